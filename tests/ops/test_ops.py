"""Every op of the engine passes a float64 gradcheck, over several shapes (chapters 1–2).

Shapes include broadcasting, size-1 axes, 0-d tensors and negative axes. The
values are drawn away from the kinks (relu at 0, maximum at a tie) so that
central differences see a smooth function; ties get their own exact tests.
"""
from __future__ import annotations

import numpy as np
import pytest

import minitransformer as mt


def normal(rng, shape):
    return mt.Tensor(rng.standard_normal(shape), requires_grad=True)


def positive(rng, shape):
    return mt.Tensor(rng.uniform(0.5, 2.0, shape), requires_grad=True)


def away_from_zero(rng, shape):
    """Values with |x| in [0.1, 1]: relu's kink at 0 is further than eps away."""
    magnitude = rng.uniform(0.1, 1.0, shape)
    return mt.Tensor(magnitude * rng.choice([-1.0, 1.0], shape), requires_grad=True)


BROADCAST_PAIRS = [
    ((3,), (3,)),
    ((2, 3), (3,)),         # a row added to every row
    ((2, 1, 4), (3, 1)),    # both sides stretch
    ((1,), (2, 3)),         # size-1 against a matrix
    ((), (2, 2)),           # 0-d against a matrix
    ((2, 3, 1), (1, 1, 5)),
]


# -- binary arithmetic -----------------------------------------------------------------
@pytest.mark.parametrize("a_shape,b_shape", BROADCAST_PAIRS, ids=str)
@pytest.mark.parametrize("op", [
    pytest.param(lambda a, b: a + b, id="add"),
    pytest.param(lambda a, b: a - b, id="sub"),
    pytest.param(lambda a, b: a * b, id="mul"),
    pytest.param(lambda a, b: a / b, id="div"),
    pytest.param(mt.maximum, id="maximum"),
])
def test_binary_ops_gradcheck_with_broadcasting(op, a_shape, b_shape, rng):
    a = normal(rng, a_shape)
    b = positive(rng, b_shape)  # a divisor away from zero
    assert mt.gradcheck(op, [a, b])


@pytest.mark.parametrize("op", [
    pytest.param(lambda x: x + 2.0, id="tensor+scalar"),
    pytest.param(lambda x: 2.0 - x, id="scalar-tensor"),
    pytest.param(lambda x: 3.0 * x, id="scalar*tensor"),
    pytest.param(lambda x: 1.5 / x, id="scalar/tensor"),
    pytest.param(lambda x: x / 4.0, id="tensor/scalar"),
])
def test_ops_with_a_python_scalar_gradcheck(op, rng):
    assert mt.gradcheck(op, [positive(rng, (2, 3))])


def test_only_the_input_that_requires_grad_is_checked(rng):
    a, b = normal(rng, (2, 3)), mt.Tensor(rng.standard_normal((3,)))
    assert mt.gradcheck(lambda a, b: a * b, [a, b])
    assert b.grad is None


# -- elementwise -------------------------------------------------------------------------
UNARY_SHAPES = [(), (4,), (2, 3), (2, 1, 3)]


@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=str)
@pytest.mark.parametrize("op,make", [
    pytest.param(lambda x: -x, normal, id="neg"),
    pytest.param(mt.exp, normal, id="exp"),
    pytest.param(mt.log, positive, id="log"),
    pytest.param(mt.sqrt, positive, id="sqrt"),
    pytest.param(mt.tanh, normal, id="tanh"),
    pytest.param(mt.sigmoid, normal, id="sigmoid"),
    pytest.param(mt.relu, away_from_zero, id="relu"),
    pytest.param(lambda x: x ** 2, normal, id="pow2"),
    pytest.param(lambda x: x ** 3, normal, id="pow3"),
    pytest.param(lambda x: x ** 0.5, positive, id="pow0.5"),
    pytest.param(lambda x: x ** -1.5, positive, id="pow-1.5"),
    pytest.param(lambda x: x.exp().log(), positive, id="method-spellings"),
])
def test_unary_ops_gradcheck(op, make, shape, rng):
    assert mt.gradcheck(op, [make(rng, shape)])


