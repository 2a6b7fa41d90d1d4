"""Sliding-window (local) attention in O(n·w) time and memory (chapter 13).

Each query i attends only to the keys j with i − w ≤ j ≤ i + w (j ≤ i when
causal): w counts one side, 2w + 1 keys in all. That is the "restricted
self-attention" of the paper's Table 1 with a neighbourhood of size r = 2w + 1
(§4), and the sliding window of Longformer (Beltagy et al., 2020), whose window
size counts both sides (ours is half of theirs).

A band mask over the full n × n scores would give the same numbers at O(n²)
cost. Instead, cut the sequence into chunks of w queries. The keys any query
of chunk c can see lie in chunks c − 1, c and c + 1 (c − 1 and c when causal),
so each chunk attends over 3w keys (2w), built from three shifted views of the
same key blocks:

    keys of chunk c = [block c−1 | block c | block c+1]          (3w, d_k)

Then one ``scaled_dot_product_attention`` over (n/w chunks) × (w queries) ×
(3w keys) with a small band mask does the work: n/w · w · 3w = 3·n·w scores.
The engine's ops (concatenate, slicing, reshape) carry the gradients back to
the original keys and values; the attention's own backward is chapter 6's.
"""
from __future__ import annotations

import math
import numbers

from .. import backend
from ..backend import xp_of
from ..ops.shape import concatenate
from ..tensor import Tensor
from .attention import scaled_dot_product_attention


def band_mask(length: int, window: int, causal: bool = False, device: str | None = None):
    """(1, 1, n, n) bool, True where |i − j| ≤ window (and j ≤ i when causal): the O(n²) reference."""
    xp = backend.xp_for(device or backend.default_device())
    offset = xp.arange(length)[None, :] - xp.arange(length)[:, None]      # j − i
    allowed = (offset >= -window) & (offset <= (0 if causal else window))
    return allowed[None, None]


