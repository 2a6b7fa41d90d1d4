"""Scaled dot-product attention, eq. 1 of the paper (§3.2.1), as ONE fused Function (chapter 6).

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V

Forward, for one batch element and one head (T queries, S keys):

    Z  = Q Kᵀ / √d_k          scores          (T, S)
    A  = softmax(Z)           weights, rows sum to 1
    O  = A V                  output          (T, d_v)

Backward, given gO = dL/dO (the chain rule through the three lines, in reverse):

    gV = Aᵀ gO                                          (S, d_v)
    gA = gO Vᵀ                                          (T, S)
    gZ = A ⊙ (gA − Σ_j gA ⊙ A)    softmax backward, row by row (chapter 4)
    gQ = gZ K / √d_k                                    (T, d_k)
    gK = gZᵀ Q / √d_k                                   (S, d_k)

Fusing the three lines into one Function means the (T, S) arrays are stored
once (A) and no softmax Jacobian (T × S × S) is ever formed.

Masks. ``mask`` is boolean and broadcasts against the scores (B, h, T, S);
True means "may attend". A masked score is set to −∞ before the softmax, so
its weight is exactly 0 and no gradient reaches its key or value. A row in
which *every* key is masked (a query with nothing to look at) would be
softmax(−∞, …, −∞) = 0/0 = NaN; we define it instead as all-zero weights, so
that row's output is zeros and it sends no gradient to q, k or v.
"""
from __future__ import annotations

import math

from ..backend import xp_of
from ..fast.rows import row_max, row_sum   # functional/rows.py's two reductions, faster for short rows
from ..ops.broadcasting import unbroadcast
from ..tensor import Function, Tensor
from .checks import check_attention_operands
from .dropout import Generator, check_generator, default_generator


def mask_scores(scores, mask) -> None:
    """Set the attention scores to −∞ in place wherever ``mask`` (boolean, broadcasting against them) is False.

    Their weight after the softmax is then exactly 0. Flash attention masks its tiles with this too.
    """
    xp = xp_of(scores)
    # in place: scores where mask is False become −∞ (their weight is then exactly 0)
    # Exercise 6.1 — masking the attention scores (chapters/06-attention.md; graded by pytest -m ex_6_1)
    ### BEGIN SOLUTION
    xp.copyto(scores, -xp.inf, where=~mask)                 # masked: weight exactly 0 after exp
    ### END SOLUTION


