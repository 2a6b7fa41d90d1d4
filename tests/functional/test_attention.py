"""Scaled dot-product attention (eq. 1, §3.2.1) and the masks of §3.2.3."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import minitransformer as mt
from minitransformer.functional.attention import ScaledDotProductAttention, scaled_dot_product_attention
from minitransformer.functional.dropout import Generator
from minitransformer.functional.masks import causal_mask, padding_mask
from minitransformer.gradcheck import GradientMismatch

B, H, T, S, D_K, D_V = 2, 3, 4, 5, 6, 7


def qkv(rng, t=T, s=S, dtype=np.float64):
    q = mt.Tensor(rng.standard_normal((B, H, t, D_K)).astype(dtype), requires_grad=True)
    k = mt.Tensor(rng.standard_normal((B, H, s, D_K)).astype(dtype), requires_grad=True)
    v = mt.Tensor(rng.standard_normal((B, H, s, D_V)).astype(dtype), requires_grad=True)
    return q, k, v


def reference(q, k, v, mask=None):
    """eq. 1 spelled out in NumPy, one (batch, head) at a time; masked rows with no key give zeros."""
    q, k, v = q.data, k.data, v.data
    scores = q @ k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    allowed = np.ones(scores.shape, bool) if mask is None else np.broadcast_to(mask, scores.shape)
    out = np.zeros(q.shape[:-1] + (v.shape[-1],))
    for index in np.ndindex(*scores.shape[:-1]):
        keys = allowed[index]
        if keys.any():
            row = np.exp(scores[index][keys] - scores[index][keys].max())
            out[index] = (row / row.sum()) @ v[index[:-1]][keys]
    return out


def source_ids():
    ids = np.array([[5, 6, 7, 0, 0], [8, 9, 10, 11, 12]])   # row 0 padded after 3 tokens
    return ids


def fully_masked_row_mask():
    mask = np.ones((B, 1, T, S), bool)
    mask[0, 0, 2, :] = False        # batch 0, query 2: nothing to attend to
    mask[1, 0, :, 3:] = False
    return mask


MASKS = {
    "none": lambda: None,
    "padding": lambda: padding_mask(source_ids(), pad_id=0),                          # (B, 1, 1, S)
    "causal": lambda: causal_mask(T)[..., :T],                                        # (1, 1, T, T) with S = T
    "padding_and_causal": lambda: padding_mask(source_ids()[:, :T], 0) & causal_mask(T),
    "fully_masked_row": fully_masked_row_mask,
}


def key_length(name):
    return T if "causal" in name else S


@pytest.mark.parametrize("name", sorted(MASKS))
def test_forward_matches_the_equation(rng, name):
    q, k, v = qkv(rng, s=key_length(name))
    mask = MASKS[name]()
    out = scaled_dot_product_attention(q, k, v, mask=mask)
    assert out.shape == (B, H, T, D_V)
    np.testing.assert_allclose(out.data, reference(q, k, v, mask), atol=1e-12)


@pytest.mark.parametrize("name", sorted(MASKS))
def test_gradcheck_with_each_kind_of_mask(rng, name):
    q, k, v = qkv(rng, s=key_length(name))
    mask = MASKS[name]()
    assert mt.gradcheck(lambda q, k, v: scaled_dot_product_attention(q, k, v, mask=mask), [q, k, v])


def test_gradcheck_when_keys_and_values_are_shared_across_heads(rng):
    q, _, _ = qkv(rng)
    k = mt.Tensor(rng.standard_normal((B, 1, S, D_K)), requires_grad=True)   # broadcast over heads
    v = mt.Tensor(rng.standard_normal((B, 1, S, D_V)), requires_grad=True)
    assert mt.gradcheck(lambda q, k, v: scaled_dot_product_attention(q, k, v), [q, k, v])


def test_gradcheck_with_attention_dropout(rng):
    q, k, v = qkv(rng)

    def fn(q, k, v):   # a fresh generator per call: every perturbed forward drops the same weights
        return scaled_dot_product_attention(q, k, v, dropout_p=0.3, training=True, generator=Generator(1))

    assert mt.gradcheck(fn, [q, k, v])
    dropped = fn(q, k, v).data
    assert not np.allclose(dropped, scaled_dot_product_attention(q, k, v).data)


def test_dropout_is_off_unless_training(rng):
    q, k, v = qkv(rng)
    plain = scaled_dot_product_attention(q, k, v).data
    evaluated = scaled_dot_product_attention(q, k, v, dropout_p=0.5, training=False).data
    np.testing.assert_array_equal(plain, evaluated)


def test_fully_masked_row_gives_zeros_and_leaks_no_gradient(rng):
    q, k, v = qkv(rng)
    mask = fully_masked_row_mask()
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # no "invalid value" from 0/0 or inf − inf
        with np.errstate(all="raise"):
            out, weights = scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
            assert np.isfinite(out.data).all()
            np.testing.assert_array_equal(out.data[0, :, 2], 0.0)
            np.testing.assert_array_equal(weights.data[0, :, 2], 0.0)
            # the gradient of that row's output alone reaches nothing
            upstream = np.zeros(out.shape)
            upstream[0, :, 2] = rng.standard_normal((H, D_V))
            out.backward(upstream)
    for tensor in (q, k, v):
        assert np.isfinite(tensor.grad).all()
        np.testing.assert_array_equal(tensor.grad, 0.0)


def test_masked_keys_get_no_gradient_and_no_weight(rng):
    q, k, v = qkv(rng)
    mask = padding_mask(source_ids(), pad_id=0)   # row 0: keys 3 and 4 are padding
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
    out.backward(rng.standard_normal(out.shape))
    np.testing.assert_array_equal(weights.data[0, :, :, 3:], 0.0)
    np.testing.assert_array_equal(k.grad[0, :, 3:], 0.0)
    np.testing.assert_array_equal(v.grad[0, :, 3:], 0.0)
    assert np.abs(k.grad[1, :, 3:]).sum() > 0
    np.testing.assert_allclose(weights.data.sum(-1), 1.0, rtol=1e-12)
    assert not weights.requires_grad


def test_changing_a_masked_value_changes_nothing(rng):
    q, k, v = qkv(rng)
    mask = padding_mask(source_ids(), pad_id=0)
    before = scaled_dot_product_attention(q, k, v, mask=mask).data
    k.data[0, :, 3:] += 100.0
    v.data[0, :, 3:] = -7.0
    np.testing.assert_array_equal(scaled_dot_product_attention(q, k, v, mask=mask).data, before)


def test_float32_stays_float32_and_extreme_scores_stay_finite(rng):
    q, k, v = qkv(rng, dtype=np.float32)
    q.data *= 1e3                               # scores of order 1e6: softmax must not overflow
    out = scaled_dot_product_attention(q, k, v, mask=fully_masked_row_mask())
    assert out.dtype == np.float32
    assert np.isfinite(out.data).all()
    out.backward(np.ones(out.shape, np.float32))
    assert q.grad.dtype == np.float32 and np.isfinite(q.grad).all()


# ----- mutation tests: a broken backward must fail the check -------------------------------------

class ForgetsScaleInQueryGradient(ScaledDotProductAttention):
    def backward(self, g_out):
        g_q, g_k, g_v = super().backward(g_out)
        return g_q / self.scale, g_k, g_v            # gQ = gS K, the 1/√d_k forgotten


class ZeroKeyGradient(ScaledDotProductAttention):
    def backward(self, g_out):
        g_q, g_k, g_v = super().backward(g_out)
        return g_q, np.zeros_like(g_k), g_v


class ForgetsSoftmaxCentering(ScaledDotProductAttention):
    """gS = A ⊙ gA: the − Σ gA⊙A term of the softmax backward dropped."""

    def backward(self, g_out):
        q, k, v, weights, _ = self.saved_arrays
        g_scores = (g_out @ v.swapaxes(-1, -2)) * weights * self.scale
        return g_scores @ k, g_scores.swapaxes(-1, -2) @ q, weights.swapaxes(-1, -2) @ g_out


@pytest.mark.parametrize("broken", [ForgetsScaleInQueryGradient, ZeroKeyGradient, ForgetsSoftmaxCentering])
def test_a_broken_backward_fails_gradcheck(rng, broken):
    q, k, v = qkv(rng)
    mask = padding_mask(source_ids(), 0)
    with pytest.raises(GradientMismatch, match=r"gradient of input \d .* is wrong at"):
        mt.gradcheck(lambda q, k, v: broken(mask)(q, k, v), [q, k, v])
    assert mt.gradcheck(lambda q, k, v: ScaledDotProductAttention(mask)(q, k, v), [q, k, v])


# ----- bad input names the problem ----------------------------------------------------------------

def test_bad_shapes_and_masks_raise_clear_errors(rng):
    q, k, v = qkv(rng)
    with pytest.raises(ValueError, match="same last size d_k"):
        scaled_dot_product_attention(q, mt.Tensor(np.zeros((B, H, S, D_K + 1))), v)
    with pytest.raises(ValueError, match="same length S"):
        scaled_dot_product_attention(q, k, mt.Tensor(np.zeros((B, H, S + 1, D_V))))
    with pytest.raises(TypeError, match="boolean"):
        scaled_dot_product_attention(q, k, v, mask=np.ones((B, 1, 1, S)))
    with pytest.raises(ValueError, match=r"does not broadcast.*\(B, h, T, S\)"):
        scaled_dot_product_attention(q, k, v, mask=np.ones((B, 1, 1, S + 1), bool))


@pytest.mark.parametrize("attend", [scaled_dot_product_attention, mt.functional.flash_attention])
def test_attention_over_no_keys_is_refused_naming_the_shape(rng, attend):
    q = mt.Tensor(rng.standard_normal((B, H, T, D_K)))
    empty = mt.Tensor(np.zeros((B, H, 0, D_K)))
    with pytest.raises(ValueError, match=rf"no keys to attend to: k has shape \({B}, {H}, 0, {D_K}\)"):
        attend(q, empty, empty)
    with pytest.raises(ValueError, match=r"no keys to attend to"):
        attend(empty, empty, empty)                              # an empty sequence attending to itself


# ----- masks --------------------------------------------------------------------------------------

def test_padding_mask_marks_real_tokens():
    mask = padding_mask(source_ids(), pad_id=0)
    assert mask.shape == (B, 1, 1, S) and mask.dtype == bool
    assert mask[0, 0, 0].tolist() == [True, True, True, False, False]
    assert mask[1].all()
    assert padding_mask(mt.Tensor(source_ids()), 0).shape == (B, 1, 1, S)
    with pytest.raises(ValueError, match=r"\(B, S\)"):
        padding_mask(np.array([1, 2, 0]), 0)


def test_causal_mask_lets_position_i_see_only_positions_up_to_i():
    mask = causal_mask(4)
    assert mask.shape == (1, 1, 4, 4) and mask.dtype == bool
    for i in range(4):
        assert mask[0, 0, i].tolist() == [j <= i for j in range(4)]
    combined = padding_mask(source_ids()[:, :4], 0) & mask
    assert combined.shape == (B, 1, 4, 4)
    assert not combined[0, 0, 3, 3]                           # a padded key stays hidden
