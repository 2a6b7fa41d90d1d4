"""Linformer: attention over k learned summaries of the sequence (Wang et al., 2020; chapter 13).

Linformer's premise (its §3, Theorem 1) is that the n × n attention matrix P = softmax(QKᵀ/√d_k) is
close to a matrix of low rank, so that n numbers per query carry more than is needed. It does not
compute P at all: two learned matrices E and F, each k × n with k ≪ n, project the keys and the values
along the *sequence* axis before attention,

    K̄ = E K   (k × d_k),     V̄ = F V   (k × d_v),     head = softmax(Q K̄ᵀ / √d_k) V̄     (eq. 7)

so the scores are n × k: O(n·k) time and memory. Each row of K̄ is a weighted sum of all n keys, which
fixes n: E has one column per position (a shorter sequence uses the first columns, the same as padding
it with zero keys, and a padded key is set to zero before the projection, so it adds nothing).

Causality. Every projected key mixes all n positions, the future ones too, so no mask applied after the
projection can hide the future from a query. The paper trains bidirectional (masked) language models and
fine-tunes classifiers; it gives no causal variant. ``linformer_attention`` therefore refuses
``causal=True`` and a (T, S) mask, and the model refuses Linformer in its decoder.

Nothing here needs a backward of its own: the projection is a matrix product and the attention eq. 1,
both with their gradients derived in chapters 2 and 6; the tests gradient-check the composition.
"""
from __future__ import annotations

from .. import backend
from ..ops.matmul import matmul
from ..tensor import Tensor
from .attention import scaled_dot_product_attention


def project_along_sequence(projection: Tensor, x: Tensor) -> Tensor:
    """E X: (k, n_max) and (..., n, d) -> (..., k, d), the first n columns of E for a sequence of n."""
    n = x.shape[-2]
    return matmul(projection[:, :n], x)                     # Σ_j E_rj x_j: each summary mixes every position


def linformer_attention(q, k, v, e, f, mask=None, causal: bool = False) -> Tensor:
    """softmax(Q (E K)ᵀ / √d_k) (F V): q (..., T, d_k), k (..., n, d_k), v (..., n, d_v) -> (..., T, d_v).

    ``e``, ``f`` (k, n_max) Tensors, n ≤ n_max: the learned projections of keys and values. ``mask``: a
    key-padding mask (B, 1, 1, n), True = real key (padded keys become zero before the projection).
    ``causal=True`` is refused: a projected key mixes every position, the later ones too.
    """
    q, k, v, e, f = (t if isinstance(t, Tensor) else Tensor(t) for t in (q, k, v, e, f))
    if causal:
        raise ValueError("linformer_attention: no causal form. Each projected key E K mixes all n positions, the "
                         "future ones too, so no mask can hide them (Wang et al. train bidirectional models only); "
                         "use 'linear' or 'local' attention in a decoder")
    if min(q.ndim, k.ndim, v.ndim) < 2 or q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"linformer_attention: need q (..., T, d_k), k (..., n, d_k) and v (..., n, d_v); got "
                         f"q {q.shape}, k {k.shape}, v {v.shape}")
    n = k.shape[-2]
    for name, p in (("e", e), ("f", f)):
        if p.ndim != 2 or p.shape[1] < n:
            raise ValueError(f"linformer_attention: {name} must be (k, n_max) with n_max >= n = {n}, one column "
                             f"per position; got {p.shape}")
    if e.shape != f.shape:
        raise ValueError(f"linformer_attention: e and f must have the same shape (k, n_max); got {e.shape}, {f.shape}")
    if mask is not None:
        mask = mask.data if isinstance(mask, Tensor) else mask
        if not backend.is_array(mask) or mask.dtype != bool or mask.ndim < 2 or mask.shape[-2] != 1 \
                or mask.shape[-1] not in (1, n):
            raise ValueError(f"linformer_attention: mask must be a boolean key-padding mask of shape (B, 1, 1, {n}) "
                             f"(True = real key); a (T, S) mask cannot act after the projection; got "
                             f"{getattr(mask, 'dtype', type(mask).__name__)} {getattr(mask, 'shape', '')}")
        keep = Tensor(mask[..., 0, :, None].astype(k.dtype))            # (B, 1, n, 1): padded keys become zero
        k, v = k * keep, v * keep
    return scaled_dot_product_attention(q, project_along_sequence(e, k), project_along_sequence(f, v))
