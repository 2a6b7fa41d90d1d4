"""BLEU from scratch against hand-computed cases and against sacrebleu."""

import gzip
import math
import random
from pathlib import Path

import pytest

from minitransformer.bleu import (
    BLEUScore, bleu_stats, brevity_penalty, clipped_ngram_matches, corpus_bleu,
    corpus_bleu_score, sentence_bleu,
)

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"


def test_clipped_matches_clip_repeated_words():
    # "the" appears 7 times in the hypothesis but twice in the reference (Papineni et al. §2.1).
    hyp = "the the the the the the the".split()
    ref = "the cat is on the mat".split()
    assert clipped_ngram_matches(hyp, ref, 1) == (2, 7)
    assert clipped_ngram_matches(hyp, ref, 2) == (0, 6)


def test_clipped_matches_short_hypothesis_has_no_long_ngrams():
    assert clipped_ngram_matches(["a", "b"], ["a", "b", "c"], 3) == (0, 0)


def test_perfect_translation_scores_100():
    refs = ["the cat ate the fish .", "i went to the park yesterday ."]
    assert corpus_bleu(refs, refs) == pytest.approx(100.0)


def test_hand_computed_score():
    hyps = ["the cat sat on the mat"]
    refs = ["the cat sat on a mat today"]
    correct, total, hyp_len, ref_len = bleu_stats(hyps, refs)
    assert correct == [5, 3, 2, 1] and total == [6, 5, 4, 3]
    assert (hyp_len, ref_len) == (6, 7)
    precisions = [5 / 6, 3 / 5, 2 / 4, 1 / 3]
    expected = math.exp(1 - 7 / 6) * math.exp(sum(map(math.log, precisions)) / 4) * 100
    score = corpus_bleu_score(hyps, refs)
    assert score.score == pytest.approx(expected)
    assert score.bp == pytest.approx(brevity_penalty(6, 7))
    assert score.ratio == pytest.approx(6 / 7)
    assert float(score) == score.score
    assert "BLEU = " in str(score)


def test_corpus_bleu_pools_statistics_before_taking_precisions():
    hyps = ["a b c d e f", "x y z w"]
    refs = ["a b c d e f", "p q r s"]
    # Pooled: 6/10 unigrams, 5/8 bigrams, 4/6 trigrams, 3/4 4-grams match.
    expected = 100 * (6 / 10 * 5 / 8 * 4 / 6 * 3 / 4) ** 0.25
    assert corpus_bleu(hyps, refs) == pytest.approx(expected)
    mean_of_sentences = (sentence_bleu(hyps[0], refs[0]).score + sentence_bleu(hyps[1], refs[1]).score) / 2
    assert mean_of_sentences == pytest.approx(50.0)


def test_no_match_and_empty_hypotheses_score_zero():
    assert corpus_bleu(["x y z"], ["a b c"]) == 0.0
    assert corpus_bleu([""], ["a b c"]) == 0.0
    score = corpus_bleu_score(["", ""], ["a b", "c"])
    assert score.hyp_len == 0 and score.bp == 0.0 and score.score == 0.0


def test_zero_precision_order_exp_smoothing_versus_none():
    # Unigrams match but no 4-gram does: 'exp' smoothing (sacrebleu's default)
    # keeps a small positive score, 'none' gives 0.
    hyps = ["a b c x d e f"]
    refs = ["a b c y d e f"]
    correct, total, _, _ = bleu_stats(hyps, refs)
    assert correct[3] == 0 and total[3] > 0
    assert corpus_bleu(hyps, refs, smooth="none") == 0.0
    smoothed = corpus_bleu_score(hyps, refs, smooth="exp")
    assert smoothed.precisions[3] == pytest.approx(100.0 / (2 * total[3]))
    assert 0.0 < smoothed.score < 100.0


def test_hypotheses_too_short_for_4grams_score_zero():
    assert corpus_bleu(["a b c"], ["a b c"]) == 0.0
    assert sentence_bleu("a b c", "a b c").score == pytest.approx(100.0)  # effective order


