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
does: attention weights are not an explanation (Jain & Wallace 2019). Reading
the matrices out of a trained model, and drawing them, is attention_maps.py.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

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
                "aer": alignment_error_rate(*self.as_one_sentence()), "rows": self.rows}

    def as_one_sentence(self) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """A sentence with the same counts as everything added, whose AER is the corpus AER: so the one formula,
        alignment_error_rate's, computes both. Each row is sure (one gold partner, column 0) or possible (partners
        0 and 1), and its argmax is on column 0 (a hit) or 2 (a miss)."""
        possible_hits = self.hits - self.sure_hits
        kinds = ([(True, True)] * self.sure_hits + [(True, False)] * (self.sure - self.sure_hits)
                 + [(False, True)] * possible_hits + [(False, False)] * (self.rows - self.sure - possible_hits))
        weights, links = np.zeros((self.rows, 3)), []
        for t, (sure, hit) in enumerate(kinds):
            weights[t, 0 if hit else 2] = 1.0
            links += [(0, t)] if sure else [(0, t), (1, t)]
        return weights, links


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
