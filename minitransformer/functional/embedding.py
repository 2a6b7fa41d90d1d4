"""Token embeddings: a lookup table whose backward is a scatter-add (chapter 5, §3.4).

Forward reads rows: y[b, t] = W[ids[b, t]]. Backward must ADD the gradient
of every position into the row it read; a token that appears five times in a
batch receives five contributions. ``W[ids] += g`` would keep only one of
them (fancy-index assignment does not accumulate), so we use a scatter-add.
"""
from __future__ import annotations

from .. import backend
from ..backend import scatter_add_rows, xp_of
from ..tensor import Function, Tensor


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
        scatter_add_rows(gw, self.ids.reshape(-1), gy.reshape(-1, self.weight_shape[1]))  # repeats accumulate
        if self.padding_idx is not None:
            gw[self.padding_idx] = 0                               # the pad row never learns
        return gw


def embedding(ids, weight: Tensor, padding_idx: int | None = None) -> Tensor:
    """The rows of ``weight`` (num, dim) at integer ``ids`` (...) -> (..., dim).

    ``ids`` may be an array, a list or a Tensor; with ``padding_idx`` that row gets no gradient.
    """
    ids = _as_ids(ids, weight.shape[0], weight.device)
    return EmbeddingFunction(ids, padding_idx)(weight)


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
