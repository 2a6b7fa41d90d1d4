"""Exercise 4.2 — log-softmax backward (chapters/04-softmax-cross-entropy.md).

Its public tests, its grading cases and its catalogued mistakes (spec.py).
"""
from __future__ import annotations

import minitransformer as mt
import minitransformer.functional as F

from ..spec import ExerciseSpec, case, mistake, parametrize, random_shape, tensor


# -- the public tests (pytest -m grades_4_2) --------------------------------------------------------------------------
@parametrize("axis", [-1, 1])
def test_log_softmax_backward_gradcheck(rng, axis):
    x = tensor(rng, 2, 3, 4)
    assert mt.gradcheck(lambda t: F.log_softmax(t, axis=axis), [x])


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
PUBLIC = [case(f"log-softmax over axis {a}", "gradient", operation="log-softmax", shapes=[[2, 3, 4]],
               axis=a) for a in (-1, 1)]


def hidden_case(r, n: int, count: int) -> dict:
    shape = random_shape(r, int(r.integers(1, 4)), 2, 6)
    return case("random", "gradient", operation="log-softmax",
                shapes=[shape], axis=int(r.integers(-len(shape), len(shape))))


def large_case(r) -> dict:
    return case("large", "gradient", operation="log-softmax", shapes=[[512, 256]], axis=-1,
                central=False)


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("log-probabilities used as probabilities", "z is log-softmax: exp(z) recovers the softmax",
            ("xp.exp(z)", "z.copy()")),
    mistake("Σ gy forgotten", "gx = gy − softmax · Σ gy: the softmax is weighted by the sum of the upstream gradient",
            ("gx *= -gy.sum(axis=self.axis, keepdims=True)", "gx *= -1")),
    mistake("sign of the softmax term", "gx = gy − softmax · Σ gy: the softmax term is subtracted",
            ("gx *= -gy.sum(", "gx *= gy.sum(")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("4.2", public=PUBLIC, hidden=hidden_case, large=large_case, mistakes=MISTAKES)
