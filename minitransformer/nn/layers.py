"""Encoder and decoder layers and their stacks (§3.1, chapter 9).

Each sub-layer (attention or feed-forward) is wrapped in a residual
connection and a layer normalisation. The paper puts the normalisation after
the residual sum ("post-LN"):

    post-LN:  x ← LayerNorm(x + Dropout(Sublayer(x)))        (§3.1, dropout §5.4)

A later, now common variant normalises the sub-layer's *input* and leaves the
residual path untouched, with one final LayerNorm on top of the stack:

    pre-LN:   x ← x + Dropout(Sublayer(LayerNorm(x)))

Xiong et al. (2020, "On Layer Normalization in the Transformer Architecture")
show why pre-LN trains without the learning-rate warm-up that post-LN needs:
in post-LN the gradients of the last layers are large at initialisation, in
pre-LN they are well behaved. ``norm_first=True`` selects it.

Encoder layer: self-attention, then the feed-forward network.
Decoder layer: masked self-attention, then encoder–decoder attention over the
encoder output ("memory"), then the feed-forward network.
"""
from __future__ import annotations

from typing import Callable

from ..tensor import Tensor
from .attention import MultiHeadAttention
from .cache import DecoderCache, LayerCache
from .dropout import Dropout
from .feedforward import FeedForward
from .module import Module, ModuleList
from .normalization import LayerNorm


class _ResidualLayer(Module):
    """The residual + LayerNorm wrapper shared by both layer kinds."""

    norm_first: bool
    dropout: Dropout

    def residual(self, x: Tensor, norm: LayerNorm, sublayer: Callable[[Tensor], Tensor]) -> Tensor:
        if self.norm_first:
            return self.dropout.residual(x, sublayer(norm(x)))   # pre-LN: x + Dropout(Sublayer(LN(x)))
        return norm(self.dropout.residual(x, sublayer(x)))       # post-LN: LN(x + Dropout(Sublayer(x))), §3.1


class EncoderLayer(_ResidualLayer):
    """x (B, S, d_model) -> (B, S, d_model): self-attention, then the FFN (§3.1)."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False,
                 attention_dropout: float = 0.0, attention: str = "softmax",
                 attention_window: int | None = None) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, attention_dropout, attention, attention_window)
        self.norm1 = LayerNorm(d_model)
        self.feed_forward = FeedForward(d_model, d_ff)
        self.norm2 = LayerNorm(d_model)
        self.dropout = Dropout(dropout)                    # P_drop = 0.1 in the base model (§5.4)

    def forward(self, x: Tensor, mask=None) -> Tensor:
        """``mask`` (B, 1, 1, S): the source padding mask."""
        x = self.residual(x, self.norm1, lambda h: self.self_attn(h, None, mask))
        return self.residual(x, self.norm2, self.feed_forward)

    def extra_repr(self) -> str:
        return f"norm_first={self.norm_first}"


class DecoderLayer(_ResidualLayer):
    """x (B, T, d_model), memory (B, S, d_model) -> (B, T, d_model) (§3.1).

    Masked self-attention, then attention over the encoder output, then the FFN.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1, norm_first: bool = False,
                 attention_dropout: float = 0.0, attention: str = "softmax",
                 attention_window: int | None = None) -> None:
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, attention_dropout, attention, attention_window)
        self.norm1 = LayerNorm(d_model)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, attention_dropout)
        self.norm2 = LayerNorm(d_model)
        self.feed_forward = FeedForward(d_model, d_ff)
        self.norm3 = LayerNorm(d_model)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor, self_mask=None, memory_mask=None,
                cache: LayerCache | None = None) -> Tensor:
        """``self_mask`` (1, 1, T, T) causal (None when decoding step by step with a cache);
        ``memory_mask`` (B, 1, 1, S) source padding."""
        self_cache = cache.self_attn if cache is not None else None
        cross_cache = cache.cross_attn if cache is not None else None
        x = self.residual(x, self.norm1, lambda h: self.self_attn(h, None, self_mask, cache=self_cache))
        x = self.residual(x, self.norm2, lambda h: self.cross_attn(h, memory, memory_mask, cache=cross_cache))
        return self.residual(x, self.norm3, self.feed_forward)

    def extra_repr(self) -> str:
        return f"norm_first={self.norm_first}"


class Encoder(Module):
    """N encoder layers (N = 6 in the paper), and a final LayerNorm in the pre-LN variant."""

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False, attention_dropout: float = 0.0, attention: str = "softmax",
                 attention_window: int | None = None) -> None:
        super().__init__()
        self.layers = ModuleList(EncoderLayer(d_model, n_heads, d_ff, dropout, norm_first, attention_dropout,
                                              attention, attention_window) for _ in range(n_layers))
        # post-LN already ends in a LayerNorm; pre-LN leaves the residual stream unnormalised
        self.norm = LayerNorm(d_model) if norm_first else None

    def forward(self, x: Tensor, mask=None) -> Tensor:
        for layer in self.layers:
            x = layer(x, mask)                             # (B, S, d_model)
        return self.norm(x) if self.norm is not None else x


class Decoder(Module):
    """N decoder layers, and a final LayerNorm in the pre-LN variant."""

    def __init__(self, n_layers: int, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1,
                 norm_first: bool = False, attention_dropout: float = 0.0, attention: str = "softmax",
                 attention_window: int | None = None) -> None:
        super().__init__()
        self.layers = ModuleList(DecoderLayer(d_model, n_heads, d_ff, dropout, norm_first, attention_dropout,
                                              attention, attention_window) for _ in range(n_layers))
        self.norm = LayerNorm(d_model) if norm_first else None

    def forward(self, x: Tensor, memory: Tensor, self_mask=None, memory_mask=None,
                cache: DecoderCache | None = None) -> Tensor:
        """x (B, T, d_model) -> (B, T, d_model)."""
        if cache is not None and len(cache.layers) != len(self.layers):
            raise ValueError(f"Decoder: the cache has {len(cache.layers)} layers but the decoder has "
                             f"{len(self.layers)}; make it with model.init_cache()")
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, self_mask, memory_mask, cache=cache.layers[i] if cache is not None else None)
        return self.norm(x) if self.norm is not None else x
