"""BLEU from scratch against hand-computed cases and against sacrebleu."""

import gzip
import math
import random
from pathlib import Path

import pytest

from minitransformer.bleu import (
    BLEUScore, bleu_stats, brevity_penalty, clipped_ngram_matches, corpus_bleu,
    corpus_bleu_score, sentence_bleu, tokenization_for, tokenize,
)
from minitransformer.chrf import chrf_words, corpus_chrf, corpus_chrf_score

ROOT = Path(__file__).resolve().parents[1]
# ../shared/data from the project root (from a worktree one level deeper: ../../shared/data)
DATA = next((p / "shared" / "data" for p in (ROOT.parent, ROOT.parent.parent) if (p / "shared" / "data").is_dir()),
            ROOT.parent / "shared" / "data")


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
    ours = corpus_bleu_score(hyps, refs, tokenize="none")
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
        assert sentence_bleu(hyp, ref, tokenize="none").score == pytest.approx(expected.score, abs=0.01)


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
        assert corpus_bleu(h, refs, tokenize="none") == pytest.approx(expected, abs=0.01)


# --- tokenizations: 13a (the default), char, none, ja-mecab ----------------------------------------

PIECES = ["the", "cat", "Cat", "fish", "milk?", "it's", "3.5", "1,000", "a-b", "9-", "(hi)", "&amp;", "<skipped>",
          "é", "私は", "学生", "です", "。", "、", "猫", "🎉", "\u3000", "x.y", "--", "\t"]


def _random_raw_corpus(rng: random.Random, n: int) -> tuple[list[str], list[str]]:
    """Raw sentences: mixed scripts, ASCII punctuation glued to words, numbers, entities, odd spaces."""
    refs = ["".join(rng.choice(PIECES) + rng.choice([" ", " ", "", "  "]) for _ in range(rng.randint(0, 10)))
            for _ in range(n)]
    hyps = []
    for ref in refs:
        chars = [c if rng.random() < 0.85 else rng.choice("ab .,?私猫") for c in ref if rng.random() < 0.9]
        hyps.append("".join(chars))
    return hyps, refs


@pytest.mark.parametrize("tokenize", ["13a", "char", "none"])
@pytest.mark.parametrize("seed", range(5))
def test_every_tokenization_matches_sacrebleu_on_random_raw_sentences(tokenize, seed):
    sb = pytest.importorskip("sacrebleu")
    hyps, refs = _random_raw_corpus(random.Random(seed), random.Random(seed).choice([1, 3, 30]))
    expected = sb.corpus_bleu(hyps, [refs], tokenize=tokenize, force=True)
    ours = corpus_bleu_score(hyps, refs, tokenize=tokenize)
    assert ours.score == pytest.approx(expected.score, abs=0.01)
    assert (ours.hyp_len, ours.ref_len) == (expected.sys_len, expected.ref_len)
    assert ours.tokenize == tokenize and f"tokenize {tokenize}" in str(ours)


def test_13a_is_the_default_and_sets_punctuation_apart():
    assert tokenize("Did the dog drink the milk? It's 3.5 km, a-b &amp; 9-5.") == \
        ["Did", "the", "dog", "drink", "the", "milk", "?", "It's", "3.5", "km", ",", "a-b", "&", "9", "-", "5", "."]
    assert corpus_bleu(["the milk?"], ["the milk ?"]) == pytest.approx(
        corpus_bleu(["the milk ?"], ["the milk ?"], tokenize="none"))
    assert tokenize("私は 学生です。", "char") == ["私", "は", "学", "生", "で", "す", "。"]


def test_unknown_tokenization_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown tokenize 'intl'"):
        corpus_bleu(["a"], ["a"], tokenize="intl")


def test_unsegmented_languages_are_scored_on_characters():
    assert tokenization_for("ja") == "char" and tokenization_for("zh") == "char"
    assert tokenization_for("en") == "13a" and tokenization_for(None) == "13a"
    assert tokenization_for("ja", ["私は学生です。"]) == "char" and tokenization_for(None, ["私は学生です。"]) == "char"
    assert tokenization_for("ja", ["私 は 学生 です 。"]) == "none"   # already in words: its own words
    assert tokenization_for("en", ["I am a student."]) == "13a"
    # one Japanese sentence with one wrong character: 0 as whitespace "words", high on characters
    hyp, ref = ["私は学生です。"], ["私は先生です。"]
    assert corpus_bleu(hyp, ref) == 0.0
    assert corpus_bleu(hyp, ref, tokenize="char") > 40


def _tatoeba(pair: str, n: int = 300) -> list[tuple[str, str]]:
    path = DATA / "tatoeba_manythings" / pair / "test.tsv.gz"
    if not path.is_file():
        pytest.skip(f"real data not found at {path}")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [tuple(line.rstrip("\n").split("\t")[:2]) for line in f][:n]


