"""Property tests on random shapes (chapter 2): broadcasting gradients match the
definition of unbroadcast, shape ops round-trip, sums spread their gradient."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import minitransformer as mt

FAST = settings(max_examples=25, deadline=None)
shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=4)
pairs = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, min_side=1, max_side=3)


def values(seed: int, shape) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def gradient_by_definition(input_shape, output_shape, upstream_times_partial):
    """Each input element was copied to several output positions; its gradient is
    the sum of (upstream · ∂output/∂input) over exactly those positions."""
    owner = np.broadcast_to(np.arange(int(np.prod(input_shape))).reshape(input_shape), output_shape)
    return np.bincount(owner.ravel(), weights=upstream_times_partial.ravel(),
                       minlength=int(np.prod(input_shape))).reshape(input_shape)


@FAST
@given(pair=pairs, seed=st.integers(0, 2**16))
@pytest.mark.parametrize("op", ["add", "mul"])
def test_broadcast_gradients_match_the_definition(op, pair, seed):
    (a_shape, b_shape), out_shape = pair
    a = mt.Tensor(values(seed, a_shape), requires_grad=True)
    b = mt.Tensor(values(seed + 1, b_shape), requires_grad=True)
    y = a + b if op == "add" else a * b
    assert y.shape == out_shape
    upstream = values(seed + 2, out_shape)
    y.backward(upstream)
    a_partial = np.ones(out_shape) if op == "add" else np.broadcast_to(b.data, out_shape)  # ∂y/∂a
    b_partial = np.ones(out_shape) if op == "add" else np.broadcast_to(a.data, out_shape)  # ∂y/∂b
    np.testing.assert_allclose(a.grad, gradient_by_definition(a_shape, out_shape, upstream * a_partial))
    np.testing.assert_allclose(b.grad, gradient_by_definition(b_shape, out_shape, upstream * b_partial))


@FAST
@given(pair=pairs, seed=st.integers(0, 2**16))
def test_broadcast_mul_gradchecks(pair, seed):
    (a_shape, b_shape), _ = pair
    a = mt.Tensor(values(seed, a_shape), requires_grad=True)
    b = mt.Tensor(values(seed + 1, b_shape), requires_grad=True)
    assert mt.gradcheck(lambda a, b: a * b - a, [a, b], seed=seed)


@FAST
@given(shape=shapes, seed=st.integers(0, 2**16), data=st.data())
def test_reshape_round_trip_keeps_values_and_gradients(shape, seed, data):
    flat = int(np.prod(shape))
    new_shape = data.draw(st.sampled_from([(flat,), (1, flat), (flat, 1), (-1,)]))
    x = mt.Tensor(values(seed, shape), requires_grad=True)
    back = x.reshape(new_shape).reshape(shape)
    np.testing.assert_array_equal(back.data, x.data)
    upstream = values(seed + 1, shape)
    back.backward(upstream)
    np.testing.assert_array_equal(x.grad, upstream)


@FAST
@given(shape=shapes, seed=st.integers(0, 2**16), data=st.data())
def test_transpose_round_trip_and_gradient(shape, seed, data):
    axes = tuple(data.draw(st.permutations(range(len(shape)))))
    inverse = tuple(int(i) for i in np.argsort(axes))
    x = mt.Tensor(values(seed, shape), requires_grad=True)
    moved = x.transpose(axes) if axes else x.transpose()
    np.testing.assert_array_equal(moved.data, x.data.transpose(axes))
    np.testing.assert_array_equal(moved.transpose(inverse).data if axes else moved.data, x.data)
    upstream = values(seed + 1, moved.shape)
    moved.backward(upstream)
    np.testing.assert_array_equal(x.grad, upstream.transpose(inverse))  # the gradient moves back


@FAST
@given(shape=shapes, seed=st.integers(0, 2**16), keepdims=st.booleans(), data=st.data())
def test_sum_spreads_the_upstream_gradient_over_the_reduced_axes(shape, seed, keepdims, data):
    axes = tuple(data.draw(st.sets(st.integers(0, max(len(shape) - 1, 0)), max_size=len(shape))))
    axis = axes if axes else None
    x = mt.Tensor(values(seed, shape), requires_grad=True)
    total = x.sum(axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(total.data, x.data.sum(axis=axis, keepdims=keepdims))
    upstream = values(seed + 1, total.shape)
    total.backward(upstream)
    reduced = axes if axes else tuple(range(len(shape)))
    expanded = upstream if keepdims else np.expand_dims(upstream, reduced)
    np.testing.assert_array_equal(x.grad, np.broadcast_to(expanded, shape))
