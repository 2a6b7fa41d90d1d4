"""The Embedding layer: a (num_embeddings, dim) table of learned vectors (chapter 5, §3.4).

The lookup and its scatter-add backward are ``functional/embedding.py``
(Functions live in functional/, Modules in nn/).
"""
from __future__ import annotations

import math

from .. import backend
from ..functional.embedding import embedding
from ..tensor import Tensor
from . import init
from .module import Module, Parameter

__all__ = ["Embedding", "token_ids", "TranslationTables", "TABLE_PARTS", "table_notes"]


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
        return embedding(ids, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.dim}{pad}"


def token_ids(ids, name: str, ndim: int, device: str, model: str):
    """Token ids as an integer array on ``device``, of rank ``ndim`` ((B, length) or (B,)); a clear error naming
    ``model`` and the argument ``name`` otherwise. A sentence of length 0 is refused: it has nothing to read."""
    ids = ids.data if isinstance(ids, Tensor) else ids
    if not backend.is_array(ids):
        ids = backend.asnumpy(ids)  # a Python list: to an array on the host
    if ids.ndim != ndim or ids.dtype.kind not in "iu":
        expected = "(B, length)" if ndim == 2 else "(B,)"
        raise ValueError(f"{model}: {name} must be an integer array of shape {expected}, got shape "
                         f"{tuple(ids.shape)} and dtype {ids.dtype}")
    if ndim == 2 and ids.shape[1] == 0:
        raise ValueError(f"{model}: {name} has length 0 (shape {tuple(ids.shape)}); every sentence "
                         "needs at least one token")
    return backend.to_device(ids, device)


class TranslationTables:
    """The embedding tables of a translation model (Transformer, Seq2Seq), mixed into the Module: with
    ``config.tie_embeddings`` one (V, d_model) table for both languages (``embedding``), else one each
    (``src_embedding``, ``tgt_embedding``)."""

    def _make_tables(self, config, d_model: int) -> None:
        if config.tie_embeddings:
            self.embedding = Embedding(config.src_vocab_size, d_model)
        else:
            self.src_embedding = Embedding(config.src_vocab_size, d_model)
            self.tgt_embedding = Embedding(config.tgt_vocab_size, d_model)

    @property
    def device(self) -> str:
        return self._source_table().weight.device

    def _source_table(self) -> Embedding:
        return self.embedding if self.config.tie_embeddings else self.src_embedding

    def _target_table(self) -> Embedding:
        return self.embedding if self.config.tie_embeddings else self.tgt_embedding


# a translation model's embedding tables, by the attribute names both models give them: one part of its report
TABLE_PARTS = {"embedding": "embeddings", "src_embedding": "embeddings", "tgt_embedding": "embeddings"}


def table_notes(tied: bool, source: str = "") -> dict[str, str]:
    """The parameter report's notes on the embedding tables and the output projection; ``source`` cites the
    reason for tying (the Transformer's §3.4)."""
    return {"embeddings": f"one shared (V, d_model) matrix, also the output projection{source}" if tied else
            "separate source and target matrices",
            "output": "tied to the embeddings" if tied else "Linear without bias"}
