"""The unigram language model of subwords (Kudo 2018, "Subword Regularization"), over raw text.

BPE (raw_bpe.py) builds its vocabulary bottom up: it merges the most frequent pair, again and again,
and segments a new sentence by replaying those merges in order. The segmentation it gives is whatever
the merge order happens to produce; nothing says it is the best one. The unigram model turns this
around. It is a probability model of segmentations: every piece x of the vocabulary has a probability
p(x), the pieces of a segmentation are drawn independently, and

    P(x_1 … x_m) = p(x_1) · … · p(x_m)          (Kudo 2018, §3.2)

A sentence is encoded as its most probable segmentation, found by the Viterbi algorithm over the
lattice of every way to cut it into pieces of the vocabulary:

    "▁私は学生"   ->   ▁ | 私は | 学生     if  log p(▁) + log p(私は) + log p(学生)  is the largest sum

Learning (§3.2) needs both a vocabulary and its probabilities, and each is easy given the other:

1. Seed: every substring seen at least twice (up to ``MAX_PIECE_LENGTH`` characters), the most
   frequent (by count × length) kept, ten times the target size (``SEED_FACTOR``), and every character.
2. EM (§3.2): the segmentation of each sentence is hidden. The E step takes each sentence's lattice
   and computes, by the forward–backward algorithm, how often each piece is used in expectation over
   all its segmentations, weighted by their probabilities; the M step sets p(x) to x's expected count
   over the sum of them. The corpus likelihood never goes down.
3. Prune: for each piece, the loss is how much the likelihood drops if the piece is removed and
   its uses go to the best segmentation of the piece without it ("私は" -> "私" "は"). The pieces
   with the smallest loss are dropped, a quarter per round, then EM again, until the target size.
   Single characters are never dropped, so every string the training text could spell stays
   spellable.

As in raw_bpe.py (and raw_text.py, which the two share): the space is the symbol "▁", a "▁" is put in
front, pieces never continue across a space, characters never seen are written as their UTF-8 bytes
(byte fallback, so nothing is unknown), and decoding gives back the exact input string.
"""
from __future__ import annotations

import math
from collections import Counter
from typing import Iterable, Mapping, Sequence

import numpy as np

from .raw_text import (BYTE_TOKENS, FIRST_PIECE_ID, SPACE, RawTextTokenizer, byte_ids, check_lists, file_vocab,
                       full_vocab, split_pieces)
from .tokenizer import SPECIAL_TOKENS, check_training_texts, register

MAX_PIECE_LENGTH = 8       # characters in a piece (SentencePiece allows 16; 8 keeps the lattice small)
SEED_FACTOR = 10           # seed pieces per piece of the target vocabulary
SHRINK = 0.75              # each pruning round keeps this share of the pieces (SentencePiece's shrinking factor)
EM_STEPS = 2               # EM steps per round (SentencePiece's sub-iterations)
MIN_EXPECTED_COUNT = 0.5   # a piece used less than half a time in expectation is dropped at the M step
UNKNOWN_PENALTY = 10.0     # a character outside the vocabulary scores this much below the worst piece
MAX_TEXT_LENGTH = 4096     # longer texts are left out of learning (SentencePiece: --max_sentence_length 4192
                           # bytes); with pieces of at most 8 characters, such a text is more than 512 tokens,
                           # more than the model's positions (its pair is dropped from training anyway)


# --- the Viterbi segmentation ------------------------------------------------------------------------
def viterbi(text: str, log_probs: Mapping[str, float], unknown: float, max_length: int = MAX_PIECE_LENGTH,
            exclude: str | None = None) -> list[str]:
    """The most probable segmentation of ``text`` into pieces of ``log_probs`` (piece -> log p).

    best[e] is the best log-probability of ``text[:e]``: the best over pieces ``text[s:e]`` of
    best[s] + log p(text[s:e]). A character that is no piece scores ``unknown`` on its own (the
    caller writes it as bytes). ``exclude`` leaves one piece out (pruning asks for the best
    segmentation of a piece without itself). Of equally good segmentations, the one whose last
    piece is longest wins.
    """
    n = len(text)
    best = [0.0] + [-math.inf] * n
    start_of = [0] * (n + 1)                    # where the best segmentation's last piece of text[:e] starts
    for end in range(1, n + 1):
        for start in range(max(0, end - max_length), end):
            piece = text[start:end]
            score = log_probs.get(piece) if piece != exclude else None
            if score is None and end - start == 1:
                score = unknown                 # a character outside the vocabulary: byte fallback
            if score is not None and best[start] + score > best[end]:
                best[end], start_of[end] = best[start] + score, start
    pieces, end = [], n
    while end > 0:
        pieces.append(text[start_of[end]:end])
        end = start_of[end]
    return pieces[::-1]


