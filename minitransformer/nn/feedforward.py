"""The position-wise feed-forward network (§3.3, eq. 2):

    FFN(x) = max(0, x W₁ + b₁) W₂ + b₂

applied to every position separately and identically: d_model = 512 → d_ff = 2048 → 512
in the base model. "Another way of describing this is as two convolutions with kernel
size 1" (§3.3) — chapter 5 checks that numerically. Dropout on the hidden layer is a
common addition (the paper applies dropout to sub-layer outputs, §5.4); p = 0 disables it.
"""
from __future__ import annotations

from ..functional.linear import linear_relu
from ..tensor import Tensor
from .dropout import Dropout
from .linear import Linear
from .module import Module


class FeedForward(Module):
    """x (..., d_model) -> (..., d_model) through a ReLU hidden layer of width d_ff."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.linear1 = Linear(d_model, d_ff)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        hidden = linear_relu(x, self.linear1.weight, self.linear1.bias)   # max(0, x W₁ + b₁), one Function
        return self.linear2(self.dropout(hidden))  # (..., d_model)
