"""Exercise 13.3 — causal linear attention by prefix sums (chapters/13-long-sequences.md).

Its public tests, its grading cases and its catalogued mistakes (spec.py).
"""
from __future__ import annotations

import numpy as np

import minitransformer as mt
import minitransformer.functional as F

from ..spec import ExerciseSpec, case, mistake, parametrize, random_shape


# -- the public tests (pytest -m grades_13_3) -------------------------------------------------------------------------
@parametrize("chunk", [1, 3, 64])
def test_prefix_sums_equal_the_lower_triangle_of_the_similarities(rng, chunk):
    from minitransformer.functional.linear_attention import causal_prefix_attention

    phi_q, phi_k, v = rng.random((2, 8, 3)), rng.random((2, 8, 3)), rng.standard_normal((2, 8, 4))
    similarity = np.tril(phi_q @ phi_k.swapaxes(-1, -2))       # φ(q_i)·φ(k_j) for j ≤ i
    num, den, _ = causal_prefix_attention(phi_q, phi_k, v, chunk)
    np.testing.assert_allclose(num, similarity @ v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(den, similarity.sum(axis=-1, keepdims=True), rtol=1e-12)


def test_causal_linear_attention_does_not_see_the_future(rng):
    q, k, v = (mt.Tensor(rng.standard_normal((1, 2, 9, 3))) for _ in range(3))
    out = F.linear_attention(q, k, v, causal=True)
    k.data[:, :, 5:], v.data[:, :, 5:] = 3.0, -7.0
    np.testing.assert_array_equal(F.linear_attention(q, k, v, causal=True).data[:, :, :5], out.data[:, :, :5])


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def probe_causal_prefix(rng, lead, length: int, d_k: int, d_v: int, chunk: int) -> dict:
    """num and den of causal linear attention by prefix sums, chunk by chunk."""
    from minitransformer.functional.linear_attention import causal_prefix_attention

    shape = tuple(lead) + (length,)
    phi_q, phi_k = rng.random(shape + (d_k,)), rng.random(shape + (d_k,))
    v = rng.standard_normal(shape + (d_v,))
    num, den, _ = causal_prefix_attention(phi_q, phi_k, v, chunk)
    return {"num": np.asarray(num), "den": np.asarray(den)}


def probe_linear_attention(rng, shape) -> dict:
    """Causal linear attention end to end (its output is built from num and den)."""
    q, k, v = (mt.Tensor(rng.standard_normal(shape)) for _ in range(3))
    return {"out": np.asarray(F.linear_attention(q, k, v, causal=True).data)}


PUBLIC = ([case(f"chunk {c}", "causal_prefix", lead=[2], length=8, d_k=3, d_v=4, chunk=c) for c in (1, 3, 64)]
          + [case("causal linear attention", "linear_attention", shape=[1, 2, 9, 3])])


def hidden_case(r, n: int, count: int) -> dict:
    if n % 4 == 3:
        return case("random", "linear_attention", shape=[1, int(r.integers(1, 3)), int(r.integers(1, 10)), 2])
    return case("random", "causal_prefix", lead=random_shape(r, int(r.integers(0, 3)), 1, 3),
                length=int(r.integers(1, 12)), d_k=int(r.integers(1, 4)), d_v=int(r.integers(1, 4)),
                chunk=int(r.integers(1, 6)))


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("diagonal left out", "inside a chunk, position i sees keys j ≤ i, itself included: keep the diagonal (tri "
            "with k=0)", ("xp.tri(fq.shape[-2], dtype=fq.dtype)", "xp.tri(fq.shape[-2], k=-1, dtype=fq.dtype)")),
    mistake("totals not carried", "the running totals KV and z must be carried to the next chunk",
            ("kv = kv + fk.swapaxes(-1, -2) @ fv", "kv = kv"), ("z = z + fk.sum(axis=-2, keepdims=True)", "z = z")),
    mistake("the whole chunk visible", "inside a chunk, position i may only see keys j ≤ i: multiply by the lower "
            "triangle", ("(fq @ fk.swapaxes(-1, -2)) * lower", "(fq @ fk.swapaxes(-1, -2))")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("13.3", public=PUBLIC, hidden=hidden_case, probes=[probe_causal_prefix, probe_linear_attention],
                    mistakes=MISTAKES)