def test_pow_refuses_a_tensor_exponent(rng):
    with pytest.raises(TypeError, match=r"^pow: the exponent must be a Python number \(x \*\* c with constant c\)$"):
        normal(rng, (2,)) ** mt.Tensor(2.0)


@pytest.mark.parametrize("op", [mt.ops.Mul, mt.ops.Div, mt.ops.MatMul], ids=lambda op: op.__name__)
def test_backward_spends_no_work_on_an_input_that_needs_no_gradient(op, rng):
    """A constant operand (a mask, a scale) gets None, not a gradient computed and thrown away."""
    variable, constant = normal(rng, (2, 2)), mt.Tensor(rng.standard_normal((2, 2)) + 3.0)
    for inputs, needed in (((variable, constant), (True, False)), ((constant, variable), (False, True))):
        function = op()
        function(*inputs)
        grads = function.backward(np.ones((2, 2)))
        assert tuple(g is not None for g in grads) == needed


def test_sigmoid_is_the_logistic_function_and_stays_finite_far_out():
    x = np.array([-1000.0, -30.0, -1.0, 0.0, 2.0, 30.0, 1000.0])
    with np.errstate(over="raise", invalid="raise"):   # no overflow on the way: e^1000 would be inf
        y = mt.sigmoid(mt.Tensor(x, requires_grad=True))
        y.backward(np.ones_like(x))
    middle = slice(1, 6)
    np.testing.assert_allclose(y.data[middle], 1 / (1 + np.exp(-x[middle])), rtol=1e-12)
    np.testing.assert_array_equal(y.data[[0, -1]], [0.0, 1.0])
    assert np.isfinite(y.data).all()


def test_relu_passes_gradient_only_where_the_input_is_positive():
    x = mt.Tensor([-2.0, 0.0, 3.0], requires_grad=True)
    upstream = np.array([5.0, 7.0, 11.0])
    x.relu().backward(upstream)
    np.testing.assert_array_equal(x.grad, upstream * (x.data > 0))


def test_maximum_splits_the_gradient_in_half_on_a_tie():
    a = mt.Tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = mt.Tensor([1.0, 5.0, 3.0], requires_grad=True)
    upstream = np.array([4.0, 6.0, 8.0])
    mt.maximum(a, b).backward(upstream)
    a_share = np.where(a.data > b.data, 1.0, np.where(a.data == b.data, 0.5, 0.0))
    np.testing.assert_array_equal(a.grad, upstream * a_share)
    np.testing.assert_array_equal(b.grad, upstream * (1 - a_share))


# -- reductions --------------------------------------------------------------------------
REDUCTION_CASES = [
    ((2, 3, 4), None),
    ((2, 3, 4), 0),
    ((2, 3, 4), -1),
    ((2, 3, 4), (0, 2)),
    ((2, 3, 4), (-1, -3)),
    ((1, 3, 1), 1),        # size-1 axes around the reduced one
    ((1, 3, 1), (0, -1)),  # reducing size-1 axes
    ((5,), 0),
    ((), None),
]


@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("shape,axis", REDUCTION_CASES, ids=str)
@pytest.mark.parametrize("reduction", ["sum", "mean", "max"])
def test_reductions_gradcheck(reduction, shape, axis, keepdims, rng):
    x = normal(rng, shape)  # continuous random values: no ties for max
    assert mt.gradcheck(lambda x: getattr(x, reduction)(axis=axis, keepdims=keepdims), [x])


@pytest.mark.parametrize("reduction", ["sum", "mean", "max"])
def test_reductions_with_keepdims_keep_size_one_axes(reduction, rng):
    x = normal(rng, (2, 3, 4))
    assert getattr(x, reduction)(axis=(0, -1), keepdims=True).shape == (1, 3, 1)
    assert getattr(x, reduction)(axis=(0, -1)).shape == (3,)


