"""Byte-pair encoding of raw text, in the manner of SentencePiece (Kudo & Richardson 2018).

The word-level ``BPETokenizer`` (bpe.py) splits text at spaces before it learns
anything, so it needs text whose words are already set apart. Japanese,
Chinese and Thai are written without spaces, and so is every raw corpus's
punctuation ("Tom's here."): to a whitespace tokenizer a Japanese sentence is
one long "word", every sentence a word of its own.

SentencePiece's idea is to stop treating the space as special. The sentence is
a sequence of characters in which the space is an ordinary symbol, written
"▁" (U+2581) so that it can be seen inside a token:

    "I am here."   ->  ▁ I ▁ a m ▁ h e r e .      (a "▁" is put in front: the dummy prefix)
    "私は学生です。" ->  ▁ 私 は 学 生 で す 。

BPE then merges the most frequent adjacent pair of symbols, again and again,
exactly as Sennrich et al. do within words. Two rules keep it sane: a token
never continues across a space ("▁" only ever begins a token, so "e▁a" is
never learned), and pairs involving raw bytes are never merged.

Byte fallback: the vocabulary holds the 256 bytes "<0x00>" … "<0xFF>", and a
character that is not in the vocabulary is written as the bytes of its UTF-8
encoding. No input is ever unknown, and decoding gives back the exact input
string: the "▁" become spaces again, the dummy prefix is dropped, the bytes are
joined and read as UTF-8. (A literal "▁" in the input is written as its bytes,
so that it cannot turn into a space.)

Training is incremental: the corpus is one flat array of symbols linked to
their neighbours, each pair knows where it occurs, and a merge touches only
the places where it happens (and the pairs on either side), never the whole
corpus. Ties between equally frequent pairs go to the pair whose symbols
entered the vocabulary first (the smallest ids), so learning is deterministic.
"""
from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from typing import Iterable, Sequence

# the space, the pieces, byte fallback, decoding and the file's vocabulary: shared with the unigram model
from .raw_text import (BYTE_TOKENS, FIRST_BYTE_ID, FIRST_PIECE_ID, SPACE, RawTextTokenizer,  # noqa: F401
                       character_ids, check_lists, file_vocab, full_vocab, split_pieces)
from .tokenizer import SPECIAL_TOKENS, TOKENIZERS, check_training_texts, register

UNSEGMENTED_SPACE_RATIO = 0.05     # fewer spaces than this per other character: text without word spaces


def looks_unsegmented(texts: Sequence[str], sample: int = 2000) -> bool:
    """True for text written without spaces between words (raw Japanese, Chinese): fewer than
    one space per 20 other characters over the first ``sample`` sentences. English has about
    one in five; Japanese segmented into words, one in two."""
    spaces = others = 0
    for text in texts[:sample]:
        n = text.count(" ")
        spaces, others = spaces + n, others + len(text) - n
    return others > 0 and spaces / others < UNSEGMENTED_SPACE_RATIO


def choose_tokenizer(kind: str | None, sides: Sequence[Sequence[str]]) -> tuple[str, str]:
    """The tokenizer kind for a corpus (a key of ``TOKENIZERS``: "words", "raw" or "unigram"), and why:
    ``kind`` itself unless it is "auto" (or None); then "raw" when one side (a list of sentences) looks
    unsegmented, else "words"."""
    if kind is None:
        kind = "auto"
    if kind in TOKENIZERS:
        return kind, "chosen with --tokenizer"
    if kind != "auto":
        raise ValueError(f"unknown tokenizer {kind!r}; expected auto, {', '.join(TOKENIZERS)}")
    if any(looks_unsegmented(side) for side in sides):
        return "raw", "a side of the corpus has almost no spaces, so words cannot be split at them"
    return "words", "both sides of the corpus are written with spaces between words"


