"""The four arithmetic operations, negation and powers (chapters 1–2).

Each backward is one line of calculus, followed by ``unbroadcast`` so that a
gradient has the shape of the input it belongs to.
"""
from __future__ import annotations

from ..backend import xp_of
from ..tensor import Function, Tensor
from .broadcasting import broadcast_error, unbroadcast


class Add(Function):
    def forward(self, a, b):
        try:
            y = a + b
        except ValueError as error:
            raise broadcast_error("add", a, b, error) from None
        self.shapes = a.shape, b.shape
        return y

    def backward(self, gy):
        a_shape, b_shape = self.shapes
        return unbroadcast(gy, a_shape), unbroadcast(gy, b_shape)  # d(a+b)/da = d(a+b)/db = 1


class Sub(Function):
    def forward(self, a, b):
        try:
            y = a - b
        except ValueError as error:
            raise broadcast_error("sub", a, b, error) from None
        self.shapes = a.shape, b.shape
        return y

    def backward(self, gy):
        a_shape, b_shape = self.shapes
        return unbroadcast(gy, a_shape), unbroadcast(-gy, b_shape)


class Mul(Function):
    def forward(self, a, b):
        try:
            y = a * b
        except ValueError as error:
            raise broadcast_error("mul", a, b, error) from None
        self.save_for_backward(a, b)
        return y

    def backward(self, gy):
        a, b = self.saved_arrays
        ga = unbroadcast(gy * b, a.shape) if self.inputs[0].requires_grad else None  # d(ab)/da = b
        gb = unbroadcast(gy * a, b.shape) if self.inputs[1].requires_grad else None  # d(ab)/db = a
        return ga, gb


class Div(Function):
    def forward(self, a, b):
        try:
            y = a / b
        except ValueError as error:
            raise broadcast_error("div", a, b, error) from None
        self.save_for_backward(a, b)
        return y

    def backward(self, gy):
        a, b = self.saved_arrays
        # Exercise 1.2 — Div backward (chapters/01-autograd.md; graded by pytest -m ex_1_2)
        ### BEGIN SOLUTION
        ga = unbroadcast(gy / b, a.shape) if self.inputs[0].requires_grad else None  # d(a/b)/da = 1/b
        gb = unbroadcast(-gy * a / (b * b), b.shape) if self.inputs[1].requires_grad else None  # = -a/b²
        ### END SOLUTION
        return ga, gb


class Neg(Function):
    def forward(self, x):
        return -x

    def backward(self, gy):
        return -gy


class Pow(Function):
    """x ** c for a constant exponent c."""

    def __init__(self, exponent: float) -> None:
        self.c = exponent

    def forward(self, x):
        self.save_for_backward(x)
        return x ** self.c

    def backward(self, gy):
        (x,) = self.saved_arrays
        c = self.c
        if c == 0:   # x⁰ = 1 is a constant; c·x^(c−1) would be 0·∞ = nan at x = 0
            return xp_of(x).zeros_like(x)
        return gy * (c * x ** (c - 1))  # d(x^c)/dx = c x^(c-1)


def add(a, b) -> Tensor: return Add()(a, b)
def sub(a, b) -> Tensor: return Sub()(a, b)
def mul(a, b) -> Tensor: return Mul()(a, b)
def div(a, b) -> Tensor: return Div()(a, b)
def neg(x) -> Tensor: return Neg()(x)


def pow(x, exponent) -> Tensor:  # noqa: A001 - mirrors the ** operator
    if isinstance(exponent, Tensor):
        raise TypeError("pow: the exponent must be a Python number (x ** c with constant c)")
    return Pow(exponent)(x)
