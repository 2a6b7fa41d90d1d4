"""Exercise 13.1 — the online-softmax merge of a new block (chapters/13-long-sequences.md).

Its public tests, its grading cases and its catalogued mistakes (spec.py).
"""
from __future__ import annotations

import math

import numpy as np

from ..cases import drive
from ..spec import ExerciseSpec, case, mistake, parametrize


# -- the public tests (pytest -m grades_13_1) -------------------------------------------------------------------------
def _online(scores, values, cuts):
    from minitransformer.functional.flash_attention import finish_rows, online_softmax_step

    rows = scores.shape[0]
    state = (np.full((rows, 1), -np.inf), np.zeros((rows, 1)), np.zeros((rows, values.shape[1])))
    for start, stop in zip(cuts[:-1], cuts[1:]):
        state = online_softmax_step(*state, scores[:, start:stop], values[start:stop])
    return finish_rows(*state)


# every case has a block before the last whose scores count: online and offline (the last block alone) differ
CUTS = [[0, 3, 7], [0, 4, 7], [0, 1, 2, 5, 7]]
# a huge first block, a fully masked one, a huge last one; and a row that sees no key at all
HUGE = [[1e4 - 2, 1e4 - 3, -math.inf, -math.inf, 1e4, 1e4 - 1], [-math.inf] * 6]


@parametrize("cuts", CUTS)
def test_block_by_block_softmax_equals_the_softmax_of_the_whole_row(rng, cuts):
    scores, values = 4 * rng.standard_normal((3, 7)), rng.standard_normal((7, 2))
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    out, log_sum_exp = _online(scores, values, cuts)
    np.testing.assert_allclose(out, weights @ values, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(log_sum_exp[:, 0], np.log(np.exp(scores).sum(axis=1)), rtol=1e-12)


def test_the_merge_survives_huge_scores_and_fully_masked_blocks():
    scores = np.array(HUGE)
    values = np.arange(12.0).reshape(6, 2)
    out, log_sum_exp = _online(scores, values, [0, 2, 4, 6])
    assert np.isfinite(out).all()
    seen = [0, 1, 4, 5]                                        # the masked block adds nothing
    weights = np.exp(scores[0, seen] - 1e4)
    np.testing.assert_allclose(out[0], weights / weights.sum() @ values[seen], rtol=1e-12)
    np.testing.assert_array_equal(out[1], 0.0)                 # a row that saw no key: zeros
    assert log_sum_exp[1, 0] == np.inf


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
FLASH = "minitransformer.functional.flash_attention"


def staged_online_softmax(rng, rows: int, length: int, d_v: int, cuts, scale: float = 4.0, scores=None,
                          masked=None):
    """A staged probe: yields each call (module, function, arguments), is sent its results,
    and returns the outputs. The grader runs each call in a fresh sandbox, which sees that block and the
    running state and nothing of the blocks before it: only the state can carry the past (online means online)."""
    if scores is None:
        scores = scale * rng.standard_normal((rows, length))
        if masked is not None:                       # −∞ at a random share of positions (whole blocks sometimes)
            scores[rng.random((rows, length)) < masked] = -np.inf
            # but each row keeps a finite score in its first block: a row masked everywhere has the state it
            # started with as its answer (a step that does nothing would pass), and a row whose first blocks are
            # all masked brings no past to the next one (a step that ignores the state would pass)
            first = np.isneginf(scores[:, cuts[0]:cuts[1]]).all(axis=1)
            empty = np.flatnonzero(first)
            scores[empty, rng.integers(cuts[0], cuts[1], empty.size)] = scale * rng.standard_normal(empty.size)
    scores = np.asarray(scores, dtype=float)
    values = rng.standard_normal((scores.shape[1], d_v))
    state = (np.full((scores.shape[0], 1), -np.inf), np.zeros((scores.shape[0], 1)),
             np.zeros((scores.shape[0], d_v)))
    for start, stop in zip(cuts[:-1], cuts[1:]):
        state = yield FLASH, "online_softmax_step", (*state, scores[:, start:stop], values[start:stop])
        if len(state) != 3:
            raise ValueError(f"online_softmax_step must return 3 arrays (row_max, row_sum, weighted), not {len(state)}")
    out, log_sum_exp = yield FLASH, "finish_rows", state
    return {"out": np.asarray(out), "log_sum_exp": np.asarray(log_sum_exp)}


def probe_online_softmax(rng, **params) -> dict:
    """In one process (the teacher's casebook): staged_online_softmax with every call made here."""
    return drive(staged_online_softmax(rng, **params))


PUBLIC = ([case(f"cuts {cuts}", "online_softmax", rows=3, length=7, d_v=2, cuts=cuts) for cuts in CUTS]
          + [case("huge scores and a fully masked block", "online_softmax", rows=2, length=6, d_v=2,
                  cuts=[0, 2, 4, 6], scores=HUGE)])


def hidden_case(r, n: int, count: int) -> dict:
    length = int(r.integers(2, 12))
    cuts = sorted({0, length, *(int(x) for x in r.integers(1, length, int(r.integers(1, 4))))})
    return case("random blocks", "online_softmax", rows=int(r.integers(1, 5)), length=length,
                d_v=int(r.integers(1, 4)), cuts=cuts, scale=float(r.choice([1.0, 10.0, 100.0])),
                masked=[None, 0.3, 0.7][n % 3])


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("running sum not rescaled", "when the maximum grows from m to m', the running sum ℓ must be rescaled by "
            "e^(m − m') before the new block's terms are added", ("rescale * row_sum + ", "row_sum + ")),
    mistake("running output not rescaled", "when the maximum grows from m to m', the running output a must be rescaled "
            "by e^(m − m') too", ("rescale * weighted + ", "weighted + ")),
    mistake("−∞ − (−∞)", "a row that has seen only −∞ keeps m = −∞: shift by 0 there, or exp(−∞ − (−∞)) is NaN",
            ("shift = xp.where(xp.isneginf(new_max), 0, new_max)", "shift = new_max")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("13.1", public=PUBLIC, hidden=hidden_case, probes=[probe_online_softmax],
                    staged=[staged_online_softmax], mistakes=MISTAKES)
