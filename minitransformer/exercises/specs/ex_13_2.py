"""Exercise 13.2 — the D term of the flash backward (chapters/13-long-sequences.md).

Its public tests, its grading cases and its catalogued mistakes (spec.py).
"""
from __future__ import annotations

import numpy as np

import minitransformer as mt
import minitransformer.functional as F

from ..cases import gradient_case
from ..spec import ExerciseSpec, case, mistake, tensor


# -- the public tests (pytest -m grades_13_2) -------------------------------------------------------------------------
def test_delta_makes_the_rows_of_the_softmax_gradient_sum_to_zero(rng):
    from minitransformer.functional.flash_attention import flash_delta

    weights = rng.random((2, 4, 6))
    weights /= weights.sum(axis=-1, keepdims=True)             # A, rows sum to 1
    values, g_out = rng.standard_normal((2, 6, 3)), rng.standard_normal((2, 4, 3))
    g_weights = g_out @ values.swapaxes(-1, -2)                # gA = gO Vᵀ
    delta = flash_delta(g_out, weights @ values)
    assert delta.shape == (2, 4, 1)
    g_scores = weights * (g_weights - delta)                   # gS = A ⊙ (gA − D): a softmax gradient sums to 0
    np.testing.assert_allclose(g_scores.sum(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(flash_delta(np.array([[1.0, 2.0], [0.0, -1.0]]), np.array([[3.0, 4.0], [5.0, 6.0]])),
                               [[11.0], [-6.0]])               # 1·3 + 2·4 and 0·5 − 1·6, by hand


def test_flash_attention_backward_gradcheck(rng):
    q, k, v = tensor(rng, 1, 2, 7, 3), tensor(rng, 1, 2, 9, 3), tensor(rng, 1, 2, 9, 2)
    assert mt.gradcheck(lambda a, b, c: F.flash_attention(a, b, c, causal=True, block_size=4), [q, k, v])


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def probe_flash_backward(rng, q_shape, k_shape, v_shape, causal: bool = True, block_size: int = 4) -> dict:
    """FlashAttention's backward, which uses the student's D."""
    arrays = [rng.standard_normal(q_shape), rng.standard_normal(k_shape), rng.standard_normal(v_shape)]
    return gradient_case(rng, lambda a, b, c: F.flash_attention(a, b, c, causal=causal, block_size=block_size),
                         arrays, [True] * 3)


def probe_flash_delta(rng, batch: int, queries: int, keys: int, d_v: int) -> dict:
    """D = rowsum(gA ⊙ A) from O and gO."""
    from minitransformer.functional.flash_attention import flash_delta

    weights = rng.random((batch, queries, keys))
    weights /= weights.sum(axis=-1, keepdims=True)
    values, g_out = rng.standard_normal((batch, keys, d_v)), rng.standard_normal((batch, queries, d_v))
    return {"delta": np.asarray(flash_delta(g_out, weights @ values))}


PUBLIC = [case("D from O and gO", "flash_delta", batch=2, queries=4, keys=6, d_v=3),
          case("the flash backward", "flash_backward", q_shape=[1, 2, 7, 3], k_shape=[1, 2, 9, 3],
               v_shape=[1, 2, 9, 2])]


def hidden_case(r, n: int, count: int) -> dict:
    if n % 2:
        return case("random", "flash_delta", batch=int(r.integers(1, 3)), queries=int(r.integers(1, 6)),
                    keys=int(r.integers(1, 7)), d_v=int(r.integers(1, 4)))
    t, s = (int(x) for x in r.integers(2, 9, 2))
    return case("random", "flash_backward", q_shape=[1, 1, t, 2], k_shape=[1, 1, s, 2],
                v_shape=[1, 1, s, int(r.integers(1, 3))], causal=bool(s >= t and n % 4 == 0),
                block_size=int(r.integers(2, 5)))


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("O forgotten", "D_i = Σ_e gO_ie O_ie: the row sum of gO ⊙ O, not of gO alone",
            ("(g_out * out).sum(", "g_out.sum(")),
    mistake("no keepdims", "D is (..., T, 1), one number per row, kept as a column (keepdims=True)",
            ("keepdims=True", "keepdims=False")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("13.2", public=PUBLIC, hidden=hidden_case, needs={"2.1", "6.1", "13.1"},
                    probes=[probe_flash_backward, probe_flash_delta], mistakes=MISTAKES)
