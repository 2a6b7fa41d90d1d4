"""Softmax, log-softmax, cross-entropy, layer norm, dropout: gradients, mutations, closed forms."""
from __future__ import annotations

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F


def leaf(array) -> mt.Tensor:
    return mt.Tensor(np.asarray(array, dtype=np.float64), requires_grad=True)


# -- softmax and log-softmax -----------------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_softmax_gradcheck_along_each_axis(rng, axis):
    x = leaf(rng.standard_normal((2, 3, 4)))
    assert mt.gradcheck(lambda x: F.softmax(x, axis=axis), [x])


@pytest.mark.parametrize("axis", [0, -1])
def test_log_softmax_gradcheck(rng, axis):
    x = leaf(rng.standard_normal((3, 5)))
    assert mt.gradcheck(lambda x: F.log_softmax(x, axis=axis), [x])


def test_softmax_rows_sum_to_one_and_match_the_definition(rng):
    x = rng.standard_normal((4, 6))
    y = F.softmax(mt.Tensor(x)).numpy()
    expected = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(y, expected, rtol=1e-12)
    np.testing.assert_allclose(y.sum(axis=1), 1.0, rtol=1e-12)


def test_softmax_and_log_softmax_are_finite_for_huge_scores():
    x = mt.Tensor(np.array([[1e4, -1e4, 0.0], [1e4, 1e4, -1e4]], dtype=np.float32))
    y = F.softmax(x).numpy()
    z = F.log_softmax(x).numpy()
    assert np.isfinite(y).all() and np.isfinite(z).all()
    np.testing.assert_allclose(y, [[1, 0, 0], [0.5, 0.5, 0]], atol=1e-7)
    np.testing.assert_allclose(z[0], [0, -2e4, -1e4], rtol=1e-6)
    np.testing.assert_allclose(z[1, :2], [-np.log(2)] * 2, rtol=1e-6)


def test_log_softmax_is_log_of_softmax(rng):
    x = mt.Tensor(rng.standard_normal((3, 7)))
    np.testing.assert_allclose(F.log_softmax(x).numpy(), np.log(F.softmax(x).numpy()), rtol=1e-12)


@pytest.mark.parametrize("function", [F.softmax, F.log_softmax])
def test_softmax_over_an_empty_axis_is_refused_naming_the_shape(function):
    # NumPy's own words were "zero-size array to reduction operation maximum which has no identity"
    with pytest.raises(ValueError, match=rf"{function.__name__}: axis -1 of shape \(2, 0\) is empty"):
        function(mt.Tensor(np.zeros((2, 0))))
    assert function(mt.Tensor(np.zeros((0, 3)))).shape == (0, 3)      # no rows: nothing to normalise, fine


# -- mutation tests: a broken backward must fail the gradient check ---------------------------
WRONG = "gradient of input .* is wrong at"  # a wrong value, not a crash: a crashing mutant proves nothing


class ZeroSoftmax(F.Softmax):
    def backward(self, gy):
        return gy * 0


class FlippedSoftmax(F.Softmax):
    def backward(self, gy):
        return -super().backward(gy)


class ZeroLogSoftmax(F.LogSoftmax):
    def backward(self, gy):
        return gy * 0


class FlippedCrossEntropy(F.CrossEntropy):
    def backward(self, gy):
        return -super().backward(gy)


class ZeroCrossEntropy(F.CrossEntropy):
    def backward(self, gy):
        return super().backward(gy) * 0


class FlippedLayerNorm(F.LayerNormFunction):
    def backward(self, gy):
        gx, gw, gb = super().backward(gy)
        return -gx, gw, gb


class ZeroLayerNormWeight(F.LayerNormFunction):
    def backward(self, gy):
        gx, gw, gb = super().backward(gy)
        return gx, gw * 0, gb