def local_attention(q, k, v, window: int, causal: bool = False, mask=None) -> Tensor:
    """Self-attention restricted to a window: query i sees keys i − window … i + window (… i if causal).

    q, k (..., n, d_k), v (..., n, d_v) Tensors, the same length n -> (..., n, d_v). ``mask``: a
    key-padding mask broadcastable to (B, 1, 1, n), True = real key. Equal to
    ``scaled_dot_product_attention(q, k, v, mask=band_mask(n, window, causal) & mask)``, in
    O(n·window) time and memory.
    """
    q, k, v = (t if isinstance(t, Tensor) else Tensor(t) for t in (q, k, v))
    if not is_window(window):
        raise ValueError(f"local_attention: window must be a positive integer, got {window!r}")
    length = q.shape[-2]
    # A window of n − 1 or more already sees every key: wider ones would only pad the chunks with
    # zeros, O(window²) of them (a window of 20,000 over 8 positions asked for gigabytes).
    window = max(1, min(int(window), length))
    if k.shape[-2] != length or v.shape[-2] != length:
        raise ValueError(f"local_attention is self-attention: q, k, v need the same length (axis -2); got "
                         f"q {q.shape}, k {k.shape}, v {v.shape}")
    mask = mask.data if isinstance(mask, Tensor) else mask
    if mask is not None and (not backend.is_array(mask) or mask.dtype != bool or mask.ndim < 2
                             or mask.shape[-2] != 1 or mask.shape[-1] not in (1, length)):
        raise ValueError(f"local_attention: mask must be a boolean key-padding mask of shape (B, 1, 1, {length}) "
                         f"(True = real key); got {getattr(mask, 'dtype', type(mask).__name__)} "
                         f"{getattr(mask, 'shape', '')}")
    xp = xp_of(q.data)
    n_chunks = -(-length // window)
    halo_right = 0 if causal else 1                      # blocks after the query's own block

    # queries: (..., n, d) -> (..., n_chunks, w, d), padded at the end to a whole number of chunks
    q_chunks = _blocks(q, window, n_chunks, before=0, after=0)
    # keys and values: one block of zeros before, halo_right blocks after, then the overlapping views
    k_chunks = _overlapping(_blocks(k, window, n_chunks, before=1, after=halo_right), n_chunks)
    v_chunks = _overlapping(_blocks(v, window, n_chunks, before=1, after=halo_right), n_chunks)
    span = k_chunks.shape[-2]                            # 3w (2w when causal)

    # which (query, key) pairs of a chunk may attend: the band, and keys that exist
    a = xp.arange(window)[:, None]                       # query offset in its chunk
    b = xp.arange(span)[None, :]                         # key offset in the chunk's span; key j = c·w + b − w
    allowed = chunk_band(a, b, window, causal)[None]                               # (1, w, span)
    key_index = xp.arange(n_chunks)[:, None] * window + xp.arange(span)[None, :] - window   # (n_chunks, span)
    allowed = allowed & ((key_index >= 0) & (key_index < length))[:, None, :]      # (n_chunks, w, span)
    if mask is not None:
        keys = xp.broadcast_to(mask[..., 0, :], mask.shape[:-2] + (length,))
        padded = xp.zeros(keys.shape[:-1] + (window + n_chunks * window + halo_right * window,), dtype=bool)
        padded[..., window:window + length] = keys
        key_ok = _overlapping_array(padded.reshape(padded.shape[:-1] + (-1, window)), n_chunks)  # (.., nc, span)
        allowed = allowed & key_ok[..., :, None, :]                                # (B, 1, nc, w, span)

    out = scaled_dot_product_attention(q_chunks, k_chunks, v_chunks, mask=allowed)  # (..., nc, w, d_v)
    out = out.reshape(out.shape[:-3] + (n_chunks * window, out.shape[-1]))
    return out[..., :length, :]


def is_window(window) -> bool:
    """A window is a whole number >= 1 (a float such as 3.0 is accepted; nan, inf, 2.5 and "3" are not)."""
    if isinstance(window, bool) or not isinstance(window, numbers.Real) or not math.isfinite(window):
        return False
    return int(window) == window and window >= 1


def chunk_band(a, b, window: int, causal: bool):
    """Inside a chunk's span: query at offset a sees key at offset b when −w ≤ j − i ≤ w (≤ 0 if causal).

    Query i = c·w + a and key j = c·w + b − w, so j − i = b − a − w.
    """
    offset = b - a - window
    return (offset >= -window) & (offset <= (0 if causal else window))


def _blocks(x: Tensor, window: int, n_chunks: int, before: int, after: int) -> Tensor:
    """(..., n, d) -> (..., before + n_chunks + after, w, d): zero blocks around, zero rows to fill the last."""
    xp = xp_of(x.data)
    lead, length, width = x.shape[:-2], x.shape[-2], x.shape[-1]
    parts = []
    if before:
        parts.append(Tensor(xp.zeros(lead + (before * window, width), dtype=x.dtype)))
    parts.append(x)
    tail = (n_chunks * window - length) + after * window
    if tail:
        parts.append(Tensor(xp.zeros(lead + (tail, width), dtype=x.dtype)))
    padded = concatenate(parts, axis=-2) if len(parts) > 1 else x
    return padded.reshape(lead + (before + n_chunks + after, window, width))


def _overlapping(blocks: Tensor, n_chunks: int) -> Tensor:
    """Blocks (..., n_chunks + m − 1, w, d) -> chunks (..., n_chunks, m·w, d): chunk c = blocks c … c+m−1."""
    m = blocks.shape[-3] - n_chunks + 1
    views = [blocks[..., i:i + n_chunks, :, :] for i in range(m)]        # m shifted views (slices)
    return concatenate(views, axis=-2)                                   # one copy: m·n keys


def _overlapping_array(blocks, n_chunks: int):
    """The same for a plain array (..., n_chunks + m − 1, w) -> (..., n_chunks, m·w)."""
    m = blocks.shape[-2] - n_chunks + 1
    return xp_of(blocks).concatenate([blocks[..., i:i + n_chunks, :] for i in range(m)], axis=-1)
