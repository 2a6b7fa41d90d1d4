"""Positional encodings (§3.5): the sinusoid, its linear-map property, the learned table, offsets."""
from __future__ import annotations

import math

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.nn as nn
from minitransformer.nn.positional import sinusoidal_table

D_MODEL, LENGTH = 16, 64


def test_table_follows_the_formula():
    table = sinusoidal_table(LENGTH, D_MODEL)
    for pos in (0, 1, 7, 63):
        for i in range(D_MODEL // 2):
            angle = pos / 10000 ** (2 * i / D_MODEL)
            assert table[pos, 2 * i] == pytest.approx(math.sin(angle), abs=1e-12)
            assert table[pos, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-12)


def rotation(k: int, d_model: int) -> np.ndarray:
    """R(k): block-diagonal 2×2 rotations by k·ω_i, written from the angle-addition formulas.

    sin(a + kω) = sin a cos kω + cos a sin kω,   cos(a + kω) = cos a cos kω − sin a sin kω
    """
    r = np.zeros((d_model, d_model))
    for i in range(d_model // 2):
        angle = k / 10000 ** (2 * i / d_model)
        c, s = math.cos(angle), math.sin(angle)
        # column vectors (sin, cos) -> row form: PE(pos+k) = PE(pos) @ r
        r[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[c, -s], [s, c]]
    return r


@pytest.mark.parametrize("k", [1, 3, 10, -5])
def test_shifting_by_k_is_the_same_linear_map_at_every_position(k):
    table = sinusoidal_table(LENGTH, D_MODEL)
    positions = np.arange(max(0, -k), LENGTH - max(0, k))
    shifted = table[positions + k]
    np.testing.assert_allclose(table[positions] @ rotation(k, D_MODEL), shifted, atol=1e-9)
    # and the map is found from the data alone: least squares over all positions fits exactly
    fitted, *_ = np.linalg.lstsq(table[positions], shifted, rcond=None)
    np.testing.assert_allclose(table[positions] @ fitted, shifted, atol=1e-8)


def test_module_adds_the_table_at_the_offset(rng):
    encoding = nn.PositionalEncoding(D_MODEL, max_len=LENGTH).to(np.float64)
    x = mt.Tensor(rng.standard_normal((2, 5, D_MODEL)))
    full = encoding(x).data
    np.testing.assert_allclose(full, x.data + sinusoidal_table(LENGTH, D_MODEL)[:5], atol=1e-12)
    np.testing.assert_allclose(encoding(x[:, 3:4], offset=3).data, full[:, 3:4], atol=1e-12)
    assert encoding.table.dtype == np.float64 and encoding.table_like(x, 3, 2).shape == (2, D_MODEL)
    with pytest.raises(ValueError, match="max_len=64"):
        encoding(x, offset=LENGTH - 2)


def test_dropout_acts_on_the_sum_in_training_only(rng):
    encoding = nn.PositionalEncoding(D_MODEL, max_len=LENGTH, dropout=0.5).to(np.float64)
    x = mt.Tensor(rng.standard_normal((2, 5, D_MODEL)))
    summed = x.data + sinusoidal_table(LENGTH, D_MODEL)[:5]
    dropped = encoding(x).data
    kept = dropped != 0
    assert 0 < kept.mean() < 1
    np.testing.assert_allclose(dropped[kept], 2 * summed[kept], atol=1e-12)   # 1/(1 − p) = 2
    np.testing.assert_allclose(encoding.eval()(x).data, summed, atol=1e-12)


def test_learned_encoding_gradcheck_and_offset(rng):
    nn.init.set_seed(0)
    encoding = nn.LearnedPositionalEncoding(4, max_len=6).to(np.float64)
    x = mt.Tensor(rng.standard_normal((2, 3, 4)), requires_grad=True)
    assert mt.gradcheck(lambda x, w: encoding(x, offset=2), [x, encoding.weight])
    np.testing.assert_array_equal(encoding.weight.grad[:2], 0.0)   # positions 0, 1 were not used
    np.testing.assert_allclose(encoding(x, offset=2).data, x.data + encoding.weight.data[2:5])
    assert encoding.num_parameters() == 6 * 4


def test_learned_table_starts_at_the_sinusoid_scale():
    nn.init.set_seed(0)
    weight = nn.LearnedPositionalEncoding(64, max_len=512).weight.data
    sinusoid = sinusoidal_table(512, 64)
    assert abs(np.mean(weight ** 2) - np.mean(sinusoid ** 2)) < 0.02


def test_the_table_is_one_buffer_that_moves_and_casts_with_the_module(rng):
    encoding = nn.PositionalEncoding(D_MODEL, max_len=LENGTH)
    assert encoding.table.dtype == np.float64 and "table" in encoding._buffers and encoding.state_dict() == {}
    x32 = mt.Tensor(rng.standard_normal((1, 4, D_MODEL)).astype(np.float32))
    assert encoding(x32).dtype == np.float32                       # the rows follow the input's dtype
    np.testing.assert_allclose(encoding(x32).data, x32.data + sinusoidal_table(LENGTH, D_MODEL)[:4], rtol=1e-6)
