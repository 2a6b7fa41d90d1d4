"""Exercise 15.1 — top-p (nucleus) sampling's cut (chapters/15-decoder-only.md).

Its public tests, its grading cases and its catalogued mistakes (spec.py).
"""
from __future__ import annotations

import numpy as np

from ..spec import ExerciseSpec, case, mistake, parametrize


# -- the public tests (pytest -m grades_15_1) -------------------------------------------------------------------------
# worked by hand on the distribution (0.15, 0.5, 0.05, 0.3), given in no particular order: sorted, its cumulative
# probabilities are 0.5, 0.8, 0.95, 1. p = 0.3 keeps the first token alone (it reaches 0.3 by itself); p = 0.6 keeps
# two (0.5 falls short, 0.8 reaches 0.6: the token that crosses p stays); p = 0.9 keeps three. Renormalised.
PROBS = [0.15, 0.5, 0.05, 0.3]
WORKED = [(0.3, [0, 1, 0, 0]), (0.6, [0, 0.5 / 0.8, 0, 0.3 / 0.8]),
          (0.9, [0.15 / 0.95, 0.5 / 0.95, 0, 0.3 / 0.95])]


@parametrize("top_p, expected", WORKED)
def test_top_p_of_a_worked_example(top_p, expected):
    from minitransformer.generate import next_token_probabilities

    probs = next_token_probabilities(np.log(PROBS), top_p=top_p)
    np.testing.assert_allclose(probs, expected, rtol=1e-12, atol=1e-15)


def test_equal_probabilities_are_kept_in_the_order_of_their_ids():
    from minitransformer.generate import next_token_probabilities

    # four tokens of 0.25: p = 0.3 needs two of them; the first two ids are the ones kept
    np.testing.assert_array_equal(next_token_probabilities(np.zeros(4), top_p=0.3), [0.5, 0.5, 0, 0])


@parametrize("top_p", [0.05, 0.5, 0.9, 0.99])
def test_the_cut_keeps_the_smallest_set_of_most_likely_tokens_that_reaches_p(rng, top_p):
    from minitransformer.generate import next_token_probabilities

    logits = 2 * rng.standard_normal(30)
    full, cut = next_token_probabilities(logits), next_token_probabilities(logits, top_p=top_p)
    kept = cut > 0
    np.testing.assert_allclose(cut.sum(), 1.0, rtol=1e-12)
    assert full[kept].min() > full[~kept].max(initial=0)                # the most likely ones
    assert full[kept].sum() >= top_p                                    # enough of them to reach p ...
    assert full[kept].sum() - full[kept].min() < top_p                  # ... and no more
    np.testing.assert_allclose(cut[kept], full[kept] / full[kept].sum(), rtol=1e-12)   # in their proportions


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def probe_top_p(rng, vocab: int, top_p: float, scale: float = 2.0, temperature: float = 1.0, top_k=None,
                ties: bool = False, logits=None) -> dict:
    """The distribution one sampling step draws from, cut at top_p, for random (or given) logits."""
    from minitransformer.generate import next_token_probabilities

    if logits is None:
        logits = scale * rng.standard_normal(vocab)
        if ties:                                     # a few values only: many tokens of equal probability
            logits = np.round(logits)
    return {"probs": np.asarray(next_token_probabilities(np.asarray(logits, dtype=float), temperature, top_k,
                                                         top_p))}


PUBLIC = ([case(f"worked example, p = {p}", "top_p", vocab=4, top_p=p, logits=np.log(PROBS).tolist())
           for p, _ in WORKED]
          + [case("four equal tokens, p = 0.3", "top_p", vocab=4, top_p=0.3, logits=[0.0] * 4)]
          + [case(f"30 random tokens, p = {p}", "top_p", vocab=30, top_p=p) for p in (0.05, 0.5, 0.9, 0.99)])


def hidden_case(r, n: int, count: int) -> dict:
    return case("random distribution", "top_p", vocab=int(r.integers(2, 60)), top_p=float(r.uniform(0.05, 0.99)),
                scale=float(r.choice([0.5, 2.0, 5.0])), temperature=float(r.choice([0.7, 1.0, 1.5])),
                top_k=[None, None, int(r.integers(2, 20))][n % 3], ties=bool(n % 2))


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("the token that crosses p dropped", "keep the tokens up to AND including the one whose cumulative "
            "probability reaches p: a token stays when the mass ahead of it is still below p",
            ("order[before < top_p]", "order[before + probs[order] < top_p]")),
    mistake("not renormalised", "after the cut the kept probabilities must sum to 1 again: divide by their sum",
            ("probs = cut / cut.sum()", "probs = cut")),
    mistake("sorted ascending", "the nucleus is made of the MOST likely tokens: sort by decreasing probability",
            ("np.argsort(-probs, ", "np.argsort(probs, ")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("15.1", public=PUBLIC, hidden=hidden_case, probes=[probe_top_p], mistakes=MISTAKES)
