"""Corpus BLEU from scratch (Papineni et al. 2002), on sacrebleu's 0-100 scale.

The paper reports BLEU on WMT 2014 (§6.1, Table 2). Here BLEU works on one
reference per hypothesis, n-grams up to 4, clipped counts and a brevity penalty.
The numbers match ``sacrebleu.corpus_bleu(hyps, [refs], tokenize=...)``,
including sacrebleu's default ``"exp"`` smoothing of n-gram orders with no
match (see ``bleu_from_stats``).

BLEU counts n-grams of *tokens*, so the number depends on how a sentence is cut
into tokens, and a BLEU figure means little without its tokenization:

* ``"13a"`` (the default, as in sacrebleu and WMT's mteval-v13a): split at
  spaces, and set ASCII punctuation apart ("milk?" -> "milk ?");
* ``"char"``: every character but the spaces is a token, for languages written
  without spaces (Japanese, Chinese, Thai), where "words" would be whole sentences;
* ``"none"``: split at spaces only (a corpus that is already tokenized);
* ``"ja-mecab"``: Japanese words from the MeCab analyser, through the optional
  ``fugashi`` package with ``unidic-lite`` (sacrebleu's own ``ja-mecab`` uses
  another dictionary, so its numbers differ a little).

A hypothesis given as a list of tokens is used as it is.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Sequence

MAX_ORDER = 4
SMOOTH_METHODS = ("exp", "none")
TOKENIZATIONS = ("13a", "char", "none", "ja-mecab")
DEFAULT_TOKENIZATION = "13a"
# Languages written without spaces between words: BLEU on characters (and chrF) suits them.
UNSEGMENTED_LANGUAGES = ("ja", "zh", "th", "lo", "km", "my")

Text = str | Sequence[str]  # a sentence, or a list of its tokens

# mteval-v13a's rules, as sacrebleu writes them: ASCII punctuation apart; "." and "," apart unless
# between digits; a "-" after a digit apart.
_13A_RULES = [(re.compile(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])"), r" \1 "),
              (re.compile(r"([^0-9])([\.,])"), r"\1 \2 "),
              (re.compile(r"([\.,])([^0-9])"), r" \1 \2"),
              (re.compile(r"([0-9])(-)"), r"\1 \2 ")]


@lru_cache(maxsize=2 ** 16)
def _tokenize_13a(line: str) -> tuple[str, ...]:
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        line = line.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    line = f" {line} "
    for rule, replacement in _13A_RULES:
        line = rule.sub(replacement, line)
    return tuple(line.split())


def _tokenize_char(line: str) -> list[str]:
    return [char for char in line if not char.isspace()]


def _tokenize_none(line: str) -> list[str]:
    return line.split()


@lru_cache(maxsize=1)
def _mecab_tagger():
    try:
        import fugashi  # noqa: PLC0415 - optional
        return fugashi.Tagger()
    except (ImportError, RuntimeError) as error:
        raise ValueError(f"tokenize='ja-mecab' needs the packages fugashi and unidic-lite "
                         f"(pip install fugashi unidic-lite): {error}") from None


def _tokenize_ja_mecab(line: str) -> list[str]:
    return [word.surface for word in _mecab_tagger()(line) if word.surface.strip()]


TOKENIZERS: dict[str, Callable[[str], Sequence[str]]] = {
    "13a": _tokenize_13a, "char": _tokenize_char, "none": _tokenize_none, "ja-mecab": _tokenize_ja_mecab}


def tokenize(text: str, tokenization: str = DEFAULT_TOKENIZATION) -> list[str]:
    """The tokens BLEU counts in ``text`` under ``tokenization`` (one of TOKENIZATIONS)."""
    return list(_tokenizer(tokenization)(text.rstrip()))


def _tokenizer(tokenization: str) -> Callable[[str], Sequence[str]]:
    if tokenization not in TOKENIZERS:
        raise ValueError(f"unknown tokenize {tokenization!r}; expected one of {', '.join(TOKENIZATIONS)}")
    return TOKENIZERS[tokenization]


def tokenization_for(language: str | None, references: Sequence[str] = ()) -> str:
    """The tokenization to score a target language with.

    "char" for references written without spaces (data/raw_bpe.looks_unsegmented), or for a
    language written without them (ja, zh, th, ...) when no references are given; "none" for such
    a language already segmented into words (KyTea-style Japanese: its own words, as the figures
    published for such corpora use); "13a" otherwise.
    """
    from .data.raw_bpe import looks_unsegmented  # noqa: PLC0415 - the one definition of "no spaces"

    if references:
        if looks_unsegmented(references):
            return "char"
        return "none" if language in UNSEGMENTED_LANGUAGES else DEFAULT_TOKENIZATION
    return "char" if language in UNSEGMENTED_LANGUAGES else DEFAULT_TOKENIZATION


def _tokens(text: Text, tokenization: str = DEFAULT_TOKENIZATION, where: str = "sentence") -> list[str]:
    if isinstance(text, str):
        return tokenize(text, tokenization)
    if not isinstance(text, Sequence):
        raise TypeError(f"{where} is {type(text).__name__}; expected a string or a list of its tokens")
    tokens = list(text)
    for token in tokens:
        # sacrebleu takes [references]: here that makes one sentence a "token", and a silent 0
        if not isinstance(token, str) or any(char.isspace() for char in token):
            raise ValueError(f"{where} is a list whose token {token!r} is not a string or contains whitespace; "
                             "pass one reference string per hypothesis (not sacrebleu's [references])")
    return tokens


def ngram_counts(tokens: Sequence[str], n: int) -> Counter:
    """Counts of every n-gram (as a tuple of tokens) in ``tokens``."""
    return Counter(tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1))


def clipped_ngram_matches(hypothesis: Sequence[str], reference: Sequence[str],
                          n: int) -> tuple[int, int]:
    """Modified n-gram precision of one sentence, as (clipped matches, hypothesis n-grams).

    Each hypothesis n-gram counts as a match at most as often as it occurs in
    the reference ("clipping"), so "the the the" does not score against "the cat".
    """
    hyp_counts = ngram_counts(hypothesis, n)
    ref_counts = ngram_counts(reference, n)
    # Exercise 11.2 — BLEU's clipped n-gram precision (chapters/11-translator.md; graded by pytest -m ex_11_2)
    ### BEGIN SOLUTION
    matches = sum(min(count, ref_counts[gram]) for gram, count in hyp_counts.items())
    total = max(len(hypothesis) - n + 1, 0)
    ### END SOLUTION
    return matches, total


@dataclass(frozen=True)
class BLEUScore:
    """A BLEU score with the statistics it was computed from.

    ``precisions`` are the n-gram precisions in percent (after smoothing),
    ``bp`` the brevity penalty, ``ratio`` = hyp_len / ref_len.
    """

    score: float
    precisions: tuple[float, ...]
    bp: float
    ratio: float
    hyp_len: int
    ref_len: int
    correct: tuple[int, ...]
    total: tuple[int, ...]
    tokenize: str = DEFAULT_TOKENIZATION    # how the sentences were cut into tokens

    def __float__(self) -> float:
        return self.score

    def __str__(self) -> str:
        precisions = "/".join(f"{p:.1f}" for p in self.precisions)
        return (f"BLEU = {self.score:.2f} (tokenize {self.tokenize}) {precisions} (BP = {self.bp:.3f} "
                f"ratio = {self.ratio:.3f} hyp_len = {self.hyp_len} ref_len = {self.ref_len})")


def _check_pairs(hypotheses: Sequence[Text], references: Sequence[Text]) -> None:
    if isinstance(references, str) or isinstance(hypotheses, str):
        raise TypeError("hypotheses and references must be lists of sentences, not one string")
    if len(hypotheses) != len(references):
        raise ValueError(f"got {len(hypotheses)} hypotheses but {len(references)} references; "
                         "BLEU needs exactly one reference per hypothesis")
    if len(hypotheses) == 0:
        raise ValueError("BLEU of an empty list of hypotheses is undefined")


def bleu_stats(hypotheses: Sequence[Text], references: Sequence[Text],
               max_order: int = MAX_ORDER, tokenize: str = DEFAULT_TOKENIZATION
               ) -> tuple[list[int], list[int], int, int]:
    """Sufficient statistics of corpus BLEU, summed over sentences (tokenized by ``tokenize``).

    Returns (correct, total, hyp_len, ref_len): ``correct[n-1]`` clipped n-gram
    matches and ``total[n-1]`` hypothesis n-grams for n = 1..max_order, and the
    total token lengths of hypotheses and references.
    """
    _check_pairs(hypotheses, references)
    _tokenizer(tokenize)
    if max_order < 1:
        raise ValueError(f"max_order must be >= 1, got {max_order}")
    correct = [0] * max_order
    total = [0] * max_order
    hyp_len = ref_len = 0
    for number, (hypothesis, reference) in enumerate(zip(hypotheses, references), start=1):
        hyp = _tokens(hypothesis, tokenize, f"hypothesis {number}")
        ref = _tokens(reference, tokenize, f"reference {number}")
        hyp_len += len(hyp)
        ref_len += len(ref)
        for n in range(1, max_order + 1):
            matches, count = clipped_ngram_matches(hyp, ref, n)
            correct[n - 1] += matches
            total[n - 1] += count
    return correct, total, hyp_len, ref_len


def brevity_penalty(hyp_len: int, ref_len: int) -> float:
    """exp(1 - r/c) when the hypotheses are shorter than the references, else 1."""
    if hyp_len >= ref_len:
        return 1.0
    return math.exp(1.0 - ref_len / hyp_len) if hyp_len > 0 else 0.0


def bleu_from_stats(correct: Sequence[int], total: Sequence[int], hyp_len: int, ref_len: int,
                    smooth: str = "exp", effective_order: bool = False) -> BLEUScore:
    """BLEU = BP * exp(mean_n log p_n), with p_n the clipped n-gram precisions.

    Zero counts follow sacrebleu: if nothing matches at all the score is 0; if the
    hypotheses have no n-grams of some order (all too short) that precision is 0
    and so is the score. With ``smooth="exp"`` (sacrebleu's default) an order
    with n-grams but no match gets precision 100 / (2^k * total) for the k-th
    such order; with ``smooth="none"`` it is 0 and so is the score.
    ``effective_order`` ignores orders the hypotheses are too short to have
    (used by ``sentence_bleu``).
    """
    if smooth not in SMOOTH_METHODS:
        raise ValueError(f"unknown smooth {smooth!r}; expected one of {SMOOTH_METHODS}")
    max_order = len(correct)
    bp = brevity_penalty(hyp_len, ref_len)
    ratio = hyp_len / ref_len if ref_len > 0 else 0.0
    precisions = [0.0] * max_order
    stats = dict(bp=bp, ratio=ratio, hyp_len=hyp_len, ref_len=ref_len,
                 correct=tuple(correct), total=tuple(total))
    if not any(correct):
        return BLEUScore(score=0.0, precisions=tuple(precisions), **stats)

    orders_used = max_order
    smoothing_factor = 1.0
    for n in range(1, max_order + 1):
        if total[n - 1] == 0:
            break
        if effective_order:
            orders_used = n
        if correct[n - 1] > 0:
            precisions[n - 1] = 100.0 * correct[n - 1] / total[n - 1]
        elif smooth == "exp":
            smoothing_factor *= 2.0
            precisions[n - 1] = 100.0 / (smoothing_factor * total[n - 1])

    used = precisions[:orders_used]
    if min(used) <= 0.0:
        score = 0.0
    else:
        score = bp * math.exp(sum(math.log(p) for p in used) / orders_used)
    return BLEUScore(score=score, precisions=tuple(precisions), **stats)


def corpus_bleu_score(hypotheses: Sequence[Text], references: Sequence[Text],
                      smooth: str = "exp", max_order: int = MAX_ORDER,
                      tokenize: str = DEFAULT_TOKENIZATION) -> BLEUScore:
    """Corpus BLEU with its statistics; one reference per hypothesis."""
    correct, total, hyp_len, ref_len = bleu_stats(hypotheses, references, max_order, tokenize)
    score = bleu_from_stats(correct, total, hyp_len, ref_len, smooth=smooth)
    return dataclasses.replace(score, tokenize=tokenize)


def corpus_bleu(hypotheses: Sequence[Text], references: Sequence[Text],
                smooth: str = "exp", max_order: int = MAX_ORDER, tokenize: str = DEFAULT_TOKENIZATION) -> float:
    """Corpus BLEU on the 0-100 scale: n-gram statistics are summed over all
    sentences before the precisions are taken (not an average of sentence scores)."""
    return corpus_bleu_score(hypotheses, references, smooth, max_order, tokenize).score


def sentence_bleu(hypothesis: Text, reference: Text, smooth: str = "exp",
                  max_order: int = MAX_ORDER, tokenize: str = DEFAULT_TOKENIZATION) -> BLEUScore:
    """BLEU of one sentence, with effective order (like sacrebleu.sentence_bleu)."""
    correct, total, hyp_len, ref_len = bleu_stats([hypothesis], [reference], max_order, tokenize)
    score = bleu_from_stats(correct, total, hyp_len, ref_len, smooth=smooth, effective_order=True)
    return dataclasses.replace(score, tokenize=tokenize)
