"""Layer norm with its means and sums as matrix–vector products: functional/normalization.py's
LayerNormFunction, faster on the CPU (chapter 5).

NumPy reduces along the last axis one row at a time; for the many rows of a few hundred features that
layer norm sees, that per-row loop, not the arithmetic, is the cost. Here every leading axis is folded
into one axis of N rows, and the row means are products with a vector: mean(x) = x·1/D, and in the
backward mean(g) = (gy·γ)/D and mean(g ⊙ x̂) = ((gy ⊙ x̂)·γ)/D, with g = gy ⊙ γ; the row sums of squares
are row-wise dot products (einsum). One BLAS call for all rows each. The same math as the plain form
(tests/fast/test_fast_normalization.py proves them equal); nn.LayerNorm, which the command line's
models use, runs this one.
"""
from __future__ import annotations

from ..backend import xp_of
from ..functional.normalization import LayerNormFunction, check_layer_norm


class LayerNormGEMV(LayerNormFunction):
    """``LayerNormFunction`` with the row means and sums as matrix–vector products."""

    # the student edition keeps the class and drops these lines, so that Exercise 5.1's own backward runs
    ### BEGIN FAST FORM OF 5.1
    def forward(self, x, weight, bias):
        xp = xp_of(x)
        self.x_shape = x.shape
        dim = x.shape[-1]
        x = x.reshape(-1, dim)                                       # (N, D): every leading axis is a row
        centered = x - (x @ xp.ones(dim, dtype=x.dtype))[:, None] / dim            # x − μ
        variance = xp.einsum("nd,nd->n", centered, centered)[:, None] / dim        # (N, 1) biased, as defined
        inv_std = 1 / xp.sqrt(variance + self.eps)                  # (N, 1) 1/σ, eps inside the root
        x_hat = centered                                             # (N, D), reusing the array:
        x_hat *= inv_std                                             # x̂ = (x − μ)/σ
        self.save_for_backward(x_hat, inv_std, weight)
        y = x_hat * weight
        y += bias
        return y.reshape(self.x_shape)

    def backward(self, gy):
        x_hat, inv_std, weight = self.saved_arrays
        dim = weight.shape[0]
        gy = gy.reshape(-1, dim)                                     # (N, D)
        gy_x_hat = gy * x_hat
        g_weight = gy_x_hat.sum(axis=0)                              # gγ = Σ gy ⊙ x̂      (D,)
        g_bias = gy.sum(axis=0)                                      # gβ = Σ gy          (D,)
        mean_g = (gy @ weight)[:, None] / dim                        # mean(g) = gy·γ / D            (N, 1)
        mean_g_x_hat = (gy_x_hat @ weight)[:, None] / dim            # mean(g ⊙ x̂) = (gy ⊙ x̂)·γ / D  (N, 1)
        gx = gy * weight                                             # g
        gx -= mean_g
        gx -= x_hat * mean_g_x_hat
        gx *= inv_std                                                # (1/σ)(g − mean(g) − x̂ ⊙ mean(g ⊙ x̂))
        return gx.reshape(self.x_shape), g_weight, g_bias
    ### END FAST FORM


def layer_norm(x, weight=None, bias=None, eps: float = 1e-5):
    """``functional.layer_norm``, run by ``LayerNormGEMV``: the same checks, the same result."""
    return LayerNormGEMV(eps)(*check_layer_norm(x, weight, bias, eps))
