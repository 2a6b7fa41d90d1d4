"""The attention LSTM encoder-decoder (chapter 6): gradients, padding, the cache, the searches, checkpoints,
the configuration, and a tiny model that learns to reverse sentences."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F
import minitransformer.nn as nn
from minitransformer import checkpoint as ckpt
from minitransformer import models, optim
from minitransformer.decode import Decodable, beam_search, greedy_decode
from minitransformer.translator import config_from_dict, model_from_checkpoint

PAD, BOS, EOS, VOCAB = 0, 1, 2, 11

VARIANTS = {
    "Bahdanau": {},                                                     # bidirectional, additive, input feeding
    "no-input-feeding": {"input_feeding": False},
    "one-way-dot": {"bidirectional": False, "score": "dot"},
    "general-untied": {"score": "general", "tie_embeddings": False, "tgt_vocab_size": 13},
}


def tiny_config(**overrides):
    fields = dict(src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, d_model=8, n_layers=2, dropout=0.0, seed=1)
    fields.update(overrides)
    return nn.Seq2SeqConfig(**fields)


def tiny_model(**overrides):
    return nn.Seq2Seq(tiny_config(**overrides)).to(np.float64)


def batch():
    src = np.array([[4, 5, 6, 7, 8], [9, 3, 4, PAD, PAD]])      # row 1: two pad tokens
    tgt_in = np.array([[1, 5, 7, 9], [1, 6, 8, PAD]])
    tgt_out = np.array([[5, 7, 9, 2], [6, 8, 2, PAD]])
    return src, tgt_in, tgt_out


# -- gradients -------------------------------------------------------------------------------------
def test_whole_tiny_model_gradcheck_on_the_label_smoothed_loss():
    model = tiny_model()
    src, tgt_in, tgt_out = batch()
    checked = [model.embedding.weight, model.encoder.cells[1].weight_h, model.bridge.weight, model.attention.v,
               model.attention.w_k.weight, model.decoder.cells[1].bias, model.combine.weight]
    assert mt.gradcheck(lambda *params: model.loss(src, tgt_in, tgt_out, label_smoothing=0.1), checked)


@pytest.mark.parametrize("variant", ["no-input-feeding", "one-way-dot", "general-untied"])
def test_variants_gradcheck(variant):
    model = tiny_model(**VARIANTS[variant])
    src, tgt_in, tgt_out = batch()
    # few numbers each: the whole model runs twice per number
    checked = [model.encoder.cells[0].bias, model.bridge.bias, model.decoder.cells[1].bias,
               *model.attention.parameters()] + ([model.output.weight] if variant == "general-untied" else [])
    assert mt.gradcheck(lambda *params: model.loss(src, tgt_in, tgt_out, label_smoothing=0.1), checked)


def test_loss_is_the_cross_entropy_of_the_logits():
    model = tiny_model()
    src, tgt_in, tgt_out = batch()
    logits = model(src, tgt_in)
    expected = F.cross_entropy(logits.reshape(-1, VOCAB), tgt_out.reshape(-1), label_smoothing=0.1, ignore_index=PAD)
    np.testing.assert_allclose(model.loss(src, tgt_in, tgt_out, 0.1).item(), expected.item(), rtol=1e-12)


# -- padding and causality ------------------------------------------------------------------------
def test_changing_a_padded_source_token_changes_no_output():
    model = tiny_model()
    src, tgt_in, _ = batch()
    before = model(src, tgt_in).data
    src[1, 3:] = 7                                                     # write words where the padding was...
    src_mask_kept = np.array([[True] * 5, [True, True, True, False, False]])
    memory, _ = model.encode(src)
    after = model.decode(tgt_in, memory, src_mask_kept).data           # ...but keep them masked
    np.testing.assert_allclose(after[0], before[0], rtol=1e-12)
    assert not np.allclose(after[1], before[1])                        # the encoder read them: not padding now
    memory, _ = model.encode(batch()[0])
    np.testing.assert_allclose(model.decode(tgt_in, memory, src_mask_kept).data, before, rtol=1e-12)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_sentence_gives_the_same_logits_alone_and_padded_in_a_batch(variant):
    model = tiny_model(**VARIANTS[variant])
    src, tgt_in, _ = batch()
    together = model(src, tgt_in).data
    alone = model(src[1:, :3], tgt_in[1:, :3]).data
    np.testing.assert_allclose(together[1, :3], alone[0], rtol=1e-10, atol=1e-13)


def test_changing_a_future_target_token_changes_no_earlier_output():
    model = tiny_model()
    src, tgt_in, _ = batch()
    before = model(src, tgt_in).data
    tgt_in[:, 2] = 10
    after = model(src, tgt_in).data
    np.testing.assert_allclose(after[:, :2], before[:, :2], rtol=1e-12)
    assert not np.allclose(after[:, 2:], before[:, 2:])


# -- the cache and the searches --------------------------------------------------------------------
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_cached_step_by_step_decoding_equals_the_full_pass(variant):
    model = tiny_model(**VARIANTS[variant])
    src, tgt_in, _ = batch()
    memory, src_mask = model.encode(src)
    full = model.decode(tgt_in, memory, src_mask).data
    cache = model.init_cache()
    with mt.no_grad():
        steps = [model.decode_step(tgt_in[:, t], memory, src_mask, cache).data for t in range(tgt_in.shape[1])]
    assert cache.position == len(cache) == tgt_in.shape[1]
    np.testing.assert_allclose(np.stack(steps, axis=1), full, rtol=0, atol=1e-12)


@pytest.mark.parametrize("same_sources", [False, True], ids=["any-rows", "within-a-sentence"])
def test_cache_reorder_continues_the_chosen_hypotheses(same_sources):
    model = tiny_model()
    src, tgt_in, _ = batch()
    rows = np.repeat(np.arange(2), 2) if same_sources else np.arange(2)          # two beams per sentence
    order = np.array([1, 1, 3, 2]) if same_sources else np.array([1, 1, 0])
    with mt.no_grad():
        memory, src_mask = model.encode(src[rows])
        cache = model.init_cache()
        for t in range(2):
            model.decode_step(tgt_in[rows, t], memory, src_mask, cache)
        keys = cache.keys
        cache.reorder(order, same_sources=same_sources)
        assert (cache.keys is keys) == same_sources                              # kept, not copied
        if not same_sources:
            memory, src_mask = mt.Tensor(memory.data[order]), src_mask[order]
        step = model.decode_step(tgt_in[rows[order], 2], memory, src_mask, cache).data
        expected = model.decode(tgt_in[rows[order], :3], memory, src_mask).data[:, 2]
    np.testing.assert_allclose(step, expected, atol=1e-12)


def test_the_cache_names_bad_indices():
    cache = tiny_model().init_cache()
    model = tiny_model()
    memory, src_mask = model.encode(batch()[0])
    model.decode_step(np.array([BOS, BOS]), memory, src_mask, cache)
    with pytest.raises(ValueError, match=r"Seq2SeqCache.reorder: indices must be a 1-D integer array"):
        cache.reorder(np.array([[0]]))


def test_both_models_offer_the_decoding_protocol():
    assert isinstance(tiny_model(), Decodable)
    transformer = nn.Transformer(nn.TransformerConfig.tiny(VOCAB, d_model=8, n_heads=2, d_ff=16, n_layers=1))
    assert isinstance(transformer, Decodable)


@pytest.fixture
def sources(rng):
    src = np.zeros((4, 7), dtype=np.int64)
    for i, n in enumerate([5, 2, 7, 4]):
        src[i, :n] = rng.integers(3, VOCAB, size=n)
    return src


@pytest.mark.parametrize("variant", ["Bahdanau", "no-input-feeding"])
def test_greedy_and_beam_search_agree_with_and_without_the_cache(sources, variant):
    model = tiny_model(**VARIANTS[variant])
    greedy = greedy_decode(model, sources, BOS, EOS, max_len=8)
    assert greedy == greedy_decode(model, sources, BOS, EOS, max_len=8, use_cache=False)
    beam_of_one = beam_search(model, sources, BOS, EOS, beam_size=1, max_len=8)
    assert [h[0].tokens for h in beam_of_one] == greedy
    fast = beam_search(model, sources, BOS, EOS, beam_size=3, max_len=8, n_best=3)
    slow = beam_search(model, sources, BOS, EOS, beam_size=3, max_len=8, n_best=3, use_cache=False)
    assert [[h.tokens for h in hs] for hs in fast] == [[h.tokens for h in hs] for hs in slow]
    for i in range(len(sources)):                                      # batched = one sentence at a time
        n = int((sources[i] != PAD).sum())
        [alone] = beam_search(model, sources[i:i + 1, :n], BOS, EOS, beam_size=3, max_len=8)
        assert alone[0].tokens == fast[i][0].tokens
        assert alone[0].score == pytest.approx(fast[i][0].score, rel=1e-9)


def test_beam_log_prob_is_the_teacher_forced_log_prob_and_the_score_has_the_length_penalty(sources):
    model = tiny_model()
    [[best]] = beam_search(model, sources[:1, :5], BOS, EOS, beam_size=4, alpha=0.6, max_len=8)
    tokens = best.tokens + ([EOS] if best.finished else [])
    with mt.no_grad():
        log_probs = F.log_softmax(model(sources[:1, :5], np.array([[BOS] + tokens[:-1]]))).numpy()[0]
    assert best.log_prob == pytest.approx(sum(log_probs[t, tok] for t, tok in enumerate(tokens)), rel=1e-9)
    assert best.score == pytest.approx(best.log_prob / ((5 + len(tokens)) / 6) ** 0.6, rel=1e-12)


def test_a_model_in_training_mode_drops_units_and_the_searches_do_not():
    model = tiny_model(dropout=0.3)
    src, tgt_in, tgt_out = batch()
    model.train()
    assert model.loss(src, tgt_in, tgt_out).item() != model.loss(src, tgt_in, tgt_out).item()
    assert greedy_decode(model, src, BOS, EOS, max_len=6) == greedy_decode(model.eval(), src, BOS, EOS, max_len=6)


# -- what else the model offers --------------------------------------------------------------------
def test_attention_weights_are_a_distribution_over_the_real_source_tokens():
    model = tiny_model().eval()
    src, tgt_in, _ = batch()
    weights = model.attention_weights(src, tgt_in)
    assert weights.shape == (2, 4, 5)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-12)
    assert np.all(weights[1, :, 3:] == 0)


def test_parameter_counts_add_up_and_follow_the_formula():
    config = tiny_config()
    model = nn.Seq2Seq(config)
    counts = model.parameter_counts()
    assert sum(counts.values()) == model.num_parameters()
    d, h, layers = 8, 4, 2                                             # h: units per encoder direction

    def lstm(inputs, units):
        return 4 * units * (inputs + units + 1)
    assert counts["embeddings"] == VOCAB * d and counts["output"] == 0
    assert counts["encoder"] == 2 * (lstm(d, h) + lstm(2 * h, h))
    assert counts["decoder"] == lstm(2 * d, d) + lstm(d, d) + (h + 1) * layers * 2 * d + 2 * d * d
    assert counts["attention"] == 2 * d * d + d                        # W_q, W_k and v
    assert "total" in model.parameter_report() and f"{model.num_parameters():,}" in model.parameter_report()


def test_same_seed_same_weights():
    a, b = nn.Seq2Seq(tiny_config(seed=3)), nn.Seq2Seq(tiny_config(seed=3))
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        np.testing.assert_array_equal(x, y, err_msg=name)
    assert not np.array_equal(a.bridge.weight.data, nn.Seq2Seq(tiny_config(seed=4)).bridge.weight.data)


@pytest.mark.parametrize("overrides,message", [
    ({"d_model": 7}, r"d_model=7 must be even when bidirectional=True"),
    ({"d_model": 0}, r"d_model must be a positive integer, got 0"),
    ({"n_layers": 1.5}, r"n_layers must be a positive integer, got 1.5"),
    ({"dropout": 1.0}, r"dropout must be in \[0, 1\), got 1.0"),
    ({"tgt_vocab_size": 12}, r"tie_embeddings=True shares one embedding matrix"),
    ({"pad_id": 11}, r"pad_id 11 is not a valid token id"),
    ({"score": "concat"}, r"score must be one of additive, dot, general, got 'concat'"),
    ({"model": "transformer"}, r"model must be 'lstm', got 'transformer'"),
    ({"max_len": 0}, r"max_len must be a positive integer, got 0"),
    ({"input_feeding": "no"}, r"input_feeding must be True or False, got 'no'"),
], ids=lambda value: value if isinstance(value, str) and "\\" not in value else None)
def test_bad_configurations_are_named(overrides, message):
    with pytest.raises(ValueError, match=rf"^Seq2SeqConfig: {message}"):
        tiny_config(**overrides)


def test_bad_inputs_are_named():
    model = tiny_model()
    with pytest.raises(ValueError, match=r"Seq2Seq: src_ids row 1 holds only padding"):
        model.encode(np.array([[4, 5], [PAD, PAD]]))
    with pytest.raises(ValueError, match=r"Seq2Seq: src_ids must be an integer array of shape \(B, length\)"):
        model.encode(np.zeros((2, 3)))
    memory, src_mask = model.encode(batch()[0])
    with pytest.raises(ValueError, match=r"the target ids have 3 rows but the memory has 2"):
        model.decode(np.ones((3, 2), np.int64), memory, src_mask)


# -- saving and loading ------------------------------------------------------------------------------
def test_a_checkpoint_names_its_model_and_loads_back_as_the_same_lstm(tmp_path):
    model = nn.Seq2Seq(tiny_config(score="general", input_feeding=False))      # float32, as trained
    folder = ckpt.save_final(tmp_path, model.state_dict(), {"config": dataclasses.asdict(model.config)})
    loaded = ckpt.load_checkpoint(folder)
    assert loaded.config["model"] == "lstm"
    again = model_from_checkpoint(loaded)
    assert type(again) is nn.Seq2Seq and again.config == model.config
    src, tgt_in, _ = batch()
    np.testing.assert_array_equal(again(src, tgt_in).data, model.eval()(src, tgt_in).data)


def test_configurations_of_both_kinds_read_back_and_an_old_one_is_a_transformer():
    transformer = nn.TransformerConfig.tiny(VOCAB)
    lstm = tiny_config()
    assert config_from_dict(dataclasses.asdict(transformer)) == transformer
    assert config_from_dict(dataclasses.asdict(lstm)) == lstm
    older = {k: v for k, v in dataclasses.asdict(transformer).items() if k != "model"}   # saved before the field
    assert config_from_dict(older) == transformer
    assert type(models.build_model(lstm)) is nn.Seq2Seq
    assert type(models.build_model(transformer)) is nn.Transformer
    with pytest.raises(ckpt.CheckpointError, match=r"unknown model 'rnn'; choose one of transformer, lstm"):
        config_from_dict({**dataclasses.asdict(lstm), "model": "rnn"})
    with pytest.raises(ckpt.CheckpointError, match=r"unknown Seq2SeqConfig field\(s\) \['n_heads'\]"):
        config_from_dict({**dataclasses.asdict(lstm), "n_heads": 4})
    with pytest.raises(ValueError, match=r"TransformerConfig: model must be 'transformer', got 'lstm'"):
        nn.TransformerConfig.tiny(VOCAB, model="lstm")


# -- it learns ---------------------------------------------------------------------------------------
def reversal_batch(rng, n=32):
    """Sentences of 2-6 words from a vocabulary of 9; the target is the source reversed."""
    lengths = rng.integers(2, 7, n)
    longest = lengths.max()
    src, tgt_in, tgt_out = (np.full((n, longest + extra), PAD, np.int64) for extra in (0, 1, 1))
    for i, n_words in enumerate(lengths):
        words = rng.integers(3, 12, n_words)
        src[i, :n_words], reverse = words, words[::-1]
        tgt_in[i, :n_words + 1] = [BOS, *reverse]
        tgt_out[i, :n_words + 1] = [*reverse, EOS]
    return src, tgt_in, tgt_out


def test_a_tiny_model_learns_to_reverse_sentences(rng):
    model = nn.Seq2Seq(nn.Seq2SeqConfig(12, 12, d_model=32, n_layers=1, dropout=0.0))
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(80):
        loss = model.loss(*reversal_batch(rng))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert np.mean(losses[-10:]) < 0.5 * losses[0]                      # from log 12 ≈ 2.5 to well below half
    src, _, tgt_out = reversal_batch(rng, 8)
    found = greedy_decode(model, src, BOS, EOS)
    right = sum(tokens == [t for t in row if t not in (PAD, EOS)] for tokens, row in zip(found, tgt_out.tolist()))
    assert right >= 2, found                                            # some sentences already come out reversed