def test_max_splits_the_gradient_equally_among_tied_maxima():
    x = mt.Tensor([[1.0, 3.0, 3.0, 0.0],
                   [2.0, 2.0, 2.0, 2.0],
                   [5.0, 1.0, 1.0, 1.0]], requires_grad=True)
    upstream = np.array([6.0, 8.0, 9.0])
    x.max(axis=1).backward(upstream)
    winners = x.data == x.data.max(axis=1, keepdims=True)
    tied = winners.sum(axis=1, keepdims=True)             # k = 2, 4, 1
    np.testing.assert_array_equal(x.grad, winners * upstream[:, None] / tied)
    np.testing.assert_array_equal(x.grad.sum(axis=1), upstream)  # nothing lost, nothing doubled


def test_max_over_everything_with_a_tie():
    x = mt.Tensor([[4.0, 1.0], [4.0, 4.0]], requires_grad=True)
    x.max().backward()
    np.testing.assert_array_equal(x.grad, (x.data == 4.0) / 3)


def test_reduction_axis_out_of_range_is_named(rng):
    with pytest.raises(ValueError, match="axis 3 is out of range"):
        normal(rng, (2, 3)).sum(axis=3)


# -- shape ops ---------------------------------------------------------------------------
@pytest.mark.parametrize("op", [
    pytest.param(lambda x: x.reshape(6, 4), id="reshape-2d"),
    pytest.param(lambda x: x.reshape(-1), id="reshape-flat"),
    pytest.param(lambda x: x.reshape((4, 1, 6)), id="reshape-tuple-size1"),
    pytest.param(lambda x: mt.reshape(x, (2, -1)), id="mt.reshape"),
    pytest.param(lambda x: x.transpose(), id="transpose-reverse"),
    pytest.param(lambda x: x.transpose(1, 0, 2), id="transpose-axes"),
    pytest.param(lambda x: x.transpose((-1, 0, 1)), id="transpose-negative"),
    pytest.param(lambda x: x.permute(2, 0, 1), id="permute"),
    pytest.param(lambda x: x.swapaxes(0, -1), id="swapaxes"),
    pytest.param(lambda x: mt.swapaxes(x, -2, -1), id="mt.swapaxes"),
    pytest.param(lambda x: x.T, id=".T"),
    pytest.param(lambda x: x[None, :, :, :1].reshape(2, 3), id="size1-axes"),
])
def test_shape_ops_gradcheck(op, rng):
    assert mt.gradcheck(op, [normal(rng, (2, 3, 4))])


def test_transpose_of_a_matrix_gradcheck(rng):
    assert mt.gradcheck(lambda x: x.T * mt.Tensor(np.arange(6.0).reshape(3, 2)), [normal(rng, (2, 3))])


@pytest.mark.parametrize("source,target", [((3, 1), (2, 3, 4)), ((4,), (3, 4)), ((), (2, 2)), ((1, 1), (1, 5))],
                         ids=str)
def test_broadcast_to_gradcheck(source, target, rng):
    assert mt.gradcheck(lambda x: mt.broadcast_to(x, target), [normal(rng, source)])


def test_shape_op_errors_name_the_shapes(rng):
    x = normal(rng, (2, 3))
    with pytest.raises(ValueError, match=r"reshape.*\(2, 3\).*\(4, 2\)"):
        x.reshape(4, 2)
    with pytest.raises(ValueError, match=r"broadcast_to.*\(2, 3\).*\(4, 3\)"):
        mt.broadcast_to(x, (4, 3))
    with pytest.raises(ValueError, match="not a permutation"):
        x.transpose(0, 0)


