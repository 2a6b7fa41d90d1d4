"""Exercise 6.1 — masking the attention scores (chapters/06-attention.md).

Its public tests, its grading cases and its catalogued mistakes (spec.py).
"""
from __future__ import annotations

import numpy as np

import minitransformer as mt
import minitransformer.functional as F

from ..spec import ExerciseSpec, case, mistake


# -- the public tests (pytest -m grades_6_1) --------------------------------------------------------------------------
def _qkv(rng, batch=2, heads=2, queries=4, keys=5, d_k=3):
    return (mt.Tensor(rng.standard_normal((batch, heads, queries, d_k))),
            mt.Tensor(rng.standard_normal((batch, heads, keys, d_k))),
            mt.Tensor(rng.standard_normal((batch, heads, keys, d_k))))


def test_a_padding_mask_equals_attending_to_the_real_keys_only(rng):
    q, k, v = _qkv(rng)
    lengths = [5, 3]
    mask = (np.arange(5)[None, :] < np.array(lengths)[:, None])[:, None, None, :]   # (B, 1, 1, S)
    out, weights = F.scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
    for b, n in enumerate(lengths):
        alone = F.scaled_dot_product_attention(q[b:b + 1], k[b:b + 1, :, :n], v[b:b + 1, :, :n])
        np.testing.assert_allclose(out.data[b:b + 1], alone.data, rtol=1e-12, atol=1e-12)
        assert np.all(weights.data[b, :, :, n:] == 0)   # exactly zero, not merely small


def test_a_lower_triangular_mask_hides_the_future(rng):
    q, k, v = _qkv(rng, queries=4, keys=4)
    lower = np.tril(np.ones((4, 4), dtype=bool))[None, None]
    out = F.scaled_dot_product_attention(q, k, v, mask=lower)
    for t in range(4):
        prefix = F.scaled_dot_product_attention(q[:, :, t:t + 1], k[:, :, :t + 1], v[:, :, :t + 1])
        np.testing.assert_allclose(out.data[:, :, t:t + 1], prefix.data, rtol=1e-12, atol=1e-12)


def test_a_query_with_every_key_masked_gets_zeros(rng):
    q, k, v = _qkv(rng, batch=1, heads=1, queries=2, keys=3)
    mask = np.array([[True, False, True], [False, False, False]])[None, None]
    out, weights = F.scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
    assert np.all(np.isfinite(out.data))
    np.testing.assert_array_equal(out.data[0, 0, 1], 0.0)
    np.testing.assert_array_equal(weights.data[0, 0, 0, 1], 0.0)


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def _mask(rng, kind: str, batch: int, queries: int, keys: int, lengths=None):
    if kind == "padding":
        lengths = lengths or [int(n) for n in rng.integers(1, keys + 1, batch)]
        return (np.arange(keys)[None, :] < np.asarray(lengths)[:, None])[:, None, None, :]
    if kind == "causal":
        return np.tril(np.ones((queries, keys), dtype=bool), keys - queries)[None, None]
    if kind == "random":
        mask = rng.random((batch, 1, queries, keys)) < 0.6
        mask[..., 0] |= rng.random((batch, 1, queries)) < 0.7      # most rows keep a key ...
        mask[rng.integers(batch), 0, rng.integers(queries)] = False  # ... and one keeps none
        return mask
    if kind == "empty-row":
        mask = np.ones((1, 1, queries, keys), dtype=bool)
        mask[..., 0, 1::2] = False
        mask[..., -1, :] = False
        return mask
    raise ValueError(f"unknown mask {kind!r}")


def probe_attention(rng, batch, heads, queries, keys, d_k, d_v=None, mask=None, lengths=None) -> dict:
    """Masked attention's output and weights (the masking is the student's)."""
    d_v = d_v or d_k
    q = mt.Tensor(rng.standard_normal((batch, heads, queries, d_k)))
    k = mt.Tensor(rng.standard_normal((batch, heads, keys, d_k)))
    v = mt.Tensor(rng.standard_normal((batch, heads, keys, d_v)))
    where = None if mask is None else _mask(rng, mask, batch, queries, keys, lengths)
    out, weights = F.scaled_dot_product_attention(q, k, v, mask=where, return_weights=True)
    return {"out": np.asarray(out.data), "weights": np.asarray(weights.data)}


PUBLIC = [case("a padding mask", "attention", batch=2, heads=2, queries=4, keys=5, d_k=3, mask="padding",
               lengths=[5, 3]),
          case("a lower-triangular mask", "attention", batch=2, heads=2, queries=4, keys=4, d_k=3,
               mask="causal"),
          case("a query with every key masked", "attention", batch=1, heads=1, queries=3, keys=4, d_k=3,
               mask="empty-row")]


def hidden_case(r, n: int, count: int) -> dict:
    queries, keys = (int(x) for x in r.integers(1, 6, 2))
    return case("random", "attention", batch=int(r.integers(1, 3)), heads=int(r.integers(1, 3)),
                queries=queries, keys=keys, d_k=int(r.integers(1, 4)),
                mask=["padding", "random", "causal"][n % 3])


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("mask inverted", "the mask is inverted: True means the key MAY be attended to, so the scores to hide are "
            "where the mask is False (~mask)", ("~mask", "mask")),
    mistake("mask forgotten", "the mask is not applied: the scores of masked keys must become −∞ before the softmax",
            ("xp.copyto(scores, -xp.inf, where=~mask)", "pass")),
    mistake("a large negative number, not −∞", "with a finite number such as −1e9, a query whose every key is masked "
            "attends to all of them equally instead of getting zeros: use −∞", ("-xp.inf", "-1e9")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("6.1", public=PUBLIC, hidden=hidden_case, probes=[probe_attention], mistakes=MISTAKES)
