"""PyTorch as an independent oracle for attention and multi-head attention (skipped without torch)."""
from __future__ import annotations

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.nn as nn
from minitransformer.functional.attention import scaled_dot_product_attention
from minitransformer.functional.masks import causal_mask, padding_mask

torch = pytest.importorskip("torch")


def test_attention_forward_and_backward_match_torch(rng):
    q, k, v = (rng.standard_normal(shape) for shape in ((2, 3, 4, 8), (2, 3, 4, 8), (2, 3, 4, 5)))
    mask = padding_mask(np.array([[3, 4, 5, 0], [3, 4, 5, 6]]), 0) & causal_mask(4)   # (2, 1, 4, 4)
    upstream = rng.standard_normal((2, 3, 4, 5))

    ours = [mt.Tensor(a, requires_grad=True) for a in (q, k, v)]
    out = scaled_dot_product_attention(*ours, mask=mask)
    out.backward(upstream)

    theirs = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    reference = torch.nn.functional.scaled_dot_product_attention(*theirs, attn_mask=torch.tensor(mask))
    reference.backward(torch.tensor(upstream))

    np.testing.assert_allclose(out.data, reference.detach().numpy(), atol=1e-12)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad, b.grad.numpy(), atol=1e-12)


def test_multi_head_attention_matches_torch(rng):
    d, h = 8, 2
    nn.init.set_seed(0)
    ours = nn.MultiHeadAttention(d, h).to(np.float64)
    theirs = torch.nn.MultiheadAttention(d, h, batch_first=True, dtype=torch.float64)
    with torch.no_grad():   # torch stores W^Q, W^K, W^V stacked as (3d, d) with y = x Wᵀ; ours are (d, d), y = x W
        theirs.in_proj_weight.copy_(torch.tensor(np.concatenate(
            [ours.w_q.weight.data.T, ours.w_k.weight.data.T, ours.w_v.weight.data.T])))
        theirs.in_proj_bias.copy_(torch.tensor(np.concatenate(
            [ours.w_q.bias.data, ours.w_k.bias.data, ours.w_v.bias.data])))
        theirs.out_proj.weight.copy_(torch.tensor(ours.w_o.weight.data.T))
        theirs.out_proj.bias.copy_(torch.tensor(ours.w_o.bias.data))
    x, memory = rng.standard_normal((2, 3, d)), rng.standard_normal((2, 5, d))
    ids = np.array([[3, 4, 5, 0, 0], [3, 4, 5, 6, 7]])
    out = ours(mt.Tensor(x), mt.Tensor(memory), padding_mask(ids, 0)).data
    reference, _ = theirs(torch.tensor(x), torch.tensor(memory), torch.tensor(memory),
                          key_padding_mask=torch.tensor(ids == 0))       # torch: True = ignore
    np.testing.assert_allclose(out, reference.detach().numpy(), atol=1e-12)
