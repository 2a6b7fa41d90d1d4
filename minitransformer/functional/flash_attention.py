"""FlashAttention: exact attention in tiles, without the (T, S) matrix (chapter 13).

Dao et al. (2022) compute softmax(Q Kᵀ/√d_k) V one tile of queries × one tile
of keys at a time, so the T × S scores and weights never exist at once. Two
ideas make that exact rather than approximate.

Online softmax (forward). For one row of scores s_1, s_2, ... seen block by
block, keep the running maximum m, the running sum ℓ = Σ exp(s_j − m) and the
running weighted sum a = Σ exp(s_j − m) v_j. A new block with scores s_B and
values V_B is folded in with the max shift of chapter 4:

    m'  = max(m, max s_B)
    ℓ'  = e^{m − m'} ℓ + Σ exp(s_B − m')            the old sum, rescaled to the new max
    a'  = e^{m − m'} a + exp(s_B − m') V_B
    after the last block:  o = a / ℓ,   L = m + log ℓ  (the row's log-sum-exp)

Recomputation (backward). Only O (T, d_v) and L (T, 1) are saved. Each weight
is recomputed when needed as P = exp(S − L), block by block. Chapter 6's
softmax backward needs the row sums Σ_j gA_ij A_ij; with gA = gO Vᵀ that is

    Σ_j (gO Vᵀ)_ij A_ij = Σ_e gO_ie (A V)_ie = Σ_e gO_ie O_ie =: D_i,

one number per query, computed from O and gO before the loop. Then per block:

    gV_B += P_Bᵀ gO,   gP_B = gO V_Bᵀ,   gS_B = P_B ⊙ (gP_B − D),
    gQ  += gS_B K_B / √d_k,   gK_B += gS_Bᵀ Q / √d_k.

Memory is O((T + S)·d + block²) instead of O(T·S). On a GPU the tiles live in
on-chip SRAM and the win is fewer reads and writes of HBM (speed); on NumPy the
win is memory, and the Python loop over tiles costs time.
"""
from __future__ import annotations

import math

from .. import backend
from ..backend import xp_of
from ..ops.broadcasting import unbroadcast
from ..tensor import Function, Tensor
from .checks import broadcast_leading, check_attention_operands
from .attention import mask_scores


