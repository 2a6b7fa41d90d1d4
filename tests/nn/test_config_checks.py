"""A model configuration is checked when it is made and when it is loaded: every field by name, with its range."""
from __future__ import annotations

import json
import math
import re
import sys

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F
from minitransformer import checkpoint as ckpt
from minitransformer.nn.transformer import Transformer, TransformerConfig
from minitransformer.translator import config_from_dict, model_from_checkpoint


def small(**fields) -> TransformerConfig:
    settings = dict(src_vocab_size=11, tgt_vocab_size=11, d_model=8, n_heads=2, d_ff=16, n_layers=1, max_len=16)
    settings.update(fields)
    return TransformerConfig(**settings)


@pytest.mark.parametrize("field, value, allowed", [
    ("d_model", -8, "an integer >= 1"), ("d_model", 0, "an integer >= 1"), ("d_model", 8.0, "an integer >= 1"),
    ("n_heads", 0, "an integer >= 1"), ("n_heads", -2, "an integer >= 1"), ("d_ff", 0, "an integer >= 1"),
    ("n_layers", 0, "an integer >= 1"), ("max_len", -1, "an integer >= 1"), ("max_len", True, "an integer >= 1"),
    ("src_vocab_size", 0, "an integer >= 1"), ("seed", -1, "an integer >= 0"), ("pad_id", "0", "an integer >= 0"),
    ("dropout", math.nan, "a number in [0, 1)"), ("dropout", "0.1", "a number in [0, 1)"),
    ("tie_embeddings", "yes", "True or False"), ("norm_first", 1, "True or False"),
    ("attention_window", 0, "None or an integer >= 1"), ("attention_window", 2.5, "None or an integer >= 1"),
])
def test_every_field_is_checked_with_its_name_and_range(field, value, allowed):
    fields = {"tgt_vocab_size": 0} if field == "src_vocab_size" else {}
    with pytest.raises(ValueError, match=re.escape(f"TransformerConfig: {field} must be {allowed}, got {value!r}")):
        small(**{field: value, **fields})


def test_the_valid_configurations_of_the_presets_pass():
    for name in ("toy", "tiny", "small", "medium", "base", "big"):
        TransformerConfig.preset(name, 100)
    small(attention="local", attention_window=3, seed=2**40, dropout=0.0, tie_embeddings=False, norm_first=True)
    small(d_model=np.int64(8))                   # a NumPy integer is an integer


@pytest.mark.parametrize("field, value", [("n_heads", 0), ("d_model", -32), ("max_len", -1), ("d_ff", "many")])
def test_a_saved_configuration_is_checked_when_it_is_loaded(tmp_path, field, value):
    config = small()
    model = Transformer(config)
    state = {"config": {**config.__dict__, field: value}}
    ckpt.save_checkpoint(tmp_path, 1, model.state_dict(), state, tokenizer=None)
    with pytest.raises(ckpt.CheckpointError, match=rf"step-000001: invalid model configuration "
                                                   rf"\(TransformerConfig: {field} must be an integer >= 1"):
        model_from_checkpoint(ckpt.load_checkpoint(tmp_path))
    with pytest.raises(ckpt.CheckpointError, match=f"{field} must be"):
        config_from_dict(json.loads(json.dumps(state["config"])), "config.json")


def test_local_attention_refuses_a_window_that_is_not_a_number_with_its_name():
    x = mt.Tensor(np.ones((1, 3, 4)))
    for window in (math.nan, math.inf, "3", None, 0, 1.5):
        with pytest.raises((ValueError, TypeError), match=rf"local_attention: window must be a positive integer, "
                                                          rf"got {window!r}"):
            F.local_attention(x, x, x, window=window)


def test_a_window_wider_than_the_sequence_is_the_sequence(monkeypatch):
    """A window of 20,000 over 8 positions used to build (3 · 20,000)² scores: the window is clipped to n."""
    rng = np.random.default_rng(0)
    q, k, v = (mt.Tensor(rng.standard_normal((1, 2, 8, 4))) for _ in range(3))
    sizes = []
    real = F.attention.scaled_dot_product_attention

    def recording(q, k, v, mask=None, **kwargs):
        sizes.append(k.shape[-2])
        return real(q, k, v, mask=mask, **kwargs)

    monkeypatch.setattr(sys.modules["minitransformer.functional.local_attention"], "scaled_dot_product_attention",
                        recording)
    wide = F.local_attention(q, k, v, window=20_000)
    assert max(sizes) <= 3 * 8                                # keys per chunk: at most three blocks of n
    full = real(q, k, v)
    np.testing.assert_allclose(wide.data, full.data, atol=1e-12)
    causal = F.local_attention(q, k, v, window=20_000, causal=True)
    np.testing.assert_allclose(causal.data, real(q, k, v, mask=F.causal_mask(8)).data, atol=1e-12)


def test_a_model_with_a_window_wider_than_its_sentences_trains_in_the_memory_of_the_sentences():
    config = small(attention="local", attention_window=100_000)
    model = Transformer(config)
    src, tgt = np.array([[4, 5, 6, 7]]), np.array([[1, 8, 9, 2]])
    loss = model.loss(src, tgt[:, :-1], tgt[:, 1:])
    loss.backward()
    assert np.isfinite(loss.item())
