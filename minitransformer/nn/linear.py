"""The Linear layer: y = x W + b with W and b as Parameters (chapter 5).

The Function that computes it, one matrix product each way, is
``functional/linear.py`` (Functions live in functional/, Modules in nn/).
"""
from __future__ import annotations

from .. import backend
from ..functional.linear import linear
from ..tensor import Tensor
from . import init
from .module import Module, Parameter

__all__ = ["Linear"]


class Linear(Module):
    """y = x W + b with W (in_features, out_features), Xavier-uniform; b zeros."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        xp = backend.xp_for(backend.default_device())
        self.weight = Parameter(xp.empty((in_features, out_features), dtype="float32"))
        init.xavier_uniform(self.weight)
        self.bias = Parameter(xp.zeros(out_features, dtype="float32")) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
