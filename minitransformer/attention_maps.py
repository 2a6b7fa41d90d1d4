"""Every attention head of a trained model for one sentence: read out, and drawn as grids (chapter 12).

``attention_maps`` runs the model once with every attention layer keeping its weights and returns them by
kind: encoder self-attention, decoder masked self-attention and encoder–decoder attention, each
(layers, heads, queries, keys), with the subword labels of both axes. ``draw_attention_maps`` draws one
picture per kind, a grid of layers × heads (``python -m minitransformer attention``). How well a head's
matrix agrees with the grammar's gold alignments is alignment_scores.py.
"""
from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

KINDS = ("encoder", "decoder", "cross")   # encoder self-attention, decoder masked self-attention, encoder–decoder


def model_kinds(model) -> tuple[str, ...]:
    """The kinds of attention a model has: all three in a Transformer; only "cross" in the attention LSTM,
    whose one attention looks from the decoder at the encoder (chapter 6)."""
    from .nn.seq2seq import Seq2Seq  # noqa: PLC0415

    return ("cross",) if isinstance(model, Seq2Seq) else KINDS


def check_kinds(model, kinds: Sequence[str]) -> None:
    """Refuse, by name, a kind of attention the model does not have."""
    missing = [kind for kind in kinds if kind not in model_kinds(model)]
    if missing:
        raise ValueError(f"an attention LSTM has no {' and no '.join(missing)} self-attention: its one attention "
                         f"looks from the decoder at the encoder; ask for --kind cross (or no --kind)")


@dataclass
class AttentionMaps:
    """Every head's weights for one sentence: ``weights[kind]`` is (layers, heads, queries, keys), for each kind
    the model has (an attention LSTM: "cross" only, one layer and one head)."""

    weights: dict[str, np.ndarray]
    source: list[str]          # labels of the source subwords (encoder queries and keys, cross keys)
    decoder_input: list[str]   # <s> y_1 … y_n: decoder self-attention queries and keys
    output: list[str]          # y_1 … y_n </s>: what each decoder row predicts (cross-attention queries)
    source_ids: list[int]
    decoder_input_ids: list[int]
    output_ids: list[int]

    def labels(self, kind: str) -> tuple[list[str], list[str], list[int], list[int]]:
        """(query labels, key labels, query ids, key ids) of a kind."""
        if kind == "encoder":
            return self.source, self.source, self.source_ids, self.source_ids
        if kind == "decoder":
            return self.decoder_input, self.decoder_input, self.decoder_input_ids, self.decoder_input_ids
        if kind == "cross":
            return self.output, self.source, self.output_ids, self.source_ids
        raise ValueError(f"unknown attention kind {kind!r}; choose one of {', '.join(KINDS)}")


def attention_maps(translator, source: str, output_ids: Sequence[int] | None = None) -> AttentionMaps:
    """Run the model once on ``source`` (and ``output_ids``, default: its greedy translation) with every
    attention layer keeping its weights (``record_attention``), then read them from the layers. An attention
    LSTM's one attention comes from ``translator.cross_attention``."""
    from . import backend  # noqa: PLC0415
    from .decode import decode_sentences, searching  # noqa: PLC0415
    from .nn.attention import record_attention  # noqa: PLC0415

    model, tok = translator.model, translator.tokenizer
    src_ids = translator.encode_sources([source])[0]
    if not src_ids:
        raise ValueError("attention_maps: the source sentence is empty")
    if output_ids is None:
        output_ids = decode_sentences(model, [src_ids], tok.bos_id, tok.eos_id, beam_size=1)[0]
    output_ids = list(output_ids)[:model.config.max_len - 1]
    tgt_in = [tok.bos_id] + output_ids
    target = output_ids + [tok.eos_id]
    if model_kinds(model) == ("cross",):
        weights = translator.cross_attention(source, output_ids)[0]                     # (T, S)
        return AttentionMaps({"cross": weights[None, None]}, translator.display_tokens(src_ids),
                             translator.display_tokens(tgt_in), translator.display_tokens(target), list(src_ids),
                             tgt_in, target)
    with searching(model), record_attention(model):
        memory, src_mask = model.encode(np.asarray([src_ids], dtype=np.int64))
        model.decode(np.asarray([tgt_in], dtype=np.int64), memory, src_mask)

    def stack(layers, name: str) -> np.ndarray:
        return np.stack([backend.asnumpy(getattr(layer, name).attention_weights.data)[0] for layer in layers])

    weights = {"encoder": stack(model.encoder.layers, "self_attn"),
               "decoder": stack(model.decoder.layers, "self_attn"),
               "cross": stack(model.decoder.layers, "cross_attn")}
    return AttentionMaps(weights, translator.display_tokens(src_ids), translator.display_tokens(tgt_in),
                         translator.display_tokens(target), list(src_ids), tgt_in, target)


def draw_attention_maps(maps: AttentionMaps, out: str, kinds: Sequence[str] | None = None,
                        sentence: str = "") -> list[str]:
    """One picture per kind, a grid of layers × heads: OUT-encoder.png, OUT-decoder.png, OUT-cross.png
    (or exactly OUT when one kind is asked for). Returns the paths written."""
    from .plot import attention_grid  # noqa: PLC0415 - matplotlib only when drawing

    titles = {"encoder": "encoder self-attention", "decoder": "decoder masked self-attention",
              "cross": "encoder–decoder attention"}
    kinds = list(maps.weights) if kinds is None else kinds               # default: every kind the maps hold
    missing = [kind for kind in kinds if kind not in maps.weights]
    if missing:
        raise ValueError(f"no {', '.join(missing)} attention among the maps (they hold {', '.join(maps.weights)})")
    paths = []
    for kind, path in zip(kinds, picture_paths(out, kinds)):
        queries, keys, query_ids, key_ids = maps.labels(kind)
        attention_grid(maps.weights[kind], keys, queries, path, title=f"{titles[kind]}: {sentence}".rstrip(": "),
                       src_ids=key_ids, tgt_ids=query_ids)
        paths.append(str(path))
    return paths


def picture_paths(out: str, kinds: Sequence[str]) -> list[Path]:
    """The files ``draw_attention_maps`` writes for OUT: the names matplotlib will really use.

    OUT that ends in a slash or names a folder gets OUT/attention-KIND.png, one per kind; otherwise one kind
    writes OUT and several OUT-KIND, each with .png added when OUT has no picture format's suffix
    (matplotlib would add it silently, and the path printed would not be the file written).
    """
    from matplotlib.backend_bases import FigureCanvasBase  # noqa: PLC0415 - the formats matplotlib writes

    text = os.path.expanduser(str(out))
    if text.endswith(("/", os.sep)) or os.path.isdir(text):
        return [Path(text) / f"attention-{kind}.png" for kind in kinds]
    path = Path(text)
    if path.suffix.lower().lstrip(".") not in FigureCanvasBase.get_supported_filetypes():
        path = path.with_name(path.name + ".png")
    if len(kinds) == 1:
        return [path]
    return [path.with_name(f"{path.stem}-{kind}{path.suffix}") for kind in kinds]
