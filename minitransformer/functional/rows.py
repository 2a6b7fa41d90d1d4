"""The maximum and the sum of every row, for the many short rows of attention (chapters 4 and 6).

NumPy reduces along the last axis one row at a time; for the rows of attention scores (one
entry per key, a sentence's length) that per-row loop, not the arithmetic, is the cost. These
helpers give the same results as ``x.max(axis=-1, keepdims=True)`` and
``x.sum(axis=-1, keepdims=True)``, a few times faster on the CPU:

* the maximum folds every row in half, log₂ S times: each fold is ONE elementwise ``maximum``
  over all rows at once (an odd length carries its last entry into the first column);
* the sum is a matrix–vector product with a vector of ones: one GEMV call for all rows.

On a GPU every fold would be a kernel launch, so there the maximum is the plain reduction (the
same result: a maximum is exact, whatever the order).
"""
from __future__ import annotations

from ..backend import get_device, xp_of

FOLD_UP_TO = 128   # longer rows: NumPy's own reduction is as fast


def row_max(x):
    """The maximum along the last axis, keeping it: (..., S) -> (..., 1)."""
    if get_device(x) != "cpu" or x.shape[-1] > FOLD_UP_TO or x.shape[-1] == 0:
        return x.max(axis=-1, keepdims=True)
    xp = xp_of(x)
    while x.shape[-1] > 1:
        half = x.shape[-1] // 2
        folded = xp.maximum(x[..., :half], x[..., half:2 * half])        # (..., S // 2)
        if x.shape[-1] % 2:                                              # the odd one out
            xp.maximum(folded[..., :1], x[..., -1:], out=folded[..., :1])
        x = folded
    return x


def row_sum(x):
    """The sum along the last axis, keeping it: (..., S) -> (..., 1), as one matrix–vector product."""
    xp = xp_of(x)
    return (x @ xp.ones(x.shape[-1], dtype=x.dtype))[..., None]
