"""The maximum and the sum of every row, for the softmax over the rows of attention scores (chapter 6).

Two names for NumPy's reductions along the last axis, kept as an axis of size 1 so that they broadcast
back against the rows. The attention of the command line's models takes the faster twins of
fast/rows.py instead: the same maximum, the same sum up to the order of the additions.
"""
from __future__ import annotations


def row_max(x):
    """The maximum along the last axis, keeping it: (..., S) -> (..., 1)."""
    return x.max(axis=-1, keepdims=True)


def row_sum(x):
    """The sum along the last axis, keeping it: (..., S) -> (..., 1)."""
    return x.sum(axis=-1, keepdims=True)
