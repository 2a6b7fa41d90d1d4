"""Turning a trained model into translations: greedy search and beam search (chapter 11).

§6.1: "we used beam search with a beam size of 4 and length penalty α = 0.6 ...
We set the maximum output length during inference to input length + 50, but
terminate early when possible."

The length penalty is the one of Wu et al. (2016, GNMT), which the paper's α
refers to: a finished hypothesis Y is ranked by

    score(Y) = log P(Y | X) / lp(Y),      lp(Y) = ((5 + |Y|) / 6)^α

where |Y| counts the generated tokens including the final eos. Without it,
beam search prefers short outputs: every extra token multiplies in a
probability below 1.

Both searches are batched over sentences and use the model's cache
(``model.init_cache()`` / ``model.decode_step``): the Transformer's keys and values
(step t costs O(t) rather than re-running the decoder over the whole prefix), or
the LSTM's states; ``use_cache=False`` re-runs the prefix every step (the slow
reference the cache must agree with). What a search needs of a model is the
``Decodable`` protocol below, which ``nn.Transformer`` and ``nn.Seq2Seq`` both offer.
Sentences that are finished leave the batch (``cache.reorder`` keeps only the
rows still searching), so one long sentence does not keep the others running.

Ids go in as a (B, S) integer array padded with the model's pad id; the
results are lists of generated ids without bos and eos. The searches run the
model in eval mode (no dropout, whatever mode the caller left it in) and give
every module its mode back afterwards.
"""
from __future__ import annotations

import math
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Protocol, Sequence, runtime_checkable

import numpy as np

from .backend import asnumpy, get_device, to_device, xp_of
from .nn.cache import DecoderCache
from .nn.module import Module
from .nn.seq2seq import Seq2SeqCache
from .tensor import Tensor, no_grad

EXTRA_LENGTH = 50  # §6.1: maximum output length = input length + 50


@runtime_checkable
class Decodable(Protocol):
    """What greedy and beam search need of a model (nn.Transformer and nn.Seq2Seq; a test double may too).

    ``config.pad_id`` says which source ids are padding, ``config.max_len`` (if any) caps the output; the
    cache is any object with ``reorder(rows)``, which keeps those batch rows (repeats allowed) in place.
    """

    config: Any

    def parameters(self) -> list: ...

    def encode(self, src_ids) -> tuple[Tensor, Any]:
        """(B, S) ids -> (memory, src_mask), both indexable by batch row."""

    def decode(self, tgt_ids, memory: Tensor, src_mask) -> Tensor:
        """(B, t) ids -> logits (B, t, V) of a full pass over the prefix."""

    def init_cache(self) -> Any:
        """An empty cache for ``decode_step``."""

    def decode_step(self, step_ids, memory: Tensor, src_mask, cache) -> Tensor:
        """(B,) ids at position ``len(prefix) − 1`` -> logits (B, V) of the next token; advances the cache."""


@dataclass
class Hypothesis:
    """One search result: ids (no bos/eos), total log-probability, length-penalised score."""

    tokens: list[int]
    log_prob: float
    score: float
    finished: bool = True  # False when the search hit the length limit before eos


DEFAULT_ALPHA = 0.6     # α of the length penalty, as in §6.1 (chosen there on the development set)
# The α a search accepts: |α| up to 10. At α = 10 a hypothesis one token longer already gains (or, below 0,
# loses) more than any difference of log-probability, so a larger |α| means nothing more; past ±190 the
# penalty itself would leave the range of a float.
MAX_ABS_ALPHA = 10.0
_MAX_EXPONENT = 700.0   # e^700 ≈ 1e304: the penalty stays a finite, positive float whatever the length


