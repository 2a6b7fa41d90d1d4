"""Exercise 6.4 — additive attention's scores backward (chapters/06-attention.md).

Its public tests, its grading cases and its catalogued mistakes (spec.py).
"""
from __future__ import annotations

import minitransformer as mt
import minitransformer.functional as F

from ..cases import gradient_case
from ..spec import ExerciseSpec, case, mistake, tensor


# -- the public tests (pytest -m grades_6_4) --------------------------------------------------------------------------
def test_additive_score_backward_gradcheck(rng):
    queries, keys, v = tensor(rng, 2, 3, 4), tensor(rng, 2, 5, 4), tensor(rng, 4)    # T = 3 queries, S = 5 keys
    assert mt.gradcheck(F.additive_score, [queries, keys, v])


def test_additive_score_backward_gradcheck_for_one_decoder_step_with_saturated_units(rng):
    queries, keys, v = tensor(rng, 3, 1, 5), tensor(rng, 3, 4, 5), tensor(rng, 5)    # T = 1: one step, S = 4
    keys.data *= 3.0                                        # many tanh units near ±1, where 1 − a² matters most
    assert mt.gradcheck(F.additive_score, [queries, keys, v])


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def probe_additive_score(rng, batch: int, queries: int, keys: int, hidden: int, scale: float = 1.0,
                         central: bool = True) -> dict:
    """The backward of Bahdanau's scores vᵀ tanh(q_t + k_j) to the queries, the keys and v."""
    arrays = [rng.standard_normal((batch, queries, hidden)), scale * rng.standard_normal((batch, keys, hidden)),
              rng.standard_normal(hidden)]
    return gradient_case(rng, F.additive_score, arrays, [True] * 3, central)


PUBLIC = [case("T = 3 queries, S = 5 keys", "additive_score", batch=2, queries=3, keys=5, hidden=4),
          case("one decoder step, saturated units", "additive_score", batch=3, queries=1, keys=4, hidden=5,
               scale=3.0)]


def hidden_case(r, n: int, count: int) -> dict:
    b, t, k, a = (int(x) for x in r.integers(1, 5, 4))
    return case("random", "additive_score", batch=b, queries=t, keys=k, hidden=a,
                scale=float(r.choice([0.3, 1.0, 4.0])))


def large_case(r) -> dict:
    return case("large", "additive_score", batch=1, queries=64, keys=64, hidden=128, central=False)


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("tanh's derivative forgotten", "the gradient flows through tanh on its way from vᵀ to u: multiply by "
            "1 − a² (a = tanh(u), the saved hidden array)", ("g_pre *= 1 - hidden * hidden", "pass")),
    mistake("sums over the wrong axes", "each query t met every key j: g_q sums g_u over the keys (axis 2), g_k over "
            "the queries (axis 1)", ("g_pre.sum(axis=2)", "g_pre.sum(axis=@)"), ("g_pre.sum(axis=1)", "g_pre.sum(axis=2)"),
            ("g_pre.sum(axis=@)", "g_pre.sum(axis=1)")),
    mistake("g_v without the upstream gradient", "∂L/∂v = Σ g_e,tj a_tj: weight each hidden vector by its score's "
            "upstream gradient before summing", ("@ g_scores.reshape(-1)", "@ (0 * g_scores.reshape(-1) + 1)")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("6.4", public=PUBLIC, hidden=hidden_case, large=large_case, probes=[probe_additive_score],
                    mistakes=MISTAKES)