class ScaledDotProductAttention(Function):
    """softmax(q kᵀ / √d_k) v with a mask and optional dropout on the weights.

    q (..., T, d_k), k (..., S, d_k), v (..., S, d_v) -> out (..., T, d_v);
    the leading axes are usually (B, h). Forward saves q, k, v, the weights A
    (..., T, S, before dropout; also readable as ``self.weights``, for pictures)
    and the dropout's factors (``self.keep``, None without dropout).
    """

    def __init__(self, mask=None, dropout_p: float = 0.0, training: bool = False,
                 generator: Generator | None = None) -> None:
        self.mask = mask.data if isinstance(mask, Tensor) else mask
        self.dropout_p = float(dropout_p)
        self.training = training
        self.generator = generator

    def forward(self, q, k, v):
        check_attention_operands(q, k, v, self.mask)
        xp = xp_of(q, k, v)
        self.scale = 1.0 / math.sqrt(q.shape[-1])  # §3.2.1: keeps the scores' variance near 1 (footnote 4)

        scores = q @ k.swapaxes(-1, -2)                         # (B, h, T, S)
        scores *= self.scale
        if self.mask is not None:
            mask_scores(scores, self.mask)
        # softmax over the keys, in place (chapter 4: subtract the row maximum first)
        maximum = row_max(scores)                               # (B, h, T, 1)
        if self.mask is not None:
            maximum[xp.isneginf(maximum)] = 0                   # a fully masked row: avoid −∞ − (−∞) = NaN
        scores -= maximum
        xp.exp(scores, out=scores)
        total = row_sum(scores)                                 # (B, h, T, 1); ≥ 1 unless the row is fully masked
        if self.mask is not None:
            total[total == 0] = 1                               # fully masked row: 0 / 1 = all-zero weights
        scores /= total                                         # A (B, h, T, S)

        keep = None
        if self.training and self.dropout_p > 0:
            keep = _dropout_keep_scale(scores, self.dropout_p, self.generator)
        self.save_for_backward(q, k, v, scores, keep)           # q, k, v, the weights A, the dropout's factors
        if keep is not None:
            scores = scores * keep                              # inverted dropout on the weights
        return scores @ v                                       # (B, h, T, d_v)

    @property
    def weights(self):
        """A (..., T, S), the attention weights before dropout: saved by forward."""
        return self.saved_arrays[3]

    @property
    def keep(self):
        """The dropout's factors keep / (1 − p) (..., T, S), or None without dropout: saved by forward."""
        return self.saved_arrays[4]

    def backward(self, g_out):
        q, k, v, weights = self.saved_arrays[:4]                # and self.keep (the property above)
        need_q, need_k, need_v = self._needs_gradient()
        dropped = weights if self.keep is None else weights * self.keep

        g_v = unbroadcast(dropped.swapaxes(-1, -2) @ g_out, v.shape) if need_v else None   # gV = Aᵀ gO
        if not (need_q or need_k):
            return None, None, g_v
        # set g_q and g_k (None when not needed); with dropout the weights used were A ⊙ keep, so the gradient
        # reaching A is gA = (gO Vᵀ) ⊙ self.keep (self.keep is None without dropout); self.scale is 1/√d_k
        # Exercise 6.2 — attention backward to the queries and keys (chapters/06-attention.md; graded by pytest -m ex_6_2)
        ### BEGIN SOLUTION
        g_scores = g_out @ v.swapaxes(-1, -2)                   # gA = gO Vᵀ   (B, h, T, S)
        if self.keep is not None:
            g_scores *= self.keep                               # through the dropout
        # softmax backward: gZ = A ⊙ (gA − Σ_j gA ⊙ A); zero wherever A is zero (masked keys, empty rows)
        g_scores -= row_sum(g_scores * weights)
        g_scores *= weights
        g_scores *= self.scale                                  # the 1/√d_k of Z = Q Kᵀ/√d_k
        g_q = unbroadcast(g_scores @ k, q.shape) if need_q else None                    # gQ = gZ K / √d_k
        g_k = unbroadcast(g_scores.swapaxes(-1, -2) @ q, k.shape) if need_k else None   # gK = gZᵀ Q / √d_k
        ### END SOLUTION
        return g_q, g_k, g_v

    def _needs_gradient(self) -> tuple[bool, bool, bool]:
        """Whether q, k and v need a gradient."""
        return tuple(t.requires_grad for t in self.inputs)


def scaled_dot_product_attention(q, k, v, mask=None, return_weights: bool = False, dropout_p: float = 0.0,
                                 training: bool = False, generator: Generator | None = None):
    """Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V (eq. 1).

    q (B, h, T, d_k), k (B, h, S, d_k), v (B, h, S, d_v) Tensors; ``mask`` a
    boolean array broadcastable to (B, h, T, S), True = may attend (a padding
    mask (B, 1, 1, S), a causal mask (1, 1, T, T), or both combined with &).
    A query whose keys are all masked gets all-zero weights and a zero output.
    ``dropout_p`` drops attention weights when ``training`` (the paper applies
    dropout elsewhere, §5.4; the default is off).

    Returns out (B, h, T, d_v), and with ``return_weights`` also the weights
    (B, h, T, S) as a Tensor that carries no gradient (for inspection and plots).
    """
    if not 0.0 <= dropout_p < 1.0:   # the Function checks only when it drops: a negative p went unnoticed
        raise ValueError(f"scaled_dot_product_attention: dropout_p must be in [0, 1), got {dropout_p}")
    check_generator("scaled_dot_product_attention", generator)
    function = ScaledDotProductAttention(mask, dropout_p, training, generator)
    out = function(q, k, v)
    if return_weights:
        return out, Tensor(function.weights)
    return out


def _dropout_keep_scale(weights, p: float, generator):
    """1/(1 − p) where a weight is kept, 0 where it is dropped (inverted dropout, chapter 5)."""
    if not 0 <= p < 1:
        raise ValueError(f"attention dropout probability must be in [0, 1), got {p}")
    generator = generator if generator is not None else default_generator()
    keep = generator.keep(weights.shape, p, like=weights)                      # (B, h, T, S) bool, u ≥ p
    return keep.astype(weights.dtype) * weights.dtype.type(1.0 / (1.0 - p))
