"""A recurrent encoder–decoder with attention, the translator the Transformer replaced (chapter 6).

    src (B, S) ─ embed ─ bidirectional LSTM ─────────────────────────────┐ memory (B, S, d)
                            └─ ←h_1 ─ bridge ─ s_0                       │
    tgt (B, T) ─ embed ─ LSTM (from s_0) ─ h_t ─ attention over memory ─ c_t
                   ↑                       └── h̃_t = tanh(W_c [c_t ; h_t]) ─ linear ─ logits (B, T, V)
                   └── h̃_{t−1} (input feeding)

(dropout after the embeddings, between LSTM layers and on h̃_t.)

The encoder is Bahdanau et al.'s (2015, §3.2): a bidirectional LSTM (they used GRUs) whose two halves
give every source word an annotation of the whole sentence, and whose right-to-left state at the
first word starts the decoder, s_0 = tanh(W_s ←h_1) (their appendix A.2.2). The decoder is Luong et
al.'s (2015): the LSTM steps first, its new state h_t asks the attention for the context c_t, and the
two make the attentional state h̃_t = tanh(W_c [c_t; h_t]) (their eq. 5), from which the next token is
predicted. With ``input_feeding`` h̃_t also goes into the next step (their §3.3), so that the decoder
knows what it attended to before, the role the context plays inside Bahdanau's decoder state. Without
it the decoder's LSTM can run over the whole target at once, and attention over all steps together.
The score is Bahdanau's additive one by default, or Luong's dot or general (``score``).

``d_model`` is the width of everything, as in the Transformer: embeddings, the decoder's LSTM, the
attention's hidden layer and h̃; each direction of the encoder has d_model / 2 units, so that the
memory is d_model wide. With ``tie_embeddings`` one (V, d_model) matrix embeds both languages and
makes the logits as h̃ Eᵀ (§3.4 of the Transformer paper, used here the same way).

The model speaks the Transformer's interface (``encode``, ``decode``, ``loss``, ``init_cache``,
``decode_step``, ``parameter_counts``), so the searches of decode.py, the Translator and the
checkpoints take either model.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .. import backend
from ..functional.linear_loss import linear_cross_entropy
from ..ops.shape import concatenate
from ..tensor import Tensor, no_grad
from . import init
from .dropout import Dropout
from .cache import _as_index_array
from .embedding import TABLE_PARTS, TranslationTables, table_notes, token_ids
from .linear import Linear, linear
from .lstm import LSTM
from .module import Module, counts_by_part, parts_table
from .seq2seq_attention import ATTENTION_SCORES, make_attention


@dataclass
class Seq2SeqConfig:
    """Hyper-parameters of the LSTM encoder–decoder; the names the Transformer's config shares mean the same."""

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 256                # embeddings, decoder LSTM, attention, h̃; encoder: d_model/2 each way
    n_layers: int = 2                 # LSTM layers in the encoder and in the decoder
    dropout: float = 0.2              # on embeddings, between LSTM layers, on h̃ (Zaremba et al., 2014)
    tie_embeddings: bool = True       # one (V, d_model) matrix: source, target and output
    pad_id: int = 0
    max_len: int = 512                # the longest sentence read or written (no positional table to outgrow)
    seed: int = 0
    score: str = "additive"           # "additive" (Bahdanau), "dot" or "general" (Luong)
    input_feeding: bool = True        # h̃_{t−1} into step t (Luong et al., §3.3)
    bidirectional: bool = True        # the encoder reads both ways (Bahdanau et al., §3.2)
    model: str = "lstm"               # which model a saved config describes (models.py)

    def __post_init__(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "n_layers", "max_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Seq2SeqConfig: {name} must be a positive integer, got {value!r}")
        for name in ("tie_embeddings", "input_feeding", "bidirectional"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"Seq2SeqConfig: {name} must be True or False, got {getattr(self, name)!r}")
        if self.bidirectional and self.d_model % 2:
            raise ValueError(f"Seq2SeqConfig: d_model={self.d_model} must be even when bidirectional=True "
                             "(each direction of the encoder has d_model/2 units)")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"Seq2SeqConfig: dropout must be in [0, 1), got {self.dropout}")
        if self.tie_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(f"Seq2SeqConfig: tie_embeddings=True shares one embedding matrix, so "
                             f"src_vocab_size ({self.src_vocab_size}) must equal tgt_vocab_size "
                             f"({self.tgt_vocab_size}); use a joint vocabulary or tie_embeddings=False")
        if not 0 <= self.pad_id < min(self.src_vocab_size, self.tgt_vocab_size):
            raise ValueError(f"Seq2SeqConfig: pad_id {self.pad_id} is not a valid token id (vocabularies of "
                             f"{self.src_vocab_size} and {self.tgt_vocab_size})")
        if self.score not in ATTENTION_SCORES:
            raise ValueError(f"Seq2SeqConfig: score must be one of {', '.join(ATTENTION_SCORES)}, got {self.score!r}")
        if self.model != "lstm":
            raise ValueError(f"Seq2SeqConfig: model must be 'lstm', got {self.model!r}; a Transformer is "
                             "configured by TransformerConfig")


