"""The decoder alone: a GPT-style language model from the translator's parts (chapter 15).

    ids (B, T) ─ embed·√d_model + PE ─ dropout ─ N × [causal self-attention, FFN] ─ LayerNorm ─ h Eᵀ ─ logits (B, T, V)

A language model predicts each token from the ones before it. That is the
translator's decoder with nothing to translate from: drop the encoder and the
encoder–decoder attention, and what is left — masked self-attention and the
FFN — is exactly an encoder layer (§3.1) under the causal mask (§3.2.3). So the
blocks here ARE ``EncoderLayer``s, given a cache for generation; the causal
mask is the whole difference between them and the encoder.

Pre-LN by default (``norm_first=True``), unlike the paper's post-LN translator:
the stack is trained with a short warm-up and a high learning rate (nanoGPT's
recipe), which Xiong et al. (2020) show post-LN does not tolerate, and the
final LayerNorm then normalises the residual stream before the projection.
``norm_first=False`` gives the paper's post-LN blocks (their last LayerNorm is
already the stack's, so no extra one is added).

Weight tying (§3.4): the output projection is h Eᵀ with the embedding E.
Positions: ``positional`` is "learned" (GPT's, Table 3 row (E)), "sinusoidal"
(§3.5) or "rope" (functional/rotary.py: q and k turned by position-dependent
angles inside each attention layer, so that their dot products depend on the
relative position only; nothing is added to the embeddings).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from .. import backend
from ..functional.attention_kinds import ATTENTION_KINDS, check_attention
from ..functional.linear import linear
from ..functional.linear_loss import linear_cross_entropy
from ..functional.masks import causal_mask
from ..functional.rotary import Rotary
from ..tensor import Tensor
from . import init
from .cache import AttentionCache
from .dropout import Dropout
from .embedding import Embedding, token_ids
from .layers import EncoderLayer
from .module import Module, ModuleList, counts_by_part, parts_table
from .normalization import LayerNorm
from .positional import LearnedPositionalEncoding, PositionalEncoding
from .transformer import _is_integer

POSITIONAL_KINDS = ("learned", "sinusoidal", "rope")


@dataclass
class LanguageModelConfig:
    """Hyper-parameters of a decoder-only language model; the defaults are nanoGPT's CPU recipe for
    Shakespeare's characters (4 layers, 4 heads, width 128, context 64, no dropout)."""

    vocab_size: int
    d_model: int = 128
    n_heads: int = 4
    d_ff: int = 512
    n_layers: int = 4
    context: int = 64                 # the longest sequence: rows of the position table, the KV cache's limit
    dropout: float = 0.0              # on sub-layer outputs and the embedding sum (§5.4)
    positional: str = "learned"       # "learned", "sinusoidal" (§3.5) or "rope" (rotary, chapter 15)
    norm_first: bool = True           # pre-LN (GPT-2, nanoGPT); False: the paper's post-LN
    seed: int = 0
    attention_dropout: float = 0.0
    attention: str = "softmax"        # "softmax", "flash", "local", "linear" (chapter 13), as the translator
    attention_window: int | None = None
    model: str = "lm"

    def __post_init__(self) -> None:
        for name in ("vocab_size", "d_model", "n_heads", "d_ff", "n_layers", "context"):
            value = getattr(self, name)
            _require(name, value, _is_integer(value) and value >= 1, "an integer >= 1")
        _require("seed", self.seed, _is_integer(self.seed) and self.seed >= 0, "an integer >= 0")
        for name in ("dropout", "attention_dropout"):
            value = getattr(self, name)
            _require(name, value, isinstance(value, (int, float)) and not isinstance(value, bool)
                     and 0.0 <= value < 1.0, "a number in [0, 1)")
        _require("norm_first", self.norm_first, isinstance(self.norm_first, bool), "True or False")
        _require("positional", self.positional, self.positional in POSITIONAL_KINDS,
                 " or ".join(repr(k) for k in POSITIONAL_KINDS))
        _require("model", self.model, self.model == "lm", "'lm'")
        if self.d_model % self.n_heads:
            raise ValueError(f"LanguageModelConfig: d_model={self.d_model} must be divisible by "
                             f"n_heads={self.n_heads}")
        if self.positional == "rope" and (self.d_model // self.n_heads) % 2:
            raise ValueError(f"LanguageModelConfig: positional 'rope' turns pairs of features, so d_k = "
                             f"d_model / n_heads = {self.d_model // self.n_heads} must be even")
        try:
            kind = check_attention(self.attention, self.attention_window, self.attention_dropout)
        except ValueError as error:
            raise ValueError(f"LanguageModelConfig: {error}") from None
        if kind.projected:
            raise ValueError(f"LanguageModelConfig: attention {self.attention!r} has no causal form (each projected "
                             "key mixes every position, the future ones too), and a language model's attention "
                             "is causal")


def _require(name: str, value, ok: bool, allowed: str) -> None:
    if not ok:
        raise ValueError(f"LanguageModelConfig: {name} must be {allowed}, got {value!r}")


class LanguageModelCache:
    """What ``LanguageModel.step`` remembers: one self-attention ``AttentionCache`` per block (the
    translator's mechanism, cache.py, without the cross-attention), and the next position."""

    def __init__(self, n_layers: int) -> None:
        self.layers = [AttentionCache(static=False) for _ in range(n_layers)]
        self.position = 0

    def __len__(self) -> int:
        return self.position

    @property
    def nbytes(self) -> int:
        return sum(layer.nbytes for layer in self.layers)

    def __repr__(self) -> str:
        return f"LanguageModelCache(layers={len(self.layers)}, position={self.position})"


class Block(EncoderLayer):
    """x (B, T, d_model) -> (B, T, d_model): causal self-attention, then the FFN — an encoder layer (§3.1)
    given the causal mask, and a cache for generation."""

    def forward(self, x: Tensor, mask=None, cache: AttentionCache | None = None) -> Tensor:
        x = self.residual(x, self.norm1, lambda h: self.self_attn(h, None, mask, cache=cache))
        return self.residual(x, self.norm2, self.feed_forward)


class LanguageModel(Module):
    """A decoder-only Transformer. ``model(ids)`` -> logits (B, T, V): row t predicts token t + 1."""

    def __init__(self, config: LanguageModelConfig) -> None:
        super().__init__()
        self.config = config
        init.set_seed(config.seed)
        d = config.d_model
        self.embed_scale = math.sqrt(d)                    # §3.4, as in the translator
        self.embedding = Embedding(config.vocab_size, d)   # also the output projection (§3.4)
        if config.positional == "rope":
            self.positional = Dropout(config.dropout)      # nothing added: the positions turn q and k instead
        else:
            positional = LearnedPositionalEncoding if config.positional == "learned" else PositionalEncoding
            self.positional = positional(d, config.context, config.dropout)
        self.blocks = ModuleList(Block(d, config.n_heads, config.d_ff, config.dropout, config.norm_first,
                                       config.attention_dropout, config.attention, config.attention_window)
                                 for _ in range(config.n_layers))
        self.norm = LayerNorm(d) if config.norm_first else None   # post-LN blocks already end in one
        if config.positional == "rope":
            for block in self.blocks:
                block.self_attn.rotary = Rotary()             # RoPE on every layer's queries and keys

    @property
    def device(self) -> str:
        return self.embedding.weight.device

    # -- the pieces ----------------------------------------------------------------------------
    def _ids(self, ids, name: str, ndim: int):
        return token_ids(ids, name, ndim, self.device, "LanguageModel")

    def _embed(self, ids, offset: int) -> Tensor:
        length = ids.shape[1]
        if offset + length > self.config.context:
            raise ValueError(f"LanguageModel: positions {offset}..{offset + length - 1} are beyond the context of "
                             f"{self.config.context} tokens the model was built for; feed at most the last "
                             f"{self.config.context} tokens")
        x = self.embedding(ids) * self.embed_scale                   # (B, T, d_model), ×√d_model (§3.4)
        if self.config.positional == "rope":
            return self.positional(x)                                # dropout only; RoPE acts in the attention
        return self.positional(x, offset)                            # + PE, then dropout

    def _mask(self, length: int, cache: LanguageModelCache | None):
        """The causal mask (1, 1, T, S) for T new positions after ``cache.position`` earlier ones."""
        if cache is None:
            return causal_mask(length, self.device)                  # (1, 1, T, T)
        if length == 1 or ATTENTION_KINDS[self.config.attention].recurrent is not None:
            return None     # one query sees every cached key; a running state is causal by construction
        xp = backend.xp_for(self.device)
        before = cache.position
        keys = xp.arange(before + length)[None, :]
        return (keys <= xp.arange(length)[:, None] + before)[None, None]   # (1, 1, T, before + T)

    def hidden(self, ids, cache: LanguageModelCache | None = None) -> Tensor:
        """ids (B, T) -> the final states h (B, T, d_model), before the projection."""
        ids = self._ids(ids, "ids", 2)
        offset = 0 if cache is None else cache.position
        x = self._embed(ids, offset)
        mask = self._mask(ids.shape[1], cache)
        if cache is not None and len(cache.layers) != len(self.blocks):
            raise ValueError(f"LanguageModel: the cache has {len(cache.layers)} layers but the model has "
                             f"{len(self.blocks)}; make it with model.init_cache()")
        for i, block in enumerate(self.blocks):
            x = block(x, mask, cache.layers[i] if cache is not None else None)
        if cache is not None:
            cache.position += ids.shape[1]
        return self.norm(x) if self.norm is not None else x

    # -- the interface ---------------------------------------------------------------------------
    def forward(self, ids) -> Tensor:
        """ids (B, T) -> logits (B, T, V); position t sees positions 0..t only (the causal mask)."""
        return linear(self.hidden(ids), self.embedding.weight.T)     # h Eᵀ (§3.4)

    def loss(self, inputs, targets) -> Tensor:
        """Mean cross-entropy (nats per token) of ``targets`` (B, T), the text shifted by one, after ``inputs``.

        Projection and loss as one Function (chapter 10): no (B·T, V) logits outlive the forward pass."""
        targets = self._ids(targets, "targets", 2)
        return linear_cross_entropy(self.hidden(inputs), self.embedding.weight.T, targets)

    def init_cache(self) -> LanguageModelCache:
        """An empty cache for ``step``: one self-attention cache per block."""
        return LanguageModelCache(len(self.blocks))

    def step(self, ids, cache: LanguageModelCache) -> Tensor:
        """ids (B, T) at positions cache.position .. + T -> logits (B, T, V), the earlier positions' keys and
        values read from ``cache`` (and this call's appended). Equals ``model(all ids so far)[:, -T:]``."""
        return linear(self.hidden(ids, cache), self.embedding.weight.T)

    # -- reporting ----------------------------------------------------------------------------
    def parameter_counts(self) -> dict[str, int]:
        """Learned numbers per part: embeddings (also the output), positional (learned only), blocks, norm."""
        return counts_by_part(self, ("embeddings", "positional", "blocks", "norm"),
                              {"embedding": "embeddings", "positional": "positional", "blocks": "blocks",
                               "norm": "norm"})

    def parameter_report(self) -> str:
        c = self.config
        notes = {"embeddings": "one (V, d_model) matrix, also the output projection (§3.4)",
                 "positional": "learned table" if c.positional == "learned" else f"{c.positional}: nothing learned",
                 "blocks": f"{c.n_layers} × (causal self-attention + FFN), {'pre' if c.norm_first else 'post'}-LN",
                 "norm": "final LayerNorm" if c.norm_first else "none (post-LN blocks end in one)"}
        return parts_table(self.parameter_counts(), notes)

    def extra_repr(self) -> str:
        fields = dataclasses.asdict(self.config)
        keys = ("vocab_size", "d_model", "n_heads", "d_ff", "n_layers", "context", "positional", "norm_first")
        return ", ".join(f"{k}={fields[k]}" for k in keys)
