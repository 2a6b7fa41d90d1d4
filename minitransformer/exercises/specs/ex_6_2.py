"""Exercise 6.2 — attention backward to the queries and keys (chapters/06-attention.md).

Its public tests, its grading cases and its catalogued mistakes (spec.py).
"""
from __future__ import annotations

import numpy as np

import minitransformer as mt
import minitransformer.functional as F

from ..cases import gradient_case
from ..spec import ExerciseSpec, case, mistake, tensor


# -- the public tests (pytest -m grades_6_2) --------------------------------------------------------------------------
def test_attention_backward_gradcheck(rng):
    q, k, v = (tensor(rng, 2, 2, 3, 4), tensor(rng, 2, 2, 5, 4), tensor(rng, 2, 2, 5, 3))
    assert mt.gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c), [q, k, v])


def test_attention_backward_gradcheck_with_a_mask_and_broadcast_keys(rng):
    q, k, v = tensor(rng, 2, 2, 3, 4), tensor(rng, 1, 1, 4, 4), tensor(rng, 1, 1, 4, 2)
    mask = np.array([[True, True, False, False], [True, True, True, True]])[:, None, None, :]
    assert mt.gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, mask=mask), [q, k, v])


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def probe_attention_backward(rng, q_shape, k_shape, v_shape, mask_shape=None, central: bool = True) -> dict:
    """The attention backward to Q, K (and V) through an optional boolean mask."""
    mask = None
    if mask_shape is not None:
        mask = rng.random(mask_shape) < 0.7
        mask[..., 0] = True                       # every row keeps a key: a fully masked row has no gradient
    arrays = [rng.standard_normal(q_shape), rng.standard_normal(k_shape), rng.standard_normal(v_shape)]
    return gradient_case(rng, lambda a, b, c: F.scaled_dot_product_attention(a, b, c, mask=mask), arrays,
                         [True] * 3, central)


PUBLIC = [case("no mask", "attention_backward", q_shape=[2, 2, 3, 4], k_shape=[2, 2, 5, 4],
               v_shape=[2, 2, 5, 3]),
          case("a mask and broadcast keys", "attention_backward", q_shape=[2, 2, 3, 4], k_shape=[1, 1, 4, 4],
               v_shape=[1, 1, 4, 2], mask_shape=[2, 1, 1, 4])]


def hidden_case(r, n: int, count: int) -> dict:
    b, h, t, s, d = (int(x) for x in r.integers(1, 4, 5))
    return case("random", "attention_backward", q_shape=[b, h, t, d], k_shape=[b, h, s, d],
                v_shape=[b, h, s, int(r.integers(1, 4))],
                mask_shape=[b, 1, t, s] if n % 2 else None)


def large_case(r) -> dict:
    return case("large", "attention_backward", q_shape=[1, 1, 256, 64], k_shape=[1, 1, 256, 64],
                v_shape=[1, 1, 256, 64], central=False)


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("row sum forgotten", "the softmax backward is gS = A ⊙ (gA − Σ_j gA ⊙ A): the row sum is missing",
            ("g_scores -= row_sum(g_scores * weights)", "pass")),
    mistake("1/√d_k forgotten", "S = Q Kᵀ/√d_k: the gradients of Q and K carry the 1/√d_k too",
            ("g_scores *= self.scale", "pass")),
    mistake("gS not transposed for K", "gK = gSᵀ Q: the scores' gradient is transposed for the keys",
            ("g_scores.swapaxes(-1, -2) @ q", "g_scores @ q")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("6.2", public=PUBLIC, hidden=hidden_case, large=large_case, needs={"2.1", "6.1"},
                    probes=[probe_attention_backward], mistakes=MISTAKES)
