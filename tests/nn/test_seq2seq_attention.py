"""Attention of a recurrent decoder over the encoder's annotations (chapter 6): Bahdanau's additive score
and Luong's dot and general scores, with masks; float64 gradchecks and the definitions."""
from __future__ import annotations

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F
import minitransformer.nn as nn
from minitransformer.nn.seq2seq_attention import make_attention, masked_softmax

KEY_MASK = np.array([[True, True, True, False, False], [True, True, True, True, True]])   # (B, S)
QUERY_MASK = np.ones((2, 3, 5), bool)
QUERY_MASK[0, 1] = False                                   # query 1 of sentence 0 may look at nothing


def leaf(rng, *shape):
    return mt.Tensor(rng.standard_normal(shape), requires_grad=True)


def modules():
    nn.init.set_seed(0)
    return {"additive": nn.AdditiveAttention(4, 4, 6).to(np.float64), "dot": nn.DotAttention(),
            "general": nn.GeneralAttention(4, 4).to(np.float64)}


# -- the additive score -----------------------------------------------------------------------------
def test_additive_score_equals_its_definition_and_gradchecks(rng):
    q, k, v = leaf(rng, 2, 3, 4), leaf(rng, 2, 5, 4), leaf(rng, 4)
    scores = F.additive_score(q, k, v)
    expected = np.tanh(q.data[:, :, None, :] + k.data[:, None, :, :]) @ v.data     # vᵀ tanh(q_t + k_j)
    np.testing.assert_allclose(scores.data, expected, rtol=1e-13)
    assert mt.gradcheck(F.additive_score, [q, k, v])


def test_additive_score_backward_equals_the_composed_graph(rng):
    q, k, v = leaf(rng, 2, 3, 4), leaf(rng, 2, 5, 4), leaf(rng, 4)
    upstream = rng.standard_normal((2, 3, 5))
    F.additive_score(q, k, v).backward(upstream)
    fused = [t.grad for t in (q, k, v)]
    for t in (q, k, v):
        t.grad = None
    ((q.reshape(2, 3, 1, 4) + k.reshape(2, 1, 5, 4)).tanh() @ v).backward(upstream)
    for name, a, t in zip("qkv", fused, (q, k, v)):
        np.testing.assert_allclose(a, t.grad, rtol=1e-12, atol=1e-14, err_msg=name)


def test_additive_score_names_wrong_shapes(rng):
    with pytest.raises(ValueError, match=r"must share the size A of the hidden layer, got 4, 4 and 3"):
        F.additive_score(leaf(rng, 2, 3, 4), leaf(rng, 2, 5, 4), leaf(rng, 3))
    with pytest.raises(ValueError, match=r"expected queries \(B, T, A\), keys \(B, S, A\) and v \(A,\)"):
        F.additive_score(leaf(rng, 3, 4), leaf(rng, 2, 5, 4), leaf(rng, 4))
    with pytest.raises(ValueError, match=r"the same batch size, got 2 and 3"):
        F.additive_score(leaf(rng, 2, 3, 4), leaf(rng, 3, 5, 4), leaf(rng, 4))


# -- the three modules -----------------------------------------------------------------------------
@pytest.mark.parametrize("mask", [None, KEY_MASK, QUERY_MASK], ids=["no-mask", "padding", "per-query"])
@pytest.mark.parametrize("score", ["additive", "dot", "general"])
def test_attention_gradcheck(rng, score, mask):
    attention = modules()[score]
    queries, memory = leaf(rng, 2, 3, 4), leaf(rng, 2, 5, 4)
    assert mt.gradcheck(lambda q, m, *params: attention(q, m, mask)[0],
                        [queries, memory, *attention.parameters()])


@pytest.mark.parametrize("score", ["additive", "dot", "general"])
def test_the_context_is_the_weighted_sum_and_padded_keys_get_nothing(rng, score):
    attention = modules()[score]
    queries, memory = mt.Tensor(rng.standard_normal((2, 3, 4))), rng.standard_normal((2, 5, 4))
    context, weights = attention(queries, mt.Tensor(memory), KEY_MASK)
    np.testing.assert_allclose(weights.data.sum(-1), 1.0, rtol=1e-13)
    assert np.all(weights.data[0, :, 3:] == 0)                            # exactly zero, not merely small
    np.testing.assert_allclose(context.data, weights.data @ memory, rtol=1e-13)
    memory[0, 3:] = 1e3                                                   # the padding can hold anything
    changed, _ = attention(queries, mt.Tensor(memory), KEY_MASK)
    np.testing.assert_allclose(changed.data, context.data, rtol=1e-13)


def test_the_scores_are_the_papers(rng):
    found = modules()
    q, h = rng.standard_normal((1, 1, 4)), rng.standard_normal((1, 5, 4))
    softmax = lambda e: np.exp(e - e.max()) / np.exp(e - e.max()).sum()   # noqa: E731
    additive = found["additive"]
    e = np.tanh(q[0] @ additive.w_q.weight.data + h[0] @ additive.w_k.weight.data) @ additive.v.data  # vᵀtanh(Wq+Uh)
    general = found["general"]
    expected = {"additive": e, "dot": h[0] @ q[0, 0], "general": h[0] @ general.w_a.weight.data @ q[0, 0]}
    for score, attention in found.items():
        _, weights = attention(mt.Tensor(q), mt.Tensor(h))
        np.testing.assert_allclose(weights.data[0, 0], softmax(expected[score]), rtol=1e-12, err_msg=score)


def test_keys_computed_once_give_the_same_result(rng):
    for attention in modules().values():
        queries, memory = mt.Tensor(rng.standard_normal((2, 3, 4))), mt.Tensor(rng.standard_normal((2, 5, 4)))
        keys = attention.keys(memory)
        np.testing.assert_array_equal(attention(queries, memory, KEY_MASK, keys=keys)[0].data,
                                      attention(queries, memory, KEY_MASK)[0].data)


def test_a_query_with_no_key_gets_zero_weights_zero_context_and_no_gradient(rng):
    scores = leaf(rng, 2, 3, 5)
    weights = masked_softmax(scores, QUERY_MASK)
    assert np.isfinite(weights.data).all()
    np.testing.assert_array_equal(weights.data[0, 1], 0.0)
    weights.backward(rng.standard_normal((2, 3, 5)))
    np.testing.assert_array_equal(scores.grad[0, 1], 0.0)
    assert np.abs(scores.grad[0, 0]).max() > 0


def test_bad_masks_and_sizes_are_named(rng):
    queries, memory = mt.Tensor(rng.standard_normal((2, 3, 4))), mt.Tensor(rng.standard_normal((2, 5, 4)))
    with pytest.raises(ValueError, match=r"mask must be boolean, \(B, S\) = \(2, 5\) or \(B, T, S\) = \(2, 3, 5\)"):
        nn.DotAttention()(queries, memory, np.ones((2, 4), bool))
    with pytest.raises(ValueError, match=r"mask must be boolean"):
        nn.DotAttention()(queries, memory, np.ones((2, 5)))
    with pytest.raises(ValueError, match=r"the query size 3 differs from the memory size 4"):
        nn.DotAttention()(mt.Tensor(np.zeros((2, 1, 3))), memory)
    with pytest.raises(ValueError, match=r"expected queries \(B, T, d_query\) and memory \(B, S, d_memory\)"):
        nn.DotAttention()(mt.Tensor(np.zeros((2, 4))), memory)
    with pytest.raises(ValueError, match=r"unknown attention score 'concat'; choose one of additive, dot, general"):
        make_attention("concat", 4, 4)
