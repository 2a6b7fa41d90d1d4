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
dozen intermediate arrays; this keeps only x̂ and 1/σ. The models of the
command line run fast/normalization.py's twin, the same math with the means
and sums as matrix–vector products.
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
        centered = x - x.mean(axis=-1, keepdims=True)                      # x − μ
        variance = (centered * centered).mean(axis=-1, keepdims=True)      # σ², biased (divide by D)
        inv_std = 1 / xp.sqrt(variance + self.eps)                         # 1/σ, eps inside the root
        x_hat = centered * inv_std                                         # x̂ = (x − μ)/σ
        self.save_for_backward(x_hat, inv_std, weight)
        return x_hat * weight + bias

    def backward(self, gy):
        x_hat, inv_std, weight = self.saved_arrays
        leading = tuple(range(gy.ndim - 1))                                # every axis but the features
        # Exercise 5.1 — layer-norm backward (chapters/05-layers.md; graded by pytest -m ex_5_1)
        ### BEGIN SOLUTION
        g_weight = (gy * x_hat).sum(axis=leading)                          # gγ = Σ gy ⊙ x̂      (D,)
        g_bias = gy.sum(axis=leading)                                      # gβ = Σ gy          (D,)
        g = gy * weight                                                    # the gradient that reaches x̂
        mean_g = g.mean(axis=-1, keepdims=True)                            # the path through μ
        mean_g_x_hat = (g * x_hat).mean(axis=-1, keepdims=True)            # the path through σ
        gx = inv_std * (g - mean_g - x_hat * mean_g_x_hat)                 # (1/σ)(g − mean(g) − x̂ ⊙ mean(g ⊙ x̂))
        ### END SOLUTION
        return gx, g_weight, g_bias


def layer_norm(x, weight=None, bias=None, eps: float = 1e-5) -> Tensor:
    """Normalize x (..., D) over its last axis, then scale by ``weight`` (D,) and shift by ``bias`` (D,).

    Without weight/bias the affine step is the identity (γ = 1, β = 0).
    """
    return LayerNormFunction(eps)(*check_layer_norm(x, weight, bias, eps))


def check_layer_norm(x, weight, bias, eps: float) -> tuple[Tensor, Tensor, Tensor]:
    """x, γ and β as Tensors (γ = 1 and β = 0 where not given), or an error that names what is wrong."""
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
    return x, weight, bias
