"""linear_cross_entropy: the output projection and the loss as one Function (functional/linear_loss.py).

It must be the two-Function form, ``cross_entropy(linear(x, W, b), targets)``, in value and in every gradient:
to central differences in float64, and bit for bit in float32 (so that training with it gives the very same
model), for a bare layer and for the whole Transformer, tied and untied. And it must keep its promise about
memory: no (N, V) array is left once forward returns.
"""
from __future__ import annotations

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F
from minitransformer.functional.dropout import set_dropout_seed
from minitransformer.nn.transformer import Transformer, TransformerConfig

WRONG = r"gradient of input \d+ .* is wrong at \d+ of \d+ positions"
TARGETS = np.array([[3, 0, 5], [1, 0, 2]])          # (2, 3); id 0 is the padding id in the ignore_index cases


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def leaf(rng, shape, dtype="float64"):
    return mt.Tensor(rng.standard_normal(shape).astype(dtype), requires_grad=True)


def both_forms(x, w, b, targets, smoothing, ignore_index):
    """(fused loss, two-Function loss), each on its own copies of the leaves, backward done."""
    results = []
    for fused in (True, False):
        leaves = [None if t is None else mt.Tensor(t.data.copy(), requires_grad=True) for t in (x, w, b)]
        xc, wc, bc = leaves
        if fused:
            loss = F.linear_cross_entropy(xc, wc, targets, bc, smoothing, ignore_index)
        else:
            logits = F.linear(xc, wc, bc)
            loss = F.cross_entropy(logits.reshape(-1, wc.shape[1]), targets.reshape(-1), smoothing, ignore_index)
        loss.backward()
        results.append([loss.data] + [t.grad for t in leaves if t is not None])
    return results


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("ignore_index", [None, 0])
@pytest.mark.parametrize("with_bias", [True, False])
def test_gradcheck(rng, smoothing, ignore_index, with_bias):
    x, w = leaf(rng, (2, 3, 4)), leaf(rng, (4, 6))
    inputs = [x, w, leaf(rng, (6,))] if with_bias else [x, w]
    assert mt.gradcheck(lambda *t: F.linear_cross_entropy(t[0], t[1], TARGETS, t[2] if with_bias else None,
                                                          smoothing, ignore_index), inputs)


