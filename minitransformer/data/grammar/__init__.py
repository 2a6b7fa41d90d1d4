"""The grammar that generates the built-in English <-> Japanese corpus.

No download: a grammar with a real lexicon (people, animals, food, objects,
places; verbs with their Japanese conjugations; adjectives; numbers with
counters; times) generates sentence pairs for a seed. Each sentence is first
built as a small meaning (who does what to whom, where, when, tense, polarity,
question or not), then written out in both languages, so every English
sentence has exactly one Japanese translation and back.

Japanese differs from English in ways that make attention maps interesting:
the verb comes last (SVO -> SOV), particles mark roles (は が を に で へ と),
relative clauses come before their noun ("the cat that ate the fish" ->
"魚 を 食べ た 猫"), and time and place phrases move to the front.

English is lowercased with punctuation as separate tokens ("the cat ate the fish .").
Japanese is written in kanji and kana, segmented into words with spaces, with
verb stems split from their endings ("食べ ます", "食べ た", "飲ま ない") and
particles standing alone. The segmentation is the grammar's own: coarser than
that of the small_parallel_enja corpus, whose tokenizer splits the endings
further (あり ます there is あ り ま す), so the two do not share a vocabulary.

    lexicon.py   the words, with their Japanese and what they combine with
    rules.py     a meaning written out in English and in Japanese
    sampler.py   drawing random meanings, construction by construction
    builtin.py   make_builtin_corpus: unique sentences for a seed, in splits
"""

from .builtin import BuiltinCorpus, GrammarError, make_builtin_corpus, reserved_combinations
from .sampler import CONSTRUCTION_WEIGHTS

__all__ = ["BuiltinCorpus", "GrammarError", "make_builtin_corpus", "reserved_combinations", "CONSTRUCTION_WEIGHTS"]