class LayerNormWithoutMeanTerm(F.LayerNormFunction):
    """Forgets the path through μ: gx = (g − x̂·mean(g x̂))/σ."""

    def backward(self, gy):
        gx, gw, gb = super().backward(gy)
        _, inv_std, weight = self.saved_arrays
        g = gy * weight
        return gx + inv_std * g.mean(axis=-1, keepdims=True), gw, gb


@pytest.mark.parametrize("broken", [ZeroSoftmax, FlippedSoftmax, ZeroLogSoftmax])
def test_broken_softmax_backward_fails_gradcheck(rng, broken):
    x = leaf(rng.standard_normal((3, 4)))
    with pytest.raises(mt.GradcheckError, match=WRONG):
        mt.gradcheck(lambda x: broken(-1)(x), [x])


@pytest.mark.parametrize("broken", [ZeroCrossEntropy, FlippedCrossEntropy])
def test_broken_cross_entropy_backward_fails_gradcheck(rng, broken):
    x = leaf(rng.standard_normal((4, 5)))
    targets = np.array([1, 0, 4, 2])
    with pytest.raises(mt.GradcheckError, match=WRONG):
        mt.gradcheck(lambda x: broken(targets, 0.1, 0)(x), [x])


@pytest.mark.parametrize("broken", [FlippedLayerNorm, ZeroLayerNormWeight, LayerNormWithoutMeanTerm])
def test_broken_layer_norm_backward_fails_gradcheck(rng, broken):
    x, w, b = leaf(rng.standard_normal((3, 5))), leaf(rng.standard_normal(5)), leaf(rng.standard_normal(5))
    with pytest.raises(mt.GradcheckError, match=WRONG):
        mt.gradcheck(lambda x, w, b: broken(1e-5)(x, w, b), [x, w, b])


# -- cross-entropy ---------------------------------------------------------------------------

@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("ignore_index", [None, 0, -100])
def test_cross_entropy_gradcheck(rng, smoothing, ignore_index):
    x = leaf(rng.standard_normal((5, 6)))
    targets = np.array([3, 0, 5, 0, 1]) if ignore_index != -100 else np.array([3, -100, 5, 2, -100])
    assert mt.gradcheck(lambda x: F.cross_entropy(x, targets, smoothing, ignore_index), [x])


def test_cross_entropy_gradcheck_on_batch_time_vocab(rng):
    x = leaf(rng.standard_normal((2, 3, 5)))
    targets = np.array([[1, 2, 0], [4, 0, 0]])
    assert mt.gradcheck(lambda x: F.cross_entropy(x, targets, 0.1, ignore_index=0), [x])


def test_cross_entropy_without_smoothing_is_mean_negative_log_probability(rng):
    x = rng.standard_normal((4, 3))
    targets = np.array([0, 2, 1, 2])
    log_p = x - np.log(np.exp(x).sum(axis=1, keepdims=True))
    expected = -log_p[np.arange(4), targets].mean()
    np.testing.assert_allclose(F.cross_entropy(mt.Tensor(x), targets).item(), expected, rtol=1e-12)


def test_smoothed_cross_entropy_equals_hand_computed_value():
    # V = 4 classes, pad id 0, ε = 0.1: q = 0.9 on the target + 0.1/3 on each of classes 1, 2, 3.
    logits = np.array([[0.0, 1.0, 2.0, 3.0],
                       [5.0, 5.0, 5.0, 5.0]])
    targets = np.array([3, 0])                       # the second row is padding and is ignored
    log_z = np.log(1 + np.e + np.e**2 + np.e**3)
    log_p = np.array([0.0, 1.0, 2.0, 3.0]) - log_z
    q = np.array([0.0, 0.1 / 3, 0.1 / 3, 0.9 + 0.1 / 3])
    expected = -(q * log_p).sum()                    # one counted row: the mean is that row
    loss = F.cross_entropy(mt.Tensor(logits), targets, label_smoothing=0.1, ignore_index=0)
    np.testing.assert_allclose(loss.item(), expected, rtol=1e-12)
    # without ignore_index the ε spreads over all 4 classes (PyTorch's convention)
    q_all = np.full(4, 0.1 / 4) + np.array([0, 0, 0, 0.9])
    loss_all = F.cross_entropy(mt.Tensor(logits[:1]), targets[:1], label_smoothing=0.1)
    np.testing.assert_allclose(loss_all.item(), -(q_all * log_p).sum(), rtol=1e-12)


