"""Elementwise functions: exp, log, sqrt, tanh, relu, maximum (chapter 1).

Where the derivative is easiest in terms of the output y (exp, sqrt, tanh),
forward keeps y rather than x.
"""
from __future__ import annotations

from ..backend import xp_of
from ..tensor import Function, Tensor
from .broadcasting import broadcast_error, unbroadcast


class Exp(Function):
    def forward(self, x):
        self.y = xp_of(x).exp(x)
        return self.y

    def backward(self, gy):
        return gy * self.y  # d(e^x)/dx = e^x = y


class Log(Function):
    def forward(self, x):
        self.x = x
        return xp_of(x).log(x)

    def backward(self, gy):
        return gy / self.x  # d(log x)/dx = 1/x


class Sqrt(Function):
    def forward(self, x):
        self.y = xp_of(x).sqrt(x)
        return self.y

    def backward(self, gy):
        return gy / (2 * self.y)  # d(√x)/dx = 1/(2√x)


class Tanh(Function):
    def forward(self, x):
        self.y = xp_of(x).tanh(x)
        return self.y

    def backward(self, gy):
        return gy * (1 - self.y * self.y)  # d(tanh x)/dx = 1 - tanh² x


class ReLU(Function):
    def forward(self, x):
        self.positive = x > 0
        return xp_of(x).maximum(x, 0)  # max(0, x), §3.3

    def backward(self, gy):
        return gy * self.positive  # 1 where x > 0, else 0 (we take 0 at x = 0)


class Maximum(Function):
    """Elementwise max(a, b). Where a == b the gradient is split in half between them."""

    def forward(self, a, b):
        xp = xp_of(a, b)
        try:
            y = xp.maximum(a, b)
        except ValueError as error:
            raise broadcast_error("maximum", a, b, error) from None
        self.a_wins = (a > b) + 0.5 * (a == b)  # 1, ½ on a tie, 0
        self.shapes = a.shape, b.shape
        return y

    def backward(self, gy):
        a_shape, b_shape = self.shapes
        share = self.a_wins.astype(gy.dtype)
        return unbroadcast(gy * share, a_shape), unbroadcast(gy * (1 - share), b_shape)


def exp(x) -> Tensor: return Exp()(x)
def log(x) -> Tensor: return Log()(x)
def sqrt(x) -> Tensor: return Sqrt()(x)
def tanh(x) -> Tensor: return Tanh()(x)
def relu(x) -> Tensor: return ReLU()(x)
def maximum(a, b) -> Tensor: return Maximum()(a, b)
