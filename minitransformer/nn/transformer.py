"""The whole model: embeddings, positional encodings, encoder, decoder, output projection (§3, chapter 9).

    src ids (B, S) ─ embed·√d_model + PE ─ dropout ─ N × EncoderLayer ────────────┐ memory (B, S, d)
    tgt ids (B, T) ─ embed·√d_model + PE ─ dropout ─ N × DecoderLayer (masked) ───┴─ linear ─ logits (B, T, V)

Weight tying (§3.4): "we share the same weight matrix between the two
embedding layers and the pre-softmax linear transformation". With
``tie_embeddings=True`` one (V, d_model) matrix E embeds source and target
tokens and produces the logits as h Eᵀ; this needs one vocabulary shared by
both languages (the paper's 37,000-token BPE vocabulary for English–German).
The pre-softmax projection has no bias in either variant, so tied and untied
models differ only in what is shared.

Embeddings are multiplied by √d_model (§3.4) before the positional encoding
is added; dropout acts on that sum (§5.4).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from .. import backend
from ..functional.attention_kinds import check_attention
from ..functional.linear_loss import linear_cross_entropy
from ..functional.masks import causal_mask, padding_mask
from ..tensor import Tensor
from . import init
from .cache import DecoderCache
from .embedding import Embedding
from .layers import Decoder, Encoder
from .linear import Linear, linear
from .module import Module
from .positional import LearnedPositionalEncoding, PositionalEncoding


@dataclass
class TransformerConfig:
    """Hyper-parameters of a Transformer; the defaults are the paper's base model (Table 3)."""

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    d_ff: int = 2048
    n_layers: int = 6                 # N, for the encoder and for the decoder
    dropout: float = 0.1              # P_drop on sub-layer outputs and embedding sums (§5.4)
    tie_embeddings: bool = True       # §3.4; needs src_vocab_size == tgt_vocab_size
    pad_id: int = 0
    max_len: int = 512                # rows of the positional table
    positional: str = "sinusoidal"    # or "learned" (Table 3, row (E))
    norm_first: bool = False          # pre-LN variant (not the paper's)
    seed: int = 0
    attention_dropout: float = 0.0    # dropout on attention weights (not in the paper)
    attention: str = "softmax"        # self-attention: "softmax" (eq. 1), "flash", "local", "linear" (chapter 13)
    attention_window: int | None = None   # ± positions each query sees when attention = "local"

    def __post_init__(self) -> None:
        if self.d_model % self.n_heads:
            raise ValueError(f"TransformerConfig: d_model={self.d_model} must be divisible by "
                             f"n_heads={self.n_heads}")
        if self.tie_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(f"TransformerConfig: tie_embeddings=True shares one embedding matrix, so "
                             f"src_vocab_size ({self.src_vocab_size}) must equal tgt_vocab_size "
                             f"({self.tgt_vocab_size}); use a joint vocabulary or tie_embeddings=False")
        if self.positional not in ("sinusoidal", "learned"):
            raise ValueError(f"TransformerConfig: positional must be 'sinusoidal' or 'learned', "
                             f"got {self.positional!r}")
        for name in ("dropout", "attention_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"TransformerConfig: {name} must be in [0, 1), got {getattr(self, name)}")
        check_attention(self.attention, self.attention_window, self.attention_dropout)
        if not 0 <= self.pad_id < min(self.src_vocab_size, self.tgt_vocab_size):
            raise ValueError(f"TransformerConfig: pad_id {self.pad_id} is not a valid token id")

    @classmethod
    def _preset(cls, vocab: int, sizes: dict, overrides: dict) -> TransformerConfig:
        fields = dict(src_vocab_size=vocab, tgt_vocab_size=vocab, **sizes)
        fields.update(overrides)
        return cls(**fields)

    @classmethod
    def preset(cls, name: str, vocab: int, **overrides) -> TransformerConfig:
        """The model called ``name`` in presets.MODELS (toy, tiny, small, medium, base, big)."""
        from ..presets import model_sizes  # noqa: PLC0415 - the one table of named sizes

        return cls._preset(vocab, model_sizes(name), overrides)

    @classmethod
    def base(cls, vocab: int = 37000, **overrides) -> TransformerConfig:
        """The paper's base model: N=6, d_model=512, h=8, d_ff=2048, P_drop=0.1 (Table 3)."""
        return cls.preset("base", vocab, **overrides)

    @classmethod
    def big(cls, vocab: int = 37000, **overrides) -> TransformerConfig:
        """The paper's big model: N=6, d_model=1024, h=16, d_ff=4096, P_drop=0.3 (Table 3)."""
        return cls.preset("big", vocab, **overrides)

    @classmethod
    def small(cls, vocab: int, **overrides) -> TransformerConfig:
        """2 + 2 layers of width 128 (4 heads, d_ff 512): the default translator, minutes on a laptop CPU."""
        return cls.preset("small", vocab, **overrides)

    @classmethod
    def tiny(cls, vocab: int, **overrides) -> TransformerConfig:
        """2 + 2 layers of width 64 (4 heads, d_ff 256): for tests and quick experiments."""
        return cls.preset("tiny", vocab, **overrides)


class Transformer(Module):
    """The encoder–decoder Transformer of §3. ``model(src_ids, tgt_ids)`` -> logits (B, T, V_tgt)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        init.set_seed(config.seed)        # same seed, same weights (and the same dropout streams)
        d = config.d_model
        self.embed_scale = math.sqrt(d)   # §3.4
        if config.tie_embeddings:
            self.embedding = Embedding(config.src_vocab_size, d)          # source, target AND output (§3.4)
        else:
            self.src_embedding = Embedding(config.src_vocab_size, d)
            self.tgt_embedding = Embedding(config.tgt_vocab_size, d)
        positional = PositionalEncoding if config.positional == "sinusoidal" else LearnedPositionalEncoding
        self.src_positional = positional(d, config.max_len, config.dropout)
        self.tgt_positional = positional(d, config.max_len, config.dropout)
        stack = (config.n_layers, d, config.n_heads, config.d_ff, config.dropout, config.norm_first,
                 config.attention_dropout)
        kind = dict(attention=config.attention, attention_window=config.attention_window)   # self-attention only
        self.encoder = Encoder(*stack, **kind)
        self.decoder = Decoder(*stack, **kind)
        if not config.tie_embeddings:
            self.output = Linear(d, config.tgt_vocab_size, bias=False)  # pre-softmax projection

    # -- the pieces --------------------------------------------------------------------------
    @property
    def device(self) -> str:
        return self._source_table().weight.device

    def _source_table(self) -> Embedding:
        return self.embedding if self.config.tie_embeddings else self.src_embedding

    def _target_table(self) -> Embedding:
        return self.embedding if self.config.tie_embeddings else self.tgt_embedding

    def _ids(self, ids, name: str, ndim: int):
        """Token ids as an integer array on the model's device, of the expected rank."""
        ids = ids.data if isinstance(ids, Tensor) else ids
        if not backend.is_array(ids):
            ids = backend.asnumpy(ids)  # a Python list: to an array on the host
        if ids.ndim != ndim or ids.dtype.kind not in "iu":
            expected = "(B, length)" if ndim == 2 else "(B,)"
            raise ValueError(f"Transformer: {name} must be an integer array of shape {expected}, got shape "
                             f"{tuple(ids.shape)} and dtype {ids.dtype}")
        if ndim == 2 and ids.shape[1] == 0:   # attention over no keys has no softmax to take
            raise ValueError(f"Transformer: {name} has length 0 (shape {tuple(ids.shape)}); every sentence "
                             "needs at least one token")
        return backend.to_device(ids, self.device)

    def _embed(self, ids, table: Embedding, positional: Module, offset: int = 0) -> Tensor:
        x = table(ids) * self.embed_scale            # (B, T, d_model), ×√d_model (§3.4)
        return positional(x, offset)                 # + PE, then dropout (§3.5, §5.4)

    def _project(self, h: Tensor) -> Tensor:
        """Decoder output (B, T, d_model) -> logits (B, T, V_tgt)."""
        if self.config.tie_embeddings:
            return linear(h, self.embedding.weight.T)   # h Eᵀ: the embedding matrix, transposed (§3.4)
        return self.output(h)

    # -- the interface ---------------------------------------------------------------------------
    def encode(self, src_ids) -> tuple[Tensor, object]:
        """src_ids (B, S) -> (memory (B, S, d_model), src_mask bool (B, 1, 1, S))."""
        src = self._ids(src_ids, "src_ids", 2)
        src_mask = padding_mask(src, self.config.pad_id)                     # (B, 1, 1, S)
        x = self._embed(src, self._source_table(), self.src_positional)      # (B, S, d_model)
        return self.encoder(x, src_mask), src_mask

    def decode(self, tgt_ids, memory: Tensor, src_mask) -> Tensor:
        """Teacher-forced pass: tgt_ids (B, T) -> logits (B, T, V_tgt).

        Position t sees target positions 0..t (causal mask, §3.2.3) and every
        unpadded source position. For the attention weights, run it inside
        ``nn.record_attention(model)`` and read each layer's ``cross_attn.attention_weights``.
        """
        return self._project(self._decoder_states(tgt_ids, memory, src_mask))   # (B, T, V)

    def _decoder_states(self, tgt_ids, memory: Tensor, src_mask) -> Tensor:
        """tgt_ids (B, T) -> the decoder's output h (B, T, d_model), before the projection."""
        tgt = self._ids(tgt_ids, "tgt_ids", 2)
        y = self._embed(tgt, self._target_table(), self.tgt_positional)     # (B, T, d_model)
        self_mask = causal_mask(tgt.shape[1], backend.get_device(tgt))      # (1, 1, T, T)
        return self.decoder(y, memory, self_mask, src_mask)                 # (B, T, d_model)

    def forward(self, src_ids, tgt_ids) -> Tensor:
        """src_ids (B, S), tgt_ids (B, T) -> logits (B, T, V_tgt); masks are built here."""
        memory, src_mask = self.encode(src_ids)
        return self.decode(tgt_ids, memory, src_mask)

    def loss(self, src_ids, tgt_in, tgt_out, label_smoothing: float = 0.0) -> Tensor:
        """The training loss: mean cross-entropy of ``tgt_out`` (B, T) after ``tgt_in`` (B, T), padding ignored.

        The same number, and the same gradients bit for bit, as
        ``cross_entropy(self(src_ids, tgt_in), tgt_out, label_smoothing, ignore_index=pad_id)``, but with the
        projection and the loss as one Function (``linear_cross_entropy``), so that no (B·T, V) array of
        logits outlives the forward pass (chapter 10).
        """
        memory, src_mask = self.encode(src_ids)
        h = self._decoder_states(tgt_in, memory, src_mask)                  # (B, T, d_model)
        if self.config.tie_embeddings:
            weight, bias = self.embedding.weight.T, None                    # h Eᵀ, as in _project (§3.4)
        else:
            weight, bias = self.output.weight, self.output.bias
        return linear_cross_entropy(h, weight, tgt_out, bias, label_smoothing, ignore_index=self.config.pad_id)

    def init_cache(self) -> DecoderCache:
        """An empty cache for ``decode_step``: one entry per decoder layer."""
        return DecoderCache(len(self.decoder.layers))

    def decode_step(self, step_ids, memory: Tensor, src_mask, cache: DecoderCache) -> Tensor:
        """One decoding step: step_ids (B,) at position ``cache.position`` -> logits (B, V_tgt).

        Equals ``decode(all ids so far, ...)[:, -1]`` but only the new position is
        computed: its query attends to the cached keys/values of the earlier steps,
        so step t costs O(t) instead of re-running O(t²). Advances ``cache.position``.
        """
        ids = self._ids(step_ids, "step_ids", 1)
        y = self._embed(ids[:, None], self._target_table(), self.tgt_positional, offset=cache.position)  # (B, 1, d)
        h = self.decoder(y, memory, None, src_mask, cache=cache)            # (B, 1, d_model); no mask needed:
        cache.position += 1                                                  # the cache holds only the past
        logits = self._project(h)                                            # (B, 1, V)
        return logits.reshape(logits.shape[0], logits.shape[2])             # (B, V)

    # -- reporting ----------------------------------------------------------------------------
    def parameter_counts(self) -> dict[str, int]:
        """Learned numbers per part: embeddings, positional (learned only), encoder, decoder, output."""
        parts = {"embeddings": 0, "positional": 0, "encoder": 0, "decoder": 0, "output": 0}
        for name, p in self.named_parameters():
            top = name.split(".")[0]
            part = {"embedding": "embeddings", "src_embedding": "embeddings", "tgt_embedding": "embeddings",
                    "src_positional": "positional", "tgt_positional": "positional"}.get(top, top)
            parts[part] += p.size
        return parts

    def parameter_report(self) -> str:
        """A table of parameter counts per part, and the total."""
        c = self.config
        counts = self.parameter_counts()
        notes = {
            "embeddings": ("one shared (V, d_model) matrix, also the output projection (§3.4)"
                           if c.tie_embeddings else "separate source and target matrices"),
            "positional": "sinusoidal: nothing learned" if c.positional == "sinusoidal" else "learned tables",
            "encoder": f"{c.n_layers} layers" + (" + final LayerNorm" if c.norm_first else ""),
            "decoder": f"{c.n_layers} layers" + (" + final LayerNorm" if c.norm_first else ""),
            "output": "tied to the embeddings" if c.tie_embeddings else "Linear without bias",
        }
        lines = [f"{'part':<12}{'parameters':>14}  note"]
        for part, count in counts.items():
            lines.append(f"{part:<12}{count:>14,}  {notes[part]}")
        lines.append(f"{'total':<12}{sum(counts.values()):>14,}")
        return "\n".join(lines)

    def extra_repr(self) -> str:
        fields = dataclasses.asdict(self.config)
        keys = ("d_model", "n_heads", "d_ff", "n_layers", "tie_embeddings", "norm_first", "positional")
        return ", ".join(f"{k}={fields[k]}" for k in keys)
