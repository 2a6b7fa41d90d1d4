"""Encoder/decoder layers and the whole Transformer (§3.1–3.4): gradients, masks, cache, counts."""
from __future__ import annotations

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F
import minitransformer.nn as nn
from minitransformer.functional.masks import causal_mask, padding_mask

PAD, VOCAB = 0, 11


def tiny_config(**overrides):
    fields = dict(d_model=8, n_heads=2, d_ff=16, n_layers=2, dropout=0.0, max_len=16)
    fields.update(overrides)
    return nn.TransformerConfig.tiny(VOCAB, **fields)


def tiny_model(**overrides):
    return nn.Transformer(tiny_config(**overrides)).to(np.float64)


def batch():
    src = np.array([[4, 5, 6, 7, 8], [9, 3, 4, PAD, PAD]])      # row 1: two pad tokens
    tgt_in = np.array([[1, 5, 7, 9], [1, 6, 8, PAD]])
    tgt_out = np.array([[5, 7, 9, 2], [6, 8, 2, PAD]])
    return src, tgt_in, tgt_out


# ----- layers ----------------------------------------------------------------------------------

@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_encoder_layer_gradcheck(rng, norm_first):
    nn.init.set_seed(0)
    layer = nn.EncoderLayer(8, 2, 16, dropout=0.0, norm_first=norm_first).to(np.float64)
    x = mt.Tensor(rng.standard_normal((2, 3, 8)), requires_grad=True)
    mask = padding_mask(np.array([[1, 2, 3], [1, 2, PAD]]), PAD)
    assert mt.gradcheck(lambda x, w, g: layer(x, mask), [x, layer.self_attn.w_v.weight, layer.norm1.weight])


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_decoder_layer_gradcheck(rng, norm_first):
    nn.init.set_seed(0)
    layer = nn.DecoderLayer(8, 2, 16, dropout=0.0, norm_first=norm_first).to(np.float64)
    x = mt.Tensor(rng.standard_normal((2, 3, 8)), requires_grad=True)
    memory = mt.Tensor(rng.standard_normal((2, 4, 8)), requires_grad=True)
    src_mask = padding_mask(np.array([[1, 2, 3, 4], [1, 2, PAD, PAD]]), PAD)
    assert mt.gradcheck(lambda x, m, w, b: layer(x, m, causal_mask(3), src_mask),
                        [x, memory, layer.cross_attn.w_q.weight, layer.feed_forward.linear2.bias])


def test_post_and_pre_ln_put_the_norm_in_different_places(rng):
    """post-LN outputs are normalised rows; pre-LN outputs are x + sub-layers, not normalised."""
    x = mt.Tensor(3 + 2 * rng.standard_normal((2, 3, 8)))
    for norm_first in (False, True):
        nn.init.set_seed(0)
        out = nn.EncoderLayer(8, 2, 16, dropout=0.0, norm_first=norm_first).to(np.float64)(x).data
        row_means = np.abs(out.mean(-1)).max()
        assert (row_means < 1e-9) == (not norm_first)


# ----- the whole model ---------------------------------------------------------------------------

def label_smoothed_loss(model, src, tgt_in, tgt_out):
    logits = model(src, tgt_in)
    return F.cross_entropy(logits.reshape(-1, VOCAB), tgt_out.reshape(-1), label_smoothing=0.1, ignore_index=PAD)


def test_whole_tiny_model_gradcheck_on_the_label_smoothed_loss():
    model = tiny_model()
    src, tgt_in, tgt_out = batch()
    layer0, layer1 = model.encoder.layers[0], model.decoder.layers[1]
    checked = [model.embedding.weight, layer1.self_attn.w_q.weight, layer0.norm2.weight,
               layer1.feed_forward.linear1.bias]
    assert mt.gradcheck(lambda *params: label_smoothed_loss(model, src, tgt_in, tgt_out), checked)


def test_untied_pre_ln_learned_positions_model_gradcheck():
    model = tiny_model(tie_embeddings=False, norm_first=True, positional="learned")
    src, tgt_in, tgt_out = batch()
    checked = [model.output.weight, model.tgt_embedding.weight, model.decoder.norm.bias,
               model.src_positional.weight]
    assert mt.gradcheck(lambda *params: label_smoothed_loss(model, src, tgt_in, tgt_out), checked)


def test_tied_embedding_is_one_matrix_used_three_times():
    model = tiny_model()
    names = [name for name, _ in model.named_parameters()]
    assert sum("embedding" in name for name in names) == 1
    src, tgt_in, _ = batch()
    with mt.no_grad():
        memory, src_mask = model.encode(src)
        decoder_out = model.decoder(model._embed(tgt_in, model.embedding, model.tgt_positional), memory,
                                    causal_mask(4), src_mask)
    logits = model(src, tgt_in).data
    np.testing.assert_allclose(logits, decoder_out.data @ model.embedding.weight.data.T, atol=1e-12)