@pytest.mark.parametrize("smoothing, ignore_index", [(0.0, None), (0.1, 0), (0.1, None)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_bit_for_bit_the_two_function_form_in_float32(rng, smoothing, ignore_index, with_bias):
    x, w = leaf(rng, (4, 5, 8), "float32"), leaf(rng, (8, 11), "float32")
    b = leaf(rng, (11,), "float32") if with_bias else None
    targets = rng.integers(0, 11, (4, 5))
    targets[0, :2] = 0
    fused, separate = both_forms(x, w, b, targets, smoothing, ignore_index)
    for got, expected in zip(fused, separate):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("tie", [True, False])
def test_transformer_loss_is_the_loss_of_its_logits_bit_for_bit(rng, tie):
    config = TransformerConfig(src_vocab_size=40, tgt_vocab_size=40, d_model=16, n_heads=2, d_ff=32, n_layers=2,
                               dropout=0.1, tie_embeddings=tie)
    src, tgt_in, tgt_out = (rng.integers(1, 40, (3, n)) for n in (7, 6, 6))
    src[2, 5:], tgt_out[1, 4:] = 0, 0                                  # padding in both
    results = []
    for fused in (True, False):
        model = Transformer(config)
        set_dropout_seed(5)                                            # the same dropout masks for both
        if fused:
            loss = model.loss(src, tgt_in, tgt_out, label_smoothing=0.1)
        else:
            loss = F.cross_entropy(model(src, tgt_in).reshape(-1, 40), tgt_out.reshape(-1), 0.1, ignore_index=0)
        loss.backward()
        results.append([loss.data] + [p.grad for p in model.parameters()])
    assert len(results[0]) > 20
    for got, expected in zip(*results):
        np.testing.assert_array_equal(got, expected)


def test_no_array_of_the_logits_size_survives_forward(rng):
    x, w = leaf(rng, (6, 5, 4), "float32"), leaf(rng, (4, 50), "float32")
    targets = rng.integers(0, 50, (6, 5))
    loss = F.linear_cross_entropy(x, w, targets)
    function = loss.creator
    assert function.loss.saved_arrays is None                          # the (N, V) array was let go
    kept = [a for a in function.saved_arrays if a is not None]
    assert [a.shape for a in kept] == [(6, 5, 4), (4, 50)]             # gX and gW: nothing (30, 50) is kept


def test_upstream_gradient_scales_and_a_second_walk_adds(rng):
    x, w = leaf(rng, (2, 3, 4)), leaf(rng, (4, 6))
    F.linear_cross_entropy(x, w, TARGETS, label_smoothing=0.1, ignore_index=0).backward()
    once = x.grad.copy(), w.grad.copy()
    x.grad = w.grad = None
    loss = F.linear_cross_entropy(x, w, TARGETS, label_smoothing=0.1, ignore_index=0) * 3.0
    loss.backward(retain_graph=True)
    loss.backward()                                                    # the graph holds no overwritten array
    np.testing.assert_allclose(x.grad, 6 * once[0], rtol=1e-12)
    np.testing.assert_allclose(w.grad, 6 * once[1], rtol=1e-12)


def test_under_no_grad_the_loss_alone(rng):
    x, w = leaf(rng, (2, 3, 4)), leaf(rng, (4, 6))
    expected = F.cross_entropy(F.linear(x, w), TARGETS, 0.1, 0).item()
    with mt.no_grad():
        loss = F.linear_cross_entropy(x, w, TARGETS, label_smoothing=0.1, ignore_index=0)
    assert loss.item() == expected and not loss.requires_grad
    function = F.LinearCrossEntropy(TARGETS.reshape(-1), 0.1, 0, needs=None)
    function.forward(x.data, w.data)
    with pytest.raises(RuntimeError, match="without its gradient"):
        function.backward(np.ones(()))


def test_only_the_gradients_asked_for_are_computed(rng):
    x, w = mt.Tensor(rng.standard_normal((2, 3, 4))), leaf(rng, (4, 6))    # x needs no gradient
    loss = F.linear_cross_entropy(x, w, TARGETS)
    assert loss.creator.saved_arrays[0] is None and loss.creator.saved_arrays[1] is not None
    loss.backward()
    assert x.grad is None and w.grad.shape == (4, 6)


def test_a_batch_of_padding_only_gives_zero_loss_and_zero_gradient(rng):
    x, w = leaf(rng, (2, 3, 4)), leaf(rng, (4, 6))
    loss = F.linear_cross_entropy(x, w, np.zeros((2, 3), int), ignore_index=0)
    loss.backward()
    assert loss.item() == 0 and not x.grad.any() and not w.grad.any()


@pytest.mark.parametrize("call, message", [
    (lambda x, w: F.linear_cross_entropy(x, w, np.zeros((3, 2), int)), r"targets have shape \(3, 2\) but x \(2, 3, 4\)"),
    (lambda x, w: F.linear_cross_entropy(x, w, np.full((2, 3), 6)), r"target id 6 is outside the vocabulary \[0, 6\)"),
    (lambda x, w: F.linear_cross_entropy(x, w.T, TARGETS), r"weight \(6, 4\)"),
    (lambda x, w: F.linear_cross_entropy(x, w, TARGETS, label_smoothing=1.0), "label_smoothing must be in"),
    (lambda x, w: F.linear_cross_entropy(x, w, TARGETS.astype(float)), "integer class ids"),
    (lambda x, w: F.linear_cross_entropy(x, w, TARGETS, bias=np.zeros(5)), r"bias has shape \(5,\)"),
])
def test_bad_input_is_named(rng, call, message):
    with pytest.raises((ValueError, TypeError, IndexError), match=message):
        call(leaf(rng, (2, 3, 4)), leaf(rng, (4, 6)))


# -- deliberately wrong derivatives must fail the check -----------------------------------------------
class BiasGradientAveraged(F.LinearCrossEntropy):
    def forward(self, x, weight, bias=None):
        loss = super().forward(x, weight, bias)
        gx, gw, gb = self.saved_arrays
        self.save_for_backward(gx, gw, gb / x.reshape(-1, weight.shape[0]).shape[0])   # mean over rows, not the sum
        return loss


class UpstreamGradientIgnored(F.LinearCrossEntropy):
    def backward(self, gy):
        return self.saved_arrays


class WeightGradientOfTheSoftmaxOnly(F.LinearCrossEntropy):
    def forward(self, x, weight, bias=None):          # gW from softmax/n alone: the target's −q forgotten
        loss = super().forward(x, weight, bias)
        x2d = x.reshape(-1, weight.shape[0])
        logits = x2d @ weight + bias
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        gx, _, gb = self.saved_arrays
        self.save_for_backward(gx, x2d.T @ (p / self.loss.n_valid), gb)
        return loss


@pytest.mark.parametrize("broken", [BiasGradientAveraged, UpstreamGradientIgnored, WeightGradientOfTheSoftmaxOnly])
def test_broken_backward_fails_gradcheck(rng, broken):
    inputs = [leaf(rng, (2, 3, 4)), leaf(rng, (4, 6)), leaf(rng, (6,))]
    assert mt.gradcheck(lambda x, w, b: F.LinearCrossEntropy(TARGETS.reshape(-1), 0.1, 0)(x, w, b), inputs)
    with pytest.raises(mt.GradcheckError, match=WRONG):
        mt.gradcheck(lambda x, w, b: broken(TARGETS.reshape(-1), 0.1, 0)(x, w, b), inputs)
