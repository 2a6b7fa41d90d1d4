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
from .checks import require_floating_point


class Softmax(Function):
    """y = exp(x − max) / Σ exp(x − max) along ``axis``; the output keeps x's shape."""

    def __init__(self, axis: int = -1) -> None:
        self.axis = axis

    def forward(self, x):
        require_floating_point("softmax", x)
        xp = xp_of(x)
        y = x - x.max(axis=self.axis, keepdims=True)   # every exponent ≤ 0: no overflow
        xp.exp(y, out=y)                               # in place: one array of x's size, not three
        y /= y.sum(axis=self.axis, keepdims=True)
        self.save_for_backward(y)
        return y

    def backward(self, gy):
        (y,) = self.saved_arrays
        # Exercise 4.1 — softmax backward (chapters/04-softmax-cross-entropy.md; graded by pytest -m ex_4_1)
        ### BEGIN SOLUTION
        gx = gy * y
        gx -= y * gx.sum(axis=self.axis, keepdims=True)   # y ⊙ (gy − Σ gy⊙y), expanded
        ### END SOLUTION
        return gx


class LogSoftmax(Function):
    """z = (x − max) − log Σ exp(x − max) along ``axis``."""

    def __init__(self, axis: int = -1) -> None:
        self.axis = axis

    def forward(self, x):
        require_floating_point("log_softmax", x)
        xp = xp_of(x)
        z = x - x.max(axis=self.axis, keepdims=True)
        z -= xp.log(xp.exp(z).sum(axis=self.axis, keepdims=True))   # log Σ ≥ log 1 = 0: finite
        self.save_for_backward(z)
        return z

    def backward(self, gy):
        xp = xp_of(gy)
        (z,) = self.saved_arrays
        # Exercise 4.2 — log-softmax backward (chapters/04-softmax-cross-entropy.md; graded by pytest -m ex_4_2)
        ### BEGIN SOLUTION
        gx = xp.exp(z)                                     # softmax, recovered from the output
        gx *= -gy.sum(axis=self.axis, keepdims=True)
        gx += gy                                           # gy − softmax · Σ gy
        ### END SOLUTION
        return gx


def softmax(x, axis: int = -1) -> Tensor:
    """Softmax along ``axis`` (default the last), numerically stable. Same shape out as in."""
    return Softmax(axis)(_with_an_axis("softmax", x, axis))


def log_softmax(x, axis: int = -1) -> Tensor:
    """log(softmax(x)) along ``axis``, computed without ever taking log of a tiny number."""
    return LogSoftmax(axis)(_with_an_axis("log_softmax", x, axis))


def _with_an_axis(function: str, x, axis) -> Tensor:
    """x as a Tensor, refused if it is a scalar or has no such axis: a distribution needs an axis to spread over."""
    x = x if isinstance(x, Tensor) else Tensor(x)
    if x.ndim == 0:
        raise ValueError(f"{function}: needs at least one axis to normalise over, got a scalar (shape ())")
    if isinstance(axis, int) and not -x.ndim <= axis < x.ndim:
        raise ValueError(f"{function}: axis {axis} is out of range for shape {x.shape}")
    if isinstance(axis, int) and x.shape[axis] == 0:     # NumPy: "zero-size array to reduction operation maximum"
        raise ValueError(f"{function}: axis {axis} of shape {x.shape} is empty; a distribution over no "
                         "entries is not defined")
    return x
