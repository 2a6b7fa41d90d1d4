"""Generation from a language model (chapter 15): the sampling cuts, seeds, and the KV cache's equality."""
from __future__ import annotations

import numpy as np
import pytest

import minitransformer.nn as nn
from minitransformer.generate import generate, next_token_probabilities, window_start

VOCAB = 13


def tiny_model(**overrides) -> nn.LanguageModel:
    fields = dict(vocab_size=VOCAB, d_model=16, n_heads=2, d_ff=32, n_layers=2, context=10, seed=3)
    fields.update(overrides)
    return nn.LanguageModel(nn.LanguageModelConfig(**fields)).to(np.float64)


SETTINGS = [dict(greedy=True), dict(temperature=1.3, seed=5), dict(temperature=0.7, top_k=4, seed=6),
            dict(top_p=0.8, seed=7)]
SETTING_IDS = ["greedy", "temperature", "top-k", "top-p"]


@pytest.mark.parametrize("settings", SETTINGS, ids=SETTING_IDS)
@pytest.mark.parametrize("overrides", [{}, {"attention": "linear"}, {"positional": "sinusoidal"},
                                       {"positional": "rope"}], ids=["softmax", "linear", "sinusoidal", "rope"])
def test_the_cache_gives_the_tokens_and_logits_of_recomputing_the_prefix(settings, overrides):
    model = tiny_model(**overrides)
    # 3 + 25 tokens: past the context of 10, so the window slides (and the cache is rebuilt) several times
    cached, logits_cached = generate(model, [1, 2, 3], 25, use_cache=True, return_logits=True, **settings)
    plain, logits_plain = generate(model, [1, 2, 3], 25, use_cache=False, return_logits=True, **settings)
    assert cached == plain
    np.testing.assert_allclose(logits_cached, logits_plain, rtol=0, atol=1e-10)
    assert len(cached) == 25 and all(0 <= t < VOCAB for t in cached)


def test_greedy_takes_the_argmax_of_each_step_of_the_full_pass():
    model = tiny_model()
    tokens = generate(model, [4], 6, greedy=True)
    text = [4] + tokens
    logits = model(np.asarray([text[:-1]])).data[0]
    assert tokens == [int(i) for i in logits.argmax(axis=-1)]


def test_same_seed_same_text_other_seed_other_text():
    model = tiny_model()
    a = generate(model, [1], 30, temperature=2.0, seed=1)
    assert a == generate(model, [1], 30, temperature=2.0, seed=1)
    assert a != generate(model, [1], 30, temperature=2.0, seed=2)


def test_temperature_sharpens_and_flattens():
    logits = np.array([2.0, 1.0, 0.0, -1.0])
    base = next_token_probabilities(logits)
    cold, hot = next_token_probabilities(logits, 0.5), next_token_probabilities(logits, 2.0)
    np.testing.assert_allclose(base, np.exp(logits) / np.exp(logits).sum())
    np.testing.assert_allclose(cold, np.exp(2 * logits) / np.exp(2 * logits).sum())
    assert cold[0] > base[0] > hot[0]
    assert next_token_probabilities(logits, 0).tolist() == [1, 0, 0, 0]


def test_top_k_keeps_the_k_largest_renormalised():
    logits = np.array([0.5, 3.0, -1.0, 2.0, 1.0])
    probs = next_token_probabilities(logits, top_k=2)
    kept = np.exp([3.0, 2.0]) / np.exp([3.0, 2.0]).sum()
    np.testing.assert_allclose(probs, [0, kept[0], 0, kept[1], 0])


def test_top_p_keeps_the_smallest_set_reaching_p():
    probs_in = np.array([0.1, 0.5, 0.15, 0.25])
    logits = np.log(probs_in)
    # sorted: 0.5, 0.25, 0.15, 0.1; 0.5 < 0.7, 0.75 >= 0.7: the nucleus is {0.5, 0.25}
    np.testing.assert_allclose(next_token_probabilities(logits, top_p=0.7), [0, 0.5 / 0.75, 0, 0.25 / 0.75])
    np.testing.assert_allclose(next_token_probabilities(logits, top_p=0.75), [0, 0.5 / 0.75, 0, 0.25 / 0.75])
    np.testing.assert_allclose(next_token_probabilities(logits, top_p=0.76), [0, 0.5, 0.15, 0.25] / np.float64(0.9))
    assert next_token_probabilities(logits, top_p=0.01).tolist() == [0, 1, 0, 0]   # the first token always stays
    np.testing.assert_allclose(next_token_probabilities(logits, top_p=1.0), probs_in)


def test_sampled_tokens_follow_the_cut_distribution():
    model = tiny_model()
    tokens = generate(model, [1], 200, top_k=1, seed=0)          # top-k 1 is greedy, whatever the draws
    assert tokens == generate(model, [1], 200, greedy=True)


def test_window_slides_by_half_a_context():
    assert [window_start(n, 10) for n in (1, 10, 11, 15, 16, 20, 21)] == [0, 0, 5, 5, 10, 10, 15]
    assert window_start(5, 1) == 4


@pytest.mark.parametrize("kwargs, named", [
    (dict(temperature=-1), "temperature"), (dict(temperature=float("nan")), "temperature"),
    (dict(top_k=0), "top_k"), (dict(top_p=0.0), "top_p"), (dict(top_p=1.5), "top_p"),
])
def test_bad_settings_are_named(kwargs, named):
    with pytest.raises(ValueError, match=named):
        generate(tiny_model(), [1], 3, **kwargs)


def test_bad_prompts_are_named():
    model = tiny_model()
    with pytest.raises(ValueError, match="empty"):
        generate(model, [], 3)
    with pytest.raises(ValueError, match=r"\[0, 13\)"):
        generate(model, [13], 3)
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(model, [1], -1)