def test_token_lists_are_accepted():
    assert corpus_bleu([["a", "b", "c", "d"]], [["a", "b", "c", "d"]]) == pytest.approx(100.0)


def test_bad_input_raises_clear_errors():
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        corpus_bleu(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="empty"):
        corpus_bleu([], [])
    with pytest.raises(TypeError, match="lists of sentences"):
        corpus_bleu("a b", "a b")
    with pytest.raises(ValueError, match="unknown smooth"):
        corpus_bleu(["a"], ["a"], smooth="floor")


def test_bleu_score_is_a_dataclass():
    score = corpus_bleu_score(["a b c d e"], ["a b c d e"])
    assert isinstance(score, BLEUScore)
    assert score.correct == (5, 4, 3, 2) and score.total == (5, 4, 3, 2)


# --- agreement with sacrebleu ------------------------------------------------

def _random_corpus(rng: random.Random, n: int, vocab: list[str]) -> tuple[list[str], list[str]]:
    hyps, refs = [], []
    for _ in range(n):
        ref = [rng.choice(vocab) for _ in range(rng.randint(0, 12))]
        hyp = [w if rng.random() < 0.7 else rng.choice(vocab) for w in ref]
        if rng.random() < 0.3 and hyp:
            del hyp[rng.randrange(len(hyp))]
        if rng.random() < 0.3:
            hyp.insert(rng.randint(0, len(hyp)), rng.choice(vocab))
        hyps.append(" ".join(hyp))
        refs.append(" ".join(ref))
    return hyps, refs


@pytest.mark.parametrize("seed", range(8))
def test_matches_sacrebleu_on_random_sentences(seed):
    sb = pytest.importorskip("sacrebleu")
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(rng.choice([3, 6, 20]))]
    hyps, refs = _random_corpus(rng, rng.choice([1, 2, 5, 40]), vocab)
    expected = sb.corpus_bleu(hyps, [refs], tokenize="none", force=True)
    ours = corpus_bleu_score(hyps, refs)
    assert ours.score == pytest.approx(expected.score, abs=0.01)
    assert ours.bp == pytest.approx(expected.bp, abs=1e-9)
    for n in range(4):
        assert ours.precisions[n] == pytest.approx(expected.precisions[n], abs=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_sentence_bleu_matches_sacrebleu(seed):
    sb = pytest.importorskip("sacrebleu")
    rng = random.Random(100 + seed)
    hyps, refs = _random_corpus(rng, 10, ["a", "b", "c", "d", "e"])
    for hyp, ref in zip(hyps, refs):
        expected = sb.sentence_bleu(hyp, [ref], tokenize="none")
        assert sentence_bleu(hyp, ref).score == pytest.approx(expected.score, abs=0.01)


def test_matches_sacrebleu_on_real_sentences():
    sb = pytest.importorskip("sacrebleu")
    path = DATA / "small_parallel_enja"
    if not path.is_dir():
        pytest.skip(f"real data not found at {path}")
    with gzip.open(path / "test.ja.gz", "rt", encoding="utf-8") as f:
        refs = [line.rstrip("\n") for line in f][:200]
    with gzip.open(path / "dev.ja.gz", "rt", encoding="utf-8") as f:
        unrelated = [line.rstrip("\n") for line in f][:200]
    rng = random.Random(0)
    # Hypotheses: references with some words dropped or swapped for unrelated ones.
    hyps = []
    for ref, other in zip(refs, unrelated):
        words, others = ref.split(), other.split()
        hyps.append(" ".join(w if rng.random() < 0.8 else rng.choice(others)
                             for w in words if rng.random() < 0.9))
    for h in (hyps, unrelated):
        expected = sb.corpus_bleu(h, [refs], tokenize="none", force=True).score
        assert corpus_bleu(h, refs) == pytest.approx(expected, abs=0.01)
