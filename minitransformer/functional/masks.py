"""Attention masks (chapter 6, §3.2.3).

A mask is a boolean array that broadcasts against the attention scores of
shape (B, h, T, S): True means "this query may attend to this key" (the
convention PyTorch uses). Two kinds are needed:

* a padding mask hides the pad tokens that make a batch rectangular:
  shape (B, 1, 1, S), the same for every head and every query;
* a causal mask hides the future in the decoder's self-attention, so that
  position i sees positions 0..i only ("masking out ... all values in the
  input of the softmax which correspond to illegal connections", §3.2.3):
  shape (1, 1, T, T), lower triangular, the same for every sentence.

Combine them with ``&``: both broadcast to (B, 1, T, S).
"""
from __future__ import annotations

from .. import backend
from ..tensor import Tensor


def padding_mask(ids, pad_id: int):
    """(B, S) token ids -> (B, 1, 1, S) bool, True where the key is a real token.

    The result lives where ``ids`` live (NumPy or CuPy).
    """
    ids = ids.data if isinstance(ids, Tensor) else ids
    if not backend.is_array(ids):
        ids = backend.xp_for(backend.default_device()).asarray(ids)
    if ids.ndim != 2:
        raise ValueError(f"padding_mask expects token ids of shape (B, S), got shape {tuple(ids.shape)}")
    if ids.dtype.kind not in "iu":
        raise TypeError(f"padding_mask expects integer token ids, got dtype {ids.dtype}")
    return (ids != pad_id)[:, None, None, :]  # (B, 1, 1, S)


def causal_mask(size: int, device: str | None = None):
    """(1, 1, T, T) bool, lower triangular: query i may attend to keys 0..i.

    ``device`` is 'cpu' or 'cuda'; by default the backend's default device.
    """
    if int(size) != size or size < 0:
        raise ValueError(f"causal_mask needs a non-negative integer size, got {size!r}")
    xp = backend.xp_for(device or backend.default_device())
    # Exercise 6.3 — the causal mask (chapters/06-attention.md; graded by pytest -m ex_6_3)
    ### BEGIN SOLUTION
    return xp.tril(xp.ones((int(size), int(size)), dtype=bool))[None, None]  # (1, 1, T, T)
    ### END SOLUTION

