"""Edge inputs to the public API of the engine and layers, the way a student or an outside test-writer
would try them: each test pins a case that once gave a wrong value, a confusing error from deep inside,
or silently accepted input that could only produce garbage."""
import warnings

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F
from minitransformer import Tensor, nn, optim
from minitransformer.nn.transformer import Transformer, TransformerConfig


# -- engine --------------------------------------------------------------------------------------
def test_pow_with_exponent_zero_has_zero_gradient_even_at_zero():
    # x⁰ = 1 is a constant; c·x^(c−1) would be 0·0⁻¹ = 0·∞ = nan at x = 0
    x = Tensor([0.0, 2.0, -3.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no divide-by-zero on the way either
        (x ** 0).backward(np.ones(3))
    np.testing.assert_array_equal(x.grad, [0.0, 0.0, 0.0])


def test_pow_keeps_its_gradient_at_zero_for_other_exponents():
    x = Tensor([0.0, 2.0], requires_grad=True)
    (x ** 2).backward(np.ones(2))
    np.testing.assert_array_equal(x.grad, [0.0, 4.0])


@pytest.mark.parametrize("join", [mt.concatenate, mt.stack])
def test_joining_no_tensors_says_so(join):
    with pytest.raises(ValueError, match=rf"{join.__name__}: needs at least one tensor"):
        join([])


@pytest.mark.parametrize("call", [
    lambda x: mt.swapaxes(x, 0, 3), lambda x: x.swapaxes(-4, 1), lambda x: mt.split(x, 2, axis=3),
    lambda x: mt.concatenate([x, x], axis=3)], ids=["swapaxes", "method", "split", "concatenate"])
def test_an_axis_out_of_range_is_named(call):
    # was IndexError 'list index out of range' or 'tuple index out of range'
    with pytest.raises(ValueError, match=r"axis -?\d+ is out of range for 3 axes \(shape \(2, 3, 4\)\)"):
        call(Tensor(np.zeros((2, 3, 4))))


@pytest.mark.parametrize("axis", [4, -5])
def test_stack_names_an_axis_out_of_range(axis):
    # was "all inputs need the same shape, got (2, 3, 4), (2, 3, 4)": the shapes were fine, the axis was not
    x = Tensor(np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match=rf"stack: axis {axis} is out of range for inputs of 3 axes"):
        mt.stack([x, x], axis=axis)


def test_axes_at_the_ends_of_the_range_still_work():
    x = Tensor(np.arange(24.0).reshape(2, 3, 4))
    assert mt.swapaxes(x, -3, 2).shape == (4, 3, 2)
    assert mt.stack([x, x], axis=3).shape == (2, 3, 4, 2)
    assert mt.stack([x, x], axis=-4).shape == (2, 2, 3, 4)
    assert mt.concatenate([x, x], axis=-3).shape == (4, 3, 4)
    assert [p.shape for p in mt.split(x, 2, axis=-1)] == [(2, 3, 2), (2, 3, 2)]


@pytest.mark.parametrize("parts", [0, -2])
def test_split_into_no_parts_says_so(parts):
    with pytest.raises(ValueError, match=f"split: the number of parts must be at least 1, got {parts}"):
        mt.split(Tensor(np.zeros(4)), parts)


def test_where_names_the_condition_when_it_is_the_shape_that_does_not_fit():
    a, b = Tensor(np.zeros((2, 3))), Tensor(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"where: condition, a and b of shapes \(5,\), \(2, 3\), \(2, 3\)"):
        mt.where(np.ones(5, dtype=bool), a, b)


def test_gradcheck_given_one_tensor_instead_of_a_list_says_how_to_call_it():
    x = Tensor(np.ones(3), requires_grad=True)
    with pytest.raises(TypeError, match=r"gradcheck: inputs must be a list of Tensors.*\[x\]"):
        mt.gradcheck(lambda a: (a * a).sum(), x)


@pytest.mark.parametrize("eps", [0.0, float("nan")])
def test_gradcheck_refuses_a_step_that_is_not_positive(eps):
    # eps = 0 divided by zero; eps = nan made every numerical gradient nan, and any backward passed
    with pytest.raises(ValueError, match=f"gradcheck: eps must be a small positive step such as 1e-6, got {eps}"):
        mt.gradcheck(lambda a: a * a, [Tensor(np.ones(2), requires_grad=True)], eps=eps)


# -- functional ----------------------------------------------------------------------------------
@pytest.mark.parametrize("function", [F.softmax, F.log_softmax])
def test_softmax_of_a_scalar_names_the_missing_axis(function):
    with pytest.raises(ValueError, match=rf"{function.__name__}: needs at least one axis"):
        function(Tensor(1.0))


@pytest.mark.parametrize("function", [F.softmax, F.log_softmax])
def test_softmax_still_takes_lists(function):
    out = function([1.0, 2.0])
    np.testing.assert_allclose(np.exp(out.data) if function is F.log_softmax else out.data,
                               [0.26894142, 0.73105858], rtol=1e-7)


@pytest.mark.parametrize("function", [F.softmax, F.log_softmax])
@pytest.mark.parametrize("axis", [2, -3])
def test_softmax_names_an_axis_out_of_range(function, axis):
    with pytest.raises(ValueError, match=rf"{function.__name__}: axis {axis} is out of range for shape \(2, 3\)"):
        function(Tensor(np.ones((2, 3))), axis=axis)


def test_softmax_still_takes_a_tuple_of_axes():
    np.testing.assert_allclose(F.softmax(Tensor(np.zeros((2, 3))), axis=(0, 1)).data, np.full((2, 3), 1 / 6))


@pytest.mark.parametrize("generator", [np.random.default_rng(0), 3])
def test_dropout_names_a_generator_that_is_not_ours(generator):
    # a NumPy Generator failed with "uniform() got an unexpected keyword argument 'like'", a seed with
    # "'int' object has no attribute 'uniform'"
    x = Tensor(np.ones((1, 1, 2, 2)))
    with pytest.raises(TypeError, match="dropout: generator must be a minitransformer Generator"):
        F.dropout(x, 0.5, generator=generator)
    with pytest.raises(TypeError, match="scaled_dot_product_attention: generator must be a minitransformer"):
        F.scaled_dot_product_attention(x, x, x, dropout_p=0.5, training=True, generator=generator)


@pytest.mark.parametrize("training", [True, False])
def test_attention_refuses_a_negative_dropout_probability(training):
    # it was accepted, and ignored, since only a positive p reaches the check
    x = Tensor(np.ones((1, 1, 2, 2)))
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention: dropout_p must be in \[0, 1\), got -0.1"):
        F.scaled_dot_product_attention(x, x, x, dropout_p=-0.1, training=training)


@pytest.mark.parametrize("shape", [(), (2, 0)])
def test_layer_norm_needs_features_to_normalise(shape):
    with pytest.raises(ValueError, match=r"layer_norm: x needs a last axis of at least one feature"):
        F.layer_norm(Tensor(np.ones(shape)))


def test_layer_norm_refuses_a_negative_eps():
    # σ² + eps < 0 for a row of small variance: nan, silently
    with pytest.raises(ValueError, match="layer_norm: eps must be >= 0, got -1"):
        F.layer_norm(Tensor(np.ones((2, 4))), eps=-1)
    with pytest.raises(ValueError, match="layer_norm: eps must be >= 0"):
        nn.LayerNorm(4, eps=-1e-5)(Tensor(np.ones((2, 4), dtype=np.float32)))


def test_dropout_of_an_integer_tensor_is_refused():
    # the scale 1/(1 − p) cast to int64 is 1: kept entries would silently not be scaled
    with pytest.raises(TypeError, match="dropout: input must be floating point"):
        F.dropout(Tensor([1, 2, 3, 4]), 0.3)
    with pytest.raises(TypeError, match="dropout: input must be floating point"):
        nn.Dropout(0.3)(Tensor([1, 2, 3, 4]))


def test_dropout_off_passes_any_tensor_through():
    x = Tensor([1, 2, 3])
    assert F.dropout(x, 0.3, training=False) is x
    assert F.dropout(x, 0.0) is x


@pytest.mark.parametrize("function", [F.linear, F.linear_relu])
@pytest.mark.parametrize("x_shape, w_shape, b_shape, says", [
    ((2, 4), (4, 3), (4,), r"bias has shape \(4,\) but the weight \(4, 3\) needs a bias of shape \(3,\)"),
    ((2, 4), (4, 3), (2, 3), r"bias has shape \(2, 3\)"),     # broadcast on the way in, failed on the way back
    ((2, 4), (4,), None, r"expected x \(\.\.\., in\) and weight \(in, out\), got shapes \(2, 4\) and \(4,\)"),
    ((), (4, 3), None, r"expected x .* got shapes \(\) and \(4, 3\)"),
])
def test_linear_names_operands_of_the_wrong_shape(function, x_shape, w_shape, b_shape, says):
    x = Tensor(np.ones(x_shape), requires_grad=True)
    weight = Tensor(np.ones(w_shape), requires_grad=True)
    bias = None if b_shape is None else Tensor(np.ones(b_shape), requires_grad=True)
    with pytest.raises(ValueError, match=rf"{function.__name__}: {says}"):
        function(x, weight, bias).sum().backward()


def test_linear_still_takes_arrays_and_lists():
    assert F.linear(np.ones((2, 4)), np.ones((4, 3)), np.ones(3)).shape == (2, 3)
    np.testing.assert_array_equal(F.linear(Tensor([[1.0, 2.0]]), [[1.0], [1.0]]).data, [[3.0]])


# -- nn ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("d_model, n_heads", [(8, 0), (0, 2), (8, -2)])
def test_multi_head_attention_needs_positive_sizes(d_model, n_heads):
    # was ZeroDivisionError ('integer modulo by zero', or in the initialisation of a 0-wide layer)
    with pytest.raises(ValueError, match="MultiHeadAttention: d_model and n_heads must be positive"):
        nn.MultiHeadAttention(d_model, n_heads)


@pytest.fixture(scope="module")
def tiny_model():
    # learned positions: the test needs no classroom exercise (the sinusoidal table is one)
    return Transformer(TransformerConfig.tiny(20, positional="learned")).eval()


def test_transformer_refuses_empty_sentences_with_a_clear_error(tiny_model):
    # both crashed in attention's row max: "zero-size array to reduction operation maximum"
    empty = np.zeros((1, 0), dtype=np.int64)
    with pytest.raises(ValueError, match=r"Transformer: src_ids has length 0 \(shape \(1, 0\)\)"):
        tiny_model(empty, np.array([[1, 2]]))
    with pytest.raises(ValueError, match=r"Transformer: tgt_ids has length 0"):
        tiny_model.decode(empty, memory=None, src_mask=None)   # refused before memory is looked at


# -- optim ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [lambda ps: optim.SGD(ps, lr=0.1), lambda ps: optim.Adam(ps, lr=0.1)])
def test_optimizer_given_one_tensor_instead_of_a_list_is_refused(make):
    # iterating a Tensor gives its rows: new tensors, so step() would update copies, never the parameter
    with pytest.raises(TypeError, match=r"optimiser: params must be an iterable of Tensors.*\[p\]"):
        make(nn.Parameter(np.ones(3)))


def test_optimizer_given_a_module_says_to_pass_its_parameters():
    with pytest.raises(TypeError, match=r"model\.parameters\(\)"):
        optim.SGD(nn.Linear(2, 2), lr=0.1)


def test_optimizer_refuses_a_parameter_listed_twice():
    p = nn.Parameter(np.ones(3))
    with pytest.raises(ValueError, match="parameter 1 is parameter 0 again"):
        optim.SGD([p, p], lr=0.1)


@pytest.mark.parametrize("make", [lambda ps, lr: optim.SGD(ps, lr=lr), lambda ps, lr: optim.Adam(ps, lr=lr)])
def test_optimizer_refuses_a_learning_rate_of_nan(make):
    # nan < 0 is False, so it passed the check and made every parameter nan at the first step
    with pytest.raises(ValueError, match="learning rate must be >= 0, got nan"):
        make([nn.Parameter(np.ones(3))], float("nan"))


def test_adam_refuses_a_negative_eps():
    with pytest.raises(ValueError, match="eps must be >= 0, got -1e-09"):
        optim.Adam([nn.Parameter(np.ones(3))], lr=0.1, eps=-1e-9)


@pytest.mark.parametrize("max_norm", [0.0, -1.0, float("nan")])
def test_clip_grad_norm_refuses_a_bound_that_is_not_positive(max_norm):
    p = nn.Parameter(np.ones(4))
    p.grad = np.full(4, 3.0)
    with pytest.raises(ValueError, match="clip_grad_norm: max_norm must be a positive number"):
        optim.clip_grad_norm([p], max_norm)
