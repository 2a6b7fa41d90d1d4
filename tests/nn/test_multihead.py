"""Multi-head attention (§3.2.2): heads, projections, masks, the key/value cache."""
from __future__ import annotations

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F
import minitransformer.nn as nn
from minitransformer.functional.masks import causal_mask, padding_mask
from minitransformer.functional.multi_head import merge_heads, split_heads
from minitransformer.nn.cache import AttentionCache, DecoderCache

B, T, S, D, H = 2, 4, 5, 8, 2


def make_attention(seed=0, dropout_p=0.0):
    nn.init.set_seed(seed)
    return nn.MultiHeadAttention(D, H, dropout_p=dropout_p).to(np.float64)


def tensor(rng, *shape, grad=True):
    return mt.Tensor(rng.standard_normal(shape), requires_grad=grad)


def test_split_and_merge_heads_are_inverse_and_give_each_head_its_slice(rng):
    x = tensor(rng, B, T, D)
    heads = split_heads(x, H)
    assert heads.shape == (B, H, T, D // H)
    for i in range(H):
        np.testing.assert_array_equal(heads.data[:, i], x.data[..., i * (D // H):(i + 1) * (D // H)])
    np.testing.assert_array_equal(merge_heads(heads).data, x.data)


def softmax_rows(scores):
    e = np.exp(scores - scores.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def test_matches_concat_of_heads_times_w_o(rng):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W^Q_i, K W^K_i, V W^V_i)."""
    attention = make_attention()
    x, memory = tensor(rng, B, T, D), tensor(rng, B, S, D)
    d_k = D // H
    heads = []
    for i in range(H):
        cols = slice(i * d_k, (i + 1) * d_k)
        q = x.data @ attention.w_q.weight.data[:, cols] + attention.w_q.bias.data[cols]
        k = memory.data @ attention.w_k.weight.data[:, cols] + attention.w_k.bias.data[cols]
        v = memory.data @ attention.w_v.weight.data[:, cols] + attention.w_v.bias.data[cols]
        heads.append(softmax_rows(q @ k.swapaxes(-1, -2) / np.sqrt(d_k)) @ v)
    expected = np.concatenate(heads, axis=-1) @ attention.w_o.weight.data + attention.w_o.bias.data
    np.testing.assert_allclose(attention(x, memory).data, expected, atol=1e-12)


def test_gradcheck_self_attention_with_causal_mask(rng):
    attention = make_attention()
    x = tensor(rng, B, T, D)
    mask = causal_mask(T)
    assert mt.gradcheck(lambda x, w_q, b_o: attention(x, None, mask), [x, attention.w_q.weight, attention.w_o.bias])


def test_gradcheck_cross_attention_with_padding_mask(rng):
    attention = make_attention()
    x, memory = tensor(rng, B, T, D), tensor(rng, B, S, D)
    mask = padding_mask(np.array([[3, 4, 5, 0, 0], [3, 4, 5, 6, 7]]), 0)
    assert mt.gradcheck(lambda x, memory, w_k, w_v: attention(x, memory, mask),
                        [x, memory, attention.w_k.weight, attention.w_v.weight])


def test_self_attention_without_positions_is_permutation_equivariant(rng):
    """Permute the tokens and the outputs are permuted the same way: attention cannot see order (§3.5)."""
    attention = make_attention()
    x = tensor(rng, B, T, D, grad=False)
    permutation = np.array([2, 0, 3, 1])
    out = attention(x, None).data
    out_of_permuted = attention(mt.Tensor(x.data[:, permutation]), None).data
    np.testing.assert_allclose(out_of_permuted, out[:, permutation], atol=1e-12)


def test_the_weights_are_kept_per_head_when_asked(rng):
    attention = make_attention()
    x, memory = tensor(rng, B, T, D), tensor(rng, B, S, D)
    attention(x, memory)
    assert attention.attention_weights is None          # not kept unless asked: training holds no extra arrays
    attention.keep_weights = True
    out = attention(x, memory)
    weights = attention.attention_weights
    assert out.shape == (B, T, D) and weights.shape == (B, H, T, S) and not weights.requires_grad
    np.testing.assert_allclose(weights.data.sum(-1), 1.0, rtol=1e-12)


def test_self_attention_cache_step_by_step_equals_the_causal_full_pass(rng):
    attention = make_attention()
    x = tensor(rng, B, T, D, grad=False)
    full = attention(x, None, causal_mask(T)).data
    cache = AttentionCache(static=False)
    with mt.no_grad():
        steps = [attention(x[:, t:t + 1], None, None, cache=cache).data for t in range(T)]
        assert cache.length == T
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-12)


def test_cross_attention_cache_projects_the_memory_once(rng):
    attention = make_attention()
    x, memory = tensor(rng, B, T, D, grad=False), tensor(rng, B, S, D, grad=False)
    full = attention(x, memory).data
    cache = AttentionCache(static=True)
    with mt.no_grad():
        first = attention(x[:, :1], memory, cache=cache).data
        keys = cache.keys
        # later steps never project the memory again: a different (even wrong) memory is ignored
        second = attention(x[:, 1:2], mt.Tensor(np.zeros((B, S, D))), cache=cache).data
    assert cache.keys is keys and cache.length == S
    np.testing.assert_allclose(np.concatenate([first, second], axis=1), full[:, :2], atol=1e-12)


def test_cache_reorder_keeps_the_chosen_rows():
    cache = DecoderCache(n_layers=2)
    keys = np.arange(3 * 2 * 4 * 1, dtype=float).reshape(3, 2, 4, 1)
    for layer in cache.layers:
        layer.self_attn.keys, layer.self_attn.values = mt.Tensor(keys), mt.Tensor(-keys)
        layer.cross_attn.keys, layer.cross_attn.values = mt.Tensor(keys[:, :, :2]), mt.Tensor(keys[:, :, :2])
    cache.reorder(np.array([2, 2, 0]))
    for layer in cache.layers:
        np.testing.assert_array_equal(layer.self_attn.keys.data, keys[[2, 2, 0]])
        np.testing.assert_array_equal(layer.self_attn.values.data, -keys[[2, 2, 0]])
        np.testing.assert_array_equal(layer.cross_attn.keys.data, keys[[2, 2, 0], :, :2])
    with pytest.raises(ValueError, match="1-D integer"):
        cache.reorder(np.array([[0]]))


def test_attention_dropout_acts_only_in_training(rng):
    attention = make_attention(dropout_p=0.5)
    x = tensor(rng, B, T, D, grad=False)
    attention.eval()
    evaluated = attention(x, None).data
    attention.train()
    assert not np.allclose(attention(x, None).data, evaluated)
    attention.dropout_p = 0.0
    np.testing.assert_array_equal(attention(x, None).data, evaluated)   # eval = training without dropout


def test_attention_dropout_draws_from_the_layers_own_generator(rng):
    """Two layers built alike drop the same weights, and the global generator is never touched."""
    x = tensor(rng, B, T, D, grad=False)
    first, second = make_attention(dropout_p=0.5), make_attention(dropout_p=0.5)
    default = F.default_generator()
    before = default.state_dict()
    np.testing.assert_array_equal(first(x, None).data, second(x, None).data)
    assert default.state_dict() == before
    assert dict(first.named_generators()) == {"generator": first.generator}
    state = first.rng_state_dict()
    again = first(x, None).data
    first.load_rng_state_dict(state)
    np.testing.assert_array_equal(first(x, None).data, again)            # the state puts the stream back


def test_bad_sizes_are_named():
    with pytest.raises(ValueError, match="not divisible"):
        nn.MultiHeadAttention(10, 3)
    attention = make_attention()
    with pytest.raises(ValueError, match=r"\(B, T, d_model=8\)"):
        attention(mt.Tensor(np.zeros((B, T, D + 1))))
    with pytest.raises(ValueError, match="key_value must be"):
        attention(mt.Tensor(np.zeros((B, T, D))), mt.Tensor(np.zeros((B + 1, S, D))))
