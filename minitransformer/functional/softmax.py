"""Softmax and log-softmax, each one fused Function (chapter 4).

Stability: softmax(x) = softmax(x − c) for any constant c, so we subtract the
row maximum first. Then every exponent is ≤ 0, exp never overflows, and the
largest term is exactly 1, so the sum never underflows to 0 either. Scores of
±1e4 (or a mask value of −1e9) give finite, exact results.

Backward, from y_i = e^{x_i} / Σ_j e^{x_j}:

    ∂y_i/∂x_k = y_i (δ_ik − y_k)
    gx_k = Σ_i gy_i y_i (δ_ik − y_k) = y_k (gy_k − Σ_i gy_i y_i)

and for z = log_softmax(x) = x − log Σ_j e^{x_j}:

    ∂z_i/∂x_k = δ_ik − y_k
    gx_k = gy_k − y_k Σ_i gy_i
"""
from __future__ import annotations

from ..backend import xp_of
from ..tensor import Function, Tensor


class Softmax(Function):
    """y = exp(x − max) / Σ exp(x − max) along ``axis``; the output keeps x's shape."""

    def __init__(self, axis: int = -1) -> None:
        self.axis = axis

    def forward(self, x):
        xp = xp_of(x)
        shifted = x - x.max(axis=self.axis, keepdims=True)   # every exponent ≤ 0: no overflow
        e = xp.exp(shifted)
        self.y = e / e.sum(axis=self.axis, keepdims=True)
        return self.y

    def backward(self, gy):
        y = self.y
        return y * (gy - (gy * y).sum(axis=self.axis, keepdims=True))   # y ⊙ (gy − Σ gy⊙y)


class LogSoftmax(Function):
    """z = (x − max) − log Σ exp(x − max) along ``axis``."""

    def __init__(self, axis: int = -1) -> None:
        self.axis = axis

    def forward(self, x):
        xp = xp_of(x)
        shifted = x - x.max(axis=self.axis, keepdims=True)
        log_sum = xp.log(xp.exp(shifted).sum(axis=self.axis, keepdims=True))  # ≥ log 1 = 0: finite
        z = shifted - log_sum
        self.z = z
        return z

    def backward(self, gy):
        xp = xp_of(gy)
        softmax = xp.exp(self.z)
        return gy - softmax * gy.sum(axis=self.axis, keepdims=True)   # gy − softmax · Σ gy


def softmax(x, axis: int = -1) -> Tensor:
    """Softmax along ``axis`` (default the last), numerically stable. Same shape out as in."""
    return Softmax(axis)(x)


def log_softmax(x, axis: int = -1) -> Tensor:
    """log(softmax(x)) along ``axis``, computed without ever taking log of a tiny number."""
    return LogSoftmax(axis)(x)