class Seq2SeqCache:
    """What ``Seq2Seq.decode_step`` remembers between steps, for every row (hypothesis) of the batch.

    ``states``: the decoder's [h | c] per layer; ``attentional``: h̃ of the last step (B, 1, d_model),
    fed into the next with input feeding; ``keys``: the attention's keys, computed from the memory once;
    ``position``: how many steps were taken. ``reorder(rows)`` keeps those rows, as beam search needs.
    """

    def __init__(self) -> None:
        self.position = 0
        self.states: list[Tensor] | None = None
        self.attentional: Tensor | None = None
        self.keys: Tensor | None = None

    def __len__(self) -> int:
        return self.position

    def reorder(self, indices, same_sources: bool = False) -> None:
        """Keep batch rows ``indices`` (any order, repeats allowed), in place: row j becomes old row indices[j].

        ``same_sources=True`` (each row stays with its own sentence) leaves the keys as they are."""
        if self.states is None:
            return
        rows = _index_rows(indices, self.attentional)
        self.states = [Tensor(state.data[rows]) for state in self.states]
        self.attentional = Tensor(self.attentional.data[rows])
        if not same_sources:
            self.keys = Tensor(self.keys.data[rows])

    def __repr__(self) -> str:
        return f"Seq2SeqCache(position={self.position})"


