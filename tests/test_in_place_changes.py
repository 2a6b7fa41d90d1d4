"""An array changed in place between forward and backward: the engine refuses the backward (chapter 1).

A Function saves arrays, not copies. ``x.data *= 2`` after ``y = x * x`` would make backward
compute the gradient at the new x from the output of the old one, a wrong number without a word.
Each Tensor counts the in-place changes of its array (its version); a Function notes the versions of
its tensors when it is recorded, and backward refuses when an array it saved has changed since.
"""
from __future__ import annotations

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F


def leaf(values, name=None):
    return mt.Tensor(np.asarray(values, dtype=np.float64), requires_grad=True, name=name)


@pytest.mark.parametrize("change", ["x.data *= 2", "x.data += 1", "x.data -= 0.5 * x.data", "x.data /= 3"])
def test_changing_a_saved_input_in_place_makes_backward_refuse(change):
    x = leaf([1.0, 2.0, 3.0])
    y = (x * x).sum()                          # Mul saves x for its backward
    exec(change, {"x": x})
    with pytest.raises(RuntimeError, match=r"tensor of shape \(3,\).*changed in place.*after Mul saved it"):
        y.backward()


def test_the_error_names_a_named_tensor_and_the_counts():
    """The engine counts in-place changes with one counter; the error says which change came after which."""
    from minitransformer.tensor import _InPlace

    w = leaf([[1.0, 2.0], [3.0, 4.0]], name="w")
    loss = (mt.Tensor(np.ones((1, 2))) @ w).sum()
    before = _InPlace.changes
    w.data -= 0.1                               # an optimizer step before the backward of this forward
    with pytest.raises(RuntimeError, match=rf"'w' \(shape \(2, 2\)\), an input of MatMul, was changed in place.*"
                                           rf"change number {before + 1}\).*recorded after change number {before}\)"):
        loss.backward()


def test_a_change_of_another_tensor_is_no_error():
    """The counter moved (some array changed), but not for the tensors this graph saved: backward runs."""
    x, other = leaf([1.0, 2.0]), leaf([5.0])
    y = (x * x).sum()
    other.data *= 2
    y.backward()
    np.testing.assert_array_equal(x.grad, [2.0, 4.0])


def test_a_change_before_the_forward_is_no_error():
    """A tensor changed before the Function was recorded (an optimizer step, then the next forward)."""
    x = leaf([1.0, 2.0])
    x.data *= 3
    y = (x * x).sum()
    y.backward()
    np.testing.assert_array_equal(x.grad, [6.0, 12.0])


def test_changing_a_saved_output_in_place_makes_backward_refuse():
    x = leaf([0.1, 0.2])
    y = x.tanh()                                # Tanh saves its output y: dy/dx = 1 − y²
    y.data += 1.0
    with pytest.raises(RuntimeError, match="changed in place.*after Tanh saved it"):
        y.sum().backward()


def test_a_change_the_backward_does_not_read_is_no_error():
    """Add keeps no array: changing an input of an addition does not change its gradient."""
    x, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    y = (x + b).sum()
    b.data *= 10
    y.backward()
    np.testing.assert_array_equal(x.grad, [1.0, 1.0])


def test_replacing_the_array_keeps_the_saved_one_and_the_gradient_of_the_forward():
    """``x.data = new`` leaves the array Mul saved as it was: the gradient is the forward's, 2·x_old."""
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    x.data = np.array([5.0, 7.0])
    y.backward()
    np.testing.assert_array_equal(x.grad, [2.0, 4.0])


def test_changes_after_backward_are_the_normal_training_loop():
    x = leaf([1.0, 2.0])
    for _ in range(3):                          # forward, backward, update in place, again
        x.grad = None
        (x * x).sum().backward()
        x.data -= 0.1 * x.grad
    np.testing.assert_allclose(x.data, np.array([1.0, 2.0]) * 0.8 ** 3)


def test_a_retained_graph_refuses_a_second_backward_after_an_update():
    x = leaf([1.0, 2.0])
    y = (x * x).sum()
    y.backward(retain_graph=True)
    x.data -= 0.1 * x.grad                      # the graph still holds the old x's array, now changed
    with pytest.raises(RuntimeError, match="changed in place"):
        y.backward()


def test_an_optimizer_step_between_forward_and_backward_is_refused():
    layer = mt.nn.Linear(3, 2)
    optimizer = mt.optim.SGD(layer.parameters(), lr=0.1)
    x = mt.Tensor(np.ones((4, 3), dtype=np.float32))
    loss = layer(x).sum()
    for p in layer.parameters():
        p.grad = np.ones_like(p.data)
    optimizer.step()                            # changes the weight that the linear layer saved
    with pytest.raises(RuntimeError, match="changed in place"):
        loss.backward()


def test_a_view_of_the_array_counts_as_the_array():
    """The linear layer saves its input reshaped to two dimensions: a view of x's array."""
    x = leaf(np.linspace(-1, 1, 12).reshape(2, 2, 3))
    w = leaf(np.ones((3, 2)))
    loss = F.linear(x, w).sum()
    x.data *= 2
    with pytest.raises(RuntimeError, match=r"tensor of shape \(2, 2, 3\), an input of .*changed in place"):
        loss.backward()


def test_an_array_computed_in_forward_is_not_the_input():
    """The fused cross-entropy saves e^(x − m), computed in forward: changing x afterwards changes nothing."""
    x = leaf(np.linspace(-1, 1, 6).reshape(2, 3))
    loss = F.cross_entropy(x, np.array([0, 2]))
    expected = leaf(np.linspace(-1, 1, 6).reshape(2, 3))
    F.cross_entropy(expected, np.array([0, 2])).backward()
    x.data *= 2
    loss.backward()
    np.testing.assert_array_equal(x.grad, expected.grad)


@pytest.mark.gpu
def test_the_check_runs_on_the_device_as_on_the_host():
    """CuPy arrays change in place the same way: the count and the memory check are the same code."""
    from minitransformer import backend

    x = mt.Tensor(backend.to_device(np.array([1.0, 2.0, 3.0]), "cuda"), requires_grad=True)
    y = (x * x).sum()
    x.data *= 2
    with pytest.raises(RuntimeError, match="changed in place.*after Mul saved it"):
        y.backward()
