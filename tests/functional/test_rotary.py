"""RoPE (chapter 15): gradients, and scores that depend on the relative position only."""
from __future__ import annotations

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.nn as nn
from minitransformer.functional.rotary import rotary


def test_rotary_gradcheck(rng):
    x = mt.Tensor(rng.standard_normal((2, 3, 5, 6)), requires_grad=True)
    assert mt.gradcheck(lambda x: rotary(x, offset=4), [x])


def test_rotary_turns_pairs_of_halves_by_position_times_frequency(rng):
    x = rng.standard_normal((1, 1, 3, 4))
    out = rotary(mt.Tensor(x), offset=2).data
    theta = np.array([1.0, 10000.0 ** -0.5])                    # θ_i = 10000^(−2i/d_k), d_k = 4
    for row, m in enumerate((2, 3, 4)):
        c, s = np.cos(m * theta), np.sin(m * theta)
        x1, x2 = x[0, 0, row, :2], x[0, 0, row, 2:]
        np.testing.assert_allclose(out[0, 0, row], np.concatenate([x1 * c - x2 * s, x1 * s + x2 * c]), atol=1e-12)
    assert np.allclose(rotary(mt.Tensor(x), offset=0).data[0, 0, 0], x[0, 0, 0])   # position 0: not turned


@pytest.mark.parametrize("shift", [1, 7, 40])
def test_scores_depend_only_on_the_relative_position(rng, shift):
    q, k = rng.standard_normal(8), rng.standard_normal(8)

    def score(m: int, n: int) -> float:
        q_m = rotary(mt.Tensor(q[None, :]), offset=m).data[0]
        k_n = rotary(mt.Tensor(k[None, :]), offset=n).data[0]
        return float(q_m @ k_n)

    for m, n in [(3, 0), (5, 5), (2, 9)]:
        assert score(m + shift, n + shift) == pytest.approx(score(m, n), abs=1e-10)
    assert abs(score(3, 0) - score(4, 0)) > 1e-3                 # and they do depend on it


def test_the_rotary_models_attention_scores_are_shift_invariant(rng):
    """Through the model's first layer: the same two tokens at positions (m, n) and (m + s, n + s) get the
    same score, since no position was added to the embeddings."""
    model = nn.LanguageModel(nn.LanguageModelConfig(vocab_size=7, d_model=8, n_heads=2, d_ff=16, n_layers=1,
                                                    context=12, positional="rope")).to(np.float64)
    ids = np.array([[3, 1, 4, 1, 5, 2, 6, 0, 3, 1]])
    with nn.record_attention(model):
        model(ids)
    weights = model.blocks[0].self_attn.attention_weights.data[0]     # (h, T, T)
    # queries 1 and 9 both read token 3 at distance 1 back (positions 0 and 8), from token 1: equal raw
    # scores; the softmax over different numbers of keys differs, so compare the ratios of two keys
    ratio_early = weights[:, 1, 0] / weights[:, 1, 1]
    ratio_late = weights[:, 9, 8] / weights[:, 9, 9]
    np.testing.assert_allclose(ratio_early, ratio_late, rtol=1e-10)


def test_an_odd_d_k_is_refused():
    with pytest.raises(ValueError, match="even"):
        rotary(mt.Tensor(np.zeros((2, 3))))
    with pytest.raises(ValueError, match="even"):
        nn.LanguageModelConfig(vocab_size=5, d_model=6, n_heads=2, positional="rope")
