"""fast/rows.py against functional/rows.py: the folded row maximum is exactly the plain one, the GEMV row sum
the plain one up to the order of its additions, on every length and on odd layouts."""
from __future__ import annotations

import numpy as np
import pytest

from minitransformer.fast import rows as fast
from minitransformer.functional import rows as plain


@pytest.mark.parametrize("length", [1, 2, 3, 5, 7, 16, 31, 33, 64, 127, fast.FOLD_UP_TO, fast.FOLD_UP_TO + 1, 300])
def test_the_folded_row_max_is_the_plain_one_for_every_length(length):
    scores = np.random.default_rng(length).standard_normal((3, 2, 4, length)).astype(np.float32)
    scores[0, 0, 0, -1] = 50.0                     # the maximum in the last column (the odd one out, carried)
    scores[1, 1, 2, 0] = 60.0                      # ... and in the first
    expected = plain.row_max(scores)
    assert expected.shape == (3, 2, 4, 1)
    assert fast.row_max(scores).shape == expected.shape
    np.testing.assert_array_equal(fast.row_max(scores), expected)
    np.testing.assert_array_equal(expected, scores.max(axis=-1, keepdims=True))


@pytest.mark.parametrize("shape", [(1, 1), (5, 1), (1, 9), (1, 1, 1, 3), (0, 4), (2, 0, 3)])
def test_odd_shapes_give_the_plain_results(shape):
    scores = np.random.default_rng(1).standard_normal(shape)
    np.testing.assert_array_equal(fast.row_max(scores), plain.row_max(scores))
    np.testing.assert_allclose(fast.row_sum(scores), plain.row_sum(scores), rtol=1e-12, atol=0)
    assert fast.row_sum(scores).shape == plain.row_sum(scores).shape == (*shape[:-1], 1)


def test_non_contiguous_scores_give_the_plain_results(rng):
    scores = rng.standard_normal((4, 3, 6, 10)).swapaxes(-1, -2)[..., ::2, :]    # strided and transposed
    assert not scores.flags.c_contiguous
    np.testing.assert_array_equal(fast.row_max(scores), plain.row_max(scores))
    np.testing.assert_allclose(fast.row_sum(scores), plain.row_sum(scores), rtol=1e-12, atol=0)


def test_minus_infinity_and_nan_come_out_as_the_plain_max_gives_them():
    scores = np.array([[-np.inf, -np.inf, -np.inf], [1.0, np.nan, 0.0], [-np.inf, 2.0, -np.inf]])
    np.testing.assert_array_equal(fast.row_max(scores), plain.row_max(scores))


@pytest.mark.parametrize("length", [1, 3, 16, 200])
def test_the_gemv_row_sum_is_the_plain_sum_in_float64(length):
    scores = np.random.default_rng(0).random((2, 3, length))
    np.testing.assert_allclose(fast.row_sum(scores), plain.row_sum(scores), rtol=1e-12, atol=0)
    assert fast.row_sum(scores).shape == (2, 3, 1)


def test_a_fold_that_forgets_the_odd_column_is_caught(monkeypatch):
    """The comparison above can fail: a fold without the odd one out misses a maximum in the last column."""
    def forgetful(x):
        columns = np.ascontiguousarray(x.reshape(-1, x.shape[-1]).T)
        while len(columns) > 1:
            columns = np.maximum(columns[:len(columns) // 2], columns[len(columns) // 2:2 * (len(columns) // 2)])
        return columns.reshape(*x.shape[:-1], 1)
    scores = np.zeros((2, 5))
    scores[0, -1] = 1.0
    assert not np.array_equal(forgetful(scores), plain.row_max(scores))
    np.testing.assert_array_equal(fast.row_max(scores), plain.row_max(scores))