def check_alpha(alpha: float, name: str = "alpha") -> float:
    """``alpha`` if it is a finite number within ±MAX_ABS_ALPHA; else a ValueError that says so."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha) \
            or abs(alpha) > MAX_ABS_ALPHA:
        raise ValueError(f"{name} must be a finite number from {-MAX_ABS_ALPHA:g} to {MAX_ABS_ALPHA:g} (the "
                         f"length penalty's exponent; §6.1 used {DEFAULT_ALPHA}), got {alpha!r}")
    return float(alpha)


def check_beam_width(beam_size: int, vocab: int, name: str = "beam_size") -> int:
    """``beam_size`` if it is no wider than the model's vocabulary of ``vocab`` tokens; else a ValueError that
    names the limit. The commands (translate, evaluate, train's test BLEU) hold their beams to it: a beam of
    100,000 seemed to hang, each step scoring 100,000·V continuations of each sentence and holding 100,000
    copies of its encoding. (beam_search itself loses nothing by cutting a beam to the outputs that exist,
    ``distinct_outputs``, but for a real vocabulary and length those are astronomically many.)"""
    if beam_size > vocab:
        raise ValueError(f"{name} {beam_size} is wider than the model's vocabulary ({vocab:,} tokens); the widest "
                         f"beam searched is {vocab:,} (§6.1 used 4)")
    return beam_size


def length_penalty(length: int, alpha: float) -> float:
    """GNMT's lp(Y) = ((5 + |Y|) / 6)^α; 1 for α = 0. Computed as exp(α·log((5 + |Y|)/6)) with the exponent
    held within ±700, so that no α and no length can overflow it or round it to 0 (a score divides by it)."""
    exponent = alpha * math.log((5.0 + length) / 6.0)
    return math.exp(min(max(exponent, -_MAX_EXPONENT), _MAX_EXPONENT))


def _log_softmax(logits):
    """Row-wise log-softmax of a raw (N, V) array (no graph: decoding runs under no_grad)."""
    xp = xp_of(logits)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    shifted -= xp.log(xp.exp(shifted).sum(axis=-1, keepdims=True))   # in place: one array fewer
    return shifted


@contextmanager
def searching(model) -> Iterator[None]:
    """No graph and no dropout while searching; the caller's train/eval modes come back afterwards,
    also on an exception. (A model that is not a Module, e.g. a test double, has no modes.)"""
    with ExitStack() as stack:
        stack.enter_context(no_grad())
        if isinstance(model, Module):
            stack.enter_context(model.evaluating())
        yield


def _model_device(model) -> str:
    params = model.parameters()
    return get_device(params[0].data) if params else "cpu"


def _pad_id(model) -> int:
    return int(getattr(getattr(model, "config", None), "pad_id", 0))


def output_limits(src_ids: np.ndarray, pad_id: int, model_max_len: int | None,
                  extra: int = EXTRA_LENGTH, max_len: int | None = None) -> np.ndarray:
    """Per sentence, the most tokens (eos included) the search may generate: source length + 50 (§6.1),
    capped by ``max_len`` and by the model's positional table."""
    if np.ndim(src_ids) != 2:
        raise ValueError(f"src_ids must be a (batch, length) array of ids, got shape {np.shape(src_ids)}")
    if max_len is not None and max_len < 1:
        raise ValueError(f"max_len must be >= 1 (it counts the eos), got {max_len}")
    limits = (asnumpy(src_ids) != pad_id).sum(axis=1) + extra
    if max_len is not None:
        limits = np.minimum(limits, max_len)
    if model_max_len is not None:
        limits = np.minimum(limits, model_max_len)
    return np.maximum(limits, 1).astype(np.int64)


class _DecoderState:
    """The decoder side of a search: memory, mask, and the cache (or the prefix) of every row."""

    def __init__(self, model, src_ids, bos_id: int, use_cache: bool, repeat: int = 1) -> None:
        self.model, self.use_cache = model, use_cache
        device = _model_device(model)
        src = to_device(asnumpy(src_ids).astype(np.int64), device)
        memory, src_mask = model.encode(src)                       # (B, S, d_model), (B, 1, 1, S)
        xp = xp_of(memory.data)
        self.xp = xp
        if repeat > 1:                                             # every sentence gets `repeat` rows
            rows = xp.repeat(xp.arange(src.shape[0]), repeat)
            memory, src_mask = Tensor(memory.data[rows]), src_mask[rows]
        self.memory, self.src_mask = memory, src_mask
        n_rows = memory.shape[0]
        self.cache = model.init_cache() if use_cache else None
        self.prefix = xp.full((n_rows, 1), bos_id, dtype=xp.int64)  # (rows, t) decoder input so far

    def log_probs(self):
        """Log-probabilities of the next token for every row: (rows, V), on the model's device."""
        if self.use_cache:
            logits = self.model.decode_step(self.prefix[:, -1], self.memory, self.src_mask, self.cache)  # (rows, V)
        else:
            logits = self.model.decode(self.prefix, self.memory, self.src_mask)[:, -1]                 # (rows, V)
        return _log_softmax(logits.data)

    def advance(self, rows, tokens, same_sources: bool = False) -> None:
        """Keep ``rows`` (host int array, repeats allowed) in that order, and append ``tokens`` to them.

        ``same_sources``: row j and row ``rows[j]`` translate the same sentence (beam search picking
        among each sentence's beams, none finished), so the memory, its mask and the cross-attention
        cache already hold the right rows and are left as they are.
        """
        xp = self.xp
        rows_dev = xp.asarray(rows)
        if not same_sources:
            self.memory = Tensor(self.memory.data[rows_dev])
            self.src_mask = self.src_mask[rows_dev]
        if isinstance(self.cache, (DecoderCache, Seq2SeqCache)):   # ours keep what does not depend on the row
            self.cache.reorder(rows_dev, same_sources=same_sources)
        elif self.cache is not None:        # another model's cache: the plain protocol, reorder(rows)
            self.cache.reorder(rows_dev)
        tokens_dev = xp.asarray(np.asarray(tokens, dtype=np.int64))[:, None]
        self.prefix = xp.concatenate([self.prefix[rows_dev], tokens_dev], axis=1)  # (rows', t + 1)


def greedy_decode(model: Decodable, src_ids, bos_id: int, eos_id: int, max_len: int | None = None,
                  use_cache: bool = True, extra_length: int = EXTRA_LENGTH) -> list[list[int]]:
    """The most probable next token at every step, for a (B, S) batch; returns B lists of ids."""
    src_ids = asnumpy(src_ids)  # host bookkeeping; the model runs on its device
    limits = output_limits(src_ids, _pad_id(model), _model_max_len(model), extra_length, max_len)
    outputs: list[list[int]] = [[] for _ in range(len(src_ids))]
    if len(src_ids) == 0:
        return outputs
    with searching(model):
        state = _DecoderState(model, src_ids, bos_id, use_cache)
        active = np.arange(len(src_ids))            # sentence index of each row
        step = 0
        while len(active):
            log_probs = state.log_probs()                       # (rows, V)
            best = log_probs.argmax(axis=-1)
            _check_no_nan(log_probs[state.xp.arange(len(best)), best])
            best = asnumpy(best)                                # (rows,)
            step += 1
            keep = []
            for row, sentence in enumerate(active):
                token = int(best[row])
                if token == eos_id:
                    continue
                outputs[sentence].append(token)
                if step < limits[sentence]:
                    keep.append(row)
            keep = np.asarray(keep, dtype=np.int64)
            active = active[keep]
            if len(active):
                state.advance(keep, best[keep])
    return outputs


def _check_no_nan(chosen) -> None:
    """Refuse NaN log-probabilities, as beam search does: argmax picks the first NaN of a row (NaN compares
    false with everything), and the output would be whatever token that is, an empty line for eos."""
    if bool(xp_of(chosen).isnan(chosen).any()):
        raise ValueError("greedy decoding: the model's log-probabilities contain NaN")


def _model_max_len(model) -> int | None:
    value = getattr(getattr(model, "config", None), "max_len", None)
    return int(value) if value is not None else None


def _model_vocab(model) -> int | None:
    value = getattr(getattr(model, "config", None), "tgt_vocab_size", None)
    return int(value) if value is not None else None


def distinct_outputs(limit: int, vocab: int, at_most: int) -> int:
    """How many different outputs a search can end with for a sentence allowed ``limit`` tokens (eos
    included) from a vocabulary of ``vocab``, counted up to ``at_most``: the finished ones (t < limit other
    tokens, then eos) and those cut at the limit (``limit`` other tokens): Σ_{t<limit} (V−1)^t + (V−1)^limit.

    A beam at least this wide is exhaustive: step s has at most V·(V−1)^(s−1) extensions, no more than
    this count, so every one of them is kept (an eos among them finishes), and fewer than this count
    finish before the limit, so the search never stops early. Every wider beam therefore finds exactly
    the same hypotheses, and beam search caps its beam here.
    """
    others = vocab - 1
    count, term = 0, 1
    for _ in range(limit):
        count += term                  # the outputs of t = 0, 1, ... other tokens and then eos
        if count >= at_most:
            return at_most
        term *= others
    return min(count + term, at_most)  # + those cut at the limit


def _top_candidates(scores, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best entries of each row of a (B, N) device array, best first (ties: lower index first).

    Returns host arrays (indices, values), each (B, k). A partition of all k·V extensions costs far
    more than the few survivors need: instead, split each row into groups (entry j joins group
    j mod G), take each group's maximum, and use the k-th largest of those maxima as a threshold. At
    least k entries reach it (those k maxima), so the k best are among the few entries at or above
    it, and only those are sorted.
    """
    xp = xp_of(scores)
    rows, n = scores.shape
    k = min(k, n)
    groups = min(n, max(4 * k, 64))
    whole = (n // groups) * groups
    maxima = scores[:, :whole].reshape(rows, -1, groups).max(axis=1)                    # (B, G)
    if whole < n:                                                                        # the ragged end
        maxima = xp.concatenate([maxima, scores[:, whole:].max(axis=1, keepdims=True)], axis=1)
    threshold = xp.partition(maxima, maxima.shape[1] - k, axis=1)[:, -k][:, None]        # (B, 1)
    flat = xp.flatnonzero(scores >= threshold)                                           # the few candidates
    values = asnumpy(scores.reshape(-1)[flat]).astype(np.float64)
    row, index = np.divmod(asnumpy(flat), n)
    order = np.lexsort((index, -values, row))          # by row, then value descending, then index
    row, index, values = row[order], index[order], values[order]
    rank = np.arange(len(row)) - np.searchsorted(row, row)                              # place within its row
    best = rank < k
    if best.sum() != rows * k:   # NaN compares false with everything: some row lost its candidates
        raise ValueError("beam search: the model's log-probabilities contain NaN")
    return index[best].reshape(rows, k), values[best].reshape(rows, k)


def beam_search(model: Decodable, src_ids, bos_id: int, eos_id: int, beam_size: int = 4, alpha: float = 0.6,
                max_len: int | None = None, use_cache: bool = True, n_best: int = 1,
                extra_length: int = EXTRA_LENGTH) -> list[list[Hypothesis]]:
    """Beam search over a (B, S) batch; for each sentence the ``n_best`` hypotheses, best score first.

    Each step extends the ``beam_size`` live hypotheses of a sentence by every
    token and keeps the best ``2·beam_size`` extensions: those ending in eos
    that rank within the first ``beam_size`` are finished (scored with the
    length penalty), the best ``beam_size`` others stay live. A sentence stops
    when it has ``beam_size`` finished hypotheses or reaches its length limit
    (then its live hypotheses count as results). With beam_size = 1 this is
    exactly greedy search. A beam wider than the outputs a sentence can have (``distinct_outputs``) is
    cut to that number, which finds the same hypotheses.
    """
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    if n_best < 1:
        raise ValueError(f"n_best must be >= 1, got {n_best}")
    check_alpha(alpha)
    src_ids = asnumpy(src_ids)  # host bookkeeping; the model runs on its device
    n_sentences, k = len(src_ids), beam_size
    limits = output_limits(src_ids, _pad_id(model), _model_max_len(model), extra_length, max_len)
    vocab = _model_vocab(model)
    if vocab is not None and n_sentences:     # no more beams than outputs: the same result, not beam_size rows
        k = distinct_outputs(int(limits.max()), vocab, beam_size)
    finished: list[list[Hypothesis]] = [[] for _ in range(n_sentences)]
    if n_sentences == 0:
        return []
    with searching(model):
        state = _DecoderState(model, src_ids, bos_id, use_cache, repeat=k)
        active = np.arange(n_sentences)                        # sentences still searching, in row order
        alive_log_prob = np.full((n_sentences, k), -np.inf)    # (B, k): only beam 0 is real at first
        alive_log_prob[:, 0] = 0.0
        alive_tokens: list[list[list[int]]] = [[[] for _ in range(k)] for _ in range(n_sentences)]
        step = 0
        while len(active):
            log_probs = state.log_probs()                                        # (B'·k, V)
            vocab = log_probs.shape[-1]
            xp = xp_of(log_probs)
            # set flat_index, flat_value, each (B', 2k): the 2k best of the k·V extensions (beam, token) of each
            # sentence's live beams by total log-probability, best first; index = beam·V + token.
            # _top_candidates(scores, n) returns the n best entries of each row of a (B', N) array.
            # Exercise 11.1 — one beam-search step (chapters/11-translator.md; graded by pytest -m ex_11_1)
            ### BEGIN SOLUTION
            totals = log_probs.reshape(len(active), k, vocab) + \
                xp.asarray(alive_log_prob[:, :, None], dtype=log_probs.dtype)   # (B', k, V)
            flat_index, flat_value = _top_candidates(totals.reshape(len(active), k * vocab), 2 * k)  # (B', 2k)
            ### END SOLUTION
            step += 1

            keep_rows, keep_tokens, next_log_prob, next_tokens, still_active = [], [], [], [], []
            for position, sentence in enumerate(active):
                beams = _next_beams(flat_index[position], flat_value[position], vocab, k, eos_id,
                                    alive_tokens[position], step, alpha, step >= limits[sentence],
                                    finished[sentence])
                if beams is None:                          # the sentence is done
                    continue
                still_active.append(sentence)
                next_log_prob.append([value for _, _, value in beams])
                next_tokens.append([alive_tokens[position][parent] + [token] for parent, token, _ in beams])
                keep_rows.extend(position * k + parent for parent, _, _ in beams)
                keep_tokens.extend(token for _, token, _ in beams)

            same_sources = len(still_active) == len(active)   # no sentence left: rows stay with their source
            active = np.asarray(still_active, dtype=np.int64)
            if len(active):
                alive_log_prob = np.asarray(next_log_prob)
                alive_tokens = next_tokens
                state.advance(np.asarray(keep_rows, dtype=np.int64), keep_tokens, same_sources)

    return [sorted(hypotheses, key=lambda h: -h.score)[:n_best] for hypotheses in finished]   # best score first


def _next_beams(indices, values, vocab: int, k: int, eos_id: int, prefixes: list[list[int]], step: int,
                alpha: float, at_limit: bool, finished: list[Hypothesis]) -> list[tuple[int, int, float]] | None:
    """One sentence's share of a beam-search step: its k live beams after this step, or None when it is done.

    ``indices`` and ``values`` are the sentence's 2k best extensions, best first (index = beam·V + token,
    value = total log-probability); ``prefixes`` its live beams' tokens. An extension that ends in eos
    and ranks within the first k becomes a finished hypothesis (appended to ``finished``); the best k
    others stay live. The sentence is done with k finished hypotheses or no live beam left, or at its
    length limit (``at_limit``), where its live beams become results too. Returns (parent beam, token,
    log p) for each of the k beams, padded with dead ones (log p = −∞) when fewer extensions are real.
    """
    beams: list[tuple[int, int, float]] = []
    for rank, (index, value) in enumerate(zip(indices, values)):
        if value == -np.inf:
            break
        parent, token = divmod(int(index), vocab)
        if token == eos_id:
            if rank < k:   # an eos counts only among the k best extensions
                finished.append(Hypothesis(list(prefixes[parent]), float(value),
                                           float(value) / length_penalty(step, alpha)))
        elif len(beams) < k:
            beams.append((parent, token, float(value)))
    if len(finished) >= k or not beams:
        return None
    if at_limit:                                   # out of length: the live ones become results
        for parent, token, value in beams:
            finished.append(Hypothesis(prefixes[parent] + [token], value, value / length_penalty(step, alpha),
                                       finished=False))
        return None
    while len(beams) < k:                          # fewer real extensions than beams: pad with dead ones
        beams.append((beams[0][0], beams[0][1], -np.inf))
    return beams


def decode_sentences(model, sources: Sequence[Sequence[int]], bos_id: int, eos_id: int, beam_size: int = 4,
                     alpha: float = 0.6, max_tokens: int = 2000, use_cache: bool = True) -> list[list[int]]:
    """Translate many id sequences: sort by length, decode in batches of ~``max_tokens`` source
    tokens, return the best output of each in the original order. ``beam_size=1`` is greedy."""
    pad_id = _pad_id(model)
    # an empty source has nothing to attend to: its translation is empty
    order = sorted((i for i in range(len(sources)) if len(sources[i])), key=lambda i: len(sources[i]))
    outputs: list[list[int]] = [[] for _ in sources]
    start = 0
    while start < len(order):
        longest, end = 0, start
        while end < len(order):
            longest = max(longest, len(sources[order[end]]))
            if end > start and longest * (end - start + 1) * beam_size > max_tokens:
                break
            end += 1
        group = order[start:end]
        batch = np.full((len(group), max(len(sources[i]) for i in group)), pad_id, dtype=np.int64)
        for row, i in enumerate(group):
            batch[row, :len(sources[i])] = sources[i]
        if beam_size == 1:
            results = greedy_decode(model, batch, bos_id, eos_id, use_cache=use_cache)
        else:
            results = [h[0].tokens if h else [] for h in
                       beam_search(model, batch, bos_id, eos_id, beam_size, alpha, use_cache=use_cache)]
        for i, tokens in zip(group, results):
            outputs[i] = tokens
        start = end
    return outputs


__all__ = ["Decodable", "Hypothesis", "length_penalty", "check_alpha", "MAX_ABS_ALPHA", "greedy_decode",
           "beam_search", "decode_sentences", "distinct_outputs", "check_beam_width",
           "output_limits", "EXTRA_LENGTH"]
