"""Exercise 1.1 — the numerical gradient (chapters/01-autograd.md): its public tests, cases and mistakes (spec.py)."""
from __future__ import annotations

import numpy as np

import minitransformer as mt

from ..cases import EPS, named_operation, random_arrays
from ..spec import ExerciseSpec, case, mistake, random_shape, tensor


# -- the public tests (pytest -m grades_1_1) --------------------------------------------------------------------------
def test_numerical_gradient_of_a_cube_is_three_x_squared(rng):
    x = tensor(rng, 3, 4)
    upstream = rng.standard_normal((3, 4))
    numeric = mt.numerical_gradient(lambda t: t * t * t, [x], 0, upstream, 1e-6)
    np.testing.assert_allclose(numeric, 3 * x.data ** 2 * upstream, rtol=1e-6, atol=1e-8)


def test_numerical_gradient_of_each_input_of_a_product(rng):
    a, b = tensor(rng, 2, 3), tensor(rng, 2, 3)
    a_before, b_before = a.data.copy(), b.data.copy()
    upstream = rng.standard_normal((2, 3))
    np.testing.assert_allclose(mt.numerical_gradient(lambda p, q: p * q, [a, b], 0, upstream, 1e-6),
                               b_before * upstream, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(mt.numerical_gradient(lambda p, q: p * q, [a, b], 1, upstream, 1e-6),
                               a_before * upstream, rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(a.data, a_before)  # the inputs are left as they were (every nudge undone)
    np.testing.assert_array_equal(b.data, b_before)


class _Square(mt.Function):
    """x² with a backward that is right (factor 2) or wrong (factor 3)."""

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def forward(self, x):
        self.x = x
        return x * x

    def backward(self, gy):
        return gy * self.factor * self.x


def test_gradcheck_passes_a_right_backward_and_catches_a_wrong_one(rng):
    x = tensor(rng, 5)
    before = x.data.copy()
    assert mt.gradcheck(lambda t: _Square(2.0)(t), [x])
    np.testing.assert_array_equal(x.data, before)   # every perturbation was undone
    try:
        mt.gradcheck(lambda t: _Square(3.0)(t), [x])
    except mt.GradcheckError as error:
        assert "input 0" in str(error), error
    else:
        raise AssertionError("gradcheck passed a backward whose gradient is 1.5 times the right one")


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def probe_gradcheck_verdicts(rng, shape) -> dict:
    """Does the package's gradcheck pass a right backward of x² and reject a wrong one?"""
    def verdict(factor: float) -> bool:
        x = mt.Tensor(data.copy(), requires_grad=True)
        try:
            return bool(mt.gradcheck(lambda t: _Square(factor)(t), [x]))
        except mt.GradcheckError:
            return False

    data = rng.standard_normal(shape)
    return {"passes a right backward": np.asarray(verdict(2.0)), "passes a wrong backward": np.asarray(verdict(3.0))}


def probe_numerical_gradient(rng, function: str, shapes, which: int, low=None) -> dict:
    """The package's numerical_gradient of a known function, and the inputs after it."""
    arrays = random_arrays(rng, shapes, low)
    tensors = [mt.Tensor(a.copy(), requires_grad=True) for a in arrays]
    upstream = rng.standard_normal(np.broadcast_shapes(*(tuple(s) for s in shapes)) if function != "matmul"
                                   else (shapes[0][0], shapes[1][1]))
    numeric = mt.numerical_gradient(named_operation(function), tensors, which, upstream, EPS)
    outputs = {"numeric": np.asarray(numeric)}
    outputs.update({f"input:{i}": np.asarray(t.data) for i, t in enumerate(tensors)})
    return outputs


PUBLIC = [case("the cube t·t·t", "numerical_gradient", function="cube", shapes=[[3, 4]], which=0),
          case("p·q, input 0", "numerical_gradient", function="mul", shapes=[[2, 3], [2, 3]], which=0),
          case("p·q, input 1", "numerical_gradient", function="mul", shapes=[[2, 3], [2, 3]], which=1),
          case("gradcheck of x² with a right and a wrong backward", "gradcheck_verdicts", shape=[5])]


def hidden_case(r, n: int, count: int) -> dict:
    function = ["cube", "mul", "div", "tanh-mul", "matmul"][n % 5]
    if function == "cube":
        return case("t·t·t", "numerical_gradient", function=function, shapes=[random_shape(r, 2)], which=0)
    if function == "matmul":
        i, j, k = (int(x) for x in r.integers(1, 5, 3))
        return case("p @ q", "numerical_gradient", function=function, shapes=[[i, j], [j, k]],
                    which=int(r.integers(0, 2)))
    shape = random_shape(r, int(r.integers(1, 4)))
    return case(f"{function}", "numerical_gradient", function=function, shapes=[shape, shape],
                which=int(r.integers(0, 2)), low=0.5 if function == "div" else None)


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("one step, not two", "the two evaluations are 2ε apart (x − ε to x + ε): divide their difference by 2ε",
            ("(plus - minus) / (2 * eps)", "(plus - minus) / eps")),
    mistake("nudge left in place", "x_i must be put back after the two evaluations, or every later coordinate and "
            "every later check sees a moved input", ("flat_x[i] = original\n", "pass\n")),
    mistake("upstream ignored", "the scalar whose derivative is taken is Σ upstream ⊙ fn(x): weight the output by the "
            "upstream gradient before summing", (" * upstream)", ")")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("1.1", public=PUBLIC, hidden=hidden_case,
                    probes=[probe_gradcheck_verdicts, probe_numerical_gradient], mistakes=MISTAKES)
