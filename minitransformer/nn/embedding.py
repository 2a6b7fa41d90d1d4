"""Token embeddings: a lookup table whose backward is a scatter-add (chapter 5, §3.4).

Forward reads rows: y[b, t] = W[ids[b, t]]. Backward must ADD the gradient
of every position into the row it read; a token that appears five times in a
batch receives five contributions. ``W[ids] += g`` would keep only one of
them (fancy-index assignment does not accumulate), so we use scatter_add.
"""
from __future__ import annotations

import math

from .. import backend
from ..backend import scatter_add, xp_of
from ..tensor import Function, Tensor
from . import init
from .module import Module, Parameter


class EmbeddingFunction(Function):
    """weight (num, dim) gathered at integer ``ids`` (...) -> (..., dim)."""

    def __init__(self, ids, padding_idx: int | None = None) -> None:
        self.ids = ids
        self.padding_idx = padding_idx

    def forward(self, weight):
        self.weight_shape = weight.shape
        return weight[self.ids]                                    # (..., dim)

    def backward(self, gy):
        xp = xp_of(gy)
        gw = xp.zeros(self.weight_shape, dtype=gy.dtype)           # (num, dim)
        scatter_add(gw, self.ids.reshape(-1), gy.reshape(-1, self.weight_shape[1]))  # repeats accumulate
        if self.padding_idx is not None:
            gw[self.padding_idx] = 0                               # the pad row never learns
        return gw


def _as_ids(ids, num_embeddings: int, device: str):
    """Integer ids as an array on ``device``, checked to lie in [0, num_embeddings)."""
    if isinstance(ids, Tensor):
        ids = ids.data
    if not backend.is_array(ids):
        ids = backend.asnumpy(ids)  # a Python list: to an array on the host
    if ids.dtype.kind not in "iu":
        raise TypeError(f"Embedding: ids must be integers, got dtype {ids.dtype}")
    ids = backend.to_device(ids, device)
    if ids.size and bool(((ids < 0) | (ids >= num_embeddings)).any()):   # one wait for a GPU, not two
        low, high = int(ids.min()), int(ids.max())
        raise IndexError(f"Embedding: ids range over [{low}, {high}] but the table has "
                         f"{num_embeddings} rows (valid ids 0..{num_embeddings - 1})")
    return ids


class Embedding(Module):
    """A (num_embeddings, dim) table of learned vectors; forward(ids (...)) -> (..., dim).

    Initialised N(0, dim^-1/2): the Transformer multiplies embeddings by √d_model (§3.4), which
    brings them to unit scale, the scale of the sinusoidal positional encodings they are added to.
    With ``padding_idx`` that row starts at zero and never receives a gradient.
    """

    def __init__(self, num_embeddings: int, dim: int, padding_idx: int | None = None) -> None:
        super().__init__()
        if padding_idx is not None and not 0 <= padding_idx < num_embeddings:
            raise ValueError(f"Embedding: padding_idx {padding_idx} is outside [0, {num_embeddings})")
        self.num_embeddings, self.dim, self.padding_idx = num_embeddings, dim, padding_idx
        xp = backend.xp_for(backend.default_device())
        self.weight = Parameter(xp.empty((num_embeddings, dim), dtype="float32"))
        init.normal(self.weight, std=1 / math.sqrt(dim))
        if padding_idx is not None:
            self.weight.data[padding_idx] = 0

    def forward(self, ids) -> Tensor:
        ids = _as_ids(ids, self.num_embeddings, self.weight.device)
        return EmbeddingFunction(ids, self.padding_idx)(self.weight)

    def extra_repr(self) -> str:
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.dim}{pad}"
