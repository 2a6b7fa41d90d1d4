"""The built-in corpus: sentence pairs drawn from the grammar for a seed, in splits.

Every sentence occurs once in the whole corpus (on both sides); ``test_heldout``
holds only sentences with word combinations reserved out of training.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from ..corpus import Corpus
from .alignment import subword_links
from .lexicon import ADJECTIVES, ANIMALS, COMMON_NOUNS, PEOPLE, VERBS, _can_fill
from .sampler import Combination, Sentence, _Sampler

def reserved_combinations(seed: int, n_subject_verb: int = 8, n_adjective_noun: int = 8) -> list[Combination]:
    """Word pairs kept out of training for ``test_heldout``: (subject noun, verb) and (adjective, noun).

    Each reserved pair uses different nouns, so every word still occurs in training with other partners.
    """
    rng = random.Random(f"heldout-{seed}")
    subject_nouns = [n for n in PEOPLE + ANIMALS]
    subject_verb = [("subject-verb", n.en, v.base) for n in subject_nouns for v in VERBS if n.kind in v.subjects]
    adjective_noun = [("adjective-noun", a.en, n.en) for a in ADJECTIVES for n in COMMON_NOUNS
                      if _can_fill(n, a.applies_to)]
    chosen, used = [], set()
    for pool, count in ((subject_verb, n_subject_verb), (adjective_noun, n_adjective_noun)):
        pool = sorted(pool)
        rng.shuffle(pool)
        taken = 0
        for combination in pool:
            if taken == count:
                break
            if not used & set(combination[1:]):
                chosen.append(combination)
                used.update(combination[1:])
                taken += 1
    return chosen


@dataclass
class BuiltinCorpus(Corpus):
    """The generated corpus, with what is needed to check the held-out split."""

    reserved: list = field(default_factory=list)          # Combination triples kept out of training
    combinations: dict = field(default_factory=dict)      # english sentence -> frozenset of Combinations
    constructions: dict = field(default_factory=dict)     # english sentence -> construction name
    alignments: dict = field(default_factory=dict)        # english sentence -> gold (en word, ja word) links
    verb_objects: dict = field(default_factory=dict)      # english sentence -> (verb, object head) word pairs
    verb_subjects: dict = field(default_factory=dict)     # english sentence -> (verb, subject head) word pairs
    _japanese: dict | None = field(default=None, repr=False, compare=False)

    def alignment(self, english: str) -> tuple[tuple[int, int], ...]:
        """The gold word alignment of the pair whose English side is ``english``: (English word, Japanese
        word) index pairs, words as ``split()`` gives them (data/grammar/alignment.py says what links)."""
        try:
            return self.alignments[english]
        except KeyError:
            raise KeyError(f"{english!r} is not an English sentence of this corpus") from None

    def subword_alignment(self, tokenizer, english: str, direction: str | None = None
                          ) -> tuple[tuple[int, int], ...]:
        """The gold alignment of one pair as (source position, target position) links between the
        subwords ``tokenizer`` makes of the two sentences, for ``direction`` (default: the corpus's)."""
        direction = self._check_direction(direction or self.direction)
        japanese = self.translation(english)
        links = self.alignment(english)
        if direction == self.directions[0]:
            return subword_links(tokenizer, english, japanese, links)
        return subword_links(tokenizer, japanese, english, [(j, i) for i, j in links])

    def translation(self, english: str) -> str:
        """The Japanese sentence of the pair whose English side is ``english``."""
        if self._japanese is None:
            self._japanese = {en: ja for split in self.SPLITS for en, ja in self.split(split)}
        try:
            return self._japanese[english]
        except KeyError:
            raise KeyError(f"{english!r} is not an English sentence of this corpus") from None


class GrammarError(RuntimeError):
    """Two different meanings came out as the same sentence with different translations."""


def _unique_sentences(sampler: _Sampler, count: int, seen_en: dict, seen_ja: dict,
                      accept, force=None) -> list[Sentence]:
    """Draw ``count`` sentences never seen before (on either side) that ``accept`` allows."""
    sentences, attempts = [], 0
    limit = 200 * count + 1000
    while len(sentences) < count:
        attempts += 1
        if attempts > limit:
            raise ValueError(f"could only generate {len(sentences)} of {count} distinct sentences; "
                             "ask for fewer sentences")
        sentence = sampler.sentence(force() if force else None)
        if sentence is None or not accept(sentence):
            continue
        known_ja = seen_en.get(sentence.english)
        known_en = seen_ja.get(sentence.japanese)
        if known_ja is not None or known_en is not None:
            if known_ja not in (None, sentence.japanese) or known_en not in (None, sentence.english):
                raise GrammarError(f"ambiguous pair: {sentence.english!r} -> {sentence.japanese!r}, "
                                   f"but seen before: {sentence.english!r} -> {known_ja!r} and "
                                   f"{known_en!r} -> {sentence.japanese!r}")
            continue  # a duplicate
        seen_en[sentence.english] = sentence.japanese
        seen_ja[sentence.japanese] = sentence.english
        sentences.append(sentence)
    return sentences


def make_builtin_corpus(seed: int = 0, n_train: int = 20000, n_dev: int = 500, n_test: int = 500,
                        n_heldout: int = 500, weights: dict[str, float] | None = None) -> BuiltinCorpus:
    """Generate the built-in English-Japanese corpus, the same for the same arguments.

    Every sentence occurs once in the whole corpus (on both sides), so no source
    sentence is in two splits. ``test_heldout`` contains only sentences with a
    reserved word combination (see ``reserved_combinations``); train, dev and test
    contain none. ``weights`` changes how often each construction of
    ``CONSTRUCTION_WEIGHTS`` is drawn (0 switches one off).
    """
    for name, value in (("n_train", n_train), ("n_dev", n_dev), ("n_test", n_test), ("n_heldout", n_heldout)):
        if value < 0:
            raise ValueError(f"{name} must be >= 0, got {value}")
    rng = random.Random(seed)
    sampler = _Sampler(rng, weights)
    reserved = reserved_combinations(seed)
    reserved_set = frozenset(reserved)
    seen_en: dict[str, str] = {}
    seen_ja: dict[str, str] = {}

    main = _unique_sentences(sampler, n_train + n_dev + n_test, seen_en, seen_ja,
                             accept=lambda s: not (s.combinations & reserved_set))
    rng.shuffle(main)  # so that no split gets more of the short sentences drawn first
    heldout = _unique_sentences(sampler, n_heldout, seen_en, seen_ja,
                                accept=lambda s: bool(s.combinations & reserved_set),
                                force=lambda: rng.choice(reserved))

    def pairs(sentences: list[Sentence]) -> list[tuple[str, str]]:
        return [(s.english, s.japanese) for s in sentences]

    everything = main + heldout
    return BuiltinCorpus(
        train=pairs(main[n_dev + n_test:]), dev=pairs(main[:n_dev]), test=pairs(main[n_dev:n_dev + n_test]),
        test_heldout=pairs(heldout), languages=("en", "ja"), direction="en-ja", name="builtin",
        reserved=reserved,
        combinations={s.english: s.combinations for s in everything},
        constructions={s.english: s.construction for s in everything},
        alignments={s.english: s.alignment for s in everything},
        verb_objects={s.english: s.verb_object for s in everything},
        verb_subjects={s.english: s.verb_subject for s in everything},
    )
