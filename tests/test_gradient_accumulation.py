"""The engine adds the gradients of a tensor used several times in place only in a buffer it owns."""
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
    uses = [x * float(k) for k in range(1, 6)]     # d/dx Σ k·x = 1 + 2 + 3 + 4 + 5
    out = uses[0]
    for u in uses[1:]:
        out = out + u
    out.sum().backward()
    np.testing.assert_array_equal(x.grad, np.full(4, 15.0))


def test_gradcheck_through_a_tensor_used_four_times():
    rng = np.random.default_rng(0)
    x = mt.Tensor(rng.standard_normal((2, 3)), requires_grad=True)
    w = mt.Tensor(rng.standard_normal((3, 3)), requires_grad=True)
    assert mt.gradcheck(lambda a, b: (a @ b + a * a + a.tanh() + a).sum(), [x, w])