def test_cross_entropy_backward_is_softmax_minus_target_over_count():
    logits = mt.Tensor(np.array([[0.0, 1.0, 2.0], [1.0, 1.0, 1.0], [2.0, 0.0, 0.0]]), requires_grad=True)
    targets = np.array([2, 0, 1])                     # row 1 is padding (id 0)
    F.cross_entropy(logits, targets, label_smoothing=0.2, ignore_index=0).backward()
    p = np.exp(logits.data) / np.exp(logits.data).sum(axis=1, keepdims=True)
    q = np.array([[0, 0.1, 0.9], [0, 0, 0], [0, 0.9, 0.1]])
    expected = (p - q) / 2
    expected[1] = 0
    np.testing.assert_allclose(logits.grad, expected, rtol=1e-12)


def test_cross_entropy_of_only_padding_is_zero_with_zero_gradient():
    x = leaf(np.ones((2, 3)))
    loss = F.cross_entropy(x, np.array([0, 0]), label_smoothing=0.1, ignore_index=0)
    loss.backward()
    assert loss.item() == 0 and not x.grad.any()


def test_cross_entropy_rejects_bad_targets():
    x = mt.Tensor(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"targets have shape \(3,\)"):
        F.cross_entropy(x, np.array([0, 1, 2]))
    with pytest.raises(IndexError, match="target id 3 is outside"):
        F.cross_entropy(x, np.array([0, 3]))
    with pytest.raises(TypeError, match="integer"):
        F.cross_entropy(x, np.array([0.0, 1.0]))


def test_cross_entropy_keeps_float32_and_is_finite_for_huge_logits():
    x = mt.Tensor(np.array([[1e4, -1e4, 0.0]], dtype=np.float32), requires_grad=True)
    loss = F.cross_entropy(x, np.array([1]), label_smoothing=0.1)
    loss.backward()
    assert loss.dtype == np.float32 and np.isfinite(loss.item()) and np.isfinite(x.grad).all()


# -- layer norm ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3, 5), (2, 3, 4)])
def test_layer_norm_gradcheck_of_x_weight_and_bias(rng, shape):
    x = leaf(rng.standard_normal(shape))
    w, b = leaf(rng.standard_normal(shape[-1])), leaf(rng.standard_normal(shape[-1]))
    assert mt.gradcheck(lambda x, w, b: F.layer_norm(x, w, b), [x, w, b])


def test_layer_norm_output_has_zero_mean_and_unit_variance_before_the_affine(rng):
    x = mt.Tensor(3.0 + 5.0 * rng.standard_normal((4, 64)))
    y = F.layer_norm(x, eps=0.0).numpy()
    np.testing.assert_allclose(y.mean(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=-1), 1.0, rtol=1e-12)   # biased variance, as defined


def test_layer_norm_applies_weight_and_bias_after_normalizing(rng):
    x = rng.standard_normal((2, 6))
    w, b = rng.standard_normal(6), rng.standard_normal(6)
    x_hat = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    y = F.layer_norm(mt.Tensor(x), mt.Tensor(w), mt.Tensor(b)).numpy()
    np.testing.assert_allclose(y, x_hat * w + b, rtol=1e-12)


def test_layer_norm_rejects_a_weight_of_the_wrong_size():
    with pytest.raises(ValueError, match=r"weight has shape \(4,\).*must be \(5,\)"):
        F.layer_norm(mt.Tensor(np.zeros((2, 5))), mt.Tensor(np.ones(4)))