# --- the lattice of a whole corpus, and forward–backward over it -------------------------------------
class Lattice:
    """Every way to cut every training piece (a string, with its count) into candidate pieces, as arrays.

    Node ``first[k] + i`` is the point before character i of piece k; an edge (from, to, token)
    says that the characters between two points form candidate ``token``. A character that is no
    candidate gets an edge of token ``fallback`` (= the number of candidates). All the pieces go
    through forward–backward together: the edges are grouped by the position where they end (for
    the forward pass) and where they start (backward), and a group is one NumPy step.
    """

    def __init__(self, pieces: Sequence[str], counts: Sequence[float], candidates: Sequence[str],
                 max_length: int = MAX_PIECE_LENGTH) -> None:
        # every prefix of a candidate -> the candidate it spells, or -1: a longer match can only extend a prefix
        prefixes = {c[:j]: -1 for c in candidates for j in range(1, len(c))}
        prefixes.update((c, i) for i, c in enumerate(candidates))
        self.fallback = len(candidates)
        self.counts = np.asarray(counts, dtype=np.float64)
        lengths = np.asarray([len(p) for p in pieces], dtype=np.int64)
        self.first = np.concatenate([[0], np.cumsum(lengths + 1)[:-1]]).astype(np.int64)
        self.last = self.first + lengths
        self.num_nodes = int(lengths.sum() + len(pieces))
        edges = []                                          # (from, to, token)
        for k, piece in enumerate(pieces):
            base, n = int(self.first[k]), len(piece)
            for i in range(n):
                if prefixes.get(piece[i], -1) == -1:
                    edges.append((base + i, base + i + 1, self.fallback))
                for j in range(i + 1, min(n, i + max_length) + 1):
                    token = prefixes.get(piece[i:j])
                    if token is None:
                        break
                    if token >= 0:
                        edges.append((base + i, base + j, token))
        src, dst, self.tok = np.asarray(edges, dtype=np.int64).reshape(-1, 3).T
        node_piece = np.repeat(np.arange(len(pieces)), lengths + 1)
        self.owner = node_piece[src]
        self.src, self.dst = src, dst
        self.start_pos, self.end_pos = src - self.first[self.owner], dst - self.first[self.owner]
        self.by_end = np.lexsort((self.dst, self.end_pos))             # forward: by end position, then node
        self.by_start = np.lexsort((self.src, -self.start_pos))        # backward: by start position, from the end
        self._sweeps()

    def keep(self, alive: np.ndarray) -> None:
        """Drop the edges of the candidates no longer ``alive`` (a boolean per candidate, fallback last)."""
        mask = alive[self.tok]
        new_index = np.cumsum(mask) - 1                     # the sorted orders stay sorted without the dropped
        self.by_end = new_index[self.by_end[mask[self.by_end]]]
        self.by_start = new_index[self.by_start[mask[self.by_start]]]
        for name in ("src", "dst", "tok", "owner", "start_pos", "end_pos"):
            setattr(self, name, getattr(self, name)[mask])
        self._sweeps()

    def _sweeps(self) -> None:
        self.forward = _Sweep(self.by_end, self.end_pos, self.dst, self.src)        # alpha: into dst, from src
        self.backward = _Sweep(self.by_start, self.start_pos, self.src, self.dst)   # beta: into src, from dst


