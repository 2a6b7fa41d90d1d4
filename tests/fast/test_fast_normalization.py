"""fast/normalization.py against functional/normalization.py: the GEMV layer norm gives the plain one's output
and gradients in float64 on odd shapes and layouts, both gradcheck, and a broken backward of either fails."""
from __future__ import annotations

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F
from minitransformer import nn
from minitransformer.fast.normalization import LayerNormGEMV, layer_norm as fast_layer_norm

WRONG = r"gradient of input \d+ .* is wrong at \d+ of \d+ positions"
SHAPES = [(3, 5), (2, 3, 5), (1, 1), (4, 1), (1, 7), (2, 1, 1, 6), (6,)]


def _inputs(rng, shape, layout="contiguous"):
    x = rng.standard_normal(shape) * 3 + 1
    if layout == "transposed" and len(shape) > 1:         # the same values, not C-contiguous
        x = np.ascontiguousarray(np.swapaxes(x, 0, -1)).swapaxes(0, -1)
    elif layout == "strided":                              # every other entry of a wider array
        x = np.repeat(x, 2, axis=-1)[..., ::2]
    dim = shape[-1]
    return [mt.Tensor(x, requires_grad=True), mt.Tensor(rng.standard_normal(dim), requires_grad=True),
            mt.Tensor(rng.standard_normal(dim), requires_grad=True)]


def _run(layer_norm, inputs, gy):
    copies = [mt.Tensor(t.data.copy() if t is not inputs[0] else t.data, requires_grad=True) for t in inputs]
    out = layer_norm(*copies)
    (out * mt.Tensor(gy)).sum().backward()
    return [out.numpy()] + [np.asarray(t.grad) for t in copies]


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
@pytest.mark.parametrize("shape", SHAPES)
def test_the_gemv_form_is_the_plain_form_in_float64(rng, shape, layout):
    inputs = _inputs(rng, shape, layout)
    gy = rng.standard_normal(shape)
    for plain, fast in zip(_run(F.layer_norm, inputs, gy), _run(fast_layer_norm, inputs, gy)):
        assert fast.shape == plain.shape
        np.testing.assert_allclose(fast, plain, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layer_norm", [F.layer_norm, fast_layer_norm], ids=["plain", "fast"])
@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 1), (4, 1), (1, 6)])
def test_both_forms_gradcheck(rng, layer_norm, shape):
    assert mt.gradcheck(layer_norm, _inputs(rng, shape, "transposed"))


def test_both_forms_refuse_the_same_bad_input():
    for layer_norm in (F.layer_norm, fast_layer_norm):
        with pytest.raises(ValueError, match=r"layer_norm: weight has shape \(4,\)"):
            layer_norm(mt.Tensor(np.ones((2, 3))), mt.Tensor(np.ones(4)))


class GEMVWithoutScaleTerm(LayerNormGEMV):
    """Forgets the path through σ: gx = (g − mean(g))/σ."""

    def backward(self, gy):
        gx, gw, gb = super().backward(gy)
        x_hat, inv_std, weight = self.saved_arrays
        gy = gy.reshape(x_hat.shape)
        correction = x_hat * ((gy * x_hat) @ weight)[:, None] / weight.shape[0] * inv_std
        return gx + correction.reshape(gx.shape), gw, gb


class PlainWithoutScaleTerm(F.LayerNormFunction):
    def backward(self, gy):
        gx, gw, gb = super().backward(gy)
        x_hat, inv_std, weight = self.saved_arrays
        return gx + inv_std * x_hat * (gy * weight * x_hat).mean(axis=-1, keepdims=True), gw, gb


@pytest.mark.parametrize("broken", [GEMVWithoutScaleTerm, PlainWithoutScaleTerm])
def test_a_backward_without_the_path_through_sigma_fails_in_either_form(rng, broken):
    with pytest.raises(mt.GradcheckError, match=WRONG):
        mt.gradcheck(lambda x, w, b: broken(1e-5)(x, w, b), _inputs(rng, (2, 3, 5)))


def test_the_command_lines_layer_norm_runs_the_gemv_form():
    layer = nn.LayerNorm(4).to(np.float64)
    out = layer(mt.Tensor(np.arange(8.0).reshape(2, 4), requires_grad=True))
    assert isinstance(out.creator, LayerNormGEMV)
