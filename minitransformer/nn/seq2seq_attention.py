"""Attention in a recurrent encoder–decoder (chapter 6): a decoder state looks at the encoder's annotations.

Before the Transformer, attention joined a recurrent decoder to a recurrent encoder. At every output
step the decoder's state q (the query) is scored against each encoder output h_j (the annotation;
here also the key), a softmax over j makes the scores weights, and the weighted sum of the h_j is the
context vector (Bahdanau et al., 2015, eq. 5–6; Luong et al., 2015, §3.1):

    e_j = score(q, h_j),      α = softmax(e),      c = Σ_j α_j h_j

The three scores compared by Luong et al. (2015, eq. 8):

    additive (Bahdanau et al.; Luong's "concat")   vᵀ tanh(W_q q + W_k h_j)
    dot                                             qᵀ h_j
    general                                         qᵀ W_a h_j

Each module splits its score in two: ``keys(memory)``, the part that depends on the encoder alone
(W_k h_j, W_a h_j, or h_j itself), computed once per sentence and cached by a decoder that takes one
step at a time; and ``score(queries, keys)``, the part that meets the query. There is no 1/√d scaling:
these are the scores of the 2015 papers (the Transformer's scaled dot product is chapter 6's subject).

Masks. ``mask`` (B, S) is True at real source tokens (or (B, T, S) per query). A padded key gets
weight exactly 0. A query with no key at all gets all-zero weights and a zero context, the rule of
``F.scaled_dot_product_attention``.
"""
from __future__ import annotations

import math

from .. import backend
from ..functional.additive_attention import additive_score
from ..functional.softmax import softmax
from ..ops.indexing import masked_fill
from ..tensor import Tensor
from . import init
from .linear import Linear
from .module import Module, Parameter


class Seq2SeqAttention(Module):
    """The shared part: ``attn(queries, memory, mask)`` -> (context (B, T, d_memory), weights (B, T, S)).

    queries (B, T, d_query): one per decoder step (T = 1 for a single step); memory (B, S, d_memory).
    Subclasses define ``keys`` and ``score``.
    """

    def keys(self, memory: Tensor) -> Tensor:
        """What the score needs from the memory (B, S, d_memory): the same for every decoder step."""
        raise NotImplementedError(f"{type(self).__name__}.keys is not implemented")

    def score(self, queries: Tensor, keys: Tensor) -> Tensor:
        """queries (B, T, d_query), keys from ``self.keys`` -> scores (B, T, S), before the mask."""
        raise NotImplementedError(f"{type(self).__name__}.score is not implemented")

    def forward(self, queries: Tensor, memory: Tensor, mask=None, keys: Tensor | None = None):
        _check_operands(type(self).__name__, queries, memory)
        if keys is None:
            keys = self.keys(memory)
        scores = self.score(queries, keys)                                  # (B, T, S)
        weights = masked_softmax(scores, mask)                              # α, rows sum to 1
        return weights @ memory, weights                                    # c_t = Σ_j α_tj h_j  (B, T, d_memory)


class AdditiveAttention(Seq2SeqAttention):
    """Bahdanau's score vᵀ tanh(W_q q + W_k h_j), with a hidden layer of ``hidden_size`` units.

    As in the paper (appendix A.1.2) neither projection has a bias; v is initialised U(−1/√A, 1/√A).
    """

    def __init__(self, query_size: int, memory_size: int, hidden_size: int) -> None:
        super().__init__()
        self.w_q = Linear(query_size, hidden_size, bias=False)             # W (the paper's W_a)
        self.w_k = Linear(memory_size, hidden_size, bias=False)            # U (the paper's U_a)
        xp = backend.xp_for(backend.default_device())
        self.v = Parameter(xp.empty(hidden_size, dtype="float32"))        # v (the paper's v_a)
        init.uniform(self.v, -1 / math.sqrt(hidden_size), 1 / math.sqrt(hidden_size))

    def keys(self, memory: Tensor) -> Tensor:
        return self.w_k(memory)                                             # U h_j (B, S, A)

    def score(self, queries: Tensor, keys: Tensor) -> Tensor:
        return additive_score(self.w_q(queries), keys, self.v)             # vᵀ tanh(W q_t + U h_j)

    def extra_repr(self) -> str:
        return f"query_size={self.w_q.in_features}, memory_size={self.w_k.in_features}, hidden_size={self.v.shape[0]}"


