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
import numbers
from dataclasses import dataclass

from .. import backend
from ..functional.attention_kinds import check_attention
from ..functional.linear_loss import linear_cross_entropy
from ..functional.masks import causal_mask, padding_mask
from ..presets import model_sizes             # the table of named sizes: plain data, it imports nothing
from ..tensor import Tensor
from . import init
from .cache import DecoderCache
from .embedding import TABLE_PARTS, Embedding, TranslationTables, table_notes, token_ids
from .layers import Decoder, Encoder
from .linear import Linear, linear
from .module import Module, counts_by_part, parts_table
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
    model: str = "transformer"        # which model a saved config describes (models.py)

    def __post_init__(self) -> None:
        self._check_types_and_ranges()
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
        try:
            kind = check_attention(self.attention, self.attention_window, self.attention_dropout)
        except ValueError as error:
            raise ValueError(f"TransformerConfig: {error}") from None
        if kind.projected:
            raise ValueError(f"TransformerConfig: attention {self.attention!r} has no causal form (each projected key "
                             "mixes every position, the future ones too), and the decoder's self-attention is causal; "
                             "use it in an encoder-only layer, nn.MultiHeadAttention(..., attention='linformer', "
                             "window=k, max_len=n)")
        if not 0 <= self.pad_id < min(self.src_vocab_size, self.tgt_vocab_size):
            raise ValueError(f"TransformerConfig: pad_id {self.pad_id} is not a valid token id")
        if self.model != "transformer":
            raise ValueError(f"TransformerConfig: model must be 'transformer', got {self.model!r}; an LSTM "
                             "encoder-decoder is configured by Seq2SeqConfig")

    def _check_types_and_ranges(self) -> None:
        """Each field alone: the right kind of value, in its range (a config read from JSON can hold anything)."""
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "d_ff", "n_layers", "max_len"):
            _require(name, getattr(self, name), _is_integer(getattr(self, name)) and getattr(self, name) >= 1,
                     "an integer >= 1")
        for name in ("pad_id", "seed"):
            _require(name, getattr(self, name), _is_integer(getattr(self, name)) and getattr(self, name) >= 0,
                     "an integer >= 0")
        for name in ("dropout", "attention_dropout"):
            value = getattr(self, name)
            _require(name, value, isinstance(value, (int, float)) and not isinstance(value, bool)
                     and 0.0 <= value < 1.0, "a number in [0, 1)")
        for name in ("tie_embeddings", "norm_first"):
            _require(name, getattr(self, name), isinstance(getattr(self, name), bool), "True or False")

    @classmethod
    def _preset(cls, vocab: int, sizes: dict, overrides: dict) -> TransformerConfig:
        fields = dict(src_vocab_size=vocab, tgt_vocab_size=vocab, **sizes)
        fields.update(overrides)
        return cls(**fields)

    @classmethod
    def preset(cls, name: str, vocab: int, **overrides) -> TransformerConfig:
        """The model called ``name`` in presets.MODELS (toy, tiny, small, medium, base, big)."""
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


def _is_integer(value) -> bool:
    """A Python or NumPy integer; not a bool (True would read as 1), not a float (8.0 is refused as a size)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _require(name: str, value, ok: bool, allowed: str) -> None:
    if not ok:
        raise ValueError(f"TransformerConfig: {name} must be {allowed}, got {value!r}")


class Transformer(TranslationTables, Module):
    """The encoder–decoder Transformer of §3. ``model(src_ids, tgt_ids)`` -> logits (B, T, V_tgt)."""

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        init.set_seed(config.seed)        # same seed, same weights (and the same dropout streams)
        d = config.d_model
        self.embed_scale = math.sqrt(d)   # §3.4
        self._make_tables(config, d)   # source, target AND output when tied (§3.4)
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
    def _ids(self, ids, name: str, ndim: int):
        """Token ids as an integer array on the model's device, of the expected rank."""
        return token_ids(ids, name, ndim, self.device, "Transformer")   # attention over no keys has no softmax

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
        return counts_by_part(self, ("embeddings", "positional", "encoder", "decoder", "output"),
                              {**TABLE_PARTS, "src_positional": "positional", "tgt_positional": "positional"})

    def parameter_report(self) -> str:
        """A table of parameter counts per part, and the total."""
        c = self.config
        counts = self.parameter_counts()
        notes = {
            **table_notes(c.tie_embeddings, " (§3.4)"),
            "positional": "sinusoidal: nothing learned" if c.positional == "sinusoidal" else "learned tables",
            "encoder": f"{c.n_layers} layers" + (" + final LayerNorm" if c.norm_first else ""),
            "decoder": f"{c.n_layers} layers" + (" + final LayerNorm" if c.norm_first else ""),
        }
        return parts_table(counts, notes)

    def extra_repr(self) -> str:
        fields = dataclasses.asdict(self.config)
        keys = ("d_model", "n_heads", "d_ff", "n_layers", "tie_embeddings", "norm_first", "positional")
        return ", ".join(f"{k}={fields[k]}" for k in keys)
