"""LayerNorm module: the learned gain γ and bias β around F.layer_norm (chapter 5, §3.1)."""
from __future__ import annotations

from .. import backend
from ..fast.normalization import layer_norm   # F.layer_norm with its means as matrix–vector products
from ..tensor import Tensor
from .module import Module, Parameter


class LayerNorm(Module):
    """Normalize (..., dim) over the last axis; γ starts at ones, β at zeros."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps
        xp = backend.xp_for(backend.default_device())
        self.weight = Parameter(xp.ones(dim, dtype="float32"))
        self.bias = Parameter(xp.zeros(dim, dtype="float32"))

    def forward(self, x: Tensor) -> Tensor:
        return layer_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.dim}, eps={self.eps:g}"