class Seq2Seq(TranslationTables, Module):
    """The attention LSTM of 2015. ``model(src_ids, tgt_ids)`` -> logits (B, T, V_tgt)."""

    def __init__(self, config: Seq2SeqConfig) -> None:
        super().__init__()
        self.config = config
        init.set_seed(config.seed)                                     # same seed, same weights
        d, directions = config.d_model, 2 if config.bidirectional else 1
        self._make_tables(config, d)
        self.encoder = LSTM(d, d // directions, config.n_layers, config.bidirectional, config.dropout)
        self.bridge = Linear(d // directions, config.n_layers * 2 * d)   # s_0 = tanh(W_s ←h_1), every layer's [h | c]
        self.decoder = LSTM(2 * d if config.input_feeding else d, d, config.n_layers, dropout=config.dropout)
        self.attention = make_attention(config.score, d, d)
        self.combine = Linear(2 * d, d, bias=False)                     # h̃_t = tanh(W_c [c_t; h_t])
        self.dropout = Dropout(config.dropout)
        if not config.tie_embeddings:
            self.output = Linear(d, config.tgt_vocab_size, bias=False)

    # -- the pieces --------------------------------------------------------------------------
    def _output_weight(self) -> Tensor:
        """The (d_model, V_tgt) matrix of the logits h̃ W: Eᵀ when tied."""
        return self.embedding.weight.T if self.config.tie_embeddings else self.output.weight

    def _ids(self, ids, name: str, ndim: int):
        return token_ids(ids, name, ndim, self.device, "Seq2Seq")

    def _initial_states(self, memory: Tensor, src_mask) -> list[Tensor]:
        """The decoder's first [h | c] of every layer, from the encoder's summary of the sentence.

        Bidirectional: ←h_1, the right-to-left half of the first position, which has read the whole
        sentence (Bahdanau et al., A.2.2). One way: the state after each sentence's last token."""
        d, layers = self.config.d_model, self.config.n_layers
        if self.config.bidirectional:
            summary = memory[:, 0, d // 2:]                                        # ←h_1 (B, d/2)
        else:
            xp = backend.xp_of(src_mask)
            last = src_mask.shape[1] - 1 - xp.argmax(src_mask[:, ::-1], axis=1)    # each row's last real token
            summary = memory[xp.arange(memory.shape[0]), last]                     # (B, d)
        states = self.bridge(summary).tanh()                                       # (B, layers · 2d)
        return [states[:, k * 2 * d:(k + 1) * 2 * d] for k in range(layers)]

    def _attend(self, h: Tensor, memory: Tensor, src_mask, keys: Tensor) -> Tensor:
        """Decoder states h (B, T, d) -> attentional states h̃ (B, T, d), dropout applied."""
        context, _ = self.attention(h, memory, src_mask, keys)                     # c_t (B, T, d)
        attentional = self.combine(concatenate([context, h], axis=-1)).tanh()     # h̃_t = tanh(W_c [c_t; h_t])
        return self.dropout(attentional)

    def _step(self, y: Tensor, attentional: Tensor, states: list[Tensor], memory: Tensor, src_mask,
              keys: Tensor) -> tuple[Tensor, list[Tensor]]:
        """One decoder step: embedded y_{t−1} (B, 1, d) and h̃_{t−1} -> (h̃_t (B, 1, d), new states)."""
        x = concatenate([y, attentional], axis=-1) if self.config.input_feeding else y
        h, states = self.decoder(x, states=states)                                 # (B, 1, d)
        return self._attend(h, memory, src_mask, keys), states

    def _zero_attentional(self, batch: int, like: Tensor) -> Tensor:
        return Tensor(backend.xp_of(like.data).zeros((batch, 1, self.config.d_model), dtype=like.dtype))

    def _attentional_states(self, tgt_ids, memory: Tensor, src_mask) -> Tensor:
        """Teacher forcing: tgt_ids (B, T) -> h̃ (B, T, d_model), before the output projection."""
        tgt = self._ids(tgt_ids, "tgt_ids", 2)
        _check_batch(memory, src_mask, tgt.shape[0])
        y = self.dropout(self._target_table()(tgt))                               # (B, T, d)
        states = self._initial_states(memory, src_mask)
        keys = self.attention.keys(memory)
        if not self.config.input_feeding:                                         # every step at once
            h, _ = self.decoder(y, states=states)
            return self._attend(h, memory, src_mask, keys)
        attentional = self._zero_attentional(tgt.shape[0], memory)
        outputs = []
        for t in range(tgt.shape[1]):
            attentional, states = self._step(y[:, t:t + 1], attentional, states, memory, src_mask, keys)
            outputs.append(attentional)
        return concatenate(outputs, axis=1)

    # -- the interface ---------------------------------------------------------------------------
    def encode(self, src_ids) -> tuple[Tensor, object]:
        """src_ids (B, S) -> (memory (B, S, d_model), src_mask bool (B, S), True at real tokens)."""
        src = self._ids(src_ids, "src_ids", 2)
        src_mask = src != self.config.pad_id
        empty = backend.asnumpy(~src_mask.any(axis=1))
        if empty.any():                     # the decoder's first state and every attention need a token
            raise ValueError(f"Seq2Seq: src_ids row {int(empty.argmax())} holds only padding; every sentence "
                             "needs at least one token")
        memory, _ = self.encoder(self.dropout(self._source_table()(src)), src_mask)
        return memory, src_mask

    def decode(self, tgt_ids, memory: Tensor, src_mask) -> Tensor:
        """Teacher-forced pass: tgt_ids (B, T) -> logits (B, T, V_tgt)."""
        return linear(self._attentional_states(tgt_ids, memory, src_mask), self._output_weight())

    def forward(self, src_ids, tgt_ids) -> Tensor:
        """src_ids (B, S), tgt_ids (B, T) -> logits (B, T, V_tgt)."""
        memory, src_mask = self.encode(src_ids)
        return self.decode(tgt_ids, memory, src_mask)

    def loss(self, src_ids, tgt_in, tgt_out, label_smoothing: float = 0.0) -> Tensor:
        """Mean cross-entropy of ``tgt_out`` (B, T) after ``tgt_in`` (B, T), padding ignored; the projection
        and the loss as one Function, as in ``Transformer.loss``."""
        memory, src_mask = self.encode(src_ids)
        h = self._attentional_states(tgt_in, memory, src_mask)
        return linear_cross_entropy(h, self._output_weight(), tgt_out, None, label_smoothing,
                                    ignore_index=self.config.pad_id)

    def init_cache(self) -> Seq2SeqCache:
        """An empty cache for ``decode_step``."""
        return Seq2SeqCache()

    def decode_step(self, step_ids, memory: Tensor, src_mask, cache: Seq2SeqCache) -> Tensor:
        """One decoding step: step_ids (B,) -> logits (B, V_tgt) of the next token; advances the cache.

        Equals ``decode(all ids so far, ...)[:, -1]``: the recurrence makes each step O(1) in the
        length so far, and the cache holds only the decoder's states and h̃ (and the keys, once)."""
        ids = self._ids(step_ids, "step_ids", 1)
        if cache.position == 0:
            _check_batch(memory, src_mask, ids.shape[0])
            cache.states = self._initial_states(memory, src_mask)
            cache.keys = self.attention.keys(memory)
            cache.attentional = self._zero_attentional(ids.shape[0], memory)
        y = self.dropout(self._target_table()(ids[:, None]))                       # (B, 1, d)
        cache.attentional, cache.states = self._step(y, cache.attentional, cache.states, memory, src_mask,
                                                     cache.keys)
        cache.position += 1
        logits = linear(cache.attentional, self._output_weight())                  # (B, 1, V)
        return logits.reshape(logits.shape[0], logits.shape[2])

    def attention_weights(self, src_ids, tgt_in):
        """The attention weights α (B, T, S) of a teacher-forced pass, for pictures of the alignment
        (no graph; in the model's current mode: call it in eval mode)."""
        tgt = self._ids(tgt_in, "tgt_in", 2)
        weights, cache = [], self.init_cache()
        with no_grad():
            memory, src_mask = self.encode(src_ids)
            for t in range(tgt.shape[1]):
                self.decode_step(tgt[:, t], memory, src_mask, cache)
                h = cache.states[-1][:, None, :self.config.d_model]                # the top layer's h_t (B, 1, d)
                weights.append(self.attention(h, memory, src_mask, cache.keys)[1].data)
        return backend.xp_of(weights[0]).concatenate(weights, axis=1)

    # -- reporting ----------------------------------------------------------------------------
    def parameter_counts(self) -> dict[str, int]:
        """Learned numbers per part: embeddings, encoder, decoder (with the bridge and W_c), attention, output."""
        return counts_by_part(self, ("embeddings", "encoder", "decoder", "attention", "output"),
                              {**TABLE_PARTS, "bridge": "decoder", "combine": "decoder"})

    def parameter_report(self) -> str:
        """A table of parameter counts per part, and the total."""
        c = self.config
        counts = self.parameter_counts()
        directions = "bidirectional, " if c.bidirectional else ""
        notes = {
            **table_notes(c.tie_embeddings),
            "encoder": f"{c.n_layers} LSTM layers, {directions}{c.d_model // (2 if c.bidirectional else 1)} units",
            "decoder": f"{c.n_layers} LSTM layers of {c.d_model} units, the bridge s_0 and W_c"
                       + (", input feeding" if c.input_feeding else ""),
            "attention": f"{c.score} score",
        }
        return parts_table(counts, notes)

    def extra_repr(self) -> str:
        fields = dataclasses.asdict(self.config)
        keys = ("d_model", "n_layers", "score", "input_feeding", "bidirectional", "tie_embeddings")
        return ", ".join(f"{k}={fields[k]}" for k in keys)


def _check_batch(memory: Tensor, src_mask, batch: int) -> None:
    if memory.shape[0] != batch or src_mask.shape[0] != batch:
        raise ValueError(f"Seq2Seq: the target ids have {batch} rows but the memory has {memory.shape[0]} and "
                         f"the source mask {src_mask.shape[0]}; decode the batch that was encoded")


def _index_rows(indices, like: Tensor):
    return backend.to_device(_as_index_array(indices, "Seq2SeqCache"), like.device)