# -- matmul ------------------------------------------------------------------------------
MATMUL_SHAPES = [
    ((2, 3), (3, 4)),           # 2-D
    ((2, 2, 3), (2, 3, 4)),     # batched
    ((2, 1, 2, 3), (3, 3, 2)),  # broadcast batch on both sides
    ((2, 2, 3), (3, 4)),        # a shared weight
    ((3, 4), (2, 4, 2)),        # a shared left matrix
    ((3,), (3, 4)),             # vector @ matrix
    ((2, 3), (3,)),             # matrix @ vector
    ((3,), (3,)),               # dot product
    ((2, 2, 3), (3,)),          # batch @ vector
    ((3,), (2, 3, 4)),          # vector @ batch
]


@pytest.mark.parametrize("a_shape,b_shape", MATMUL_SHAPES, ids=str)
def test_matmul_gradcheck(a_shape, b_shape, rng):
    a, b = normal(rng, a_shape), normal(rng, b_shape)
    assert mt.gradcheck(lambda a, b: a @ b, [a, b])
    assert (a @ b).shape == (a.data @ b.data).shape


def test_matmul_with_a_plain_array_on_the_left(rng):
    x = rng.standard_normal((4, 3))  # a NumPy array: Tensor.__rmatmul__ takes over
    w = normal(rng, (3, 2))
    np.testing.assert_allclose((x @ w).data, x @ w.data)
    assert mt.gradcheck(lambda w: x @ w, [w])


# -- indexing ----------------------------------------------------------------------------
@pytest.mark.parametrize("index", [
    pytest.param(1, id="int"),
    pytest.param(-1, id="negative-int"),
    pytest.param((slice(None), slice(1, 3)), id="slices"),
    pytest.param((Ellipsis, -1), id="ellipsis"),
    pytest.param((None, 0, slice(None, None, 2)), id="newaxis-step"),
    pytest.param((1, -1, 2), id="one-element"),
    pytest.param([0, 2, 0], id="repeated-list"),
    pytest.param(np.array([[0, 1], [1, 1]]), id="2d-int-array"),
    pytest.param(([0, 1, 1], [2, 2, 0]), id="paired-arrays-repeated"),
    pytest.param((slice(None), [1, 1, 3]), id="slice-then-array"),
    pytest.param(np.array([True, False, True]), id="bool-mask"),
])
def test_getitem_gradcheck(index, rng):
    assert mt.gradcheck(lambda x: x[index], [normal(rng, (3, 4, 3))])


def test_getitem_with_a_repeated_index_accumulates():
    x = mt.Tensor([10.0, 20.0, 30.0], requires_grad=True)
    index = [0, 2, 0, 0]
    upstream = np.array([1.0, 2.0, 3.0, 4.0])
    x[index].backward(upstream)
    expected = np.zeros(3)
    for position, g in zip(index, upstream):  # the definition: every read sends its gradient home
        expected[position] += g
    np.testing.assert_array_equal(x.grad, expected)
    assert x.grad[0] == upstream[0] + upstream[2] + upstream[3]  # not just the last write


def test_getitem_with_a_tensor_index(rng):
    x = normal(rng, (4, 2))
    ids = mt.Tensor(np.array([3, 3, 1]))
    assert mt.gradcheck(lambda x: x[ids], [x])


def test_getitem_out_of_range_names_index_and_shape(rng):
    with pytest.raises(IndexError, match=r"getitem.*\(3, 4\)"):
        normal(rng, (3, 4))[5]


# -- joining and splitting ---------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenate_gradcheck(axis, rng):
    shapes = {0: [(1, 3), (2, 3), (3, 3)], 1: [(2, 1), (2, 3), (2, 2)], -1: [(2, 1), (2, 3), (2, 2)]}[axis]
    tensors = [normal(rng, s) for s in shapes]
    assert mt.gradcheck(lambda *ts: mt.concatenate(ts, axis=axis), tensors)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_stack_gradcheck(axis, rng):
    tensors = [normal(rng, (2, 3)) for _ in range(3)]
    assert mt.gradcheck(lambda *ts: mt.stack(ts, axis=axis), tensors)


