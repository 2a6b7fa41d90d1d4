"""Reductions: sum, mean, max over an axis or axes (chapter 2).

The backward of a reduction spreads the upstream gradient back over the
axes that were reduced: sum copies it, mean copies it divided by the count,
max sends it to the position(s) that won.
"""
from __future__ import annotations

from ..backend import xp_of
from ..tensor import Function, Tensor


def _normalize_axes(axis, ndim: int) -> tuple[int, ...]:
    """Turn None, an int or a tuple (negative allowed) into a sorted tuple of axes."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    normalized = []
    for a in axes:
        if not -ndim <= a < (ndim or 1):
            raise ValueError(f"axis {a} is out of range for an array with {ndim} dimensions")
        normalized.append(a % ndim if ndim else 0)
    return tuple(sorted(normalized))


def _restore_reduced_axes(gy, axes: tuple[int, ...], keepdims: bool):
    """Put size-1 axes back where the reduction removed them, so gy broadcasts against x."""
    if keepdims or gy.ndim == 0 and not axes:
        return gy
    shape = list(gy.shape)
    for a in axes:
        shape.insert(a, 1)
    return gy.reshape(shape)


class Sum(Function):
    def __init__(self, axis=None, keepdims: bool = False) -> None:
        self.axis, self.keepdims = axis, keepdims

    def forward(self, x):
        self.axes = _normalize_axes(self.axis, x.ndim)
        self.shape = x.shape
        return x.sum(axis=self.axes, keepdims=self.keepdims)

    def backward(self, gy):
        gy = _restore_reduced_axes(gy, self.axes, self.keepdims)
        # Exercise 2.3 — sum and max backward (chapters/02-tensors-broadcasting.md; graded by pytest -m ex_2_3)
        ### BEGIN SOLUTION
        return xp_of(gy).broadcast_to(gy, self.shape)  # every x_i contributed once
        ### END SOLUTION


class Mean(Function):
    def __init__(self, axis=None, keepdims: bool = False) -> None:
        self.axis, self.keepdims = axis, keepdims

    def forward(self, x):
        self.axes = _normalize_axes(self.axis, x.ndim)
        self.shape = x.shape
        return x.mean(axis=self.axes, keepdims=self.keepdims)

    def backward(self, gy):
        count = 1
        for a in self.axes:
            count *= self.shape[a]
        return Sum.backward(self, gy / count)   # a mean is a sum divided by the count: Sum's backward, scaled


class Max(Function):
    """The largest value. Ties split the gradient equally among the tied maxima
    (so a max over k equal values passes 1/k of the gradient to each)."""

    def __init__(self, axis=None, keepdims: bool = False) -> None:
        self.axis, self.keepdims = axis, keepdims

    def forward(self, x):
        self.axes = _normalize_axes(self.axis, x.ndim)
        y = x.max(axis=self.axes, keepdims=True)
        # set share (x's shape), which backward multiplies by: 1/k at each of the k maxima of a reduced slice, else 0
        # Exercise 2.3 — sum and max backward (chapters/02-tensors-broadcasting.md; graded by pytest -m ex_2_3)
        ### BEGIN SOLUTION
        winners = (x == y).astype(x.dtype)
        share = winners / winners.sum(axis=self.axes, keepdims=True)  # 1/k at each of k winners
        ### END SOLUTION
        self.save_for_backward(share)
        return y if self.keepdims else y.reshape([n for i, n in enumerate(x.shape) if i not in self.axes])

    def backward(self, gy):
        (share,) = self.saved_arrays
        gy = _restore_reduced_axes(gy, self.axes, self.keepdims)
        return gy * share


def sum(x, axis=None, keepdims: bool = False) -> Tensor:  # noqa: A001
    return Sum(axis, keepdims)(x)


def mean(x, axis=None, keepdims: bool = False) -> Tensor:
    return Mean(axis, keepdims)(x)


def max(x, axis=None, keepdims: bool = False) -> Tensor:  # noqa: A001
    return Max(axis, keepdims)(x)
