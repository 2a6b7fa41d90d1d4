"""Generating text with a language model (chapter 15): greedy, or sampled with temperature, top-k, top-p.

    tokens = generate(model, prompt, 200, temperature=0.8, top_k=40, seed=1)

Each step turns the last position's logits z into a distribution and picks a token:

* greedy: argmax z (``temperature=0``, or ``greedy=True``);
* temperature τ: softmax(z / τ); τ < 1 sharpens the distribution, τ > 1 flattens it;
* top-k: only the k most likely tokens keep their probability (the others get none), renormalised;
* top-p (nucleus, Holtzman et al. 2020): the smallest set of most likely tokens whose probability
  reaches p, renormalised — a cut that adapts to how confident the model is.

``seed`` fixes the draws: one uniform number per step from NumPy's generator, compared with the
cumulative distribution, so the same logits give the same tokens.

With ``use_cache=True`` each step runs the model on the ONE new token, reading the keys and values of
the earlier ones from a KV cache (nn/cache.py, chapter 9); without it, on the whole window again.
Both compute the same logits (to float rounding), hence the same tokens.

A model sees at most ``context`` tokens. nanoGPT crops the text to the last ``context`` tokens at every
step; a cache cannot follow that (every cached position would move). Here the window slides by half a
context at a time: token n is predicted from tokens[s:n], where s is the first multiple of context // 2
that leaves at most ``context`` tokens. The cache is rebuilt when s moves (once every context // 2
tokens), and the uncached path reads the same window, so the two agree for any length.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .backend import asnumpy
from .decode import searching

__all__ = ["generate", "next_token_probabilities", "window_start"]


def _check_settings(temperature: float, top_k: int | None, top_p: float | None) -> None:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not (
            math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"generate: temperature must be a finite number >= 0 (0 is greedy), got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1):
        raise ValueError(f"generate: top_k must be an integer >= 1 or None, got {top_k!r}")
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1):
        raise ValueError(f"generate: top_p must be a number in (0, 1] or None, got {top_p!r}")


def next_token_probabilities(logits, temperature: float = 1.0, top_k: int | None = None,
                             top_p: float | None = None) -> np.ndarray:
    """The distribution one sampling step draws from: logits (V,) -> probabilities (V,) in float64.

    Temperature first, then the top-k cut, then the top-p cut of what is left; temperature 0 puts
    all the probability on the argmax."""
    _check_settings(temperature, top_k, top_p)
    z = np.asarray(asnumpy(logits), dtype=np.float64)
    if z.ndim != 1:
        raise ValueError(f"next_token_probabilities: logits must be one row (V,), got shape {z.shape}")
    if temperature == 0:
        probs = np.zeros_like(z)
        probs[int(np.argmax(z))] = 1.0
        return probs
    z = z / temperature
    if top_k is not None and top_k < z.size:
        kth = np.partition(z, z.size - top_k)[z.size - top_k]     # the k-th largest logit
        z = np.where(z >= kth, z, -np.inf)                          # ties with it stay in
    probs = np.exp(z - z.max())
    probs /= probs.sum()
    if top_p is not None and top_p < 1:
        # set probs to the top-p cut of probs, renormalised: the most likely tokens (equal probabilities in
        # the order of their ids) up to and including the one whose cumulative probability reaches top_p
        # Exercise 15.1 — top-p (nucleus) sampling's cut (chapters/15-decoder-only.md; graded by pytest -m ex_15_1)
        ### BEGIN SOLUTION
        order = np.argsort(-probs, kind="stable")                   # most likely first
        before = np.cumsum(probs[order]) - probs[order]             # the mass of the tokens ahead of each
        keep = order[before < top_p]                                # the first token always stays
        cut = np.zeros_like(probs)
        cut[keep] = probs[keep]
        probs = cut / cut.sum()
        ### END SOLUTION
    return probs


def window_start(length: int, context: int) -> int:
    """Where the model's window begins when it predicts token ``length`` from tokens[s:length]:
    0 while the text fits, then the first multiple of max(1, context // 2) that leaves <= context tokens."""
    if length <= context:
        return 0
    hop = max(1, context // 2)
    return -(-(length - context) // hop) * hop


def generate(model, prompt: Sequence[int], max_new_tokens: int, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None, greedy: bool = False, seed: int = 0,
             use_cache: bool = True, return_logits: bool = False):
    """``max_new_tokens`` tokens after ``prompt`` (a list of ids): the new ones, as a list of ints.

    ``return_logits=True`` also returns the (max_new_tokens, V) logits each step drew from (for tests)."""
    _check_settings(temperature, top_k, top_p)
    prompt = [int(t) for t in np.asarray(prompt).reshape(-1)]
    vocab, context = model.config.vocab_size, model.config.context
    if not prompt:
        raise ValueError("generate: the prompt is empty; give at least one token to start from")
    if min(prompt) < 0 or max(prompt) >= vocab:
        raise ValueError(f"generate: prompt ids must be in [0, {vocab}), got {min(prompt)}..{max(prompt)}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 0:
        raise ValueError(f"generate: max_new_tokens must be an integer >= 0, got {max_new_tokens!r}")
    rng = np.random.default_rng(seed)
    tokens, new, rows = list(prompt), [], []
    cache, cache_start = None, None
    with searching(model):
        for _ in range(max_new_tokens):
            start = window_start(len(tokens), context)
            if not use_cache:
                logits = model(np.asarray([tokens[start:]]))[0, -1]                     # the whole window again
            elif cache is None or start != cache_start:
                cache, cache_start = model.init_cache(), start                          # (re)fill the cache
                logits = model.step(np.asarray([tokens[start:]]), cache)[0, -1]
            else:
                logits = model.step(np.asarray([tokens[-1:]]), cache)[0, -1]           # one new position
            logits = asnumpy(logits.data)
            probs = next_token_probabilities(logits, 0 if greedy else temperature, top_k, top_p)
            token = int(np.argmax(probs)) if greedy or temperature == 0 else _draw(probs, rng)
            tokens.append(token)
            new.append(token)
            rows.append(logits)
    if return_logits:
        return new, np.stack(rows) if rows else np.zeros((0, vocab))
    return new


def _draw(probs: np.ndarray, rng: np.random.Generator) -> int:
    """One token from ``probs``: the first whose cumulative probability exceeds a uniform draw."""
    u = rng.random()
    index = int(np.searchsorted(np.cumsum(probs), u * probs.sum(), side="right"))
    index = min(index, probs.size - 1)
    while probs[index] == 0:        # rounding at the very top of the cumulative sum: step back to a real one
        index -= 1
    return index
