"""Typed text in the form of the training corpus, and what in it the model never saw (chapter 11).

Every corpus is written its own way. The built-in one lowercases English and
sets each punctuation mark apart as a word ("did the dog drink the milk ?");
Japanese research corpora are segmented into words; other corpora keep their
capitals. A model knows only the form it was trained on: to it, "Did" and
"milk?" are words it never saw, and it answers them with invented text.

``CorpusWriting`` reads that form from the training text itself (the words the
tokenizer recorded), and ``normalize`` applies to a typed sentence only what
the corpus does:

* case: a corpus without a single capital letter is lowercased, so the input
  is too; in a corpus with capitals, an unknown word is lowered only when its
  lower-case form is a known word ("The" at the start of a sentence);
* punctuation: a mark at the edge of an unknown word is set apart when the
  corpus writes it as a word of its own ("yesterday?" -> "yesterday ?",
  "mary's" -> "mary 's"), and so is any final mark when no word of the corpus
  ends in one ("big!" -> "big !"); a known word such as "o'clock" stays whole.

``unseen`` then names the words and characters the model has never seen, so
that a translation of them is not mistaken for one it can vouch for.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Iterable


def _is_punctuation(char: str) -> bool:
    return unicodedata.category(char).startswith("P")


@dataclass(frozen=True)
class CorpusWriting:
    """How the training text is written, read from its words and characters.

    ``words`` is None when the tokenizer did not record them (saved by an older
    version): then only the case and the characters can be checked.
    """

    words: frozenset[str] | None
    characters: frozenset[str]
    marks_apart: bool = False   # no word ends in a punctuation mark: every final mark is a word of its own

    @classmethod
    def of_tokenizer(cls, tokenizer) -> CorpusWriting:
        """From a BPETokenizer: its recorded training words, and the characters of its vocabulary."""
        characters = frozenset(char for token in tokenizer.vocab[4:] for char in token.removesuffix("</w>"))
        words = tokenizer.words
        marks_apart = words is not None and not any(len(w) > 1 and _is_punctuation(w[-1]) for w in words)
        return cls(words, characters, marks_apart)

    @property
    def lowercased(self) -> bool:
        """True when the training text has no capital letter at all."""
        return not any(char.isupper() for char in self.characters)

    def known(self, word: str) -> bool:
        return self.words is not None and word in self.words

    def normalize(self, sentence: str) -> str:
        """``sentence`` written the way the corpus writes: its case, its punctuation spacing."""
        words = []
        for word in sentence.split():
            words.extend(self._normalize_word(word.lower() if self.lowercased else word))
        return " ".join(words)

    def _normalize_word(self, word: str) -> list[str]:
        before, after = [], []
        # set apart the marks the corpus writes as words of their own, from the edges of an unknown word
        while len(word) > 1 and not self.known(word) and _is_punctuation(word[0]) and self.known(word[0]):
            before.append(word[0])
            word = word[1:]
        while not self.known(word):
            suffix = max((word[i:] for i in range(1, len(word)) if _is_punctuation(word[i]) and
                          (self.known(word[i:]) or (self.marks_apart and i == len(word) - 1))),
                         key=len, default=None)
            if suffix is None:
                break
            after.insert(0, suffix)
            word = word[:-len(suffix)]
        if not self.known(word) and self.known(word.lower()):
            word = word.lower()
        return before + [word] + after

    def unseen(self, sentence: str) -> tuple[list[str], list[str]]:
        """(words, characters) of ``sentence`` that are not in the training text, each once, in order.

        Without recorded words only characters are checked.
        """
        words = [] if self.words is None else _once(w for w in sentence.split() if w not in self.words)
        characters = _once(c for c in sentence if not c.isspace() and c not in self.characters)
        return words, characters


def _once(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def describe_unseen(words: list[str], characters: list[str], read_as: str = "<unk>") -> str:
    """One line naming what the model never saw, for a warning; ``read_as`` says what the tokenizer
    makes of an unseen character (the raw-text BPE: "its UTF-8 bytes")."""
    parts = []
    if words:
        parts.append(f"word{'s' if len(words) > 1 else ''} never seen in training: "
                     + ", ".join(repr(w) for w in words))
    if characters:
        parts.append(f"character{'s' if len(characters) > 1 else ''} never seen (read as {read_as}): "
                     + ", ".join(repr(c) for c in characters))
    return "; ".join(parts) + " — the translation may be invented"