def _damaged(sentences: list[str], others: list[str], seed: int = 0) -> list[str]:
    """Hypotheses: the sentences with characters dropped or taken from unrelated sentences."""
    rng = random.Random(seed)
    out = []
    for sentence, other in zip(sentences, others):
        out.append("".join(c if rng.random() < 0.85 else rng.choice(other or "x")
                           for c in sentence if rng.random() < 0.92))
    return out


@pytest.mark.parametrize("pair", ["jpn-eng", "fra-eng"])
def test_every_tokenization_matches_sacrebleu_on_real_raw_sentences(pair):
    sb = pytest.importorskip("sacrebleu")
    pairs = _tatoeba(pair)
    for side in (0, 1):
        refs = [p[side] for p in pairs]
        hyps = _damaged(refs, refs[::-1])
        for tokenize in ("13a", "char", "none"):
            expected = sb.corpus_bleu(hyps, [refs], tokenize=tokenize, force=True).score
            assert corpus_bleu(hyps, refs, tokenize=tokenize) == pytest.approx(expected, abs=0.01), tokenize


def test_ja_mecab_words_match_sacrebleus_tokenizer_where_both_are_installed():
    pytest.importorskip("fugashi")
    pytest.importorskip("unidic_lite")
    words = tokenize("私は学生です。", "ja-mecab")
    assert "".join(words) == "私は学生です。" and 3 <= len(words) <= 7
    sb = pytest.importorskip("sacrebleu")
    try:
        sb.corpus_bleu(["私は学生です。"], [["私は学生です。"]], tokenize="ja-mecab")
    except Exception as error:  # noqa: BLE001 - sacrebleu's MeCab packages are another optional install
        pytest.skip(f"sacrebleu's ja-mecab is not usable here: {error}")
    hyps, refs = ["私は学生です。", "猫が魚を食べた。"], ["私は先生です。", "猫は魚を食べた。"]
    ours = corpus_bleu(hyps, refs, tokenize="ja-mecab")
    theirs = sb.corpus_bleu(hyps, [refs], tokenize="ja-mecab").score
    assert abs(ours - theirs) < 15     # another dictionary (unidic-lite, not ipadic): close, not equal


# --- chrF and chrF++ ------------------------------------------------------------------------------

def test_chrf_hand_computed():
    # "ab" against "abc", orders 1-2: unigrams P 2/2 R 2/3, bigrams P 1/1 R 1/2;
    # P = 1, R = 7/12, chrF2 = 5 P R / (4 P + R) = 35/55
    assert corpus_chrf(["ab"], ["abc"], char_order=2) == pytest.approx(100 * 35 / 55)
    assert corpus_chrf(["a b c"], ["abc"]) == pytest.approx(100.0)      # spaces do not count
    assert corpus_chrf(["xyz"], ["abc"]) == 0.0
    score = corpus_chrf_score(["ab"], ["abc"], word_order=2)
    assert score.name == "chrF2++" and float(score) == score.score and "chrF2++ = " in str(score)


def test_chrf_plus_plus_words_set_final_punctuation_apart():
    assert chrf_words("Did the dog drink (milk)? a") == ["Did", "the", "dog", "drink", "(milk)", "?", "a"]


@pytest.mark.parametrize("word_order", [0, 2])
@pytest.mark.parametrize("seed", range(5))
def test_chrf_matches_sacrebleu_on_random_sentences(word_order, seed):
    sb = pytest.importorskip("sacrebleu")
    rng = random.Random(seed)
    hyps, refs = _random_raw_corpus(rng, rng.choice([1, 3, 30]))
    expected = sb.corpus_chrf(hyps, [refs], word_order=word_order).score
    assert corpus_chrf(hyps, refs, word_order=word_order) == pytest.approx(expected, abs=0.01)


@pytest.mark.parametrize("pair", ["jpn-eng", "fra-eng"])
def test_chrf_matches_sacrebleu_on_real_sentences(pair):
    sb = pytest.importorskip("sacrebleu")
    pairs = _tatoeba(pair)
    for side in (0, 1):
        refs = [p[side] for p in pairs]
        for hyps in (_damaged(refs, refs[::-1]), refs[::-1]):
            for word_order in (0, 2):
                expected = sb.corpus_chrf(hyps, [refs], word_order=word_order).score
                assert corpus_chrf(hyps, refs, word_order=word_order) == pytest.approx(expected, abs=0.01)


def test_chrf_refuses_mismatched_lists():
    with pytest.raises(ValueError, match="one reference per hypothesis"):
        corpus_chrf(["a", "b"], ["a"])
    with pytest.raises(TypeError, match="lists of sentences"):
        corpus_chrf("a", "a")