def test_embeddings_are_scaled_by_sqrt_d_model_before_the_positions_are_added():
    model = tiny_model()
    ids = np.array([[3, 4, 5]])
    x = model._embed(ids, model.embedding, model.src_positional).data
    expected = model.embedding.weight.data[ids] * np.sqrt(8) + nn.sinusoidal_table(3, 8)
    np.testing.assert_allclose(x, expected, atol=1e-12)


def test_changing_a_padded_source_token_changes_no_output():
    model = tiny_model()
    src, tgt_in, _ = batch()
    before = model(src, tgt_in).data
    mask = padding_mask(src, PAD)                  # keep the mask: what sits under it must not matter
    changed = src.copy()
    changed[1, 3:] = [7, 9]
    memory = model.encoder(model._embed(changed, model.embedding, model.src_positional), mask)
    after = model.decode(tgt_in, memory, mask).data
    np.testing.assert_allclose(after, before, atol=1e-12)


def test_a_sentence_gives_the_same_logits_alone_and_padded_in_a_batch():
    model = tiny_model()
    src, tgt_in, _ = batch()
    in_batch = model(src, tgt_in).data[1, :3]
    alone = model(src[1:, :3], tgt_in[1:, :3]).data[0]      # no padding at all
    np.testing.assert_allclose(in_batch, alone, atol=1e-12)


def test_changing_a_future_target_token_changes_no_earlier_output():
    model = tiny_model()
    src, tgt_in, _ = batch()
    before = model(src, tgt_in).data
    changed = tgt_in.copy()
    changed[:, 2] = [10, 10]
    after = model(src, changed).data
    np.testing.assert_allclose(after[:, :2], before[:, :2], atol=1e-12)    # positions 0, 1 cannot see 2
    assert not np.allclose(after[:, 2:], before[:, 2:])                   # positions 2, 3 can


@pytest.mark.parametrize("overrides", [{}, {"norm_first": True}, {"tie_embeddings": False},
                                       {"positional": "learned"}],
                         ids=["post-LN", "pre-LN", "untied", "learned-PE"])
def test_cached_step_by_step_decoding_equals_the_full_pass(overrides):
    model = tiny_model(**overrides)
    src, tgt_in, _ = batch()
    memory, src_mask = model.encode(src)
    full = model.decode(tgt_in, memory, src_mask).data
    cache = model.init_cache()
    with mt.no_grad():
        steps = [model.decode_step(tgt_in[:, t], memory, src_mask, cache).data for t in range(tgt_in.shape[1])]
    assert cache.position == tgt_in.shape[1]
    assert cache.layers[0].self_attn.length == tgt_in.shape[1]
    assert cache.layers[0].cross_attn.length == src.shape[1]            # the memory, projected once
    np.testing.assert_allclose(np.stack(steps, axis=1), full, rtol=0, atol=1e-10)


def test_cache_reorder_continues_the_chosen_hypotheses():
    model = tiny_model()
    src, tgt_in, _ = batch()
    with mt.no_grad():
        memory, src_mask = model.encode(src)
        cache = model.init_cache()
        for t in range(2):
            model.decode_step(tgt_in[:, t], memory, src_mask, cache)
        order = np.array([1, 1, 0])                                       # beam search keeps row 1 twice
        cache.reorder(order)
        memory, src_mask = mt.Tensor(memory.data[order]), src_mask[order]
        step = model.decode_step(tgt_in[order, 2], memory, src_mask, cache).data
        expected = model.decode(tgt_in[order, :3], memory, src_mask).data[:, 2]
    np.testing.assert_allclose(step, expected, atol=1e-10)


def test_a_reorder_among_one_sentences_beams_keeps_the_cross_attention_cache_and_agrees():
    model = tiny_model()
    src, tgt_in, _ = batch()
    rows = np.repeat(np.arange(src.shape[0]), 2)                          # two beams per sentence
    with mt.no_grad():
        memory, src_mask = model.encode(src[rows])
        cache = model.init_cache()
        for t in range(2):
            model.decode_step(tgt_in[rows, t], memory, src_mask, cache)
        cross_keys = cache.layers[0].cross_attn.keys
        order = np.array([1, 1, 3, 2])                                    # each row stays with its sentence
        cache.reorder(order, same_sources=True)
        assert cache.layers[0].cross_attn.keys is cross_keys               # not copied
        step = model.decode_step(tgt_in[rows[order], 2], memory, src_mask, cache).data
        expected = model.decode(tgt_in[rows[order], :3], memory, src_mask).data[:, 2]
    np.testing.assert_allclose(step, expected, atol=1e-10)