# -- linear and embedding -------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 3)])
def test_linear_gradcheck_of_x_weight_and_bias(rng, shape):
    x, w, b = leaf(rng.standard_normal(shape)), leaf(rng.standard_normal((3, 2))), leaf(rng.standard_normal(2))
    assert mt.gradcheck(lambda x, w, b: F.linear(x, w, b), [x, w, b])
    assert mt.gradcheck(lambda x, w: F.linear(x, w), [x, w])


class LinearWithUntransposedInputGradient(F.LinearFunction):
    """gX = gY W instead of gY Wᵀ: the shapes still fit when W is square."""

    def backward(self, gy):
        _, weight = self.saved_arrays
        gx, gw, gb = super().backward(gy)
        return (gy.reshape(-1, weight.shape[1]) @ weight).reshape(gx.shape), gw, gb


class LinearWithoutBiasSum(F.LinearFunction):
    """gb taken from the first row only, instead of the sum over every row."""

    def backward(self, gy):
        gx, gw, gb = super().backward(gy)
        return gx, gw, gy.reshape(-1, gb.shape[0])[0]


@pytest.mark.parametrize("broken", [LinearWithUntransposedInputGradient, LinearWithoutBiasSum])
def test_broken_linear_backward_fails_gradcheck(rng, broken):
    x, w, b = leaf(rng.standard_normal((2, 3, 4))), leaf(rng.standard_normal((4, 4))), leaf(rng.standard_normal(4))
    with pytest.raises(mt.GradcheckError, match=WRONG):
        mt.gradcheck(lambda x, w, b: broken()(x, w, b), [x, w, b])


@pytest.mark.parametrize("needed", [(True, False, False), (False, True, True), (True, True, False)], ids=str)
def test_linear_backward_computes_only_the_gradients_that_are_needed(rng, needed):
    """A frozen weight or a constant input gets None: no GEMM spent on a gradient nobody reads."""
    shapes = [(2, 3, 4), (4, 5), (5,)]
    inputs = [mt.Tensor(rng.standard_normal(shape), requires_grad=need) for shape, need in zip(shapes, needed)]
    function = F.LinearFunction()
    function(*inputs)
    grads = function.backward(rng.standard_normal((2, 3, 5)))
    assert tuple(g is not None for g in grads) == needed


def test_embedding_gradcheck_with_repeated_ids_and_a_padding_row(rng):
    weight = leaf(rng.standard_normal((5, 3)))
    ids = np.array([[1, 4, 1], [0, 1, 2]])
    assert mt.gradcheck(lambda w: F.embedding(ids, w), [weight])
    not_padding = mt.Tensor((ids != 0)[..., None].astype(np.float64))  # the output ignores row 0, as
    assert mt.gradcheck(lambda w: F.embedding(ids, w, padding_idx=0) * not_padding, [weight])  # its gradient does


class EmbeddingAssigningInsteadOfAdding(F.EmbeddingFunction):
    """gw[ids] = gy: a row read several times keeps one contribution, not their sum."""

    def backward(self, gy):
        gw = np.zeros(self.weight_shape, dtype=gy.dtype)
        gw[self.ids.reshape(-1)] = gy.reshape(-1, self.weight_shape[1])
        return gw


def test_broken_embedding_backward_fails_gradcheck(rng):
    weight = leaf(rng.standard_normal((5, 3)))
    ids = np.array([[1, 4, 1], [0, 1, 2]])
    with pytest.raises(mt.GradcheckError, match=WRONG):
        mt.gradcheck(lambda w: EmbeddingAssigningInsteadOfAdding(ids)(w), [weight])


