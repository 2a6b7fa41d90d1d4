"""Measuring attention heads against what the grammar knows (chapter 12).

A head's attention matrix A (T × S) has one row per query position and sums
to 1 along it. Given gold links G — pairs (s, t): source position s and
target position t render the same meaning — three numbers say how much the
head "aligns words":

* alignment accuracy: over the target positions that have a gold link, the
  share whose strongest source position (argmax of the row) is a gold partner.
  A perfect diagonal on a diagonal gold alignment scores 1.
* attention mass: over the same rows, the mean weight the row puts on its gold
  partners. Uniform attention over S positions scores mean_t |G_t| / S.
* alignment error rate (AER, Och & Ney 2003) of the argmax links
  A = {(argmax_s A[t, s], t) : t has a gold link}: AER = 1 − (|A ∩ S| + |A ∩ P|) / (|A| + |S|),
  with the possible links P = G and the sure links S ⊆ P those of the rows that
  have exactly one gold partner (a phrase link, such as an English verb group to
  a Japanese one, is possible, not sure). One argmax per row can then reach 0.

For self-attention, ``relation_accuracy`` asks, for pairs (i, j) such as (verb,
its object), how often row i's strongest position is j; ``offset_baseline``
answers the same question for the best fixed offset ("always look k words to
the right"), the positional rule a head could follow without knowing grammar.

These numbers say where attention goes, not why the model translates as it
does: attention weights are not an explanation (Jain & Wallace 2019).
"""
from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


def _check(weights, links: Iterable[tuple[int, int]], name: str) -> tuple[np.ndarray, dict[int, set[int]]]:
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim != 2:
        raise ValueError(f"{name}: weights must be a (T, S) matrix, got shape {weights.shape}")
    rows, columns = weights.shape
    partners: dict[int, set[int]] = {}
    for source, target in links:
        if not (0 <= source < columns and 0 <= target < rows):
            raise ValueError(f"{name}: gold link (source {source}, target {target}) is outside the "
                             f"{rows} × {columns} attention matrix")
        partners.setdefault(target, set()).add(source)
    return weights, partners


def alignment_accuracy(weights, links: Iterable[tuple[int, int]]) -> float:
    """Share of gold-linked target rows whose argmax source is a gold partner (nan without links)."""
    weights, partners = _check(weights, links, "alignment_accuracy")
    if not partners:
        return float("nan")
    hits = sum(int(np.argmax(weights[t])) in sources for t, sources in partners.items())
    return hits / len(partners)


def attention_mass(weights, links: Iterable[tuple[int, int]]) -> float:
    """Mean, over gold-linked target rows, of the attention weight on the row's gold partners."""
    weights, partners = _check(weights, links, "attention_mass")
    if not partners:
        return float("nan")
    return float(np.mean([weights[t, sorted(sources)].sum() for t, sources in partners.items()]))


def alignment_error_rate(weights, links: Iterable[tuple[int, int]]) -> float:
    """AER of the argmax links of the gold-linked rows (sure: rows with one partner): 0 is perfect."""
    weights, partners = _check(weights, links, "alignment_error_rate")
    possible = {(s, t) for t, sources in partners.items() for s in sources}
    if not possible:
        return float("nan")
    # Exercise 12.1 — the alignment error rate of a head (chapters/12-looking-inside.md; graded by pytest -m ex_12_1)
    ### BEGIN SOLUTION
    sure = {(s, t) for t, sources in partners.items() if len(sources) == 1 for s in sources}
    predicted = {(int(np.argmax(weights[t])), t) for t in partners}          # one argmax link per linked row
    return 1.0 - (len(predicted & sure) + len(predicted & possible)) / (len(predicted) + len(sure))
    ### END SOLUTION


class AlignmentTally:
    """Counts over many sentences, so that a corpus score weights every gold-linked row alike."""

    def __init__(self) -> None:
        self.rows = self.hits = self.sure = self.sure_hits = 0
        self.mass = 0.0

    def add(self, weights, links: Iterable[tuple[int, int]]) -> None:
        weights, partners = _check(weights, links, "AlignmentTally.add")
        for t, sources in partners.items():
            best = int(np.argmax(weights[t]))
            self.rows += 1
            self.hits += best in sources
            self.mass += float(weights[t, sorted(sources)].sum())
            if len(sources) == 1:
                self.sure += 1
                self.sure_hits += best in sources

    def scores(self) -> dict[str, float]:
        """accuracy, mass and AER over everything added (the argmax links are one per row)."""
        if not self.rows:
            return {"accuracy": float("nan"), "mass": float("nan"), "aer": float("nan"), "rows": 0}
        return {"accuracy": self.hits / self.rows, "mass": self.mass / self.rows,
                "aer": 1.0 - (self.sure_hits + self.hits) / (self.rows + self.sure), "rows": self.rows}


def relation_accuracy(weights, pairs: Iterable[tuple[int, int]]) -> tuple[int, int]:
    """(hits, total): how many pairs (i, j) have row i of a self-attention matrix peak at column j."""
    weights = np.asarray(weights)
    pairs = list(pairs)
    return sum(int(np.argmax(weights[i])) == j for i, j in pairs), len(pairs)


def offset_baseline(pairs: Sequence[tuple[int, int]]) -> tuple[int, float]:
    """The best fixed offset k (j = i + k) for the pairs and the share of pairs it gets right."""
    if not pairs:
        return 0, float("nan")
    offsets = Counter(j - i for i, j in pairs)
    best, count = offsets.most_common(1)[0]
    return best, count / len(pairs)


# -- reading every head of a trained model ---------------------------------------------------------
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
