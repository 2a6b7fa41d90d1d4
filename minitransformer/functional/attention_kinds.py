"""Choosing a self-attention by name (chapter 13): one table of kinds, one check, one dispatch.

    "softmax"  eq. 1, ``scaled_dot_product_attention`` (chapter 6); keeps the (T, S) weights
    "flash"    the same numbers, tile by tile, in O(n) memory
    "local"    a sliding window: query i sees keys i − window … i + window (… i when causal)
    "linear"   the elu + 1 feature map: a different model, O(n) time and memory
    "linformer"  keys and values projected along the sequence to k = window summaries by learned E, F
               (k × n_max, held by the layer): O(n·k); not causal, so encoder-only

``ATTENTION_KINDS`` maps each name to what the rest of the package needs to know of it: how to run it,
whether it needs a window, whether it forms the weights (so that they can be dropped out and drawn),
and the Function that runs it on packed projections, if it has one. ``check_attention`` is the one
check of a kind and its settings (the model's configuration, the layer and ``attend`` call it), and
``attend`` the one dispatch.

The model's self-attention layers receive one of two masks: a key-padding mask (B, 1, 1, S) in the
encoder, or the causal mask (1, 1, T, T) in the decoder. Eq. 1 takes any boolean mask; the tiled,
windowed and linear functions take a key mask and a flag instead, and ``split_mask`` turns the model's
mask into that pair. In cached decoding (chapter 9) the T queries are the last T of S positions and no
mask is given: each query sees the keys up to its own position (those within the window, for "local").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..backend import xp_of
from ..tensor import Function, Tensor, no_grad
from .attention import scaled_dot_product_attention
from .dropout import Generator
from .flash_attention import flash_attention
from .linear_attention import elu_plus_one, linear_attention, linear_attention_step
from .linformer import linformer_attention
from .local_attention import is_window, local_attention
from .multi_head import PackedAttention


@dataclass(frozen=True)
class AttentionKind:
    """One kind of self-attention: ``run(q, k, v, mask, window)`` computes it from the model's mask."""

    name: str
    run: Callable[..., Tensor]
    window: bool = False                 # needs attention_window, a positive integer
    weights: bool = False                # forms the (T, S) weights: attention dropout, and pictures of them
    packed: type[Function] | None = None   # runs it on the packed Q, K, V projections (nn.MultiHeadAttention)
    # cached decoding from a running state instead of the keys: step(q, k, v, state) -> (out, state)
    recurrent: Callable | None = None
    # learned projections along the sequence (E, F), passed to run as projections=(e, f); no causal form
    projected: bool = False


def split_mask(mask, n_queries: int, n_keys: int, kind: str):
    """The model's mask as (key-padding mask or None, causal): (B, 1, 1, S) or the causal (1, 1, T, S).

    No mask and fewer queries than keys is cached decoding: the queries are the last positions, causal.
    """
    if mask is None:
        return None, n_queries < n_keys
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


def _softmax(q, k, v, mask, window, dropout_p: float = 0.0, training: bool = False,
             generator: Generator | None = None, return_weights: bool = False):
    """Eq. 1 with any boolean mask (chapter 6); the only kind with weights to drop out or return."""
    return scaled_dot_product_attention(q, k, v, mask=mask, return_weights=return_weights, dropout_p=dropout_p,
                                        training=training, generator=generator)


def _flash(q, k, v, mask, window) -> Tensor:
    key_mask, causal = split_mask(mask, q.shape[-2], k.shape[-2], "flash")
    return flash_attention(q, k, v, mask=key_mask, causal=causal)


def _linear(q, k, v, mask, window) -> Tensor:
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    key_mask, causal = split_mask(mask, n_queries, n_keys, "linear")
    if n_queries == n_keys:
        return linear_attention(q, k, v, causal=causal, mask=key_mask)
    if n_queries == 1:                               # the last position sees every key: no prefix needed
        return linear_attention(q, k, v, mask=key_mask)
    raise ValueError(f"attention 'linear': {n_queries} queries over {n_keys} keys; cached decoding takes "
                     "one query per step")


