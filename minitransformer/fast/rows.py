"""The maximum and the sum of every row, for the many short rows of attention: functional/rows.py's
``row_max`` and ``row_sum``, faster on the CPU (chapter 6).

NumPy reduces along the last axis one row at a time; for the rows of attention scores (one
entry per key, a sentence's length) that per-row loop, not the arithmetic, is the cost. These
give the results of ``x.max(axis=-1, keepdims=True)`` and ``x.sum(axis=-1, keepdims=True)``
with a few large operations instead:

* the maximum first lays the scores out column by column (one transposing copy, (S, R) for R
  rows), then folds the columns in half, log₂ S times: each fold is ONE elementwise ``maximum``
  of two contiguous blocks (an odd count carries its last column into the first), where the same
  folds on the rows themselves would run NumPy's inner loop once per row on a few entries;
* the sum is a matrix–vector product with a vector of ones: one GEMV call for all rows.

On a GPU every fold would be a kernel launch, so there the maximum is the plain reduction (the
same result: a maximum is exact, whatever the order). tests/fast/test_fast_rows.py proves both
equal to the plain forms; functional/attention.py uses these.
"""
from __future__ import annotations

from ..backend import get_device, xp_of
from ..functional import rows

FOLD_UP_TO = 48    # longer rows: NumPy's own reduction is as fast (at 64 already), and needs no copy


def row_max(x):
    """The maximum along the last axis, keeping it: (..., S) -> (..., 1)."""
    if get_device(x) != "cpu" or x.shape[-1] > FOLD_UP_TO or x.shape[-1] == 0:
        return rows.row_max(x)
    xp = xp_of(x)
    lead, length = x.shape[:-1], x.shape[-1]
    columns = xp.ascontiguousarray(x.reshape(-1, length).T)            # (S, R): column j is entry j of every row
    while len(columns) > 1:
        half = len(columns) // 2
        folded = xp.maximum(columns[:half], columns[half:2 * half])      # (S // 2, R)
        if len(columns) % 2:                                             # the odd one out
            xp.maximum(folded[0], columns[-1], out=folded[0])
        columns = folded
    return columns.reshape(*lead, 1)


def row_sum(x):
    """The sum along the last axis, keeping it: (..., S) -> (..., 1), as one matrix–vector product."""
    xp = xp_of(x)
    return (x @ xp.ones(x.shape[-1], dtype=x.dtype))[..., None]
