"""Exercise 1.2 — Div backward (chapters/01-autograd.md): its public tests, cases and mistakes (spec.py)."""
from __future__ import annotations

import minitransformer as mt

from ..spec import ExerciseSpec, case, mistake, parametrize, random_shape, tensor


# -- the public tests (pytest -m grades_1_2) --------------------------------------------------------------------------
@parametrize("needs", ["both", "numerator", "denominator"])
def test_div_backward_gradcheck(rng, needs):
    a = tensor(rng, 3, 4)
    b = tensor(rng, 3, 4, low=0.5)       # away from zero
    a.requires_grad = needs in ("both", "numerator")
    b.requires_grad = needs in ("both", "denominator")
    assert mt.gradcheck(lambda p, q: p / q, [a, b])


def test_div_by_a_number_and_of_a_number(rng):
    x = tensor(rng, 2, 3, low=0.5)
    assert mt.gradcheck(lambda t: t / 4.0, [x])
    assert mt.gradcheck(lambda t: 1.0 / t, [x])


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
PUBLIC = ([case(f"p / q, {needs} needs a gradient", "gradient", operation="div", shapes=[[3, 4], [3, 4]],
                needs=[needs in ("both", "numerator"), needs in ("both", "denominator")], low=[None, 0.5])
           for needs in ("both", "numerator", "denominator")]
          + [case("t / 4", "gradient", operation="div-by-4", shapes=[[2, 3]], low=0.5),
             case("1 / t", "gradient", operation="one-over", shapes=[[2, 3]], low=0.5)])


def hidden_case(r, n: int, count: int) -> dict:
    shape = random_shape(r, int(r.integers(1, 4)))
    kind = ["div", "div", "div-by-4", "one-over"][n % 4]
    if kind == "div":
        needs = [[True, True], [True, False], [False, True]][int(r.integers(0, 3))]
        return case("p / q", "gradient", operation="div", shapes=[shape, shape], needs=needs, low=[None, 0.5])
    return case(kind, "gradient", operation=kind, shapes=[shape], low=0.5)


def large_case(r) -> dict:
    return case("large", "gradient", operation="div", shapes=[[512, 256], [512, 256]], low=[None, 0.5],
                central=False)


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("no requires_grad guard", "an input that needs no gradient (a constant such as the 4.0 of t / 4.0) must get "
            "None, as the Function contract says: check self.inputs[i].requires_grad before computing its gradient",
            (" if self.inputs[0].requires_grad else None", ""), (" if self.inputs[1].requires_grad else None", "")),
    mistake("sign of the denominator's gradient", "d(a/b)/db = −a/b²: the minus sign is missing",
            ("-gy * a / (b * b)", "gy * a / (b * b)")),
    mistake("b, not b²", "d(a/b)/db = −a/b²: divide by b squared, not by b", ("-gy * a / (b * b)", "-gy * a / b")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("1.2", public=PUBLIC, hidden=hidden_case, large=large_case, mistakes=MISTAKES)
