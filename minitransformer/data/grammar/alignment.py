"""Which word was rendered from which: the gold word alignment of a generated pair.

The grammar writes both sentences of a pair from one meaning, so it knows, for
each word, the piece of meaning it renders: the head noun of one noun phrase,
the verb of one clause, the time of a clause, the question mark of the
sentence. The rules write such words as ``Word`` strings carrying ``links``
(keys of those pieces of meaning); two words, one per language, are aligned
when they share a key. A ``Word`` is a ``str``, so the generated text is
exactly what it was without the links.

Words that render no shared piece of meaning stay unaligned: English articles
and "that", Japanese case particles (は が を) and the relative-clause order.
Some links are phrase to phrase: an English verb group ("did not eat") links
to the whole Japanese verb group ("食べ ませ ん でし た"); "not" also links to
the negative ending alone.

English words also carry ``roles`` for encoder pictures: the main verb of a
clause, and the head nouns of its subject and object (a relative clause's head
noun is the subject or object of that clause), so ``relations`` can list the
pairs (verb, its object) of a sentence.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence


class Word(str):
    """A word of a generated sentence, with the keys of the meaning it renders and its roles."""

    links: frozenset
    roles: frozenset

    def __new__(cls, text: str, links: Iterable = (), roles: Iterable = ()) -> "Word":
        word = super().__new__(cls, text)
        word.links = frozenset(links)
        word.roles = frozenset(roles)
        return word


def linked(words: Iterable[str], *keys, roles: Iterable = ()) -> list[Word]:
    """``words`` as ``Word``s that add ``keys`` (and ``roles``) to whatever they carried already."""
    return [Word(w, getattr(w, "links", frozenset()) | set(keys), getattr(w, "roles", frozenset()) | set(roles))
            for w in words]


def add_role(words: Sequence[str], key, role) -> None:
    """Give ``role`` to the words among ``words`` that carry link ``key`` (e.g. the head of an object)."""
    for word in words:
        if isinstance(word, Word) and key in word.links:
            word.roles = word.roles | {role}


def split_words(tokens: Sequence[str]) -> list[Word]:
    """The sentence's words as the text writes them: a token with spaces ("police officer") is several."""
    words = []
    for token in tokens:
        for piece in token.split():
            words.append(Word(piece, getattr(token, "links", ()), getattr(token, "roles", ())))
    return words


def word_alignment(english: Sequence[str], japanese: Sequence[str]) -> tuple[tuple[int, int], ...]:
    """The gold links (i, j): English word i and Japanese word j render the same piece of meaning.

    Indices count the words of the text (``sentence.split()``), in order.
    """
    en, ja = split_words(english), split_words(japanese)
    return tuple((i, j) for i, e in enumerate(en) if e.links
                 for j, w in enumerate(ja) if e.links & w.links)


def relations(words: Sequence[str], kind: str = "object") -> tuple[tuple[int, int], ...]:
    """Pairs (verb word, head word of its ``kind``) of one sentence, kind "object" or "subject"."""
    words = split_words(words)
    verbs = {clause: i for i, w in enumerate(words) for role, clause in w.roles if role == "verb"}
    return tuple(sorted((verbs[clause], j) for j, w in enumerate(words) for role, clause in w.roles
                        if role == kind and clause in verbs))


def word_spans(tokenizer, text: str) -> list[range]:
    """For each word of ``text`` (``text.split()``), the positions of its subwords in ``tokenizer.encode(text)``."""
    spans, start = [], 0
    for word in text.split():
        length = len(tokenizer.encode(word))
        spans.append(range(start, start + length))
        start += length
    return spans


def subword_links(tokenizer, source: str, target: str,
                  links: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Word links (source word, target word) as links between subword positions: a word link joins every
    subword of the one word to every subword of the other. Positions are those of ``tokenizer.encode``;
    in a decoder, target position t is the row that predicts target token t."""
    source_spans, target_spans = word_spans(tokenizer, source), word_spans(tokenizer, target)
    for i, j in links:
        if not (0 <= i < len(source_spans) and 0 <= j < len(target_spans)):
            raise ValueError(f"subword_links: word link ({i}, {j}) is outside the sentences "
                             f"({len(source_spans)} and {len(target_spans)} words)")
    return tuple(sorted({(a, b) for i, j in links for a in source_spans[i] for b in target_spans[j]}))
