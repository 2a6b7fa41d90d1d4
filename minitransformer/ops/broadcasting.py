"""Broadcasting and its adjoint (chapter 2).

When NumPy broadcasts an input of shape (1, 4) against (3, 4), each input
value is used 3 times, so its gradient is the *sum* of the 3 upstream
gradients. ``unbroadcast`` does that sum, shrinking a gradient back to the
shape of the input it belongs to.
"""
from __future__ import annotations


def unbroadcast(grad, shape: tuple[int, ...]):
    """Sum ``grad`` over the axes that broadcasting added or stretched, giving ``shape``."""
    if grad.shape == shape:
        return grad
    # Exercise 2.1 — unbroadcast (chapters/02-tensors-broadcasting.md; graded by pytest -m ex_2_1)
    ### BEGIN SOLUTION
    leading = grad.ndim - len(shape)
    if leading > 0:  # axes broadcasting put in front
        grad = grad.sum(axis=tuple(range(leading)))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if stretched:  # size-1 axes broadcasting stretched
        grad = grad.sum(axis=stretched, keepdims=True)
    ### END SOLUTION
    return grad


def broadcast_error(op: str, a, b, error: Exception) -> ValueError:
    """A ValueError that names the op and both shapes."""
    return ValueError(f"{op}: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be broadcast together "
                      "(compare trailing axes: each pair must be equal or one of them 1)")