class DotAttention(Seq2SeqAttention):
    """Luong's dot score qᵀ h_j: no parameters; the query and the memory must have the same size."""

    def keys(self, memory: Tensor) -> Tensor:
        return memory

    def score(self, queries: Tensor, keys: Tensor) -> Tensor:
        if queries.shape[-1] != keys.shape[-1]:
            raise ValueError(f"DotAttention: the query size {queries.shape[-1]} differs from the memory size "
                             f"{keys.shape[-1]}; a dot product needs them equal (GeneralAttention does not)")
        return queries @ keys.swapaxes(-1, -2)                              # (B, T, S)


class GeneralAttention(Seq2SeqAttention):
    """Luong's general score qᵀ W_a h_j, computed as q · (W_a h_j): W_a h_j is a key, once per sentence."""

    def __init__(self, query_size: int, memory_size: int) -> None:
        super().__init__()
        self.w_a = Linear(memory_size, query_size, bias=False)

    def keys(self, memory: Tensor) -> Tensor:
        return self.w_a(memory)                                             # W_a h_j (B, S, d_query)

    def score(self, queries: Tensor, keys: Tensor) -> Tensor:
        return queries @ keys.swapaxes(-1, -2)

    def extra_repr(self) -> str:
        return f"query_size={self.w_a.out_features}, memory_size={self.w_a.in_features}"


ATTENTION_SCORES = ("additive", "dot", "general")


def make_attention(score: str, query_size: int, memory_size: int, hidden_size: int | None = None) -> Seq2SeqAttention:
    """The attention module for a score named in ``ATTENTION_SCORES``; ``hidden_size`` (additive only)
    defaults to ``query_size``."""
    if score == "additive":
        return AdditiveAttention(query_size, memory_size, hidden_size or query_size)
    if score == "dot":
        if query_size != memory_size:
            raise ValueError(f"the dot score needs queries and memory of the same size, got {query_size} and "
                             f"{memory_size}")
        return DotAttention()
    if score == "general":
        return GeneralAttention(query_size, memory_size)
    raise ValueError(f"unknown attention score {score!r}; choose one of {', '.join(ATTENTION_SCORES)}")


def masked_softmax(scores: Tensor, mask=None) -> Tensor:
    """softmax over the last axis of scores (B, T, S) where ``mask`` (B, S) or (B, T, S) allows, 0 elsewhere.

    A masked score becomes −∞ before the softmax (its weight is exactly 0, and no gradient reaches it).
    A row with no allowed key would be 0/0: its scores are left as they are and its weights multiplied
    by 0, so the row is zero and sends no gradient back.
    """
    if mask is None:
        return softmax(scores, axis=-1)
    mask = _mask_for(scores, mask)
    has_key = mask.any(axis=-1, keepdims=True)                              # (B, T, 1)
    scores = masked_fill(scores, ~mask & has_key, -math.inf)
    return softmax(scores, axis=-1) * Tensor(has_key.astype(scores.dtype))


def _mask_for(scores: Tensor, mask):
    """The mask as a (B, T, S) boolean array on the scores' device, with a clear error for a wrong one."""
    mask = mask.data if isinstance(mask, Tensor) else mask
    if not backend.is_array(mask):
        mask = backend.xp_for("cpu").asarray(mask)
    batch, queries, keys = scores.shape
    if mask.dtype != bool or mask.shape not in ((batch, keys), (batch, queries, keys)):
        raise ValueError(f"attention: mask must be boolean, (B, S) = ({batch}, {keys}) or (B, T, S) = "
                         f"({batch}, {queries}, {keys}), True where a key may be attended to; got shape "
                         f"{tuple(mask.shape)} and dtype {mask.dtype}")
    mask = backend.to_device(mask, scores.device)
    return mask[:, None, :] if mask.ndim == 2 else mask


def _check_operands(name: str, queries, memory) -> None:
    if not isinstance(queries, Tensor) or not isinstance(memory, Tensor) or queries.ndim != 3 or memory.ndim != 3:
        shapes = [tuple(getattr(a, "shape", ())) for a in (queries, memory)]
        raise ValueError(f"{name}: expected queries (B, T, d_query) and memory (B, S, d_memory) Tensors, got "
                         f"shapes {shapes[0]} and {shapes[1]}")
    if queries.shape[0] != memory.shape[0]:
        raise ValueError(f"{name}: queries and memory must have the same batch size, got {queries.shape[0]} and "
                         f"{memory.shape[0]}")
