"""The engine's behaviour: how gradients flow, accumulate and are freed (chapter 1)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import minitransformer as mt


def leaf(values, dtype=np.float64):
    return mt.Tensor(np.asarray(values, dtype=dtype), requires_grad=True)


# -- how gradients combine -----------------------------------------------------------------
def test_a_tensor_used_twice_gets_the_sum_of_both_gradients():
    x = leaf([1.0, -2.0, 3.0])
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad, 2 * x.data)  # d(x·x)/dx = x + x


def test_a_diamond_sums_the_gradients_of_both_paths():
    #      x
    #     / \
    #  exp   tanh      z = exp(2x) + tanh(2x)
    #     \ /
    #      z
    x = leaf([0.3, -0.7])
    y = x * 2.0
    z = y.exp() + y.tanh()
    z.sum().backward()
    y_value = 2 * x.data
    np.testing.assert_allclose(x.grad, 2 * (np.exp(y_value) + 1 - np.tanh(y_value) ** 2))
    assert mt.gradcheck(lambda x: (x * 2.0).exp() + (x * 2.0).tanh(), [leaf([0.3, -0.7])])


def test_gradients_accumulate_into_leaves_across_backward_calls():
    x = leaf([1.0, 2.0])
    (x * 3.0).sum().backward()
    first = x.grad.copy()
    (x * x).sum().backward()  # a second, separate graph
    np.testing.assert_array_equal(x.grad, first + 2 * x.data)
    x.zero_grad()
    assert x.grad is None


def test_non_leaf_grad_is_none_unless_retained():
    x = leaf([1.0, 2.0])
    hidden = x * 3.0
    kept = (hidden + 1.0).retain_grad()
    (kept * kept).sum().backward()
    assert hidden.grad is None and not hidden.is_leaf
    np.testing.assert_array_equal(kept.grad, 2 * kept.data)
    np.testing.assert_array_equal(x.grad, 3 * 2 * kept.data)


def test_two_leaves_never_share_one_gradient_array():
    a, b = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    (a + b).sum().backward()        # add passes the same upstream array to both
    a.grad *= 10                    # an optimizer scaling one gradient in place
    np.testing.assert_array_equal(b.grad, np.ones(2))


def test_leaf_gradients_are_writable_arrays_even_after_a_broadcasting_sum():
    x = leaf([[1.0, 2.0], [3.0, 4.0]])
    x.sum().backward()              # sum's backward is a read-only broadcast view
    x.grad += 1.0
    np.testing.assert_array_equal(x.grad, np.full((2, 2), 2.0))


def test_a_zero_dimensional_leaf_gets_an_array_gradient():
    x = mt.Tensor(np.float64(2.0), requires_grad=True)
    for _ in range(2):
        (x * mt.Tensor([1.0, 2.0])).sum().backward()
    assert isinstance(x.grad, np.ndarray) and x.grad.shape == ()
    assert x.grad == 2 * (1.0 + 2.0)


def test_a_chain_of_100000_ops_backpropagates_without_recursion():
    n = 100_000
    x = leaf([0.5, -1.5])
    y = x
    for _ in range(n):
        y = y + x  # depth n, and x is read n + 1 times
    np.testing.assert_allclose(y.data, (n + 1) * x.data)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, np.full(2, n + 1.0))


# -- freeing the graph -------------------------------------------------------------------
def test_second_backward_through_a_freed_graph_raises_clearly():
    x = leaf([1.0, 2.0])
    y = (x.exp() * 2.0).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="already freed.*retain_graph=True"):
        y.backward()


def test_backward_drops_each_functions_inputs_and_saved_arrays():
    x = leaf([1.0, 2.0])
    y = x.exp()
    z = y * 2.0
    assert len(y.creator.saved_arrays) == 1 and y.creator.inputs == (x,)
    z.backward(np.ones(2))
    for function in (y.creator, z.creator):
        assert function.inputs is None and function.saved_arrays is None


def test_retain_graph_allows_a_second_backward():
    x = leaf([1.0, 2.0])
    y = (x.exp() * 2.0).sum()
    y.backward(retain_graph=True)
    once = x.grad.copy()
    y.backward()
    np.testing.assert_allclose(x.grad, 2 * once)


def test_backward_needs_a_grad_for_non_scalars_and_the_right_shape():
    y = leaf([1.0, 2.0]) * 2.0
    with pytest.raises(RuntimeError, match=r"one element.*\(2,\)"):
        y.backward()
    with pytest.raises(ValueError, match=r"grad has shape \(3,\).*\(2,\)"):
        y.backward(np.ones(3))
    with pytest.raises(RuntimeError, match="does not require grad"):
        mt.Tensor([1.0]).backward()


def test_backward_accepts_a_tensor_as_upstream_gradient():
    x = leaf([1.0, 2.0])
    (x * 3.0).backward(mt.Tensor([1.0, 10.0]))
    np.testing.assert_array_equal(x.grad, [3.0, 30.0])


# -- no_grad -----------------------------------------------------------------------------
def test_no_grad_records_nothing_and_restores_the_mode():
    x = leaf([1.0, 2.0])
    assert mt.is_grad_enabled()
    with mt.no_grad():
        assert not mt.is_grad_enabled()
        y = x * 2.0 + 1.0
        with mt.enable_grad():
            z = x * 2.0
    assert mt.is_grad_enabled()
    assert y.creator is None and not y.requires_grad
    assert z.creator is not None and z.requires_grad
    np.testing.assert_array_equal(y.data, x.data * 2 + 1)


def test_no_grad_restores_the_mode_after_an_exception():
    with pytest.raises(ZeroDivisionError), mt.no_grad():
        1 / 0  # noqa: B018
    assert mt.is_grad_enabled()


# -- dtypes --------------------------------------------------------------------------------
@pytest.mark.parametrize("op", [
    pytest.param(lambda x: x + 1, id="x+1"),
    pytest.param(lambda x: 1.5 + x, id="1.5+x"),
    pytest.param(lambda x: 2.0 - x, id="2.0-x"),
    pytest.param(lambda x: x * 0.5, id="x*0.5"),
    pytest.param(lambda x: 3 / x, id="3/x"),
    pytest.param(lambda x: x ** 2, id="x**2"),
    pytest.param(lambda x: mt.maximum(x, 0.0), id="maximum(x,0.0)"),
    pytest.param(lambda x: mt.where(x > 0, x, 0.0), id="where"),
])
def test_python_scalars_keep_float32(op):
    x = leaf([1.0, 2.0], dtype=np.float32)
    y = op(x)
    assert y.dtype == np.float32
    y.sum().backward()
    assert x.grad.dtype == np.float32


def test_an_integer_tensor_times_a_float_is_not_truncated():
    ids = mt.Tensor(np.arange(3))
    np.testing.assert_array_equal((ids * 2.5).data, np.arange(3) * 2.5)


def test_requires_grad_on_an_integer_tensor_raises():
    with pytest.raises(TypeError, match="floating-point.*int64"):
        mt.Tensor(np.arange(3), requires_grad=True)


def test_casting_to_an_integer_dtype_cuts_the_graph():
    x = leaf([1.7, 2.2])
    ids = x.astype(np.int64)
    assert ids.dtype == np.int64 and not ids.requires_grad and ids.creator is None


# -- comparisons ---------------------------------------------------------------------------
@pytest.mark.parametrize("compare", [
    lambda x: x > 0, lambda x: x >= 0, lambda x: x < 0, lambda x: x <= 0, lambda x: x == 1.0, lambda x: x != 1.0,
])
def test_comparisons_give_boolean_tensors_without_grad(compare):
    x = leaf([-1.0, 0.0, 1.0])
    mask = compare(x)
    assert isinstance(mask, mt.Tensor) and mask.dtype == np.bool_
    assert not mask.requires_grad and mask.creator is None
    np.testing.assert_array_equal(mask.data, compare(x.data))


def test_comparing_two_tensors():
    a, b = leaf([1.0, 5.0]), leaf([2.0, 2.0])
    np.testing.assert_array_equal((a < b).data, [True, False])


# -- what a tensor looks like -------------------------------------------------------------
def test_repr_shows_data_and_grad_fn():
    x = leaf([1.0, 2.5])
    assert "1." in repr(x) and "2.5" in repr(x) and "requires_grad=True" in repr(x)
    y = x * 2.0
    assert repr(y).startswith("Tensor(") and "grad_fn=<Mul>" in repr(y) and "5." in repr(y)
    assert "grad_fn" not in repr(mt.Tensor([1.0]))


def test_item_numpy_detach_and_the_shape_attributes():
    x = leaf(np.arange(6.0).reshape(2, 3))
    assert (x.shape, x.ndim, x.size, x.dtype, len(x)) == ((2, 3), 2, 6, np.float64, 2)
    assert x.device == "cpu" and x.is_leaf
    assert isinstance(x.numpy(), np.ndarray)
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0).reshape(2, 3))
    assert x.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    total = x.sum()
    assert total.item() == 15.0 and isinstance(total.item(), float)
    y = (x * 2.0).detach()
    assert y.creator is None and not y.requires_grad
    np.testing.assert_array_equal(y.data, 2 * x.data)


def test_tensor_from_python_data_and_from_a_tensor():
    t = mt.Tensor([[1, 2], [3, 4]])
    assert t.shape == (2, 2) and t.dtype.kind == "i"
    same = mt.Tensor(t)
    assert same.data is t.data


@pytest.mark.parametrize("data,named", [
    ("abc", "str"), (None, "NoneType"), ({}, "dict"), ({"a": 1.0}, "dict"), ([1.0, "a"], "list"),
    (object(), "object"), (b"bytes", "bytes"),
])
def test_non_numeric_data_is_refused_at_the_door(data, named):
    with pytest.raises(TypeError, match=rf"Tensor: expected numbers .*got {named} data.*dtype"):
        mt.Tensor(data)


@pytest.mark.parametrize("array", [np.array(["a", "b"]), np.array([None, 1.0]), np.array([b"x"]),
                                   np.array(["2026-01-01"], dtype="datetime64[D]")])
def test_a_non_numeric_numpy_array_is_refused_naming_its_dtype(array):
    with pytest.raises(TypeError, match=rf"Tensor: expected numbers .*dtype {re.escape(str(array.dtype))}"):
        mt.Tensor(array)


def test_numbers_of_every_kind_are_welcome():
    for data in (True, 3, 2.5, 1 + 2j, [[1, 2], [3, 4]], np.float32(1.5), np.array([1, 2], dtype=np.uint8)):
        assert mt.Tensor(data).dtype.kind in "biufc"


def test_a_numpy_array_on_the_left_defers_to_the_tensor():
    x = leaf([1.0, 2.0])
    y = np.array([3.0, 4.0]) * x
    assert isinstance(y, mt.Tensor)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [3.0, 4.0])


# -- errors name what is wrong ----------------------------------------------------------------
@pytest.mark.parametrize("name,op", [("add", lambda a, b: a + b), ("sub", lambda a, b: a - b),
                                     ("mul", lambda a, b: a * b), ("div", lambda a, b: a / b),
                                     ("maximum", mt.maximum)])
def test_broadcast_errors_name_the_op_and_both_shapes(name, op):
    a, b = leaf(np.ones((2, 3))), leaf(np.ones((4,)))
    with pytest.raises(ValueError, match=rf"{name}: shapes \(2, 3\) and \(4,\)"):
        op(a, b)


def test_matmul_errors_name_both_shapes():
    with pytest.raises(ValueError, match=r"matmul: shapes \(2, 3\) and \(4, 5\).*inner sizes 3 and 4"):
        leaf(np.ones((2, 3))) @ leaf(np.ones((4, 5)))
    with pytest.raises(ValueError, match=r"matmul.*at least 1 dimension"):
        leaf(np.ones(())) @ leaf(np.ones((2,)))


def test_a_backward_with_a_wrong_gradient_shape_is_named():
    class Squeeze(mt.Function):
        def forward(self, x):
            return x[0]

        def backward(self, gy):
            return gy  # forgot to put the gradient back into x's shape

    x = leaf(np.ones((1, 3)))
    with pytest.raises(ValueError, match=r"Squeeze.backward.*\(3,\).*\(1, 3\)"):
        Squeeze()(x).sum().backward()


@pytest.mark.parametrize("op", [lambda x, o: x * o, lambda x, o: o * x, lambda x, o: x + o, lambda x, o: x - o,
                                lambda x, o: o - x, lambda x, o: x / o, lambda x, o: mt.maximum(x, o)])
@pytest.mark.parametrize("other,named", [(None, "NoneType"), ("2", "str"), ({}, "dict"), (object(), "object")])
def test_an_operand_that_is_no_number_is_refused_naming_both_types(op, other, named):
    # NumPy turns None into NaN when asked for floats: x * None used to be a tensor of NaNs
    with pytest.raises(TypeError, match=rf"unsupported operand type\(s\) for \w+: .*'Tensor'.*'{named}'|"
                                        rf"unsupported operand type\(s\) for \w+: '{named}' and 'Tensor'"):
        op(leaf([1.0, 2.0]), other)


def test_lists_and_numpy_scalars_are_still_operands():
    np.testing.assert_array_equal((leaf([1.0, 2.0]) + [1, 2]).data, [2.0, 4.0])
    np.testing.assert_array_equal((leaf([1.0, 2.0]) * np.float32(2)).data, [2.0, 4.0])


class _Pair(mt.Function):
    """x * y, whose backward returns whatever ``result`` makes of the two true gradients."""

    def __init__(self, result):
        self.result = result

    def forward(self, x, y):
        self.save_for_backward(x, y)
        return x * y

    def backward(self, gy):
        x, y = self.saved_arrays
        return self.result(gy * y, gy * x)


@pytest.mark.parametrize("result,error,message", [
    (lambda gx, gy: gx, ValueError, r"_Pair.backward returned 1 gradient for 2 inputs"),
    (lambda gx, gy: (gx,), ValueError, r"_Pair.backward returned 1 gradient for 2 inputs"),
    (lambda gx, gy: (gx, gy, gy), ValueError, r"_Pair.backward returned 3 gradients for 2 inputs"),
    (lambda gx, gy: [gx, gy], TypeError, r"_Pair.backward returned a list; return the gradients as a tuple"),
    (lambda gx, gy: (mt.Tensor(gx), gy), TypeError,
     r"_Pair.backward returned a Tensor as the gradient of input 0; backward works on raw arrays.*\.data"),
    (lambda gx, gy: (gx, 1.0), TypeError, r"_Pair.backward returned a float as the gradient of input 1"),
])
def test_a_backward_that_returns_no_gradient_per_input_is_named(result, error, message):
    # fewer gradients than inputs used to leave the second input silently without one
    x, y = leaf([1.0, 2.0]), leaf([3.0, 4.0])
    with pytest.raises(error, match=message):
        _Pair(result)(x, y).sum().backward()


def test_a_backward_returning_one_array_for_its_one_input_still_works():
    x = leaf([1.0, 2.0])
    Sigmoid()(x).sum().backward()
    assert x.grad.shape == (2,)


# -- a Function written by the user ---------------------------------------------------------
class Sigmoid(mt.Function):
    """σ(x) = 1 / (1 + e^(−x)); dσ/dx = σ (1 − σ)."""

    def forward(self, x):
        xp = mt.backend.xp_of(x)
        self.y = 1 / (1 + xp.exp(-x))
        return self.y

    def backward(self, gy):
        return gy * self.y * (1 - self.y)


def test_a_user_defined_function_works_and_gradchecks(rng):
    x = mt.Tensor(rng.standard_normal((3, 4)), requires_grad=True)
    y = Sigmoid()(x)
    np.testing.assert_allclose(y.data, 1 / (1 + np.exp(-x.data)))
    assert "grad_fn=<Sigmoid>" in repr(y)
    assert mt.gradcheck(lambda x: Sigmoid()(x * 2.0).sum(axis=-1), [x])


def test_a_function_may_return_none_for_an_input_without_gradient(rng):
    class Scale(mt.Function):
        def forward(self, x, factor):
            self.factor = factor
            return x * factor

        def backward(self, gy):
            return gy * self.factor, None  # the factor is treated as a constant

    x = mt.Tensor(rng.standard_normal(3), requires_grad=True)
    factor = mt.Tensor(np.full(3, 2.0), requires_grad=True)
    Scale()(x, factor).sum().backward()
    np.testing.assert_array_equal(x.grad, np.full(3, 2.0))
    assert factor.grad is None


def test_a_function_without_backward_says_so():
    class Forgetful(mt.Function):
        def forward(self, x):
            return x

    with pytest.raises(NotImplementedError, match="Forgetful.backward"):
        Forgetful()(leaf([1.0])).sum().backward()


# -- chapter 1 shows the engine's own code ------------------------------------------------
def _listings(chapter: Path, source: str) -> list[list[str]]:
    """The code lines of every listing in ``chapter`` whose first line names ``source``."""
    blocks = re.findall(r"```python\n(.*?)```", chapter.read_text(encoding="utf-8"), re.S)
    return [block.split("\n")[1:] for block in blocks if block.startswith(f"# {source}")]


@pytest.mark.parametrize("source", ["minitransformer/tensor.py", "minitransformer/ops/elementwise.py"])
def test_chapter_1_listings_are_the_code_line_for_line(source):
    root = Path(__file__).resolve().parents[1]
    code = [line.strip() for line in (root / source).read_text(encoding="utf-8").split("\n") if line.strip()]
    listings = _listings(root / "chapters" / "01-autograd.md", source)
    assert listings
    for listing in listings:
        lines = [line.strip() for line in listing if line.strip()]
        start = code.index(lines[0])
        assert code[start:start + len(lines)] == lines, f"chapter 1's listing of {source} is not the code"