@pytest.mark.parametrize("sections,axis", [(2, 0), (3, -1), ([1, 3], 1), ([2], -2)], ids=str)
def test_split_gradcheck(sections, axis, rng):
    x = normal(rng, (4, 3, 3))
    parts = mt.split(x, sections, axis=axis)
    assert sum(p.shape[axis] for p in parts) == x.shape[axis]
    weights = [float(i + 1) for i in range(len(parts))]  # distinct weights: each part routes its own gradient
    assert mt.gradcheck(lambda x: mt.concatenate(
        [p * w for p, w in zip(mt.split(x, sections, axis=axis), weights)], axis=axis), [x])


def test_split_and_join_errors_name_the_shapes(rng):
    with pytest.raises(ValueError, match=r"split.*\(4, 3\).*3 equal parts"):
        mt.split(normal(rng, (4, 3)), 3, axis=0)
    with pytest.raises(ValueError, match=r"concatenate.*\(2, 3\).*\(2, 4\)"):
        mt.concatenate([normal(rng, (2, 3)), normal(rng, (2, 4))], axis=0)
    with pytest.raises(ValueError, match=r"stack.*\(2, 3\).*\(3, 2\)"):
        mt.stack([normal(rng, (2, 3)), normal(rng, (3, 2))])


# -- selection ---------------------------------------------------------------------------
@pytest.mark.parametrize("cond_shape,a_shape,b_shape", [
    ((2, 3), (2, 3), (2, 3)),
    ((2, 3), (3,), (2, 1)),     # a and b broadcast against the condition
    ((3,), (2, 3), ()),         # the condition broadcasts; b is 0-d
    ((2, 1, 3), (4, 1), (3,)),  # output larger than every input
], ids=str)
def test_where_gradcheck(cond_shape, a_shape, b_shape, rng):
    condition = rng.random(cond_shape) > 0.5
    assert mt.gradcheck(lambda a, b: mt.where(condition, a, b), [normal(rng, a_shape), normal(rng, b_shape)])


def test_where_with_a_scalar_branch_and_a_tensor_condition(rng):
    x = normal(rng, (3, 4))
    assert mt.gradcheck(lambda x: mt.where(x > 0, x, 0.0), [x])


@pytest.mark.parametrize("mask_shape", [(3, 4), (1, 4), (3, 1), (2, 3, 4)], ids=str)
def test_masked_fill_gradcheck(mask_shape, rng):
    mask = rng.random(mask_shape) > 0.5
    # −1e9 as attention uses it; exp sends it to exactly 0, so the check is not lost in the rounding of 1e9
    assert mt.gradcheck(lambda x: mt.masked_fill(x, mask, -1e9).exp(), [normal(rng, (3, 4))])
    assert mt.gradcheck(lambda x: x.masked_fill(mt.Tensor(mask), 0.0), [normal(rng, (3, 4))])


def test_masked_fill_puts_the_value_where_the_mask_is_true(rng):
    x = normal(rng, (2, 3))
    mask = np.array([[True, False, True], [False, False, True]])
    filled = mt.masked_fill(x, mask, -5.0)
    np.testing.assert_array_equal(filled.data, np.where(mask, -5.0, x.data))
    filled.sum().backward()
    np.testing.assert_array_equal(x.grad, ~mask)


# -- dtype and device conversion -------------------------------------------------------
def test_astype_and_to_gradcheck(rng):
    assert mt.gradcheck(lambda x: x.astype(np.float64) * 2.0, [normal(rng, (2, 3))])
    assert mt.gradcheck(lambda x: x.to(np.float64).exp(), [normal(rng, (2, 3))])
    assert mt.gradcheck(lambda x: x.to("cpu") * x, [normal(rng, (2, 3))])


def test_astype_sends_the_gradient_back_in_the_source_dtype(rng):
    x = mt.Tensor(rng.standard_normal((2, 3)).astype(np.float32), requires_grad=True)
    y = x.to(np.float64)
    assert y.dtype == np.float64
    (y * y).sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(x.grad, 2 * x.data, rtol=1e-6)
