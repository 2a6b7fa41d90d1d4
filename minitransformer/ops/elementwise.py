"""Elementwise functions: exp, log, sqrt, tanh, sigmoid, relu, maximum (chapter 1).

Where the derivative is easiest in terms of the output y (exp, sqrt, tanh,
sigmoid), forward saves y rather than x.
"""
from __future__ import annotations

from ..backend import xp_of
from ..tensor import Function, Tensor
from .broadcasting import broadcast_error, unbroadcast


class Exp(Function):
    def forward(self, x):
        y = xp_of(x).exp(x)
        self.save_for_backward(y)
        return y

    def backward(self, gy):
        (y,) = self.saved_arrays
        return gy * y  # d(e^x)/dx = e^x = y


class Log(Function):
    def forward(self, x):
        self.save_for_backward(x)
        return xp_of(x).log(x)

    def backward(self, gy):
        (x,) = self.saved_arrays
        return gy / x  # d(log x)/dx = 1/x


class Sqrt(Function):
    def forward(self, x):
        y = xp_of(x).sqrt(x)
        self.save_for_backward(y)
        return y

    def backward(self, gy):
        (y,) = self.saved_arrays
        return gy / (2 * y)  # d(√x)/dx = 1/(2√x)


class Tanh(Function):
    def forward(self, x):
        y = xp_of(x).tanh(x)
        self.save_for_backward(y)
        return y

    def backward(self, gy):
        (y,) = self.saved_arrays
        return gy * (1 - y * y)  # d(tanh x)/dx = 1 - tanh² x


class Sigmoid(Function):
    """σ(x) = 1 / (1 + e^(−x)), the gate of an LSTM (chapter 6)."""

    def forward(self, x):
        y = sigmoid_array(x)
        self.save_for_backward(y)
        return y

    def backward(self, gy):
        (y,) = self.saved_arrays
        return gy * (y * (1 - y))  # dσ/dx = σ(x)(1 − σ(x))


def sigmoid_array(x):
    """σ of a raw array (for Functions that fuse a gate, the LSTM's); no graph.

    With e = e^(−|x|) ≤ 1: σ(x) = 1/(1 + e) for x ≥ 0 and e/(1 + e) for x < 0. Nothing overflows
    (e^(−x) itself is inf for x < −710 in float64), and a tiny σ(−30) keeps all its digits.
    """
    xp = xp_of(x)
    e = xp.exp(-xp.abs(x))
    y = 1 / (1 + e)
    return xp.where(x < 0, e * y, y)


class ReLU(Function):
    def forward(self, x):
        positive = x > 0
        self.save_for_backward(positive)
        return xp_of(x).maximum(x, 0)  # max(0, x), §3.3

    def backward(self, gy):
        (positive,) = self.saved_arrays
        return gy * positive  # 1 where x > 0, else 0 (we take 0 at x = 0)


class Maximum(Function):
    """Elementwise max(a, b). Where a == b the gradient is split in half between them."""

    def forward(self, a, b):
        xp = xp_of(a, b)
        try:
            y = xp.maximum(a, b)
        except ValueError as error:
            raise broadcast_error("maximum", a, b, error) from None
        a_wins = (a > b) + 0.5 * (a == b)  # 1, ½ on a tie, 0
        self.save_for_backward(a_wins)
        self.shapes = a.shape, b.shape
        return y

    def backward(self, gy):
        (a_wins,) = self.saved_arrays
        a_shape, b_shape = self.shapes
        share = a_wins.astype(gy.dtype)
        return unbroadcast(gy * share, a_shape), unbroadcast(gy * (1 - share), b_shape)


def exp(x) -> Tensor: return Exp()(x)
def log(x) -> Tensor: return Log()(x)
def sqrt(x) -> Tensor: return Sqrt()(x)
def tanh(x) -> Tensor: return Tanh()(x)
def sigmoid(x) -> Tensor: return Sigmoid()(x)
def relu(x) -> Tensor: return ReLU()(x)
def maximum(a, b) -> Tensor: return Maximum()(a, b)