class _Sweep:
    """The edges of one pass of forward–backward, in the order the pass takes them, cut into its steps.

    A step is the edges that end (forward) or start (backward) at one position of the pieces; within
    it, each run of edges into one node is one log-sum-exp: into[node] = log Σ exp(into[from] + score).
    A step is a handful of NumPy calls on slices of arrays computed here once, so that a long piece,
    which is one step per character, costs little per character: every index array (where a step's
    edges and runs begin, which run each edge is in) is found for all steps at once.
    """

    def __init__(self, order: np.ndarray, position: np.ndarray, into: np.ndarray, come_from: np.ndarray) -> None:
        self.edges, self.into, self.come_from = order, into[order], come_from[order]
        position = position[order]
        new_step = np.concatenate(([True], position[1:] != position[:-1]))
        new_run = np.concatenate(([True], self.into[1:] != self.into[:-1])) | new_step
        step_of_edge, run_of_edge = np.cumsum(new_step) - 1, np.cumsum(new_run) - 1
        step_edges = np.append(np.flatnonzero(new_step), len(order))   # step i: edges step_edges[i:i+2]
        run_starts = np.flatnonzero(new_run)
        step_runs = np.append(run_of_edge[step_edges[:-1]], len(run_starts)) if len(order) else np.zeros(1, int)
        self.targets = self.into[run_starts]                             # the node each run adds into
        self.run_starts = run_starts - step_edges[step_of_edge[run_starts]]          # within its step
        self.run_of_edge = run_of_edge - step_runs[step_of_edge]                     # within its step
        self.steps = list(zip(step_edges[:-1].tolist(), step_edges[1:].tolist(),
                              step_runs[:-1].tolist(), step_runs[1:].tolist()))

    def run(self, values_at: np.ndarray, edge_score: np.ndarray) -> None:
        """Fill ``values_at`` (alpha or beta, its starting nodes set) step by step, in place."""
        score = edge_score[self.edges]
        for a, b, first_run, end_run in self.steps:
            values = values_at[self.come_from[a:b]] + score[a:b]
            starts = self.run_starts[first_run:end_run]
            peak = np.maximum.reduceat(values, starts)                   # log-sum-exp, shifted by each run's max
            values -= peak[self.run_of_edge[a:b]]
            np.exp(values, out=values)
            values_at[self.targets[first_run:end_run]] = peak + np.log(np.add.reduceat(values, starts))


def forward_backward(lattice: Lattice, log_probs: np.ndarray) -> tuple[np.ndarray, float]:
    """The E step: each candidate's expected count over all segmentations of all pieces, and the corpus
    log-likelihood Σ count · log P(piece).

    alpha[v] = log of the total probability of all paths from a piece's start to node v (forward),
    beta[v]  = the same from v to the piece's end (backward), so the posterior of an edge u -> v of
    token x is exp(alpha[u] + log p(x) + beta[v] - log Z), Z = alpha[end] the piece's probability.
    ``log_probs`` has one entry per candidate and the fallback last.
    """
    edge_score = log_probs[lattice.tok]
    alpha = np.full(lattice.num_nodes, -np.inf)
    alpha[lattice.first] = 0.0
    lattice.forward.run(alpha, edge_score)          # every edge ending at position e, after all ending earlier
    beta = np.full(lattice.num_nodes, -np.inf)
    beta[lattice.last] = 0.0
    lattice.backward.run(beta, edge_score)          # every edge starting at position s, after all starting later
    log_z = alpha[lattice.last]
    posterior = np.exp(alpha[lattice.src] + edge_score + beta[lattice.dst] - log_z[lattice.owner])
    expected = np.bincount(lattice.tok, weights=lattice.counts[lattice.owner] * posterior,
                           minlength=len(log_probs))
    return expected, float(lattice.counts @ log_z)