def test_record_attention_keeps_each_layers_cross_attention_weights_for_plots():
    model = tiny_model()
    src, tgt_in, _ = batch()
    memory, src_mask = model.encode(src)
    plain = model.decode(tgt_in, memory, src_mask)
    assert all(layer.cross_attn.attention_weights is None for layer in model.decoder.layers)  # kept only when asked
    with nn.record_attention(model):
        logits = model.decode(tgt_in, memory, src_mask)
    np.testing.assert_array_equal(logits.data, plain.data)
    weights = [layer.cross_attn.attention_weights for layer in model.decoder.layers]
    assert logits.shape == (2, 4, VOCAB) and len(weights) == 2
    for w in weights:
        assert w.shape == (2, 2, 4, 5) and not w.requires_grad
        np.testing.assert_allclose(w.data.sum(-1), 1.0, rtol=1e-12)
        np.testing.assert_array_equal(w.data[1, :, :, 3:], 0.0)           # padded source positions
    assert not any(layer.cross_attn.keep_weights for layer in model.decoder.layers)   # off again after the block


def test_same_seed_same_weights_and_to_float64_casts_everything():
    a, b = nn.Transformer(tiny_config()), nn.Transformer(tiny_config())
    c = nn.Transformer(tiny_config(seed=1))
    for (name, p), q, r in zip(a.named_parameters(), b.parameters(), c.parameters()):
        np.testing.assert_array_equal(p.data, q.data, err_msg=name)
    assert not np.array_equal(a.embedding.weight.data, c.embedding.weight.data)
    assert all(p.dtype == np.float32 for p in a.parameters())
    a.to(np.float64)
    assert all(p.dtype == np.float64 for p in a.parameters())
    src, tgt_in, _ = batch()
    assert a(src, tgt_in).dtype == np.float64


def test_a_few_gradient_steps_fit_one_batch():
    model = nn.Transformer(tiny_config(d_model=16, d_ff=32))
    src, tgt_in, tgt_out = batch()
    losses = []
    for _ in range(40):
        model.zero_grad()
        loss = label_smoothed_loss(model, src, tgt_in, tgt_out)
        loss.backward()
        losses.append(loss.item())
        for p in model.parameters():
            p.data -= 0.3 * p.grad
    assert losses[-1] < 0.5 * losses[0]


# ----- parameter counts --------------------------------------------------------------------------

def formula(vocab, d, d_ff, n, tied=True):
    """The count written out (chapter 9): every Linear has a bias, every LayerNorm a gain and a bias."""
    attention = 4 * (d * d + d)                      # W^Q, W^K, W^V, W^O with biases
    feed_forward = (d * d_ff + d_ff) + (d_ff * d + d)
    layer_norm = 2 * d
    encoder_layer = attention + feed_forward + 2 * layer_norm
    decoder_layer = 2 * attention + feed_forward + 3 * layer_norm
    embeddings = vocab * d if tied else 2 * vocab * d + d * vocab     # untied: src, tgt, output (no bias)
    return embeddings + n * encoder_layer + n * decoder_layer


def test_base_model_parameter_count_equals_the_formula():
    model = nn.Transformer(nn.TransformerConfig.base(vocab=37000))
    assert model.num_parameters() == formula(37000, 512, 2048, 6) == 63_082_496
    counts = model.parameter_counts()
    assert counts["embeddings"] == 37000 * 512 and counts["output"] == 0
    assert sum(counts.values()) == model.num_parameters()
    report = model.parameter_report()
    assert "63,082,496" in report and "18,944,000" in report


def test_other_presets_and_variants_match_the_formula():
    assert nn.Transformer(nn.TransformerConfig.tiny(100)).num_parameters() == formula(100, 64, 256, 2)
    # "small" is the model of the default training run: 2 + 2 layers of width 128
    assert nn.Transformer(nn.TransformerConfig.small(100)).num_parameters() == formula(100, 128, 512, 2)
    untied = nn.Transformer(nn.TransformerConfig.tiny(100, tie_embeddings=False))
    assert untied.num_parameters() == formula(100, 64, 256, 2, tied=False)
    pre_ln = nn.Transformer(nn.TransformerConfig.tiny(100, norm_first=True))
    assert pre_ln.num_parameters() == formula(100, 64, 256, 2) + 2 * (2 * 64)      # two final LayerNorms
    learned = nn.Transformer(nn.TransformerConfig.tiny(100, positional="learned", max_len=32))
    assert learned.num_parameters() == formula(100, 64, 256, 2) + 2 * 32 * 64


def test_bad_configurations_and_inputs_are_named():
    with pytest.raises(ValueError, match="must equal tgt_vocab_size"):
        nn.TransformerConfig(src_vocab_size=10, tgt_vocab_size=12)
    with pytest.raises(ValueError, match="divisible"):
        nn.TransformerConfig.tiny(10, n_heads=3)
    with pytest.raises(ValueError, match="positional"):
        nn.TransformerConfig.tiny(10, positional="rotary")
    model = tiny_model()
    with pytest.raises(ValueError, match=r"src_ids must be an integer array of shape \(B, length\)"):
        model.encode(np.array([1, 2, 3]))
    with pytest.raises(ValueError, match="max_len=16"):
        model(np.ones((1, 20), dtype=int), np.ones((1, 3), dtype=int))
