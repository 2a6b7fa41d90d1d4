"""The gradient check itself: it refuses what it cannot judge, reports what is
wrong, and catches deliberately broken backward functions (mutation tests).

Each mutant is a subclass of a real op with one plausible mistake in
``backward``. The unbroken op passes the same check, so a failure can only
come from the planted mistake.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F
from minitransformer.backend import xp_of
from minitransformer.gradcheck import BackwardFailed, GradientMismatch
from minitransformer.ops import Add, Exp, MatMul, Max, Mul, Tanh, unbroadcast


def leaf(rng, shape):
    return mt.Tensor(rng.standard_normal(shape), requires_grad=True)


# -- what gradcheck refuses ------------------------------------------------------------------
def test_gradcheck_refuses_float32_and_says_why(rng):
    x = mt.Tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    with pytest.raises(TypeError, match=r"input 0 has dtype float32; use float64.*float32"):
        mt.gradcheck(lambda x: x * x, [x])


def test_gradcheck_needs_something_to_check(rng):
    with pytest.raises(ValueError, match="no input has requires_grad=True"):
        mt.gradcheck(lambda x: x * x, [mt.Tensor(rng.standard_normal(3))])
    with pytest.raises(ValueError, match="must return a Tensor"):
        mt.gradcheck(lambda x: mt.Tensor(x.data * 2), [leaf(rng, 3)])


def test_gradcheck_returns_true_for_a_correct_function(rng):
    assert mt.gradcheck(lambda a, b: (a @ b).tanh(), [leaf(rng, (2, 3)), leaf(rng, (3, 2))]) is True


def test_numerical_gradient_matches_a_known_derivative(rng):
    x = leaf(rng, (2, 3))
    upstream = rng.standard_normal((2, 3))
    numeric = mt.numerical_gradient(lambda x: x ** 3, [x], 0, upstream, eps=1e-6)
    np.testing.assert_allclose(numeric, upstream * 3 * x.data ** 2, rtol=1e-6, atol=1e-8)


def test_gradcheck_handles_a_non_contiguous_input(rng):
    x = mt.Tensor(np.asfortranarray(rng.standard_normal((3, 4))), requires_grad=True)
    assert mt.gradcheck(lambda x: x * x, [x])


# -- what its error says ---------------------------------------------------------------------
class ExpWrongAtOnePosition(Exp):
    """Exp whose gradient is zeroed at index (1, 2) only."""

    def backward(self, gy):
        (y,) = self.saved_arrays
        gx = gy * y
        gx[1, 2] = 0.0
        return gx


def test_the_error_names_input_worst_index_and_both_values(rng):
    a = mt.Tensor(rng.standard_normal((2, 3)), requires_grad=True)
    x = mt.Tensor(rng.standard_normal((2, 3)), requires_grad=True, name="x")
    with pytest.raises(mt.GradcheckError) as caught:
        mt.gradcheck(lambda a, x: a * 1.0 + ExpWrongAtOnePosition()(x), [a, x])
    message = str(caught.value)
    assert "input 1 (x) with shape (2, 3)" in message
    assert "wrong at 1 of 6 positions" in message
    assert "worst at index (1, 2)" in message
    analytic, numeric = (float(v) for v in re.search(r"analytic (\S+), numeric (\S+)", message).groups())
    assert analytic == 0.0
    upstream = np.random.default_rng([0, 1]).standard_normal((2, 3))  # gradcheck's upstream for seed 0
    assert numeric == pytest.approx(upstream[1, 2] * np.exp(x.data[1, 2]), rel=1e-4)


def test_a_backward_that_crashes_fails_the_check(rng):
    class Crashing(Tanh):
        def backward(self, gy):
            raise ArithmeticError("boom")

    with pytest.raises(mt.GradcheckError, match="backward.*failed.*ArithmeticError: boom"):
        mt.gradcheck(lambda x: Crashing()(x), [leaf(rng, 3)])


def test_a_backward_not_written_yet_fails_as_any_crash_does(rng):
    """gradcheck knows nothing of the classroom: a NotImplementedError, whatever its message, is a
    BackwardFailed with the error as its cause (the classroom finds an unsolved exercise there)."""
    class Unwritten(Tanh):
        def backward(self, gy):
            raise NotImplementedError("Exercise 9.9: a backward not written yet")

    with pytest.raises(BackwardFailed, match="backward.*failed.*NotImplementedError: Exercise 9.9") as caught:
        mt.gradcheck(lambda x: Unwritten()(x), [leaf(rng, 3)])
    assert isinstance(caught.value.__cause__, NotImplementedError)


# -- mutants: each plausible mistake is caught ---------------------------------------------------
class ZeroedTanh(Tanh):
    def backward(self, gy):
        return gy * 0.0


class WrongSignExp(Exp):
    def backward(self, gy):
        (y,) = self.saved_arrays
        return -gy * y


class ForgottenChainRuleTanh(Tanh):
    def backward(self, gy):
        (y,) = self.saved_arrays
        return 1 - y * y  # the local derivative, without multiplying by gy


class MatMulWithoutTranspose(MatMul):
    def backward(self, gy):
        a, b = self.saved_arrays
        return gy @ b, a @ gy  # should be gy @ bᵀ and aᵀ @ gy


class AddWithoutUnbroadcast(Add):
    def backward(self, gy):
        return gy, gy  # forgot to sum the broadcast axes back


class AddSummingTheWrongAxes(Add):
    def backward(self, gy):
        a_shape, b_shape = self.shapes
        return unbroadcast(gy, a_shape), gy.mean(axis=0)  # mean instead of sum


class MulWithSwappedFactors(Mul):
    def backward(self, gy):
        a, b = self.saved_arrays
        return unbroadcast(gy * a, a.shape), unbroadcast(gy * b, b.shape)


class MaxLosingHalfTheGradient(Max):
    def backward(self, gy):
        gx = super().backward(gy)
        return gx * 0.5  # half the gradient lost


WRONG = "gradient of input .* is wrong at"  # a wrong value, not a crash: a crashing mutant proves nothing
MUTANTS = [
    pytest.param(Tanh, ZeroedTanh, [(3, 4)], WRONG, id="zeroed"),
    pytest.param(Exp, WrongSignExp, [(3, 4)], WRONG, id="wrong-sign"),
    pytest.param(Tanh, ForgottenChainRuleTanh, [(3, 4)], WRONG, id="no-chain-rule"),
    pytest.param(MatMul, MatMulWithoutTranspose, [(3, 3), (3, 3)], WRONG, id="matmul-untransposed"),
    pytest.param(Add, AddWithoutUnbroadcast, [(2, 3), (3,)],
                 r"AddWithoutUnbroadcast.backward returned a gradient of shape \(2, 3\) for an input of shape \(3,\)",
                 id="missing-unbroadcast"),
    pytest.param(Add, AddSummingTheWrongAxes, [(4, 3), (3,)], WRONG, id="mean-not-sum"),
    pytest.param(Mul, MulWithSwappedFactors, [(3, 2), (3, 2)], WRONG, id="mul-swapped"),
    pytest.param(lambda: Max(axis=-1), lambda: MaxLosingHalfTheGradient(axis=-1), [(3, 4)], WRONG, id="max-halved"),
]


@pytest.mark.parametrize("correct,broken,shapes,error", MUTANTS)
def test_gradcheck_catches_a_broken_backward(correct, broken, shapes, error, rng):
    inputs = [leaf(rng, s) for s in shapes]
    assert mt.gradcheck(lambda *xs: correct()(*xs), inputs)
    with pytest.raises(mt.GradcheckError, match=error):
        mt.gradcheck(lambda *xs: broken()(*xs), inputs)


# -- why the upstream gradient is random ------------------------------------------------------
class Softmax(mt.Function):
    """softmax over the last axis, written as a Function with its own backward."""

    def forward(self, x):
        xp = xp_of(x)
        e = xp.exp(x - x.max(axis=-1, keepdims=True))
        y = e / e.sum(axis=-1, keepdims=True)
        self.save_for_backward(y)
        return y

    def backward(self, gy):
        (y,) = self.saved_arrays
        return y * (gy - (gy * y).sum(axis=-1, keepdims=True))


class SoftmaxWithZeroedBackward(Softmax):
    def backward(self, gy):
        return gy * 0.0


def test_a_sum_of_outputs_check_misses_a_zeroed_softmax_but_gradcheck_does_not(rng):
    x = leaf(rng, (2, 5))
    # The naive check, with upstream gradient 1: the outputs of softmax always sum to 1,
    # so d(Σ y)/dx is truly 0 — and the zeroed backward returns exactly that.
    SoftmaxWithZeroedBackward()(x).sum().backward()
    naive_numeric = mt.numerical_gradient(lambda x: Softmax()(x), [x], 0, np.ones((2, 5)), eps=1e-6)
    np.testing.assert_allclose(x.grad, naive_numeric, atol=1e-8)  # the naive check passes the broken op

    x.grad = None
    assert mt.gradcheck(lambda x: Softmax()(x), [x])                # the correct one passes
    with pytest.raises(mt.GradcheckError, match="input 0"):
        mt.gradcheck(lambda x: SoftmaxWithZeroedBackward()(x), [x])  # the random upstream sees the mistake


# -- the upstream gradient is not the test's own input ------------------------------------------------
class LinearWithTransposedWeightGradient(F.LinearFunction):
    def backward(self, gy):
        gx, gw = super().backward(gy)
        return gx, gw.T                              # Gᵀ X instead of Xᵀ G: the shapes fit for a square W


def test_the_upstream_gradient_is_not_drawn_like_the_tests_inputs():
    """Tests draw inputs from default_rng(0); were the upstream G drawn the same way it would equal the first
    input, and a linear map's gW = Xᵀ G = Xᵀ X would be symmetric: a transposed gW would pass."""
    rng = np.random.default_rng(0)
    x, w = leaf(rng, (2, 3, 4)), leaf(rng, (4, 4))
    assert mt.gradcheck(lambda x, w: F.LinearFunction()(x, w), [x, w])
    with pytest.raises(GradientMismatch, match=r"gradient of input 1 with shape \(4, 4\) is wrong at"):
        mt.gradcheck(lambda x, w: LinearWithTransposedWeightGradient()(x, w), [x, w])


def test_a_crash_and_a_wrong_value_are_told_apart(rng):
    """Both are GradcheckErrors (existing callers catch either); a mutation test wants the second."""
    class Crashing(Tanh):
        def backward(self, gy):
            return self.renamed_attribute

    with pytest.raises(BackwardFailed, match=r"backward\(\) failed: AttributeError"):
        mt.gradcheck(lambda x: Crashing()(x), [leaf(rng, 3)])
    with pytest.raises(GradientMismatch, match="is wrong at"):
        mt.gradcheck(lambda x: ZeroedTanh()(x), [leaf(rng, 3)])
    assert issubclass(BackwardFailed, mt.GradcheckError) and issubclass(GradientMismatch, mt.GradcheckError)
    assert not issubclass(BackwardFailed, GradientMismatch)
