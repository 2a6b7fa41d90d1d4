"""PyTorch as an independent oracle: values and gradients of composites of our
ops agree with torch in float64 (skipped when torch is not installed)."""
from __future__ import annotations

import numpy as np
import pytest

import minitransformer as mt

torch = pytest.importorskip("torch")


def both(array):
    """The same float64 values as a leaf of each library."""
    return mt.Tensor(array.copy(), requires_grad=True), torch.tensor(array, requires_grad=True)


def ours(a, b, c, ids, mask):
    h = (a @ b).tanh() * c - mt.maximum(c, 0.1)                      # (2, 3, 4)
    h = mt.masked_fill(h, mask, 0.0).exp()
    softmax = h / h.sum(axis=-1, keepdims=True)
    picked = softmax[:, ids]                                           # (2, 5, 4), repeated rows
    stacked = mt.concatenate([picked, mt.sqrt(picked + 1.0)], axis=-1)  # (2, 5, 8)
    return (stacked.max(axis=-1) - stacked.mean(axis=(0, 2), keepdims=True)[..., 0]).log().swapaxes(0, 1) ** 2


def theirs(a, b, c, ids, mask):
    h = torch.tanh(a @ b) * c - torch.clamp(c, min=0.1)
    h = h.masked_fill(torch.from_numpy(mask), 0.0).exp()
    softmax = h / h.sum(dim=-1, keepdim=True)
    picked = softmax[:, torch.from_numpy(ids)]
    stacked = torch.cat([picked, torch.sqrt(picked + 1.0)], dim=-1)
    return (stacked.amax(dim=-1) - stacked.mean(dim=(0, 2), keepdim=True)[..., 0]).log().transpose(0, 1) ** 2


def test_a_composite_matches_torch_in_values_and_gradients(rng):
    a, ta = both(rng.standard_normal((2, 3, 5)))
    b, tb = both(rng.standard_normal((5, 4)))
    c, tc = both(rng.uniform(0.5, 1.5, (3, 4)))  # clamp and maximum agree away from the 0.1 kink
    ids = np.array([0, 2, 2, 1, 0])
    mask = rng.random((2, 1, 4)) > 0.7
    y, ty = ours(a, b, c, ids, mask), theirs(ta, tb, tc, ids, mask)
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-10)
    upstream = rng.standard_normal(y.shape)
    y.backward(upstream)
    ty.backward(torch.from_numpy(upstream))
    for mine, reference in [(a, ta), (b, tb), (c, tc)]:
        np.testing.assert_allclose(mine.grad, reference.grad.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("a_shape,b_shape", [((2, 1, 3, 4), (5, 4, 2)), ((4,), (3, 4, 2)), ((2, 3, 4), (4,))],
                         ids=str)
def test_matmul_gradients_match_torch(a_shape, b_shape, rng):
    a, ta = both(rng.standard_normal(a_shape))
    b, tb = both(rng.standard_normal(b_shape))
    y, ty = a @ b, ta @ tb
    upstream = rng.standard_normal(y.shape)
    y.backward(upstream)
    ty.backward(torch.from_numpy(upstream))
    np.testing.assert_allclose(a.grad, ta.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(b.grad, tb.grad.numpy(), rtol=1e-10)
