"""Exercise 4.1 — softmax backward (chapters/04-softmax-cross-entropy.md).

Its public tests, its grading cases and its catalogued mistakes (spec.py).
"""
from __future__ import annotations

import numpy as np

import minitransformer as mt
import minitransformer.functional as F

from ..spec import ExerciseSpec, case, mistake, parametrize, random_shape, tensor


# -- the public tests (pytest -m grades_4_1) --------------------------------------------------------------------------
@parametrize("axis", [-1, 0, 1])
def test_softmax_backward_gradcheck(rng, axis):
    x = tensor(rng, 2, 3, 4)
    assert mt.gradcheck(lambda t: F.softmax(t, axis=axis), [x])


def test_softmax_gradient_sums_to_zero_along_the_axis(rng):
    x = tensor(rng, 3, 5)
    F.softmax(x, axis=-1).backward(rng.standard_normal((3, 5)))
    np.testing.assert_allclose(x.grad.sum(axis=-1), 0.0, atol=1e-12)


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
PUBLIC = [case(f"softmax over axis {a}", "gradient", operation="softmax", shapes=[[2, 3, 4]], axis=a)
          for a in (-1, 0, 1)]


def hidden_case(r, n: int, count: int) -> dict:
    shape = random_shape(r, int(r.integers(1, 4)), 2, 6)
    return case("random", "gradient", operation="softmax",
                shapes=[shape], axis=int(r.integers(-len(shape), len(shape))))


def large_case(r) -> dict:
    return case("large", "gradient", operation="softmax", shapes=[[512, 256]], axis=-1,
                central=False)


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("sum term forgotten", "gx = y ⊙ (gy − Σ gy ⊙ y): the Σ term, subtracted along the softmax's axis, is "
            "missing", ("gx -= y * gx.sum(axis=self.axis, keepdims=True)", "pass")),
    mistake("sum over the last axis", "sum along the softmax's own axis (self.axis), not always the last one",
            ("gx.sum(axis=self.axis, keepdims=True)", "gx.sum(axis=-1, keepdims=True)")),
    mistake("sum of gy alone", "the sum is Σ gy ⊙ y, not Σ gy", ("y * gx.sum(", "y * gy.sum(")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("4.1", public=PUBLIC, hidden=hidden_case, large=large_case, mistakes=MISTAKES)
