"""Greedy and beam search: on a hand-made Markov "model" with known answers, and on a tiny Transformer."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

import minitransformer as mt
from minitransformer import decode
from minitransformer.decode import (_top_candidates, beam_search, decode_sentences, distinct_outputs, greedy_decode,
                                     length_penalty)

PAD, BOS, EOS, A, B, C = 0, 1, 2, 3, 4, 5


class MarkovModel:
    """Next-token probabilities depend only on the last token: P[last] (a row of a table).

    It speaks the decoding interface (encode, init_cache, decode_step, decode) and
    counts decode calls, so tests can check which path the search took.
    """

    def __init__(self, table: dict[int, dict[int, float]], vocab: int = 6, max_len: int = 64) -> None:
        self.config = SimpleNamespace(pad_id=PAD, max_len=max_len)
        self.log_table = np.full((vocab, vocab), -1e9, dtype=np.float64)
        for last, row in table.items():
            for token, p in row.items():
                self.log_table[last, token] = math.log(p)
        self.calls = {"step": 0, "full": 0}

    def parameters(self):
        return [mt.Tensor(np.zeros(1), requires_grad=True)]

    def encode(self, src):
        return mt.Tensor(np.zeros((src.shape[0], src.shape[1], 2))), (src != PAD)[:, None, None, :]

    def init_cache(self):
        return SimpleNamespace(reorder=lambda rows: None)

    def decode_step(self, last_ids, memory, src_mask, cache):
        assert last_ids.shape == (memory.shape[0],)
        self.calls["step"] += 1
        return mt.Tensor(self.log_table[np.asarray(last_ids)])

    def decode(self, tgt_ids, memory, src_mask):
        self.calls["full"] += 1
        return mt.Tensor(self.log_table[np.asarray(tgt_ids)])  # (B, T, V)


def _src(lengths):
    src = np.full((len(lengths), max(lengths)), PAD, dtype=np.int64)
    for i, n in enumerate(lengths):
        src[i, :n] = 7
    return src


# After bos, "a" is likelier than "b", but everything after "a" is uncertain while "b" ends at once:
#   greedy: a c eos  (0.6 · 0.4 · 0.9 = 0.216)        best: b eos (0.4 · 0.9 = 0.36)
TRAP = {BOS: {A: 0.6, B: 0.4}, A: {C: 0.4, A: 0.3, B: 0.3}, B: {EOS: 0.9, C: 0.1},
        C: {EOS: 0.9, C: 0.1}}


def test_greedy_takes_the_locally_best_token():
    model = MarkovModel(TRAP)
    assert greedy_decode(model, _src([3]), BOS, EOS) == [[A, C]]


def test_beam_search_finds_the_more_probable_sentence():
    model = MarkovModel(TRAP)
    [[best]] = beam_search(model, _src([3]), BOS, EOS, beam_size=2, alpha=0.0)
    assert best.tokens == [B]
    assert best.log_prob == pytest.approx(math.log(0.4 * 0.9))
    assert best.finished


def test_beam_results_are_sorted_by_length_penalised_score():
    model = MarkovModel(TRAP)
    [hyps] = beam_search(model, _src([3]), BOS, EOS, beam_size=4, alpha=0.6, n_best=4)
    assert len(hyps) == 4
    scores = [h.score for h in hyps]
    assert scores == sorted(scores, reverse=True)
    for h in hyps:
        assert h.score == pytest.approx(h.log_prob / length_penalty(len(h.tokens) + 1, 0.6))
        expected = math.log(TRAP[BOS][h.tokens[0]]) + sum(
            math.log(TRAP[a][b]) for a, b in zip(h.tokens, h.tokens[1:] + [EOS]))
        assert h.log_prob == pytest.approx(expected)


def test_length_penalty_matches_gnmt():
    assert length_penalty(1, 0.6) == 1.0
    assert length_penalty(7, 0.6) == pytest.approx(2.0 ** 0.6)
    assert length_penalty(30, 0.0) == 1.0


def test_the_length_penalty_can_favour_a_longer_output():
    # "b eos" has P = 0.4, "a c eos" has P = 0.6 · 0.6 = 0.36: raw probability prefers the short one,
    # a strong length penalty (α = 2) the long one: log 0.4 / (7/6)² = −0.67 < log 0.36 / (8/6)² = −0.57
    table = {BOS: {A: 0.6, B: 0.4}, A: {C: 0.6, A: 0.4}, B: {EOS: 1.0}, C: {EOS: 1.0}}
    model = MarkovModel(table)
    [[short]] = beam_search(model, _src([3]), BOS, EOS, beam_size=4, alpha=0.0)
    [[long]] = beam_search(model, _src([3]), BOS, EOS, beam_size=4, alpha=2.0)
    assert short.tokens == [B]
    assert long.tokens == [A, C]


def test_output_length_is_capped_at_input_length_plus_50():
    loop = {BOS: {A: 1.0}, A: {A: 0.99, EOS: 0.01}}
    model = MarkovModel(loop, max_len=1000)
    [greedy] = greedy_decode(model, _src([3]), BOS, EOS)
    assert len(greedy) == 3 + 50
    [[beam]] = beam_search(model, _src([3]), BOS, EOS, beam_size=2)
    assert len(beam.tokens) <= 53
    assert len(greedy_decode(MarkovModel(loop, max_len=10), _src([3]), BOS, EOS)[0]) == 10  # positional table


def test_batches_of_different_lengths_each_stop_on_their_own():
    loop = {BOS: {A: 1.0}, A: {A: 0.99, EOS: 0.01}}
    model = MarkovModel(loop)
    outputs = greedy_decode(model, _src([1, 5, 2]), BOS, EOS)
    assert [len(o) for o in outputs] == [51, 55, 52]
    never_ends = MarkovModel({BOS: {A: 1.0}, A: {A: 1.0}})   # eos impossible: each runs to its own limit
    beams = beam_search(never_ends, _src([1, 5, 2]), BOS, EOS, beam_size=3)
    assert [(len(h[0].tokens), h[0].finished) for h in beams] == [(51, False), (55, False), (52, False)]


def test_cache_off_re_runs_the_prefix_and_agrees():
    with_cache, without = MarkovModel(TRAP), MarkovModel(TRAP)
    a = beam_search(with_cache, _src([2, 3]), BOS, EOS, beam_size=3, n_best=3)
    b = beam_search(without, _src([2, 3]), BOS, EOS, beam_size=3, n_best=3, use_cache=False)
    assert [[h.tokens for h in hs] for hs in a] == [[h.tokens for h in hs] for hs in b]
    assert with_cache.calls["full"] == 0 and without.calls["step"] == 0


# -- on a real (tiny, randomly initialised) Transformer ------------------------------------------
def _tiny_transformer(vocab=13, max_len=40):
    from minitransformer.nn.transformer import Transformer, TransformerConfig
    config = TransformerConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, d_model=16, n_heads=2, d_ff=32,
                               n_layers=2, dropout=0.0, max_len=max_len, seed=3)
    model = Transformer(config)
    model.eval()
    return model


@pytest.fixture
def tiny_model():
    return _tiny_transformer()


@pytest.fixture
def sources(rng):
    lengths = [5, 2, 7, 4]
    src = np.zeros((4, 7), dtype=np.int64)
    for i, n in enumerate(lengths):
        src[i, :n] = rng.integers(3, 13, size=n)
    return src


def test_beam_of_one_equals_greedy_on_a_transformer(tiny_model, sources):
    greedy = greedy_decode(tiny_model, sources, BOS, EOS, max_len=12)
    beam = beam_search(tiny_model, sources, BOS, EOS, beam_size=1, alpha=0.6, max_len=12)
    assert [h[0].tokens for h in beam] == greedy


def test_cache_and_no_cache_give_identical_outputs_on_a_transformer(tiny_model, sources):
    fast = beam_search(tiny_model, sources, BOS, EOS, beam_size=4, max_len=10, n_best=4)
    slow = beam_search(tiny_model, sources, BOS, EOS, beam_size=4, max_len=10, n_best=4, use_cache=False)
    assert [[h.tokens for h in hs] for hs in fast] == [[h.tokens for h in hs] for hs in slow]
    for hs, gs in zip(fast, slow):
        np.testing.assert_allclose([h.score for h in hs], [g.score for g in gs], rtol=1e-4)
        assert [h.score for h in hs] == sorted([h.score for h in hs], reverse=True)
    assert greedy_decode(tiny_model, sources, BOS, EOS, max_len=10) == \
        greedy_decode(tiny_model, sources, BOS, EOS, max_len=10, use_cache=False)


def test_batched_search_equals_one_sentence_at_a_time(tiny_model, sources):
    together = beam_search(tiny_model, sources, BOS, EOS, beam_size=3, max_len=9)
    for i in range(len(sources)):
        n = int((sources[i] != 0).sum())
        [alone] = beam_search(tiny_model, sources[i:i + 1, :n], BOS, EOS, beam_size=3, max_len=9)
        assert alone[0].tokens == together[i][0].tokens
        assert alone[0].score == pytest.approx(together[i][0].score, rel=1e-4)


def test_beam_log_prob_equals_the_teacher_forced_log_prob(tiny_model, sources):
    [[best]] = beam_search(tiny_model, sources[:1, :5], BOS, EOS, beam_size=4, max_len=8)
    tokens = best.tokens + ([EOS] if best.finished else [])
    tgt_in = np.array([[BOS] + tokens[:-1]])
    with mt.no_grad():
        logits = tiny_model(sources[:1, :5], tgt_in).numpy()[0].astype(np.float64)  # (T, V)
    log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) \
        - logits.max(-1, keepdims=True)
    assert best.log_prob == pytest.approx(sum(log_probs[t, tok] for t, tok in enumerate(tokens)), rel=1e-4)


def test_decode_sentences_keeps_order_and_handles_empty_sources(tiny_model, sources):
    lists = [list(row[row != 0]) for row in sources] + [[]]
    out = decode_sentences(tiny_model, lists, BOS, EOS, beam_size=2, max_tokens=20)
    assert len(out) == 5 and out[-1] == []
    direct = beam_search(tiny_model, sources, BOS, EOS, beam_size=2)
    assert out[:4] == [h[0].tokens for h in direct]


# -- a beam wider than the outputs that exist ---------------------------------------------------------------
def test_distinct_outputs_counts_the_finished_and_the_cut_ones():
    # V = 3 (two tokens besides eos), at most 3 tokens: 1 + 2 + 4 finished, 8 cut at the limit
    assert distinct_outputs(3, 3, 10 ** 9) == 15
    assert distinct_outputs(3, 2, 10 ** 9) == 4          # "", "x", "xx" and the cut "xxx"
    assert distinct_outputs(5, 1, 10 ** 9) == 1          # eos alone
    assert distinct_outputs(60, 37000, 4) == 4           # a real vocabulary: the beam is far below the cap
    assert distinct_outputs(3, 3, 15) == 15 and distinct_outputs(3, 3, 14) == 14


def test_a_beam_wider_than_the_outputs_that_exist_finds_what_the_widest_beam_finds(monkeypatch):
    """A beam of a billion rows would not fit in memory: it is cut to the 15 outputs that exist, and finds what
    the search finds with that beam, and what an uncut wider beam finds: every output, each scored the same."""
    model = _tiny_transformer(vocab=3)                   # pad 0, bos 1, eos 2
    src = np.array([[1, 1, 2], [2, 1, 0]], dtype=np.int64)
    rows, state = [], decode._DecoderState

    def rows_per_sentence(*args, repeat=1, **kwargs):    # fail here, before a billion rows are allocated
        rows.append(repeat)
        assert repeat <= 1000, f"the search made {repeat} rows per sentence"
        return state(*args, repeat=repeat, **kwargs)
    monkeypatch.setattr(decode, "_DecoderState", rows_per_sentence)
    huge = beam_search(model, src, BOS, EOS, beam_size=10 ** 9, max_len=3, n_best=10 ** 9)
    assert rows == [15]
    cap = beam_search(model, src, BOS, EOS, beam_size=15, max_len=3, n_best=15)
    assert [[(h.tokens, h.score) for h in hs] for hs in huge] == [[(h.tokens, h.score) for h in hs] for hs in cap]
    monkeypatch.setattr(decode, "distinct_outputs", lambda limit, vocab, at_most: at_most)   # no cut
    wider = beam_search(model, src, BOS, EOS, beam_size=40, max_len=3, n_best=40)
    every = {(), *((a,) for a in (0, 1)), *((a, b) for a in (0, 1) for b in (0, 1)),
             *((a, b, c) for a in (0, 1) for b in (0, 1) for c in (0, 1))}
    for found, widest in zip(cap, wider):
        assert {tuple(h.tokens) for h in found} == every and len(found) == 15     # exhaustive: each output once
        scores = {(tuple(h.tokens), h.finished): h.score for h in widest}
        assert len(widest) == 15
        for h in found:
            assert h.score == pytest.approx(scores[tuple(h.tokens), h.finished], rel=1e-5)


# -- decoding switches dropout off, and gives the caller's mode back ---------------------------------
def _dropout_transformer():
    from minitransformer.nn.transformer import Transformer, TransformerConfig
    return Transformer(TransformerConfig(src_vocab_size=13, tgt_vocab_size=13, d_model=16, n_heads=2, d_ff=32,
                                         n_layers=2, dropout=0.5, attention_dropout=0.3, max_len=40, seed=3))


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_a_model_left_in_training_mode_decodes_as_in_eval_mode(sources, search):
    def run(model):
        if search == "greedy":
            return greedy_decode(model, sources, BOS, EOS, max_len=12)
        return [[h.tokens for h in hs] for hs in beam_search(model, sources, BOS, EOS, beam_size=3, max_len=12)]

    model = _dropout_transformer()
    model.eval()
    expected = run(model)
    model.train()                                       # the caller forgot .eval()
    model.decoder.layers[0].eval()                      # and mixes modes on purpose
    assert [run(model) for _ in range(3)] == [expected] * 3
    assert model.training and model.encoder.training and not model.decoder.layers[0].training


def test_the_callers_mode_comes_back_when_decoding_fails(sources, monkeypatch):
    model = _dropout_transformer()
    modes = []

    def failing_step(*args, **kwargs):
        modes.append(model.training)
        raise RuntimeError("no memory left")
    monkeypatch.setattr(model, "decode_step", failing_step)
    with pytest.raises(RuntimeError, match="no memory"):
        greedy_decode(model, sources, BOS, EOS)
    assert modes == [False] and model.training and all(m.training for m in model.modules())


@pytest.mark.parametrize("shape, k", [((64, 16000), 8), ((3, 24), 8), ((5, 7), 3), ((2, 5), 8), ((4, 1001), 16)])
def test_top_candidates_equal_a_full_sort_ties_to_the_lower_index(shape, k):
    rng = np.random.default_rng(sum(shape) + k)
    scores = rng.standard_normal(shape).astype(np.float32)
    scores[:, ::3] = -np.inf                                  # dead beams
    scores[0] = np.round(scores[0])                           # many ties
    n = min(k, shape[1])
    order = np.lexsort((np.broadcast_to(np.arange(shape[1]), shape), -scores.astype(np.float64)), axis=-1)[:, :n]
    index, values = _top_candidates(scores, k)
    np.testing.assert_array_equal(index, order)
    np.testing.assert_array_equal(values, np.take_along_axis(scores, order, axis=1).astype(np.float64))


def test_top_candidates_name_nan_scores():
    scores = np.zeros((2, 100), dtype=np.float32)
    scores[1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        _top_candidates(scores, 4)


@pytest.mark.parametrize("beam", [1, 3])
def test_greedy_refuses_nan_log_probabilities_as_beam_search_does(beam):
    # argmax of a row of NaN is its first entry: greedy decoding of NaN weights used to print an empty line
    # (or any token) and score BLEU 0.00, where beam search refused
    model = MarkovModel(TRAP)
    model.log_table[A] = np.nan                     # after bos "a" is likeliest; then the model breaks
    with pytest.raises(ValueError, match="log-probabilities contain NaN"):
        decode_sentences(model, [[7, 7]], BOS, EOS, beam_size=beam)


def test_greedy_names_a_nan_even_where_eos_would_win():
    model = MarkovModel(TRAP)
    model.log_table[BOS, EOS] = np.nan              # argmax picks this NaN: eos, an empty line, before
    with pytest.raises(ValueError, match="greedy decoding: the model's log-probabilities contain NaN"):
        greedy_decode(model, _src([2]), BOS, EOS)