def test_linear_and_embedding_functions_live_in_functional_only():
    """Functions live in functional/, Modules in nn/: the layers use the Functions without offering them."""
    import minitransformer.nn as nn
    import minitransformer.nn.embedding
    import minitransformer.nn.linear

    assert F.LinearFunction.__module__ == "minitransformer.functional.linear"
    assert F.EmbeddingFunction.__module__ == "minitransformer.functional.embedding"
    for name in ("LinearFunction", "linear", "EmbeddingFunction"):   # nn.linear is the module of the layer
        assert name not in nn.__all__ and getattr(nn, name, None) is not getattr(F, name)
    assert "LinearFunction" not in minitransformer.nn.linear.__all__
    assert "EmbeddingFunction" not in minitransformer.nn.embedding.__all__


# -- floating-point only ----------------------------------------------------------------------

@pytest.mark.parametrize("name,call", [
    ("softmax", lambda x: F.softmax(x)),
    ("log_softmax", lambda x: F.log_softmax(x, axis=0)),
    ("cross_entropy", lambda x: F.cross_entropy(x, np.array([0, 2]))),
    ("layer_norm", lambda x: F.layer_norm(x)),
])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_])
def test_floating_only_functions_refuse_integers_and_name_themselves_and_the_dtype(name, call, dtype):
    x = mt.Tensor(np.arange(6).reshape(2, 3).astype(dtype))
    with pytest.raises(TypeError, match=rf"^{name}: input must be floating point, got dtype {np.dtype(dtype)}"):
        call(x)


# -- dropout ---------------------------------------------------------------------------------

def test_dropout_keeps_the_expectation_and_drops_about_p():
    x = mt.Tensor(np.full((400, 500), 2.0, dtype=np.float32))
    y = F.dropout(x, 0.3, generator=F.Generator(1)).numpy()
    assert y.dtype == np.float32
    assert abs((y == 0).mean() - 0.3) < 0.01
    assert abs(y.mean() - 2.0) < 0.02
    np.testing.assert_allclose(y[y != 0], 2.0 / 0.7, rtol=1e-6)


def test_dropout_is_identity_in_eval_and_for_p_zero(rng):
    x = mt.Tensor(rng.standard_normal((3, 4)))
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x


def test_dropout_is_reproducible_with_a_seed(rng):
    x = mt.Tensor(rng.standard_normal((5, 7)))
    first = F.dropout(x, 0.5, generator=F.Generator(3)).numpy()
    again = F.dropout(x, 0.5, generator=F.Generator(3)).numpy()
    other = F.dropout(x, 0.5, generator=F.Generator(4)).numpy()
    np.testing.assert_array_equal(first, again)
    assert (first != other).any()
    F.set_dropout_seed(11)
    a = F.dropout(x, 0.5).numpy()
    F.set_dropout_seed(11)
    np.testing.assert_array_equal(a, F.dropout(x, 0.5).numpy())


def test_dropout_gradcheck_with_a_fixed_mask(rng):
    x = leaf(rng.standard_normal((3, 4)))
    # reseed on every call, so the numerical differences see the same mask as backward
    assert mt.gradcheck(lambda x: F.dropout(x, 0.4, generator=F.Generator(5)), [x])


def test_dropout_rejects_a_bad_probability():
    with pytest.raises(ValueError, match="probability"):
        F.dropout(mt.Tensor(np.ones(3)), 1.5)


# -- x + dropout(y) in one Function: the residual connection (§5.4) ---------------------------------

def test_dropout_add_is_x_plus_dropout_bit_for_bit(rng):
    x, y = (rng.standard_normal((4, 6, 8)).astype(np.float32) for _ in range(2))
    g = rng.standard_normal((4, 6, 8)).astype(np.float32)
    results = []
    for fused in (True, False):
        xt, yt = mt.Tensor(x, requires_grad=True), mt.Tensor(y, requires_grad=True)
        out = F.dropout_add(xt, yt, 0.3, generator=F.Generator(9)) if fused else \
            xt + F.dropout(yt, 0.3, generator=F.Generator(9))
        out.backward(g)
        results.append((out.numpy(), xt.grad, yt.grad))
    assert isinstance(F.dropout_add(mt.Tensor(x), mt.Tensor(y, requires_grad=True), 0.3).creator, F.DropoutAdd)
    for got, expected in zip(*results):
        np.testing.assert_array_equal(got, expected)