class FlashAttention(Function):
    """Tiled softmax(q kᵀ/√d_k) v; saves only the output and the row log-sum-exp.

    q (..., T, d_k), k (..., S, d_k), v (..., S, d_v) -> out (..., T, d_v).
    """

    def __init__(self, mask=None, causal: bool = False, block_size: int = 64, block_mask=None) -> None:
        if int(block_size) != block_size or block_size < 1:
            raise ValueError(f"flash_attention: block_size must be a positive integer, got {block_size!r}")
        mask = mask.data if isinstance(mask, Tensor) else mask
        if getattr(mask, "ndim", 2) < 2:                           # a mask over keys only: (S,) -> (1, S)
            mask = mask.reshape((1,) * (2 - mask.ndim) + mask.shape)
        self.mask = mask
        self.causal = bool(causal)
        self.block_size = int(block_size)
        self.block_mask = block_mask.data if isinstance(block_mask, Tensor) else block_mask

    # -- which tiles, and which entries inside a tile ------------------------------------------------
    def _tiles(self, n_queries: int, n_keys: int):
        """(query slice, key slice) of every tile to compute, grouped by query block, in order."""
        bs = self.block_size
        n_query_blocks, n_key_blocks = -(-n_queries // bs), -(-n_keys // bs)
        layout = None
        if self.block_mask is not None:
            layout = backend.asnumpy(self.block_mask)       # a small host array: control flow, not math
            if layout.dtype != bool or layout.shape != (n_query_blocks, n_key_blocks):
                raise ValueError(f"flash_attention: block_mask must be a boolean array of shape "
                                 f"(⌈T/bs⌉, ⌈S/bs⌉) = ({n_query_blocks}, {n_key_blocks}) for T = {n_queries}, "
                                 f"S = {n_keys}, block_size = {bs}; got {layout.dtype} {layout.shape}")
        offset = n_keys - n_queries                       # causal: query i sees keys j ≤ i + offset
        for bi in range(n_query_blocks):
            rows = slice(bi * bs, min((bi + 1) * bs, n_queries))
            keys = []
            for bj in range(n_key_blocks):
                cols = slice(bj * bs, min((bj + 1) * bs, n_keys))
                if self.causal and cols.start > rows.stop - 1 + offset:
                    break                                 # the whole tile is in the future: skip it
                if layout is not None and not layout[bi, bj]:
                    continue                              # block-sparse: this tile is not in the layout
                keys.append(cols)
            yield rows, keys

    def _allowed(self, xp, rows: slice, cols: slice, n_queries: int, n_keys: int):
        """Boolean (..., rows, cols) of the tile's entries that may attend, or None when all may."""
        allowed = None
        if self.causal and cols.stop - 1 > rows.start + n_keys - n_queries:   # the tile crosses the diagonal
            i = xp.arange(rows.start, rows.stop)[:, None] + (n_keys - n_queries)
            allowed = xp.arange(cols.start, cols.stop)[None, :] <= i
        if self.mask is not None:
            mask = self.mask
            tile = mask[..., rows if mask.shape[-2] > 1 else slice(None), cols if mask.shape[-1] > 1 else slice(None)]
            allowed = tile if allowed is None else allowed & tile
        return allowed

    def _scores(self, xp, q_rows, k_cols, rows, cols, n_queries, n_keys):
        """S = (Q/√d_k) Kᵀ for one tile, −∞ where masked."""
        scores = q_rows @ k_cols.swapaxes(-1, -2)                           # (..., bq, bk)
        allowed = self._allowed(xp, rows, cols, n_queries, n_keys)
        if allowed is not None:
            mask_scores(scores, allowed)                                    # Exercise 6.1's masking, in place
        return scores

    # -- forward: the online softmax ------------------------------------------------------------------
    def forward(self, q, k, v):
        check_attention_operands(q, k, v, self.mask)
        xp = xp_of(q, k, v)
        lead = broadcast_leading(q, k, v)
        q_, k_, v_ = (xp.broadcast_to(a, lead + a.shape[-2:]) for a in (q, k, v))
        n_queries, n_keys, d_v = q.shape[-2], k.shape[-2], v.shape[-1]
        self.scale = 1.0 / math.sqrt(q.shape[-1])                 # §3.2.1
        out = xp.zeros(lead + (n_queries, d_v), dtype=q.dtype)   # (..., T, d_v)
        log_sum_exp = xp.empty(lead + (n_queries, 1), dtype=q.dtype)

        for rows, key_tiles in self._tiles(n_queries, n_keys):
            q_rows = q_[..., rows, :] * self.scale                # (..., bq, d_k): one tile of queries
            row_max = xp.full(lead + (rows.stop - rows.start, 1), -xp.inf, dtype=q.dtype)
            row_sum = xp.zeros_like(row_max)
            weighted = xp.zeros(lead + (rows.stop - rows.start, d_v), dtype=q.dtype)
            for cols in key_tiles:
                scores = self._scores(xp, q_rows, k_[..., cols, :], rows, cols, n_queries, n_keys)
                row_max, row_sum, weighted = online_softmax_step(row_max, row_sum, weighted, scores,
                                                                  v_[..., cols, :])
            out[..., rows, :], log_sum_exp[..., rows, :] = finish_rows(row_max, row_sum, weighted)

        self.shapes = q.shape, k.shape, v.shape
        self.save_for_backward(q_, k_, v_, out, log_sum_exp)   # the inputs, and of the rest only O and L
        return out

    # -- backward: recompute each tile's probabilities -----------------------------------------------
    def backward(self, g_out):
        q, k, v, out, log_sum_exp = self.saved_arrays
        xp = xp_of(g_out)
        n_queries, n_keys = q.shape[-2], k.shape[-2]
        g_out = xp.broadcast_to(g_out, out.shape)
        g_q, g_k, g_v = xp.zeros(q.shape, q.dtype), xp.zeros(k.shape, k.dtype), xp.zeros(v.shape, v.dtype)
        delta = flash_delta(g_out, out)                                         # D (..., T, 1)

        for rows, key_tiles in self._tiles(n_queries, n_keys):
            q_rows = q[..., rows, :] * self.scale
            g_out_rows, delta_rows, lse_rows = g_out[..., rows, :], delta[..., rows, :], log_sum_exp[..., rows, :]
            for cols in key_tiles:
                scores = self._scores(xp, q_rows, k[..., cols, :], rows, cols, n_queries, n_keys)
                probs = xp.exp(scores - lse_rows)                               # P = exp(S − L), recomputed
                g_v[..., cols, :] += probs.swapaxes(-1, -2) @ g_out_rows        # gV_B += Pᵀ gO
                g_probs = g_out_rows @ v[..., cols, :].swapaxes(-1, -2)         # gP = gO V_Bᵀ
                g_scores = probs * (g_probs - delta_rows)                       # gS = P ⊙ (gP − D)
                g_q[..., rows, :] += (g_scores @ k[..., cols, :]) * self.scale  # gQ += gS K_B / √d_k
                g_k[..., cols, :] += g_scores.swapaxes(-1, -2) @ q_rows         # gK_B += gSᵀ Q / √d_k
        q_shape, k_shape, v_shape = self.shapes
        return unbroadcast(g_q, q_shape), unbroadcast(g_k, k_shape), unbroadcast(g_v, v_shape)


def online_softmax_step(row_max, row_sum, weighted, scores, values):
    """Fold one tile into the running softmax of each row: (m, ℓ, a) -> (m', ℓ', a').

    row_max m and row_sum ℓ (..., bq, 1), weighted a (..., bq, d_v), scores (..., bq, bk)
    (−∞ where masked), values (..., bk, d_v). A row that has seen only −∞ keeps m = −∞, ℓ = 0, a = 0.
    """
    xp = xp_of(scores)
    # Exercise 13.1 — the online-softmax merge of a new block (chapters/13-long-sequences.md; graded by pytest -m ex_13_1)
    ### BEGIN SOLUTION
    new_max = xp.maximum(row_max, scores.max(axis=-1, keepdims=True))     # m' = max(m, max s_B)
    shift = xp.where(xp.isneginf(new_max), 0, new_max)                    # nothing seen yet: avoid −∞ − (−∞)
    probs = xp.exp(scores - shift)                                        # exp(s_B − m')
    rescale = xp.exp(row_max - shift)                                     # e^{m − m'} ≤ 1
    row_sum = rescale * row_sum + probs.sum(axis=-1, keepdims=True)       # ℓ' = e^{m−m'} ℓ + Σ exp(s_B − m')
    weighted = rescale * weighted + probs @ values                        # a' = e^{m−m'} a + exp(s_B − m') V_B
    ### END SOLUTION
    return new_max, row_sum, weighted


def finish_rows(row_max, row_sum, weighted):
    """o = a / ℓ and L = m + log ℓ; a row that saw no key gets o = 0 and L = +∞ (so exp(S − L) = 0)."""
    xp = xp_of(weighted)
    empty = row_sum == 0
    safe_sum = xp.where(empty, 1, row_sum)
    out = weighted / safe_sum
    log_sum_exp = xp.where(empty, xp.inf, xp.where(empty, 0, row_max) + xp.log(safe_sum))
    return out, log_sum_exp


def flash_delta(g_out, out):
    """D_i = Σ_j gA_ij A_ij of the softmax backward, from O and gO alone: (..., T, d_v) -> (..., T, 1)."""
    # Exercise 13.2 — the D term of the flash backward (chapters/13-long-sequences.md; graded by pytest -m ex_13_2)
    ### BEGIN SOLUTION
    return (g_out * out).sum(axis=-1, keepdims=True)      # Σ_j (gO Vᵀ)_ij A_ij = Σ_e gO_ie (AV)_ie
    ### END SOLUTION


def flash_attention(q, k, v, mask=None, causal: bool = False, block_size: int = 64, block_mask=None) -> Tensor:
    """Exact softmax(Q Kᵀ/√d_k) V computed tile by tile (Dao et al., 2022).

    q (B, h, T, d_k), k (B, h, S, d_k), v (B, h, S, d_v) Tensors -> (B, h, T, d_v), equal to
    ``scaled_dot_product_attention`` up to rounding. ``mask``: boolean, broadcastable to
    (B, h, T, S), True = may attend; a key-padding mask (B, 1, 1, S) costs O(S) memory.
    ``causal``: query i sees keys j ≤ i + (S − T) (the usual lower triangle when S = T); tiles
    above the diagonal are skipped. ``block_mask``: boolean (⌈T/bs⌉, ⌈S/bs⌉); only the tiles
    it lists are computed (block-sparse attention). A query that may see no key gets zeros.
    Memory: O((T + S)·d + block_size²) per (batch, head), never O(T·S).
    """
    return FlashAttention(mask, causal, block_size, block_mask)(q, k, v)
