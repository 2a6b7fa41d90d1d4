"""Byte-pair encoding (Sennrich et al. 2016), the subword vocabulary of §5.1.

Training starts from characters and repeatedly merges the most frequent
adjacent pair of symbols into a new symbol, until the vocabulary is full.
Words are whitespace-split; the last symbol of each word carries the
end-of-word marker "</w>", so decoding puts the spaces back exactly.

One tokenizer serves both languages: the paper shares the source and target
vocabulary (§5.1, and the tied embeddings of §3.4), so train it on source and
target texts together.

The tokenizer also remembers the words of its training text (``words``): BPE
can spell any word from known characters, so only that list tells a word the
model has seen from one it has not (``writing.py`` uses it to bring typed
text into the corpus's form and to name what the model never saw).
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from typing import Iterable, Sequence

from .tokenizer import SPECIAL_TOKENS, Tokenizer, check_training_texts, register, token_ids

END_OF_WORD = "</w>"


def _word_symbols(word: str) -> list[str]:
    """'cat' -> ['c', 'a', 't</w>']."""
    return list(word[:-1]) + [word[-1] + END_OF_WORD]


@register
class BPETokenizer(Tokenizer):
    """A subword tokenizer: ``encode`` text to ids, ``decode`` ids to text.

    Ids 0-3 are the special tokens pad, bos, eos and unk (tokenizer.py).
    """

    kind = "words"        # the "kind" field of its files: it splits at spaces (raw_bpe.py: "raw")

    def __init__(self, vocab: Sequence[str], merges: Sequence[tuple[str, str]],
                 words: Iterable[str] | None = None) -> None:
        if tuple(vocab[:len(SPECIAL_TOKENS)]) != SPECIAL_TOKENS:
            raise ValueError(f"the vocabulary must start with the special tokens {SPECIAL_TOKENS}")
        self.vocab = list(vocab)
        self.token_to_id = {token: i for i, token in enumerate(self.vocab)}
        if len(self.token_to_id) != len(self.vocab):
            raise ValueError("the vocabulary contains duplicate tokens")
        self.merges = [tuple(pair) for pair in merges]
        for a, b in self.merges:
            if a + b not in self.token_to_id:
                raise ValueError(f"merge ({a!r}, {b!r}) makes {a + b!r}, which is not in the vocabulary")
        self.merge_rank = {pair: rank for rank, pair in enumerate(self.merges)}
        self.words = None if words is None else frozenset(words)   # the training text's words (None: not recorded)
        self._cache: dict[str, list[int]] = {}

    # --- training ---------------------------------------------------------------
    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> "BPETokenizer":
        """Learn merges from ``texts`` until ``vocab_size`` tokens (or no pair occurs min_frequency times).

        The vocabulary always holds the special tokens and every character seen,
        even if that is more than ``vocab_size``.
        """
        texts = check_training_texts(texts, vocab_size)
        word_counts = Counter()
        for text in texts:
            word_counts.update(text.split())
        words = sorted(word_counts)                       # fixed order: training is deterministic
        if not words:
            raise ValueError(f"train(): no words to learn from: the texts ({len(texts)}) hold only spaces")
        frequencies = [word_counts[w] for w in words]
        alphabet = sorted({s for w in words for s in _word_symbols(w)})
        vocab = list(SPECIAL_TOKENS) + alphabet
        symbol_id = {s: i for i, s in enumerate(vocab)}
        corpus = [[symbol_id[s] for s in _word_symbols(w)] for w in words]  # each word as symbol ids

        # pair -> total count over the corpus, and pair -> the words that contain it
        pair_counts: dict[tuple[int, int], int] = defaultdict(int)
        pair_words: dict[tuple[int, int], set[int]] = defaultdict(set)
        for index, symbols in enumerate(corpus):
            if END_OF_WORD in words[index]:
                # a word that spells the marker ("a</w>b") could merge into a token equal to a word-final one
                # ("a</w>"), and decoding would end the word there: it lends its characters, never its pairs
                continue
            for pair in zip(symbols, symbols[1:]):
                pair_counts[pair] += frequencies[index]
                pair_words[pair].add(index)
        # Max-heap of (-count, pair); entries go stale when counts change and are skipped.
        heap = [(-count, pair) for pair, count in pair_counts.items()]
        heapq.heapify(heap)

        merges = []
        while len(vocab) < vocab_size and heap:
            negative_count, pair = heapq.heappop(heap)
            count = pair_counts.get(pair, 0)
            if -negative_count != count:
                continue  # stale entry
            if count < min_frequency:
                break
            new_id = len(vocab)
            vocab.append(vocab[pair[0]] + vocab[pair[1]])
            merges.append((vocab[pair[0]], vocab[pair[1]]))
            changed = set()
            for index in pair_words.pop(pair):
                symbols, frequency = corpus[index], frequencies[index]
                for old in zip(symbols, symbols[1:]):   # take the word's pairs out ...
                    pair_counts[old] -= frequency
                    changed.add(old)
                merged = _merge_word(symbols, pair, new_id)
                corpus[index] = merged
                for new in zip(merged, merged[1:]):     # ... and put the merged word's pairs back
                    pair_counts[new] += frequency
                    pair_words[new].add(index)
                    changed.add(new)
            del pair_counts[pair]
            for changed_pair in changed:
                count = pair_counts.get(changed_pair, 0)
                if count > 0:
                    heapq.heappush(heap, (-count, changed_pair))
                elif changed_pair in pair_counts:
                    del pair_counts[changed_pair]
        return cls(vocab, merges, words)

    # --- encoding -------------------------------------------------------------------
    def _encode_word(self, word: str) -> list[int]:
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        # The end of a word rides on its last symbol ('t</w>'). An unseen last character would
        # become <unk> and take the word's end with it ("the caq sat" -> "the casat"), so the word
        # ends on its last character that can end a word, and unseen trailing characters follow
        # as <unk> ("the ca sat").
        stem = word
        while stem and stem[-1] + END_OF_WORD not in self.token_to_id:
            stem = stem[:-1]
        if stem != word:
            ids = (self._encode_word(stem) if stem else []) + [self.unk_id] * (len(word) - len(stem))
            self._cache[word] = ids
            return ids
        symbols = _word_symbols(word)
        while len(symbols) > 1:
            # the adjacent pair that was merged first during training
            ranked = [(self.merge_rank.get(pair, len(self.merge_rank)), i)
                      for i, pair in enumerate(zip(symbols, symbols[1:]))]
            rank, i = min(ranked)
            if rank == len(self.merge_rank):
                break
            symbols = _merge_strings(symbols, (symbols[i], symbols[i + 1]))
        ids = [self.token_to_id.get(s, self.unk_id) for s in symbols]
        self._cache[word] = ids
        return ids

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Text -> token ids. Characters never seen in training become ``unk_id``."""
        ids = [self.bos_id] if add_bos else []
        for word in text.split():
            ids += self._encode_word(word)
        if add_eos:
            ids.append(self.eos_id)
        return ids

    # --- decoding -------------------------------------------------------------------
    def decode(self, ids: Iterable[int]) -> str:
        """Token ids -> text, dropping the special tokens (pad, bos, eos, unk)."""
        pieces = []
        for i in token_ids(ids, len(self.vocab)):
            if i < len(SPECIAL_TOKENS):
                continue
            token = self.vocab[i]
            pieces.append(token[:-len(END_OF_WORD)] + " " if token.endswith(END_OF_WORD) else token)
        return "".join(pieces).strip()

    # --- files ------------------------------------------------------------------------
    def fields(self) -> dict:
        """Vocabulary, merges and (when known) the training words, for ``to_dict``."""
        data = {"vocab": self.vocab, "merges": [list(m) for m in self.merges]}
        if self.words is not None:
            data["words"] = sorted(self.words)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Tokenizer:
        """The tokenizer ``to_dict`` wrote; ValueError naming what is wrong otherwise.

        Data of another kind gives the tokenizer of that kind ("raw": ``RawBPETokenizer``, "unigram":
        ``UnigramTokenizer``), as ``Tokenizer.from_dict`` does: this was the reader of every kind before
        the base class was. Files written before the ``kind`` field existed are of this kind.
        """
        return Tokenizer.from_dict(data)

    @classmethod
    def from_fields(cls, data: dict) -> BPETokenizer:
        for key in ("vocab", "merges"):
            if key not in data:
                raise ValueError(f"missing key {key!r}")
        vocab, merges = data["vocab"], data["merges"]
        if not isinstance(vocab, (list, tuple)) or not all(isinstance(token, str) for token in vocab):
            raise ValueError("broken tokenizer (the vocabulary must be a list of strings)")
        pairs = (list, tuple)
        if not isinstance(merges, pairs) or not all(isinstance(m, pairs) and len(m) == 2 for m in merges):
            raise ValueError("broken tokenizer (every merge must be a pair of tokens)")
        try:
            return cls(vocab, [tuple(m) for m in merges], data.get("words"))
        except TypeError as error:
            raise ValueError(f"broken tokenizer ({error})") from None


def _merge_word(symbols: list[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """Replace every occurrence of ``pair`` in ``symbols`` (left to right) by ``new_id``: the raw-text BPE's merge
    step (``raw_bpe.merge_pair``, Exercise 11.3), which both tokenizers share."""
    from .raw_bpe import merge_pair      # raw_bpe imports this module, so the import waits until here
    return merge_pair(symbols, pair, new_id)


def _merge_strings(symbols: list[str], pair: tuple[str, str]) -> list[str]:
    """The same on symbols spelled as strings: the pair becomes its concatenation."""
    return _merge_word(symbols, pair, pair[0] + pair[1])
