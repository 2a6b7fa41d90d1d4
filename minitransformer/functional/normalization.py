"""Layer normalization over the last axis, one fused Function (chapter 5).

The Transformer normalizes after every residual connection,
LayerNorm(x + Sublayer(x)) (§3.1). For one row x of length D:

    μ = mean(x)        σ² = mean((x − μ)²)   (biased: divide by D)
    σ = √(σ² + eps)    x̂ = (x − μ)/σ         y = γ ⊙ x̂ + β

Backward (chapter 5 derives it step by step). With g = gy ⊙ γ:

    gx = (1/σ) (g − mean(g) − x̂ ⊙ mean(g ⊙ x̂))
    gγ = Σ gy ⊙ x̂      gβ = Σ gy        (sums over every leading axis)

Three terms: the direct path through x, the path through μ (a shift), and
the path through σ (a rescale). A composition of primitive ops would keep a
dozen intermediate arrays; this keeps only x̂ and 1/σ.
"""
from __future__ import annotations

from ..backend import xp_of
from ..tensor import Function, Tensor
from .checks import require_floating_point


class LayerNormFunction(Function):
    """y = γ ⊙ (x − μ)/√(σ² + eps) + β over the last axis; x (..., D), γ and β (D,)."""

    def __init__(self, eps: float = 1e-5) -> None:
        self.eps = eps

    def forward(self, x, weight, bias):
        xp = xp_of(x)
        self.x_shape = x.shape
        dim = x.shape[-1]
        x = x.reshape(-1, dim)                                       # (N, D): every leading axis is a row
        # row means as a matrix-vector product and row sums of squares as row-wise dot products:
        # several times faster than .mean(axis=1) over rows of a few hundred entries
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
        # Exercise 5.1 — layer-norm backward (chapters/05-layers.md; graded by pytest -m ex_5_1)
        ### BEGIN SOLUTION
        gy_x_hat = gy * x_hat
        g_weight = gy_x_hat.sum(axis=0)                              # gγ = Σ gy ⊙ x̂      (D,)
        g_bias = gy.sum(axis=0)                                      # gβ = Σ gy          (D,)
        # with g = gy ⊙ γ:  mean(g) = gy·γ / D  and  mean(g ⊙ x̂) = (gy ⊙ x̂)·γ / D — matrix-vector products
        mean_g = (gy @ weight)[:, None] / dim                        # (N, 1)
        mean_g_x_hat = (gy_x_hat @ weight)[:, None] / dim            # (N, 1)
        gx = gy * weight                                             # g
        gx -= mean_g
        gx -= x_hat * mean_g_x_hat
        gx *= inv_std                                                # (1/σ)(g − mean(g) − x̂ ⊙ mean(g ⊙ x̂))
        ### END SOLUTION
        return gx.reshape(self.x_shape), g_weight, g_bias


def layer_norm(x, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Normalize x (..., D) over its last axis, then scale by ``weight`` (D,) and shift by ``bias`` (D,).

    Without weight/bias the affine step is the identity (γ = 1, β = 0).
    """
    if not isinstance(x, Tensor):
        x = Tensor(x)
    require_floating_point("layer_norm", x.data)
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError(f"layer_norm: x needs a last axis of at least one feature to normalise over, "
                         f"got shape {x.shape}")
    if not eps >= 0:   # a negative eps makes σ² + eps negative for a row of small variance: nan
        raise ValueError(f"layer_norm: eps must be >= 0, got {eps}")
    dim = x.shape[-1]
    xp = xp_of(x.data)
    weight = weight if weight is not None else Tensor(xp.ones(dim, dtype=x.dtype))
    bias = bias if bias is not None else Tensor(xp.zeros(dim, dtype=x.dtype))
    for name, p in (("weight", weight), ("bias", bias)):
        if tuple(p.shape) != (dim,):
            raise ValueError(f"layer_norm: {name} has shape {tuple(p.shape)} but x {x.shape} "
                             f"is normalized over its last axis of size {dim}, so {name} must be ({dim},)")
    return LayerNormFunction(eps)(x, weight, bias)
