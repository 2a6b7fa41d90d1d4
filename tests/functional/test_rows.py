"""functional/rows.py: the folded row maximum and the GEMV row sum give NumPy's results."""
from __future__ import annotations

import numpy as np
import pytest

from minitransformer.functional.rows import FOLD_UP_TO, row_max, row_sum


@pytest.mark.parametrize("length", [1, 2, 3, 5, 7, 16, 31, 33, 64, 127, FOLD_UP_TO, FOLD_UP_TO + 1, 300])
def test_row_max_is_numpys_max_for_every_length(length):
    scores = np.random.default_rng(length).standard_normal((3, 2, 4, length)).astype(np.float32)
    scores[0, 0, 0, -1] = 50.0                     # the maximum in the last column (the odd one out, carried)
    scores[1, 1, 2, 0] = 60.0                      # ... and in the first
    expected = scores.max(axis=-1, keepdims=True)
    assert row_max(scores).shape == expected.shape
    np.testing.assert_array_equal(row_max(scores), expected)


def test_row_max_keeps_minus_infinity_and_nan_as_max_does():
    scores = np.array([[-np.inf, -np.inf, -np.inf], [1.0, np.nan, 0.0], [-np.inf, 2.0, -np.inf]])
    np.testing.assert_array_equal(row_max(scores), scores.max(axis=-1, keepdims=True))


@pytest.mark.parametrize("length", [1, 3, 16, 200])
def test_row_sum_is_the_sum_of_each_row(length):
    scores = np.random.default_rng(0).random((2, 3, length))
    np.testing.assert_allclose(row_sum(scores), scores.sum(axis=-1, keepdims=True), rtol=1e-12)
    assert row_sum(scores).shape == (2, 3, 1)

