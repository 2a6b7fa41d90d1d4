"""chrF and chrF++ from scratch (Popović 2015, 2017), on sacrebleu's 0-100 scale.

BLEU counts word n-grams, so it first needs words: on a language written
without spaces it needs a tokenizer, and any two tokenizers give two different
BLEU. chrF needs none. It compares *character* n-grams (n = 1..6, spaces
removed) of the hypothesis with those of the reference, and combines the
precision P (how much of the hypothesis is in the reference) and the recall R
(how much of the reference is in the hypothesis) into an F-score that weighs
recall β = 2 times as much:

    chrF = (1 + β²) · P · R / (β² · P + R)

where P and R are the averages over the n-gram orders of the corpus-level
precisions and recalls (statistics summed over sentences first, as in corpus BLEU).
It also gives partial credit for a word with the right stem and the wrong
ending, which BLEU scores as a plain miss. chrF++ adds word unigrams and
bigrams (``word_order=2``), words being cut at spaces with a final or leading
ASCII punctuation mark set apart.

The numbers equal ``sacrebleu.corpus_chrf(hyps, [refs])`` (and ``word_order=2``
for chrF++), with sacrebleu's default "effective order": an order that the
hypotheses or references are too short to have is left out of the averages.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Sequence

CHAR_ORDER, WORD_ORDER, BETA = 6, 0, 2
_PUNCTUATION = set('!"#$%&\'()*+,-./:;<=>?@[\\]^_`{|}~')


@dataclass(frozen=True)
class CHRFScore:
    """A chrF score with its settings; ``name`` is "chrF2" or "chrF2++"."""

    score: float
    char_order: int
    word_order: int
    beta: int

    @property
    def name(self) -> str:
        return f"chrF{self.beta}" + "+" * self.word_order

    def __float__(self) -> float:
        return self.score

    def __str__(self) -> str:
        return f"{self.name} = {self.score:.2f}"


def char_ngrams(text: str, n: int) -> Counter:
    """Counts of the character n-grams of ``text`` with its whitespace removed."""
    text = "".join(text.split())
    return Counter(text[i:i + n] for i in range(len(text) - n + 1))


def chrf_words(text: str) -> list[str]:
    """chrF++'s words: split at spaces; a word's last (else first) character, if ASCII punctuation,
    becomes a word of its own ("milk?" -> "milk", "?")."""
    words = []
    for word in text.split():
        if len(word) > 1 and word[-1] in _PUNCTUATION:
            words += [word[:-1], word[-1]]
        elif len(word) > 1 and word[0] in _PUNCTUATION:
            words += [word[0], word[1:]]
        else:
            words.append(word)
    return words


def word_ngrams(words: Sequence[str], n: int) -> Counter:
    return Counter(" ".join(words[i:i + n]) for i in range(len(words) - n + 1))


def sentence_statistics(hypothesis: str, reference: str, char_order: int = CHAR_ORDER,
                        word_order: int = WORD_ORDER) -> list[tuple[int, int, int]]:
    """(hypothesis n-grams, reference n-grams, matches) for each character order, then each word order.

    A match is clipped, as in BLEU: an n-gram counts at most as often as the other side has it.
    """
    hyp_grams = [char_ngrams(hypothesis, n) for n in range(1, char_order + 1)]
    ref_grams = [char_ngrams(reference, n) for n in range(1, char_order + 1)]
    if word_order:
        hyp_words, ref_words = chrf_words(hypothesis), chrf_words(reference)
        hyp_grams += [word_ngrams(hyp_words, n) for n in range(1, word_order + 1)]
        ref_grams += [word_ngrams(ref_words, n) for n in range(1, word_order + 1)]
    statistics = []
    for hyp, ref in zip(hyp_grams, ref_grams):
        matches = sum(min(count, ref[gram]) for gram, count in hyp.items() if gram in ref)
        # as sacrebleu: hypothesis n-grams do not count where the reference has none of that order
        statistics.append((sum(hyp.values()) if ref else 0, sum(ref.values()), matches))
    return statistics


def chrf_from_statistics(statistics: Sequence[Sequence[int]], beta: int = BETA) -> float:
    """The F-score of the averaged precision and recall over the orders both sides have."""
    precision = recall = 0.0
    orders = 0
    for n_hyp, n_ref, n_match in statistics:
        if n_hyp > 0 and n_ref > 0:
            precision += n_match / n_hyp
            recall += n_match / n_ref
            orders += 1
    if orders == 0:
        return 0.0
    precision, recall = precision / orders, recall / orders
    if precision + recall == 0:
        return 0.0
    factor = beta ** 2
    return 100 * (1 + factor) * precision * recall / (factor * precision + recall)


def corpus_chrf_score(hypotheses: Sequence[str], references: Sequence[str], char_order: int = CHAR_ORDER,
                      word_order: int = WORD_ORDER, beta: int = BETA) -> CHRFScore:
    """Corpus chrF (``word_order=2``: chrF++): statistics summed over the sentences, then one F-score."""
    if isinstance(hypotheses, str) or isinstance(references, str):
        raise TypeError("hypotheses and references must be lists of sentences, not one string")
    if len(hypotheses) != len(references):
        raise ValueError(f"got {len(hypotheses)} hypotheses but {len(references)} references; "
                         "chrF needs exactly one reference per hypothesis")
    if char_order < 1 or word_order < 0 or beta < 1:
        raise ValueError(f"chrF needs char_order >= 1, word_order >= 0 and beta >= 1, "
                         f"got {char_order}, {word_order}, {beta}")
    for number, (hypothesis, reference) in enumerate(zip(hypotheses, references), start=1):
        for name, text in (("hypothesis", hypothesis), ("reference", reference)):
            if not isinstance(text, str):   # sacrebleu takes [references]; chrF here one string per hypothesis
                raise TypeError(f"{name} {number} is {type(text).__name__}, not a string; "
                                "chrF takes one reference string per hypothesis")
    totals = [[0, 0, 0] for _ in range(char_order + word_order)]
    for hypothesis, reference in zip(hypotheses, references):
        for total, stats in zip(totals, sentence_statistics(hypothesis, reference, char_order, word_order)):
            for k in range(3):
                total[k] += stats[k]
    return CHRFScore(chrf_from_statistics(totals, beta), char_order, word_order, beta)


def corpus_chrf(hypotheses: Sequence[str], references: Sequence[str], char_order: int = CHAR_ORDER,
                word_order: int = WORD_ORDER, beta: int = BETA) -> float:
    """Corpus chrF on the 0-100 scale; ``word_order=2`` gives chrF++."""
    return corpus_chrf_score(hypotheses, references, char_order, word_order, beta).score
