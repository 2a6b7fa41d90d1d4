"""Exercise 12.1 — the alignment error rate of a head (chapters/12-looking-inside.md).

Its public tests, its grading cases and its catalogued mistakes (spec.py).
"""
from __future__ import annotations

import numpy as np

from ..spec import ExerciseSpec, case, mistake


# -- the public tests (pytest -m grades_12_1) -------------------------------------------------------------------------
# the heads of the tests, (weights, gold links); the public cases hand the same heads to the grader
PERFECT = (np.eye(4), [(i, i) for i in range(4)])
# row 0 has two partners (possible links), row 1 one (a sure link); both argmaxes are right
PHRASE = (np.array([[0.1, 0.8, 0.1], [0.0, 0.0, 1.0]]), [(0, 0), (1, 0), (2, 1)])
# the same links, row 0's argmax on no partner: A meets S once and P once, AER = 1 - 2/3
PHRASE_MISSED = (np.array([[0.1, 0.1, 0.8], [0.0, 0.0, 1.0]]), PHRASE[1])
# argmax links A = {(0, 0), (2, 1), (0, 2)}; row 1 has two gold partners (possible links), rows 0 and 2 one
# (sure links S = {(0, 0), (1, 2)}); A meets S once and the possible links P twice: AER = 1 - 3/5
WORKED = (np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.5, 0.4, 0.1], [0.2, 0.2, 0.6]]),
          [(0, 0), (1, 1), (2, 1), (1, 2)])          # row 3 has no gold link: it is not counted
WORST = (WORKED[0], [(1, 0), (0, 1), (2, 2)])         # every argmax misses


def test_aer_is_zero_for_a_perfect_head_and_counts_phrase_links_as_possible():
    from minitransformer.alignment_scores import alignment_error_rate
    assert alignment_error_rate(*PERFECT) == 0.0
    assert alignment_error_rate(*PHRASE) == 0.0
    np.testing.assert_allclose(alignment_error_rate(*PHRASE_MISSED), 1 / 3, rtol=1e-12)


def test_aer_of_a_worked_example():
    from minitransformer.alignment_scores import alignment_error_rate
    np.testing.assert_allclose(alignment_error_rate(*WORKED), 0.4, rtol=1e-6, atol=1e-12)
    assert alignment_error_rate(*WORST) == 1.0            # every argmax misses: the worst


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def probe_alignment_error_rate(rng, heads=None, rows: int = 4, sources: int = 5, links: int = 6) -> dict:
    """The AER of given or random heads against given or random gold links."""
    from minitransformer.alignment_scores import alignment_error_rate

    if heads is None:
        heads = []
        for _ in range(20):
            weights = rng.dirichlet(np.ones(sources), size=rows)
            gold = sorted({(int(s), int(t)) for s, t in zip(rng.integers(0, sources, links),
                                                             rng.integers(0, rows, links))})
            heads.append((weights.tolist(), gold))
    rates = [alignment_error_rate(np.asarray(w), [tuple(link) for link in gold]) for w, gold in heads]
    return {"aer": np.asarray(rates, dtype=np.float64)}


def _heads(*heads) -> list:
    return [[np.asarray(weights).tolist(), [list(link) for link in links]] for weights, links in heads]


# each public case holds heads whose AERs differ, so that no constant answers it (issue 47); the first has only
# sure links, so a submission that gets only the possible links wrong still earns it (a partial score, always)
PUBLIC = [case("a perfect head and the worst", "alignment_error_rate", heads=_heads(PERFECT, WORST)),
          case("phrase links are possible links", "alignment_error_rate",
               heads=_heads(WORKED, PHRASE, PHRASE_MISSED)),
          case("random heads", "alignment_error_rate")]


def hidden_case(r, n: int, count: int) -> dict:
    return case("random heads", "alignment_error_rate", rows=int(r.integers(1, 7)),
                sources=int(r.integers(1, 7)), links=int(r.integers(1, 10)))


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("every link sure", "sure links are those of rows with exactly one gold partner; the others are only "
            "possible", ("if len(sources) == 1 ", "")),
    mistake("recall's denominator", "AER = 1 − (|A∩S| + |A∩P|) / (|A| + |S|): the denominator counts the sure links",
            ("(len(predicted) + len(sure))", "(len(predicted) + len(possible))")),
    mistake("1 − forgotten", "AER = 1 − (|A∩S| + |A∩P|) / (|A| + |S|): 0 is a perfect head", ("return 1.0 - (", "return (")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("12.1", public=PUBLIC, hidden=hidden_case, probes=[probe_alignment_error_rate],
                    mistakes=MISTAKES)