def test_dropout_add_gradcheck(rng):
    x, y = leaf(rng.standard_normal((3, 4))), leaf(rng.standard_normal((3, 4)))
    assert mt.gradcheck(lambda x, y: F.dropout_add(x, y, 0.4, generator=F.Generator(5)), [x, y])


class DropoutAddWithoutScale(F.DropoutAdd):
    def backward(self, gy):
        return gy, gy * self.saved_arrays[0]            # 1/(1 − p) forgotten on the way back


class DropoutAddWithoutSkip(F.DropoutAdd):
    def backward(self, gy):
        return None, super().backward(gy)[1]            # the identity path of the residual dropped


@pytest.mark.parametrize("broken", [DropoutAddWithoutScale, DropoutAddWithoutSkip])
def test_broken_dropout_add_backward_fails_gradcheck(rng, broken):
    x, y = leaf(rng.standard_normal((3, 4))), leaf(rng.standard_normal((3, 4)))
    with pytest.raises(mt.GradcheckError, match=WRONG):
        mt.gradcheck(lambda x, y: broken(0.4, F.Generator(5))(x, y), [x, y])


def test_dropout_add_falls_back_to_the_sum_where_one_function_cannot_do(rng):
    x, y = mt.Tensor(rng.standard_normal((3, 4))), mt.Tensor(rng.standard_normal((3, 4)))
    np.testing.assert_array_equal(F.dropout_add(x, y, 0.5, training=False).numpy(), (x + y).numpy())
    np.testing.assert_array_equal(F.dropout_add(x, y, 0.0).numpy(), (x + y).numpy())
    row = mt.Tensor(rng.standard_normal(4))                                  # broadcast: not fused
    np.testing.assert_array_equal(F.dropout_add(row, y, 0.5, generator=F.Generator(2)).numpy(),
                                  (row + F.dropout(y, 0.5, generator=F.Generator(2))).numpy())
    with pytest.raises(ValueError, match="probability"):
        F.dropout_add(x, y, 1.5)


def test_relu_gradcheck(rng):
    x = leaf(rng.standard_normal((3, 4)) + 0.05)
    assert mt.gradcheck(F.relu, [x])


# -- the same code on the GPU (skipped without CuPy) ----------------------------------------

@pytest.mark.gpu
def test_fused_functions_on_the_gpu_match_the_cpu(rng):
    x = rng.standard_normal((6, 5)).astype(np.float32)
    targets = np.array([1, 0, 4, 2, 0, 3])
    w, b = rng.standard_normal(5).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    results = {}
    for device in ("cpu", "cuda"):
        xt = mt.Tensor(x).to(device)
        xt.requires_grad = True
        loss = (F.cross_entropy(xt, targets, 0.1, 0) + F.softmax(xt).sum() * 0.5
                + F.log_softmax(xt, axis=0).mean()
                + F.layer_norm(xt, mt.Tensor(w).to(device), mt.Tensor(b).to(device)).mean())
        loss.backward()
        results[device] = (loss.numpy(), mt.backend.asnumpy(xt.grad))
    for cpu, gpu in zip(results["cpu"], results["cuda"]):
        np.testing.assert_allclose(cpu, gpu, rtol=1e-4, atol=1e-6)


@pytest.mark.gpu
def test_dropout_on_the_gpu_draws_its_mask_there():
    x = mt.Tensor(np.ones((300, 300), dtype=np.float32)).to("cuda")
    y = F.dropout(x, 0.25, generator=F.Generator(0))
    assert y.device == "cuda" and y.dtype == np.float32
    assert abs(float((y.data == 0).mean()) - 0.25) < 0.01
    again = F.dropout(x, 0.25, generator=F.Generator(0))
    assert bool((y.data == again.data).all())
