"""Choosing a self-attention by name (chapter 13).

    "softmax"  eq. 1, ``scaled_dot_product_attention`` (chapter 6); keeps the (T, S) weights
    "flash"    the same numbers, tile by tile, in O(n) memory
    "local"    a sliding window: query i sees keys i − window … i + window (… i when causal)
    "linear"   the elu + 1 feature map: a different model, O(n) time and memory

The model's self-attention layers receive one of two masks: a key-padding mask
(B, 1, 1, S) in the encoder, or the causal mask (1, 1, T, T) in the decoder.
``attend`` turns them into the (key mask, causal) pair that the tiled, windowed
and linear functions take. In cached decoding (chapter 9) the T queries are the
last T of S positions and no mask is given: each query sees the keys up to its
own position (those within the window, for "local").
"""
from __future__ import annotations

from ..backend import xp_of
from ..tensor import Tensor, no_grad
from .attention import scaled_dot_product_attention
from .flash_attention import flash_attention
from .linear_attention import elu_plus_one, linear_attention
from .local_attention import is_window, local_attention

ATTENTION_KINDS = ("softmax", "flash", "local", "linear")


def check_attention(kind: str, window) -> None:
    """A clear error for an unknown kind, or for "local" without a usable window."""
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"attention must be one of {', '.join(ATTENTION_KINDS)}; got {kind!r}")
    if kind == "local" and not is_window(window):
        raise ValueError(f"attention 'local' needs a window (attention_window), a positive integer; got {window!r}")


def split_mask(mask, n_queries: int, n_keys: int, kind: str = "this attention"):
    """The model's mask as (key-padding mask or None, causal): (B, 1, 1, S) or the causal (1, 1, T, S)."""
    if mask is None:
        return None, False
    mask = mask.data if isinstance(mask, Tensor) else mask
    if mask.ndim >= 2 and mask.shape[-2] == 1:
        return mask, False
    xp = xp_of(mask)
    causal = xp.arange(n_keys)[None, :] <= xp.arange(n_queries)[:, None] + (n_keys - n_queries)
    if (mask.ndim >= 2 and mask.shape[-2:] == (n_queries, n_keys) and mask.size == n_queries * n_keys
            and bool((mask.reshape(n_queries, n_keys) == causal).all())):
        return None, True
    raise ValueError(f"attention {kind!r} takes a key-padding mask (B, 1, 1, S) or the causal mask (1, 1, T, T); "
                     f"got a mask of shape {tuple(mask.shape)}; use attention 'softmax' for any other mask")


def attend(kind: str, q, k, v, mask=None, window: int | None = None) -> Tensor:
    """Self-attention of the named kind; q (B, h, T, d_k), k (B, h, S, d_k), v (B, h, S, d_v) -> (B, h, T, d_v).

    ``mask``: None, a key-padding mask (B, 1, 1, S) or the causal mask (1, 1, T, T). With fewer
    queries than keys and no mask (cached decoding), query t is position S − T + t and sees the
    keys up to it.
    """
    check_attention(kind, window)
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    key_mask, causal = split_mask(mask, n_queries, n_keys, kind)
    if n_queries < n_keys and mask is None:
        causal = True                                # cached decoding: the queries are the last positions
    if kind == "softmax":
        return scaled_dot_product_attention(q, k, v, mask=mask)
    if kind == "flash":
        return flash_attention(q, k, v, mask=key_mask, causal=causal)
    if kind == "linear":
        if n_queries == n_keys:
            return linear_attention(q, k, v, causal=causal, mask=key_mask)
        if n_queries == 1:                           # the last position sees every key: no prefix needed
            return linear_attention(q, k, v, mask=key_mask)
        raise ValueError(f"attention 'linear': {n_queries} queries over {n_keys} keys; cached decoding takes "
                         "one query per step")
    if n_queries == n_keys:
        return local_attention(q, k, v, window, causal=causal, mask=key_mask)
    # cached decoding with a window: only the last window + T keys can be seen, O(T·window)
    start = max(0, n_keys - n_queries - window)
    xp = xp_of(q.data)
    i = xp.arange(n_keys - n_queries, n_keys)[:, None]
    j = xp.arange(start, n_keys)[None, :]
    band = ((j >= i - window) & (j <= i))[None, None]          # (1, 1, T, window + T)
    if key_mask is not None:
        band = band & key_mask[..., start:]
    return scaled_dot_product_attention(q, k[..., start:, :], v[..., start:, :], mask=band)



def attention_weights(kind: str, q, k, mask=None, window: int | None = None):
    """The (B, h, T, S) weights with which attention of the named kind mixes the values: out = weights @ v.

    For pictures (``record_attention``), from arrays q (B, h, T, d_k) and k (B, h, S, d_k), in O(T·S)
    whatever the kind: "softmax" and "flash" give softmax(Q Kᵀ / √d_k) over the keys the mask allows,
    "local" the same over the keys of the window, "linear" φ(q_i)·φ(k_j) / Σ_j' φ(q_i)·φ(k_j') (eq. 1 of
    Katharopoulos et al., the similarity that replaces the exponential). A query with no key gets zeros.
    """
    check_attention(kind, window)
    xp = xp_of(q)
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    key_mask, causal = split_mask(mask, n_queries, n_keys, kind)
    if n_queries < n_keys and mask is None:
        causal = True                                # cached decoding: the queries are the last positions
    i = xp.arange(n_keys - n_queries, n_keys)[:, None]                  # each query's position among the keys
    j = xp.arange(n_keys)[None, :]
    allowed = (j <= i) if causal else xp.ones((n_queries, n_keys), dtype=bool)
    if kind == "local":
        allowed = allowed & (j >= i - window) & (j <= i + window)
    allowed = allowed[None, None] if key_mask is None else allowed & key_mask        # (B or 1, 1, T, S)
    if kind == "linear":
        similarity = (elu_plus_one(q) @ elu_plus_one(k).swapaxes(-1, -2)) * allowed   # (B, h, T, S), >= 0
        total = similarity.sum(axis=-1, keepdims=True)
        return similarity / xp.where(total == 0, 1, total)
    with no_grad():
        _, weights = scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(k), mask=allowed, return_weights=True)
    return weights.data