def merge_pair(ids: Sequence[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """One merge step on one piece: every occurrence of ``pair`` in ``ids``, left to right, becomes ``new_id``.

    [▁, a, b, c, a, b] with the pair (a, b) -> [▁, ab, c, ab]; an occurrence that overlaps one
    just merged is left: [a, a, a] with (a, a) -> [aa, a], as in training.
    """
    # Exercise 11.3 — one merge step of the raw-text BPE (chapters/11-translator.md; graded by pytest -m ex_11_3)
    ### BEGIN SOLUTION
    merged, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            merged.append(new_id)
            i += 2
        else:
            merged.append(ids[i])
            i += 1
    ### END SOLUTION
    return merged


class LinkedPieces:
    """The training corpus for BPE: every piece's symbol ids, in one flat list, linked to their neighbours.

    ``symbols[i]`` is a symbol id, ``prev[i]`` and ``next_[i]`` its neighbours in the same piece (-1: none),
    ``weight[i]`` the count of the piece it belongs to. ``counts`` holds every pair's total count and
    ``where`` the positions of its left symbol. Bytes never merge, so pairs with a byte are not counted.
    A position is not taken out of ``where`` when its pair changes: each is checked when its pair is merged.
    """

    def __init__(self, pieces: Sequence[Sequence[int]], piece_counts: Sequence[int]) -> None:
        self.symbols: list[int] = []
        self.weight: list[int] = []
        self.prev: list[int] = []
        self.next_: list[int] = []
        for ids, count in zip(pieces, piece_counts):
            start = len(self.symbols)
            self.symbols.extend(ids)
            self.weight.extend([count] * len(ids))
            self.prev.extend(range(start - 1, start + len(ids) - 1))
            self.next_.extend(range(start + 1, start + len(ids) + 1))
            self.prev[start], self.next_[-1] = -1, -1                  # the chain ends at the piece's ends
        self.counts: dict[tuple[int, int], int] = defaultdict(int)
        self.where: dict[tuple[int, int], set[int]] = defaultdict(set)
        for i, j in enumerate(self.next_):
            if j != -1 and self.symbols[i] >= FIRST_PIECE_ID and self.symbols[j] >= FIRST_PIECE_ID:
                pair = (self.symbols[i], self.symbols[j])
                self.counts[pair] += self.weight[i]
                self.where[pair].add(i)

    def merge(self, pair: tuple[int, int], new: int) -> list[tuple[int, int]]:
        """Replace every occurrence of ``pair``, left to right, by the symbol ``new``; returns the pairs
        whose counts changed and are still positive (those at zero are forgotten)."""
        a, b = pair
        symbols, prev, next_, counts, where = self.symbols, self.prev, self.next_, self.counts, self.where
        changed: set[tuple[int, int]] = set()
        for i in sorted(where.pop(pair)):                      # left to right, as encoding does
            j = next_[i]
            if symbols[i] != a or j == -1 or symbols[j] != b:
                continue                                       # moved on, or taken by an overlap ("a a a")
            left, right, w = prev[i], next_[j], self.weight[i]
            # the pairs on either side: (x, a) becomes (x, ab), (b, y) becomes (ab, y)
            if left != -1 and symbols[left] >= FIRST_PIECE_ID:
                before, after = (symbols[left], a), (symbols[left], new)
                if before != pair:
                    counts[before] -= w
                    changed.add(before)
                counts[after] += w
                where[after].add(left)
                changed.add(after)
            if right != -1 and symbols[right] >= FIRST_PIECE_ID:
                before, after = (b, symbols[right]), (new, symbols[right])
                if before != pair:
                    counts[before] -= w
                    changed.add(before)
                counts[after] += w
                where[after].add(i)
                changed.add(after)
            symbols[i], symbols[j] = new, -1                   # i holds the merged token, j is gone
            next_[i] = right
            if right != -1:
                prev[right] = i
        counts.pop(pair, None)
        alive = []
        for changed_pair in changed:
            if counts.get(changed_pair, 0) > 0:
                alive.append(changed_pair)
            else:
                counts.pop(changed_pair, None)
                where.pop(changed_pair, None)
        return alive


@register
class RawBPETokenizer(RawTextTokenizer):
    """BPE over raw text: ``encode`` any string to ids, ``decode`` gives back that exact string.

    Ids 0-3 are the special tokens pad, bos, eos and unk (tokenizer.py; unk is never produced),
    ids 4-259 the bytes, then the characters seen in training, then the merged tokens.
    Text pieces are looked up only among the ids from 260 on, so a text that contains "<s>" or
    "<0x41>" learns its own token of that name, apart from the special or byte token.
    """

    kind = "raw"          # (encoding and decoding: RawTextTokenizer, shared with the unigram model)

    def __init__(self, vocab: Sequence[str], merges: Sequence[tuple[str, str]]) -> None:
        if tuple(vocab[:FIRST_PIECE_ID]) != SPECIAL_TOKENS + BYTE_TOKENS:
            raise ValueError("the vocabulary must start with the special tokens and the 256 byte tokens")
        self.vocab = list(vocab)
        # text piece -> id, among the pieces only (ids from FIRST_PIECE_ID on)
        self.token_to_id = {token: i for i, token in enumerate(self.vocab) if i >= FIRST_PIECE_ID}
        if len(self.token_to_id) != len(self.vocab) - FIRST_PIECE_ID:
            raise ValueError("the vocabulary contains duplicate tokens")
        self.merges = [tuple(pair) for pair in merges]
        # (left id, right id) -> (rank, id of the merged token)
        self.merge_rank: dict[tuple[int, int], tuple[int, int]] = {}
        for rank, (a, b) in enumerate(self.merges):
            if a not in self.token_to_id or b not in self.token_to_id or a + b not in self.token_to_id:
                raise ValueError(f"merge ({a!r}, {b!r}): a token of it, or {a + b!r}, is not in the vocabulary")
            self.merge_rank[(self.token_to_id[a], self.token_to_id[b])] = (rank, self.token_to_id[a + b])
        self._cache: dict[str, list[int]] = {}

    # --- symbols ---------------------------------------------------------------------------------
    def _symbols(self, piece: str) -> list[int]:
        """A piece as ids of single characters: the space as "▁", an unknown character (or a literal
        "▁", which must not come back as a space) as the ids of its UTF-8 bytes."""
        return character_ids(piece, self.token_to_id)

    # --- training --------------------------------------------------------------------------------
    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> "RawBPETokenizer":
        """Learn merges from raw ``texts`` until ``vocab_size`` tokens (or no pair occurs ``min_frequency`` times).

        The vocabulary always holds the special tokens, the 256 bytes and every character seen.
        """
        texts = check_training_texts(texts, vocab_size)
        piece_counts = Counter()
        for text in texts:
            piece_counts.update(split_pieces(text))
        pieces = sorted(piece_counts)                          # a fixed order: training is deterministic
        alphabet = sorted({SPACE if c == " " else c for p in pieces for c in p if c != SPACE})
        vocab = list(SPECIAL_TOKENS) + list(BYTE_TOKENS) + alphabet
        tokenizer = cls(vocab, [])
        piece_ids = dict(tokenizer.token_to_id)
        corpus = LinkedPieces([tokenizer._symbols(piece) for piece in pieces], [piece_counts[p] for p in pieces])
        heap = [(-count, pair) for pair, count in corpus.counts.items()]   # a max-heap of counts, by negation
        heapq.heapify(heap)

        merges: list[tuple[str, str]] = []
        while len(vocab) < vocab_size and heap:
            negative_count, pair = heapq.heappop(heap)
            if corpus.counts.get(pair, 0) != -negative_count:
                continue                                       # a stale heap entry
            if -negative_count < min_frequency:
                break
            a, b = pair
            merged_token = vocab[a] + vocab[b]
            new = piece_ids.get(merged_token)
            if new is None:                                    # (rarely, two pairs spell the same token)
                new = piece_ids[merged_token] = len(vocab)
                vocab.append(merged_token)
            merges.append((vocab[a], vocab[b]))
            for changed_pair in corpus.merge(pair, new):
                heapq.heappush(heap, (-corpus.counts[changed_pair], changed_pair))
        return cls(vocab, merges)

    # --- encoding --------------------------------------------------------------------------------
    def _encode_piece(self, piece: str) -> list[int]:
        cached = self._cache.get(piece)
        if cached is not None:
            return cached
        ids = self._symbols(piece)
        while len(ids) > 1:
            # the adjacent pair merged first in training, then every occurrence of it, left to right
            best = min((self.merge_rank.get(pair, (len(self.merges), -1)) for pair in zip(ids, ids[1:])))
            rank, new = best
            if new == -1:
                break
            a, b = self.merges[rank]
            ids = merge_pair(ids, (self.token_to_id[a], self.token_to_id[b]), new)
        if len(self._cache) < 200_000:
            self._cache[piece] = ids
        return ids

    # --- files -----------------------------------------------------------------------------------
    def fields(self) -> dict:
        """Vocabulary and merges, for ``to_dict``. The 256 byte tokens are implied, not written."""
        return {"vocab": file_vocab(self.vocab), "merges": [list(m) for m in self.merges]}

    @classmethod
    def from_fields(cls, data: dict) -> RawBPETokenizer:
        check_lists(data, ("vocab", "merges"))
        try:
            return cls(full_vocab(data), [tuple(m) for m in data["merges"]])
        except TypeError as error:
            raise ValueError(f"broken tokenizer ({error})") from None