def _linformer(q, k, v, mask, window, projections=None) -> Tensor:
    if projections is None:
        raise ValueError("attention 'linformer' needs its learned projections (E, F): projections=(e, f), "
                         "each (k, n_max); nn.MultiHeadAttention holds them")
    key_mask, causal = split_mask(mask, q.shape[-2], k.shape[-2], "linformer")
    return linformer_attention(q, k, v, *projections, mask=key_mask, causal=causal)


def _local(q, k, v, mask, window) -> Tensor:
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    key_mask, causal = split_mask(mask, n_queries, n_keys, "local")
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


ATTENTION_KINDS: dict[str, AttentionKind] = {kind.name: kind for kind in (
    AttentionKind("softmax", _softmax, weights=True, packed=PackedAttention),
    AttentionKind("flash", _flash),
    AttentionKind("local", _local, window=True),
    AttentionKind("linear", _linear, recurrent=linear_attention_step),
    AttentionKind("linformer", _linformer, window=True, projected=True),
)}


def check_attention(kind: str, window=None, dropout_p: float = 0.0) -> AttentionKind:
    """The kind called ``kind``; a clear error for an unknown one, for "local" without a usable window, or
    for dropout on the weights of a kind that forms none."""
    if kind not in ATTENTION_KINDS:
        raise ValueError(f"attention must be one of {', '.join(ATTENTION_KINDS)}; got {kind!r}")
    found = ATTENTION_KINDS[kind]
    if found.window and not is_window(window):
        raise ValueError(f"attention {kind!r} needs a window (attention_window), a positive integer; got {window!r}")
    if window is not None and not is_window(window):
        raise ValueError(f"attention_window must be None or an integer >= 1, got {window!r}")
    if dropout_p and not found.weights:
        raise ValueError(f"attention {kind!r} has no weights to drop; set the attention dropout to 0")
    return found


def attend(kind: str, q, k, v, mask=None, window: int | None = None, *, dropout_p: float = 0.0,
           training: bool = False, generator: Generator | None = None, return_weights: bool = False,
           projections=None):
    """Self-attention of the named kind; q (B, h, T, d_k), k (B, h, S, d_k), v (B, h, S, d_v) -> (B, h, T, d_v).

    ``mask``: for "softmax" any boolean mask broadcastable to (B, h, T, S); for the others None, a
    key-padding mask (B, 1, 1, S) or the causal mask (1, 1, T, T). With fewer queries than keys and no
    mask (cached decoding), query t is position S − T + t and sees the keys up to it. ``dropout_p``,
    ``training`` and ``generator`` drop attention weights, and ``return_weights`` returns them as well
    (out, weights): both only for a kind that forms weights ("softmax"). ``projections``: the (E, F) of
    "linformer".
    """
    found = check_attention(kind, window, dropout_p)
    if found.projected:
        return found.run(q, k, v, mask, window, projections=projections)
    if not found.weights:
        if return_weights:
            raise ValueError(f"attention {kind!r} keeps no weights to show")
        return found.run(q, k, v, mask, window)
    return found.run(q, k, v, mask, window, dropout_p=dropout_p, training=training, generator=generator,
                     return_weights=return_weights)

def attention_weights(kind: str, q, k, mask=None, window: int | None = None):
    """The (B, h, T, S) weights with which attention of the named kind mixes the values: out = weights @ v.

    For pictures (``record_attention``), from arrays q (B, h, T, d_k) and k (B, h, S, d_k), in O(T·S)
    whatever the kind: "softmax" and "flash" give softmax(Q Kᵀ / √d_k) over the keys the mask allows,
    "local" the same over the keys of the window, "linear" φ(q_i)·φ(k_j) / Σ_j' φ(q_i)·φ(k_j') (eq. 1 of
    Katharopoulos et al., the similarity that replaces the exponential). A query with no key gets zeros.
    """
    if check_attention(kind, window).projected:
        raise ValueError(f"attention {kind!r} forms no (T, S) weights: its queries weigh k projected summaries, "
                         "each a mix of every position")
    xp = xp_of(q)
    n_queries, n_keys = q.shape[-2], k.shape[-2]
    key_mask, causal = split_mask(mask, n_queries, n_keys, kind)
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
