"""Exercise 11.2 — BLEU's clipped n-gram precision (chapters/11-translator.md).

Its public tests, its grading cases and its catalogued mistakes (spec.py).
"""
from __future__ import annotations

import numpy as np

from minitransformer.bleu import clipped_ngram_matches

from ..spec import ExerciseSpec, case, mistake, parametrize


# -- the public tests (pytest -m grades_11_2) -------------------------------------------------------------------------
# worked by hand: "the cat sat on the mat" has the bigrams the-cat, cat-sat, sat-on, on-the, the-mat, and the
# reference "the cat is on the mat" has three of them; a hypothesis shorter than n has no n-gram at all
CLIPPED = [("the cat sat on the mat", "the cat is on the mat", 1, (5, 6)),
           ("the cat sat on the mat", "the cat is on the mat", 2, (3, 5)),
           ("the cat sat on the mat", "the cat is on the mat", 3, (1, 4)),
           ("the cat sat on the mat", "the cat is on the mat", 4, (0, 3)),
           ("the the the the", "the cat", 1, (1, 4)), ("the the the the", "the the cat", 2, (1, 3)),
           ("the cat", "the cat sat", 3, (0, 0)), ("", "the cat", 1, (0, 0))]


@parametrize("hypothesis, reference, n, expected", CLIPPED)
def test_clipped_matches_of_worked_examples(hypothesis, reference, n, expected):
    assert clipped_ngram_matches(hypothesis.split(), reference.split(), n) == expected


def test_a_repeated_word_counts_at_most_as_often_as_in_the_reference():
    hypothesis, reference = ["the"] * 7, "the cat is on the mat".split()
    matches, total = clipped_ngram_matches(hypothesis, reference, 1)
    assert (matches, total) == (reference.count("the"), len(hypothesis))


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran"]


def probe_clipped_matches(rng, sentences: int = 20, words: int = 6, longest: int = 9, pairs=None) -> dict:
    """(clipped matches, total) for n = 1..4 over random (or given) sentence pairs."""
    from minitransformer.bleu import clipped_ngram_matches

    if pairs is None:
        pairs = [(list(rng.choice(WORDS[:words], size=rng.integers(0, longest))),
                  list(rng.choice(WORDS[:words], size=rng.integers(1, longest)))) for _ in range(sentences)]
    counts = [[list(clipped_ngram_matches([str(w) for w in h], [str(w) for w in r], n)) for n in range(1, 5)]
              for h, r in pairs]
    return {"matches and totals": np.asarray(counts, dtype=np.int64).reshape(len(pairs), 4, 2)}


PUBLIC = ([case(f"random sentences, seed {n}", "clipped_matches") for n in range(3)]
          + [case("a repeated word", "clipped_matches", pairs=[[["the"] * 7, "the cat is on the mat".split()]])])


def hidden_case(r, n: int, count: int) -> dict:
    # sentences up to 5 to 11 words: short ones still test the "shorter than n" total, and no draw is left where
    # no word matches at all, which `return 0, total` would pass (one such draw in four had longest = 2)
    return case("random sentences", "clipped_matches", words=int(r.integers(2, 6)),
                longest=int(r.integers(6, 12)))


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("counts not clipped", "each n-gram counts at most as often as it occurs in the reference (clip with min)",
            ("min(count, ref_counts[gram])", "(count if gram in ref_counts else 0)")),
    mistake("tokens counted, not n-grams", "a sentence of L tokens has L − n + 1 n-grams (0 when shorter than n)",
            ("max(len(hypothesis) - n + 1, 0)", "len(hypothesis)")),
    mistake("negative total", "a sentence shorter than n has no n-gram: the total is max(L − n + 1, 0), never negative",
            ("max(len(hypothesis) - n + 1, 0)", "len(hypothesis) - n + 1")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("11.2", public=PUBLIC, hidden=hidden_case, probes=[probe_clipped_matches], mistakes=MISTAKES)
