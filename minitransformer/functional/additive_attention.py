"""Bahdanau's additive attention score, as ONE Function (chapter 6).

Bahdanau et al. (2015, §3.1 and appendix A.1.2) score the decoder state s against every annotation h_j
of the encoder with a one-layer feed-forward network:

    e_j = vᵀ tanh(W s + U h_j)

The two projections are ordinary Linear layers, and U h_j is the same for every decoder step, so it
is computed once per sentence. What is left is the part that pairs every query with every key. For
queries q (B, T, A) = W s, keys k (B, S, A) = U h and v (A,):

    u_tj = q_t + k_j                  (B, T, S, A)   every pair, by broadcasting
    a_tj = tanh(u_tj)
    e_tj = a_tj · v                   (B, T, S)

Backward, from g_e = ∂L/∂e (B, T, S), through the three lines in reverse:

    g_v = Σ_{b,t,j} g_e,tj a_tj                         (A,)
    g_u = g_e,tj v ⊙ (1 − a_tj²)                        (B, T, S, A)   through vᵀ, then tanh
    g_q = Σ_j g_u,tj        g_k = Σ_t g_u,tj             each query met every key, each key every query

The sums are the adjoint of the broadcast in the first line (chapter 2: a value used n times gets
the sum of n gradients). As one Function the (B, T, S, A) array a is stored once, and neither u nor
the broadcast copies of q and k are graph nodes of their own.
"""
from __future__ import annotations

from ..backend import xp_of
from ..tensor import Function, Tensor


class AdditiveScore(Function):
    """queries (B, T, A), keys (B, S, A), v (A,) -> scores e (B, T, S) = vᵀ tanh(q_t + k_j)."""

    def forward(self, queries, keys, v):
        _check_shapes(queries, keys, v)
        hidden = xp_of(queries).tanh(queries[:, :, None, :] + keys[:, None, :, :])   # a (B, T, S, A)
        self.save_for_backward(hidden, v)
        return hidden @ v                                                            # (B, T, S)

    def backward(self, g_scores):
        hidden, v = self.saved_arrays
        # set g_queries (B, T, A), g_keys (B, S, A) and g_v (A,) from g_scores (B, T, S), with hidden = a (B, T, S, A)
        # Exercise 6.4 — additive attention's scores backward (chapters/06-attention.md; graded by pytest -m ex_6_4)
        ### BEGIN SOLUTION
        g_v = hidden.reshape(-1, v.shape[0]).T @ g_scores.reshape(-1)                # Σ g_e a
        g_pre = g_scores[..., None] * v                                             # through vᵀ ...
        g_pre *= 1 - hidden * hidden                                                # ... then through tanh
        g_queries = g_pre.sum(axis=2)                                               # Σ over the keys j
        g_keys = g_pre.sum(axis=1)                                                  # Σ over the queries t
        ### END SOLUTION
        return g_queries, g_keys, g_v


def additive_score(queries, keys, v) -> Tensor:
    """Bahdanau's e_tj = vᵀ tanh(q_t + k_j) for queries (B, T, A) = W s and keys (B, S, A) = U h, already
    projected; v (A,). Returns the scores (B, T, S), before any mask or softmax."""
    return AdditiveScore()(queries, keys, v)


def _check_shapes(queries, keys, v) -> None:
    if queries.ndim != 3 or keys.ndim != 3 or v.ndim != 1:
        raise ValueError(f"additive_score: expected queries (B, T, A), keys (B, S, A) and v (A,), got shapes "
                         f"{queries.shape}, {keys.shape} and {v.shape}")
    if not queries.shape[2] == keys.shape[2] == v.shape[0]:
        raise ValueError(f"additive_score: queries, keys and v must share the size A of the hidden layer, got "
                         f"{queries.shape[2]}, {keys.shape[2]} and {v.shape[0]}")
    if queries.shape[0] != keys.shape[0]:
        raise ValueError(f"additive_score: queries and keys must have the same batch size, got {queries.shape[0]} "
                         f"and {keys.shape[0]}")
    if queries.dtype.kind != "f":
        raise TypeError(f"additive_score: inputs must be floating point, got dtype {queries.dtype}")