def m_step(expected: np.ndarray, alive: np.ndarray, required: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The M step: log p(x) = log(expected count of x / the sum of them), over the candidates still alive.

    A candidate used less than ``MIN_EXPECTED_COUNT`` times in expectation is dropped, unless it is
    ``required`` (a single character). Returns (log_probs, alive); the fallback entry (last) is
    ``UNKNOWN_PENALTY`` below the worst piece.
    """
    alive = alive & ((expected >= MIN_EXPECTED_COUNT) | required)
    pieces = np.flatnonzero(alive[:-1])
    counts = np.maximum(expected[pieces], 1e-6)
    log_probs = np.full(len(expected), -np.inf)
    log_probs[pieces] = np.log(counts / counts.sum())
    log_probs[-1] = log_probs[pieces].min() - UNKNOWN_PENALTY
    alive[-1] = True
    return log_probs, alive


def pruning_loss(candidates: Sequence[str], expected: np.ndarray, log_probs: np.ndarray,
                 alive: np.ndarray, max_length: int = MAX_PIECE_LENGTH) -> np.ndarray:
    """How much the corpus log-likelihood drops if each candidate is removed (Kudo 2018, §3.2).

    The c_x expected uses of x go to its best segmentation without it, y_1 … y_k: each y_i gains c_x
    uses, the total N gains c_x (k - 1), and the loss is c_x (log p(x) - Σ log p'(y_i)), p' the
    probabilities after the move (as SentencePiece computes it). Single characters have no
    alternative: their loss is infinite, they are never removed.
    """
    scores = {candidates[i]: float(log_probs[i]) for i in np.flatnonzero(alive[:-1])}
    index = {c: i for i, c in enumerate(candidates)}
    total = expected[:-1][alive[:-1]].sum()
    loss = np.full(len(candidates), -np.inf)
    for i in np.flatnonzero(alive[:-1]):
        piece, used = candidates[i], expected[i]
        if len(piece) == 1:
            loss[i] = np.inf
            continue
        alternative = viterbi(piece, scores, log_probs[-1], max_length, exclude=piece)
        new_total = total + used * (len(alternative) - 1)
        moved = sum(math.log((expected[index[y]] + used) / new_total) for y in alternative)
        loss[i] = used * (log_probs[i] - moved)
    return loss


def seed_candidates(piece_counts: Mapping[str, int], size: int,
                    max_length: int = MAX_PIECE_LENGTH) -> tuple[list[str], list[int]]:
    """Every character of the pieces (but a literal "▁") and the ``size`` most frequent longer substrings
    (seen at least twice, ranked by count × length, as SentencePiece ranks its seeds), with their counts."""
    counts: Counter[str] = Counter()
    for piece, count in piece_counts.items():
        for part in piece.split(SPACE):                # a literal "▁" is written as bytes, in no piece
            n = len(part)
            substrings = [part[i:j] for i in range(n) for j in range(i + 1, min(n, i + max_length) + 1)]
            if count == 1:                             # (most raw sentences: Counter counts a list in C)
                counts.update(substrings)
            else:
                for substring in substrings:
                    counts[substring] += count
    characters = sorted(c for c in counts if len(c) == 1)
    frequent = [c for c, k in counts.items() if k >= 2 and len(c) > 1]       # (in the order first seen)
    rank = np.argsort([-counts[c] * len(c) for c in frequent], kind="stable")[:size]
    candidates = characters + [frequent[i] for i in rank]
    return candidates, [counts[c] for c in candidates]


@register
class UnigramTokenizer(RawTextTokenizer):
    """The unigram language model over raw text: ``encode`` any string to ids (its Viterbi segmentation),
    ``decode`` gives back that exact string.

    Ids 0-3 are the special tokens pad, bos, eos and unk (unk is never produced), 4-259 the bytes,
    then the pieces, each with its log-probability in ``scores``. As in ``RawBPETokenizer`` text is
    looked up only among the pieces, so "<s>" in a text is never the special token.
    """

    kind = "unigram"      # (encoding and decoding: RawTextTokenizer, shared with the raw-text BPE)

    def __init__(self, vocab: Sequence[str], scores: Sequence[float]) -> None:
        if tuple(vocab[:FIRST_PIECE_ID]) != SPECIAL_TOKENS + BYTE_TOKENS:
            raise ValueError("the vocabulary must start with the special tokens and the 256 byte tokens")
        if len(scores) != len(vocab) - FIRST_PIECE_ID:
            raise ValueError(f"{len(scores)} scores for {len(vocab) - FIRST_PIECE_ID} pieces")
        if not all(isinstance(s, (int, float)) and math.isfinite(s) and s <= 0 for s in scores):
            raise ValueError("every score must be a finite log-probability (a number ≤ 0)")
        if not all(isinstance(t, str) and t for t in vocab[FIRST_PIECE_ID:]):
            raise ValueError("every piece must be a non-empty string")
        self.vocab = list(vocab)
        self.scores = [float(s) for s in scores]
        # piece, spelled with real spaces -> (log p, id)
        self.pieces = {t.replace(SPACE, " "): (s, i) for i, (t, s) in enumerate(zip(self.vocab[FIRST_PIECE_ID:],
                                                                                   self.scores), FIRST_PIECE_ID)}
        if len(self.pieces) != len(self.scores):
            raise ValueError("the vocabulary contains duplicate tokens")
        self.log_probs = {piece: score for piece, (score, _) in self.pieces.items()}
        self.unknown = min(self.scores, default=0.0) - UNKNOWN_PENALTY
        self.max_length = max(map(len, self.pieces), default=1)
        self._cache: dict[str, list[int]] = {}

    # --- training --------------------------------------------------------------------------------
    skipped_texts = 0     # how many texts ``train`` left out as longer than its ``max_text_length``

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, max_length: int = MAX_PIECE_LENGTH,
              log=None, max_text_length: int = MAX_TEXT_LENGTH) -> "UnigramTokenizer":
        """Learn pieces and their probabilities from raw ``texts``: seed, EM, prune, until ``vocab_size``
        tokens (the special tokens and the 256 bytes included; every character seen is kept, even
        past the size). Texts longer than ``max_text_length`` characters are left out, and counted in
        the result's ``skipped_texts``. ``log``, if given, is called with a line per round."""
        texts = check_training_texts(texts, vocab_size)
        kept = [text for text in texts if len(text) <= max_text_length]
        skipped = len(texts) - len(kept)
        if skipped and log is not None:
            log(f"{skipped} of {len(texts)} texts left out: longer than {max_text_length:,} characters")
        if not kept:
            raise ValueError(f"train(): all {len(texts)} texts are longer than {max_text_length:,} characters")
        piece_counts = Counter()
        for text in kept:
            piece_counts.update(split_pieces(text))
        pieces = sorted(piece_counts)                              # a fixed order: learning is deterministic
        if not pieces:
            raise ValueError("no text to learn a unigram model from")
        target = max(vocab_size - FIRST_PIECE_ID, 0)
        candidates, seed_counts = seed_candidates(piece_counts, SEED_FACTOR * target, max_length)
        required = np.array([len(c) == 1 for c in candidates] + [True])
        lattice = Lattice(pieces, [piece_counts[p] for p in pieces], candidates, max_length)
        alive = np.ones(len(candidates) + 1, dtype=bool)
        log_probs = np.log(np.asarray(seed_counts + [1e-6]) / sum(seed_counts))   # substring frequencies to start
        while True:
            for _ in range(EM_STEPS):
                expected, likelihood = forward_backward(lattice, log_probs)
                log_probs, alive = m_step(expected, alive, required)
                lattice.keep(alive)
            size = int(alive[:-1].sum())
            if log is not None:
                log(f"{size} pieces, log-likelihood {likelihood:.1f}")
            if size <= target or not (alive & ~required).any():
                break
            loss = pruning_loss(candidates, expected, log_probs, alive, max_length)
            removable = np.flatnonzero(alive[:-1] & ~required[:-1])
            keep = max(target - int(required[:-1].sum()), int(len(removable) * SHRINK), 0)
            ranked = removable[np.lexsort((removable, -loss[removable]))]   # largest loss first
            alive[ranked[keep:]] = False
            lattice.keep(alive)
            log_probs[~alive] = -np.inf
        kept = sorted(np.flatnonzero(alive[:-1]), key=lambda i: (-log_probs[i], candidates[i]))
        vocab = list(SPECIAL_TOKENS) + list(BYTE_TOKENS) + [candidates[i].replace(" ", SPACE) for i in kept]
        tokenizer = cls(vocab, [float(log_probs[i]) for i in kept])
        tokenizer.skipped_texts = skipped
        return tokenizer

    # --- encoding --------------------------------------------------------------------------------
    def _encode_piece(self, piece: str) -> list[int]:
        cached = self._cache.get(piece)
        if cached is not None:
            return cached
        ids = []
        for part in viterbi(piece, self.log_probs, self.unknown, self.max_length):
            found = self.pieces.get(part)
            ids.extend([found[1]] if found is not None else byte_ids(part))
        if len(self._cache) < 200_000:
            self._cache[piece] = ids
        return ids

    # --- files -----------------------------------------------------------------------------------
    def fields(self) -> dict:
        """Pieces and their log-probabilities, for ``to_dict`` (the byte tokens implied)."""
        return {"vocab": file_vocab(self.vocab), "scores": self.scores}

    @classmethod
    def from_fields(cls, data: dict) -> UnigramTokenizer:
        check_lists(data, ("vocab", "scores"))
        try:
            return cls(full_vocab(data), data["scores"])
        except TypeError as error:
            raise ValueError(f"broken tokenizer ({error})") from None
