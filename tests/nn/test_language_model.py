"""The decoder-only language model (chapter 15): gradients, causality, the cache, the configuration."""
from __future__ import annotations

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F
import minitransformer.nn as nn

VOCAB = 11
KINDS = [{}, {"norm_first": False}, {"positional": "sinusoidal"}, {"positional": "rope"}, {"attention": "flash"},
         {"attention": "local", "attention_window": 2}, {"attention": "linear"}]
KIND_IDS = ["pre-LN", "post-LN", "sinusoidal", "rope", "flash", "local", "linear"]
# RoPE with a kind whose cache is a running state: the offsets of the turned keys follow the state's steps
KINDS.append({"positional": "rope", "attention": "linear"})
KIND_IDS.append("rope-linear")


def tiny_model(**overrides) -> nn.LanguageModel:
    fields = dict(vocab_size=VOCAB, d_model=8, n_heads=2, d_ff=16, n_layers=2, context=12)
    fields.update(overrides)
    return nn.LanguageModel(nn.LanguageModelConfig(**fields)).to(np.float64)


def text(seed: int = 0, length: int = 7) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, VOCAB, size=(2, length))


@pytest.mark.parametrize("overrides", KINDS[:4], ids=KIND_IDS[:4])
def test_whole_tiny_model_gradcheck(overrides):
    model = tiny_model(**overrides)
    ids = text()
    params = model.parameters()
    assert mt.gradcheck(lambda *p: model.loss(ids[:, :-1], ids[:, 1:]), params)


def test_gradcheck_of_the_logits_reaches_the_tied_embedding_through_both_uses():
    model = tiny_model()
    ids = text(1)
    assert mt.gradcheck(lambda e: model(ids), [model.embedding.weight])


def test_the_fused_loss_equals_cross_entropy_of_the_logits():
    model = tiny_model()
    ids = text(2)
    expected = F.cross_entropy(model(ids[:, :-1]), ids[:, 1:]).item()
    assert model.loss(ids[:, :-1], ids[:, 1:]).item() == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("overrides", KINDS, ids=KIND_IDS)
@pytest.mark.parametrize("t", [0, 3, 6])
def test_changing_token_t_changes_no_logit_before_t(overrides, t):
    model = tiny_model(**overrides)
    ids = text(3)
    before = model(ids).data
    changed = ids.copy()
    changed[:, t] = (changed[:, t] + 1) % VOCAB
    after = model(changed).data
    np.testing.assert_allclose(after[:, :t], before[:, :t], rtol=0, atol=1e-12)   # positions < t cannot see t
    assert np.abs(after[:, t:] - before[:, t:]).max() > 1e-6                       # positions >= t can


@pytest.mark.parametrize("overrides", KINDS, ids=KIND_IDS)
def test_cached_steps_give_the_logits_of_the_full_pass(overrides):
    model = tiny_model(**overrides)
    ids = text(4, length=9)
    full = model(ids).data
    cache = model.init_cache()
    with mt.no_grad():
        pieces = [model.step(ids[:, :4], cache).data]                # a prompt of 4, then 2 more at once,
        pieces += [model.step(ids[:, 4:6], cache).data]              # then one token at a time
        pieces += [model.step(ids[:, t:t + 1], cache).data for t in range(6, 9)]
    assert cache.position == 9
    np.testing.assert_allclose(np.concatenate(pieces, axis=1), full, rtol=0, atol=1e-10)


def test_the_embedding_is_the_output_projection():
    model = tiny_model()
    names = [name for name, _ in model.named_parameters()]
    assert sum(name.startswith("embedding") for name in names) == 1
    h = model.hidden(text(5)).data
    np.testing.assert_allclose(model(text(5)).data, h @ model.embedding.weight.data.T, atol=1e-12)


def test_pre_ln_has_a_final_norm_and_post_ln_none():
    assert tiny_model().norm is not None
    assert tiny_model(norm_first=False).norm is None
    counts = tiny_model().parameter_counts()
    assert sum(counts.values()) == sum(p.size for p in tiny_model().parameters())
    assert counts["norm"] == 2 * 8
    assert "total" in tiny_model().parameter_report()


def test_same_seed_same_weights_other_seed_other_weights():
    a, b, c = tiny_model(), tiny_model(), tiny_model(seed=1)
    assert np.array_equal(a.embedding.weight.data, b.embedding.weight.data)
    assert not np.array_equal(a.embedding.weight.data, c.embedding.weight.data)


@pytest.mark.parametrize("overrides, named", [
    ({"vocab_size": 0}, "vocab_size"),
    ({"d_model": 10, "n_heads": 4}, "divisible"),
    ({"context": 2.5}, "context"),
    ({"dropout": 1.0}, "dropout"),
    ({"positional": "rotary-ish"}, "positional"),
    ({"norm_first": 1}, "norm_first"),
    ({"attention": "nope"}, "attention"),
    ({"attention": "local"}, "window"),
    ({"attention": "linformer", "attention_window": 4}, "causal"),
    ({"model": "transformer"}, "model"),
])
def test_bad_configurations_are_named(overrides, named):
    fields = dict(vocab_size=VOCAB)
    fields.update(overrides)
    with pytest.raises(ValueError, match=named):
        nn.LanguageModelConfig(**fields)


def test_bad_inputs_are_named():
    model = tiny_model()
    with pytest.raises(ValueError, match="beyond the context of 12"):
        model(np.zeros((1, 13), dtype=np.int64))
    with pytest.raises(ValueError, match="integer array"):
        model(np.zeros((1, 3)))
    with pytest.raises(ValueError, match="length 0"):
        model(np.zeros((1, 0), dtype=np.int64))
    cache = model.init_cache()
    model.step(np.zeros((1, 10), dtype=np.int64), cache)
    with pytest.raises(ValueError, match="beyond the context"):
        model.step(np.zeros((1, 3), dtype=np.int64), cache)


@pytest.mark.gpu
@pytest.mark.parametrize("overrides", [{}, {"positional": "rope"}, {"attention": "linear"}], ids=["learned", "rope", "linear"])
def test_the_model_and_its_cached_generation_on_the_gpu_match_the_cpu(overrides):
    from minitransformer.generate import generate

    model = tiny_model(**overrides)
    ids = text(6)
    cpu_loss = model.loss(ids[:, :-1], ids[:, 1:])
    cpu_loss.backward()
    cpu_grads = [p.grad.copy() for p in model.parameters()]
    cpu_tokens = generate(model, [1, 2], 14, top_k=5, seed=4)
    model.zero_grad()
    model.to("cuda")
    gpu_loss = model.loss(ids[:, :-1], ids[:, 1:])
    gpu_loss.backward()
    assert gpu_loss.item() == pytest.approx(cpu_loss.item(), rel=1e-10)
    for g_cpu, p in zip(cpu_grads, model.parameters()):
        assert p.device == "cuda"
        np.testing.assert_allclose(mt.backend.asnumpy(p.grad), g_cpu, rtol=1e-8, atol=1e-10)
    assert generate(model, [1, 2], 14, top_k=5, seed=4) == cpu_tokens
