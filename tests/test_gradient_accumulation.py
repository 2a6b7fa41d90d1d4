"""The engine adds the gradients of a tensor used several times in place only in a buffer it owns.

Only Add, Mul and tanh backwards are used (no exercise's solution), so these tests pass in the
student edition too.
"""
import numpy as np

import minitransformer as mt


def test_a_shared_gradient_array_is_never_added_into():
    # Add.backward hands the SAME array to both of its inputs; x then gets two more contributions.
    # Adding those into that shared array would change y's gradient as well.
    x = mt.Tensor(np.ones(3), requires_grad=True)
    y = mt.Tensor(np.ones(3), requires_grad=True)
    total = (x + y) + x * 2.0 + x * 3.0
    total.backward(np.array([1.0, 10.0, 100.0]))
    np.testing.assert_array_equal(y.grad, [1.0, 10.0, 100.0])
    np.testing.assert_array_equal(x.grad, [6.0, 60.0, 600.0])


def test_many_uses_sum_every_contribution():
    x = mt.Tensor(np.arange(4.0), requires_grad=True)
    out = x * 1.0
    for k in range(2, 6):
        out = out + x * float(k)                   # d/dx Σ k·x = 1 + 2 + 3 + 4 + 5
    out.backward(np.ones(4))
    np.testing.assert_array_equal(x.grad, np.full(4, 15.0))


def test_four_uses_through_different_ops_match_the_derivative():
    a = np.linspace(-2.0, 2.0, 6).reshape(2, 3)
    x = mt.Tensor(a, requires_grad=True)
    upstream = np.arange(1.0, 7.0).reshape(2, 3)
    (x * x + x.tanh() + x + x * 3.0).backward(upstream)
    expected = upstream * (2 * a + (1 - np.tanh(a) ** 2) + 1 + 3)   # d/dx (x² + tanh x + x + 3x)
    np.testing.assert_allclose(x.grad, expected, rtol=1e-12)
