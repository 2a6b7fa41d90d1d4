"""Grading cases: what ``grade`` runs of a student's code, as plain data in and plain data out.

A case is a small JSON object, ``{"id", "exercise", "probe", "params", "seed"}``. Its probe (below)
makes the inputs from the seed, calls the package it finds on the import path (the student's, in the
sandbox) and returns named NumPy arrays: the outputs of a forward, or for a backward the output, the
gradient of each input (``grad:i``) and the values of Σ upstream ⊙ f(x ± ε e_k) of the *same*
forward at every coordinate (``fd:i``), from which the grader computes central differences itself.

Nothing here holds an answer or an expected value: the grader (judge.py) compares these outputs with
the ones the teacher's reference gave for the same case, in its own process. Public cases are the
inputs of the public tests (tests/exercises/test_exercises.py); hidden cases are drawn from the teacher's secret
seed (casebook.py), with sizes and settings the public tests do not show.

    python -m minitransformer.exercises.cases RUN.json --fd N        # what the sandbox runs

writes one JSON line per case to file descriptor N, as soon as the case is done: its outputs (arrays
as base64 ``.npy``, saved without pickle), or the error and where in the package it was raised.
"""
from __future__ import annotations

import base64
import contextlib
import io
import json
import math
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from .judge import NAME

EPS = 1e-6                 # the central-difference step of every fd:i output
CASE_SECONDS = 10          # seconds one case may take before it is stopped
STOP_AFTER_TIMEOUTS = 2    # after this many cases in a row ran out of time, the others are not run

# the exercises whose solutions the package must hold for an exercise's cases to run (besides its own):
# unbroadcast (2.1) in backwards that broadcast, masking (6.1) in attention and in flash attention's
# causal tiles, the online softmax (13.1) in the flash forward. Everything else in the graded package is the student edition's stub.

NEEDS = {"2.2": {"2.1"}, "6.2": {"2.1", "6.1"}, "6.3": {"6.1"}, "13.2": {"2.1", "6.1", "13.1"}}


# -- the probes: one per kind of case; each returns {name: array} -------------------------------------------------
def _float(value) -> np.ndarray:
    return np.asarray(float(value), dtype=np.float64)


def _arrays(rng, shapes, low=None):
    return [rng.standard_normal(shape) if low is None else low + rng.random(shape) for shape in shapes]


def _central_values(fn, arrays, which: int, upstream) -> np.ndarray:
    """(2, size): Σ upstream ⊙ fn(x ± ε e_k) for every coordinate k of input ``which``, by the package's forward."""
    import minitransformer as mt

    x = arrays[which].copy()
    flat = x.reshape(-1)
    values = np.empty((2, flat.size))
    with mt.no_grad():
        for k in range(flat.size):
            original = flat[k]
            for row, step in enumerate((EPS, -EPS)):
                flat[k] = original + step
                tensors = [mt.Tensor(x if j == which else a) for j, a in enumerate(arrays)]
                values[row, k] = float((np.asarray(fn(*tensors).data) * upstream).sum())
            flat[k] = original
    return values


class GraphInBackward(Exception):
    """A graded backward built a graph: it answered with the engine's autograd instead of the derivation."""


GRAPH_IN_BACKWARD = ("your backward built a graph: it ran the engine's autograd (operations on tensors that "
                     "require a gradient, or a second backward) instead of computing the gradient from its formula, "
                     "on arrays")


@contextlib.contextmanager
def no_graph_building():
    """Inside the block (a graded backward) recording a graph or starting a second backward raises
    GraphInBackward. A guard in the student's own process: it stops the plain route (the engine's autograd called
    from a backward), not code that takes the guard apart; a teacher reads the code for that (TEACHING.md)."""
    from minitransformer import tensor as engine

    record, backward = engine.Function.__call__, engine.Tensor.backward

    def guarded_call(self, *inputs):
        output = record(self, *inputs)
        if output.creator is self:
            raise GraphInBackward(GRAPH_IN_BACKWARD)
        return output

    def guarded_backward(self, *args, **kwargs):
        raise GraphInBackward(GRAPH_IN_BACKWARD)

    engine.Function.__call__, engine.Tensor.backward = guarded_call, guarded_backward
    try:
        yield
    finally:
        engine.Function.__call__, engine.Tensor.backward = record, backward


def _gradient_case(rng, fn, arrays, needs, central: bool = True) -> dict:
    """The forward's output, backward's gradient of each input that needs one, and the central values
    (``central`` False: a large case, where numerical differentiation cannot finish in the case's time)."""
    import minitransformer as mt

    tensors = [mt.Tensor(a.copy(), requires_grad=bool(n)) for a, n in zip(arrays, needs)]
    out = fn(*tensors)
    upstream = rng.standard_normal(np.shape(out.data))
    outputs = {"out": np.asarray(out.data)}
    backward = type(out).backward
    with no_graph_building():
        backward(out, upstream)
    for i, tensor in enumerate(tensors):
        if not needs[i]:
            continue
        if tensor.grad is not None:
            outputs[f"grad:{i}"] = np.asarray(tensor.grad)
        if central:
            outputs[f"fd:{i}"] = _central_values(fn, arrays, i, upstream)
    return outputs


def _operation(name: str):
    import minitransformer.functional as F

    return {"div": lambda p, q: p / q, "div-by-4": lambda t: t / 4.0, "one-over": lambda t: 1.0 / t,
            "add": lambda p, q: p + q, "mul": lambda p, q: p * q, "matmul": lambda p, q: p @ q,
            "matmul-swapped": lambda p, q: q @ p, "cube": lambda t: t * t * t,
            "tanh-mul": lambda p, q: (p * q).tanh(),
            "softmax": F.softmax, "log-softmax": F.log_softmax}[name]


def probe_numerical_gradient(rng, function: str, shapes, which: int, low=None) -> dict:
    """Exercise 1.1: the package's numerical_gradient of a known function, and the inputs after it."""
    import minitransformer as mt

    arrays = _arrays(rng, shapes, low)
    tensors = [mt.Tensor(a.copy(), requires_grad=True) for a in arrays]
    upstream = rng.standard_normal(np.broadcast_shapes(*(tuple(s) for s in shapes)) if function != "matmul"
                                   else (shapes[0][0], shapes[1][1]))
    numeric = mt.numerical_gradient(_operation(function), tensors, which, upstream, EPS)
    outputs = {"numeric": np.asarray(numeric)}
    outputs.update({f"input:{i}": np.asarray(t.data) for i, t in enumerate(tensors)})
    return outputs


def probe_gradcheck_verdicts(rng, shape) -> dict:
    """Exercise 1.1: does the package's gradcheck pass a right backward of x² and reject a wrong one?"""
    import minitransformer as mt

    class Square(mt.Function):
        def __init__(self, factor: float) -> None:
            self.factor = factor

        def forward(self, x):
            self.x = x
            return x * x

        def backward(self, gy):
            return gy * self.factor * self.x

    def verdict(factor: float) -> bool:
        x = mt.Tensor(data.copy(), requires_grad=True)
        try:
            return bool(mt.gradcheck(lambda t: Square(factor)(t), [x]))
        except mt.GradcheckError:
            return False

    data = rng.standard_normal(shape)
    return {"passes a right backward": np.asarray(verdict(2.0)), "passes a wrong backward": np.asarray(verdict(3.0))}


def probe_gradient(rng, operation: str, shapes, needs=None, low=None, axis=None, central: bool = True) -> dict:
    """A backward exercise: ``operation`` on random inputs of ``shapes`` (``low``: per input, entries in [low, low+1))."""
    lows = low if isinstance(low, list) else [low] * len(shapes)
    arrays = [_arrays(rng, [shape], lo)[0] for shape, lo in zip(shapes, lows)]
    function = _operation(operation)
    if axis is not None:
        base, function = function, (lambda t: base(t, axis=axis))
    return _gradient_case(rng, function, arrays, needs or [True] * len(shapes), central)


def probe_unbroadcast(rng, shape, target) -> dict:
    """Exercise 2.1: unbroadcast of a random gradient of shape ``target`` back to ``shape``."""
    from minitransformer.ops.broadcasting import unbroadcast

    return {"reduced": np.asarray(unbroadcast(rng.standard_normal(target), tuple(shape)))}


def probe_reduction(rng, reduction: str, shape, axis=None, keepdims=False, ties=None, central: bool = True) -> dict:
    """Exercise 2.3: sum or max over ``axis``; ``ties``: a matrix with tied maxima (no central values there)."""
    data = np.asarray(ties, dtype=float) if ties is not None else rng.permutation(np.prod(shape)).reshape(shape) \
        + 0.1 * rng.random(shape)
    axis = tuple(axis) if isinstance(axis, list) else axis
    function = (lambda t: t.sum(axis=axis, keepdims=keepdims)) if reduction == "sum" else \
        (lambda t: t.max(axis=axis, keepdims=keepdims))
    return _gradient_case(rng, function, [data], [True], central=ties is None and central)


def _index(spec):
    """A JSON index ({"slice": [a, b, c]}, {"int": n}, {"array": [...]}, or a list of them) as a NumPy index."""
    def one(part):
        if "slice" in part:
            return slice(*part["slice"])
        if "int" in part:
            return part["int"]
        return np.asarray(part["array"])
    return tuple(one(p) for p in spec) if isinstance(spec, list) else one(spec)


def probe_getitem(rng, shape, index, central: bool = True) -> dict:
    """Exercise 2.4: x[index] and its backward (a scatter-add where positions repeat)."""
    where = _index(index)
    return _gradient_case(rng, lambda t: t[where], [rng.standard_normal(shape)], [True], central)


def probe_cross_entropy(rng, shape, targets, smoothing: float, ignore_index=None, central: bool = True) -> dict:
    """Exercise 4.3: the label-smoothed, padding-aware cross-entropy and its backward."""
    import minitransformer.functional as F

    ids = np.asarray(targets)
    return _gradient_case(rng, lambda t: F.cross_entropy(t, ids, label_smoothing=smoothing,
                                                         ignore_index=ignore_index),
                          [rng.standard_normal(shape)], [True], central)


def probe_layer_norm(rng, shape, affine: bool = True, central: bool = True) -> dict:
    """Exercise 5.1: layer norm over the last axis, with or without γ and β."""
    import minitransformer.functional as F

    dim = shape[-1]
    if affine:
        arrays = [rng.standard_normal(shape), rng.standard_normal(dim), rng.standard_normal(dim)]
        return _gradient_case(rng, lambda a, w, b: F.layer_norm(a, w, b), arrays, [True] * 3, central)
    return _gradient_case(rng, lambda a: F.layer_norm(a), [rng.standard_normal(shape)], [True], central)


def _mask(rng, kind: str, batch: int, queries: int, keys: int, lengths=None):
    if kind == "padding":
        lengths = lengths or [int(n) for n in rng.integers(1, keys + 1, batch)]
        return (np.arange(keys)[None, :] < np.asarray(lengths)[:, None])[:, None, None, :]
    if kind == "causal":
        return np.tril(np.ones((queries, keys), dtype=bool), keys - queries)[None, None]
    if kind == "random":
        mask = rng.random((batch, 1, queries, keys)) < 0.6
        mask[..., 0] |= rng.random((batch, 1, queries)) < 0.7      # most rows keep a key ...
        mask[rng.integers(batch), 0, rng.integers(queries)] = False  # ... and one keeps none
        return mask
    if kind == "empty-row":
        mask = np.ones((1, 1, queries, keys), dtype=bool)
        mask[..., 0, 1::2] = False
        mask[..., -1, :] = False
        return mask
    raise ValueError(f"unknown mask {kind!r}")


def probe_attention(rng, batch, heads, queries, keys, d_k, d_v=None, mask=None, lengths=None) -> dict:
    """Exercise 6.1: masked attention's output and weights (the masking is the student's)."""
    import minitransformer as mt
    import minitransformer.functional as F

    d_v = d_v or d_k
    q = mt.Tensor(rng.standard_normal((batch, heads, queries, d_k)))
    k = mt.Tensor(rng.standard_normal((batch, heads, keys, d_k)))
    v = mt.Tensor(rng.standard_normal((batch, heads, keys, d_v)))
    where = None if mask is None else _mask(rng, mask, batch, queries, keys, lengths)
    out, weights = F.scaled_dot_product_attention(q, k, v, mask=where, return_weights=True)
    return {"out": np.asarray(out.data), "weights": np.asarray(weights.data)}


def probe_attention_backward(rng, q_shape, k_shape, v_shape, mask_shape=None, central: bool = True) -> dict:
    """Exercise 6.2: the attention backward to Q, K (and V) through an optional boolean mask."""
    import minitransformer.functional as F

    mask = None
    if mask_shape is not None:
        mask = rng.random(mask_shape) < 0.7
        mask[..., 0] = True                       # every row keeps a key: a fully masked row has no gradient
    arrays = [rng.standard_normal(q_shape), rng.standard_normal(k_shape), rng.standard_normal(v_shape)]
    return _gradient_case(rng, lambda a, b, c: F.scaled_dot_product_attention(a, b, c, mask=mask), arrays,
                          [True] * 3, central)


def probe_causal_mask(rng, size: int) -> dict:
    """Exercise 6.3: the causal mask, and attention under it."""
    import minitransformer as mt
    import minitransformer.functional as F

    mask = np.asarray(F.causal_mask(size, device="cpu"))
    q, k, v = (mt.Tensor(rng.standard_normal((2, 2, size, 3))) for _ in range(3))
    return {"mask": mask, "out": np.asarray(F.scaled_dot_product_attention(q, k, v, mask=mask).data)}


def probe_additive_score(rng, batch: int, queries: int, keys: int, hidden: int, scale: float = 1.0,
                         central: bool = True) -> dict:
    """Exercise 6.4: the backward of Bahdanau's scores vᵀ tanh(q_t + k_j) to the queries, the keys and v."""
    import minitransformer.functional as F

    arrays = [rng.standard_normal((batch, queries, hidden)), scale * rng.standard_normal((batch, keys, hidden)),
              rng.standard_normal(hidden)]
    return _gradient_case(rng, F.additive_score, arrays, [True] * 3, central)


def probe_heads(rng, batch, length, heads, d_k) -> dict:
    """Exercise 7.1: split_heads, merge_heads and the gradient through both."""
    import minitransformer as mt
    from minitransformer.nn.attention import merge_heads, split_heads

    x = rng.standard_normal((batch, length, heads * d_k))
    split = np.asarray(split_heads(mt.Tensor(x), heads).data)
    merged = np.asarray(merge_heads(mt.Tensor(rng.standard_normal((batch, heads, length, d_k)))).data)
    scale = mt.Tensor(rng.standard_normal((1, heads, 1, d_k)))
    outputs = _gradient_case(rng, lambda t: merge_heads(split_heads(t, heads) * scale), [x], [True])
    return {"split": split, "merged": merged, **outputs}


def probe_sinusoidal(rng, length: int, d_model: int) -> dict:
    """Exercise 8.1: the table of §3.5."""
    from minitransformer.nn.positional import sinusoidal_table

    return {"table": np.asarray(sinusoidal_table(length, d_model))}


def probe_noam(rng, d_model: int, warmup: int, factor: float, steps) -> dict:
    """Exercise 10.1: the rate at ``steps``, and the rates step() sets on the optimizer."""
    import minitransformer as mt

    holder = SimpleNamespace(lr=0.0)
    schedule = mt.optim.NoamSchedule(holder, d_model, warmup=warmup, factor=factor)
    rates = [float(schedule.rate(step)) for step in steps]
    stepped = [float(schedule.step()) for _ in range(min(6, 2 * warmup))]
    return {"rate": np.asarray(rates), "step": np.asarray(stepped), "optimizer lr": _float(holder.lr)}


PAD, BOS, EOS = 0, 1, 2


class Markov:
    """A "model" whose next-token log-probabilities depend on the last token only: log_table[last]."""

    def __init__(self, log_table, max_len: int = 8) -> None:
        self.log_table = np.asarray(log_table, dtype=float)
        self.config = SimpleNamespace(pad_id=PAD, max_len=max_len)

    def parameters(self):
        return []

    def encode(self, src):
        import minitransformer as mt

        return mt.Tensor(np.zeros((src.shape[0], src.shape[1], 1))), (src != PAD)[:, None, None, :]

    def init_cache(self):
        return SimpleNamespace(reorder=lambda rows: None)

    def decode_step(self, last_ids, memory, src_mask, cache):
        import minitransformer as mt

        return mt.Tensor(self.log_table[np.asarray(last_ids)])


def _markov_table(rng, rows, vocab: int):
    """A log-probability table: ``rows`` {last: {token: p}} as given, or random rows when ``rows`` is None."""
    table = np.full((vocab, vocab), -1e9)
    if rows is None:                  # eos (2) likely early, so that finished and live beams compete
        for last in range(vocab):
            allowed = np.concatenate([[EOS], rng.permutation(np.arange(3, vocab))[:max(2, vocab // 2)]])
            p = rng.dirichlet(np.ones(len(allowed)))
            table[last, allowed] = np.log(p)
    else:
        for last, row in rows.items():
            for token, p in row.items():
                table[int(last), int(token)] = math.log(p)
    return table


def probe_beam_search(rng, rows=None, vocab: int = 6, sources=((7, 7),), beam_size: int = 2, alpha: float = 0.0,
                      n_best: int = 1, max_len: int = 8) -> dict:
    """Exercise 11.1: beam search over a Markov "model": the n-best tokens (−1 pads) and log-probabilities."""
    from minitransformer.decode import beam_search

    model = Markov(_markov_table(rng, rows, vocab), max_len)
    source = np.asarray([list(s) for s in sources])
    results = beam_search(model, source, BOS, EOS, beam_size=beam_size, alpha=alpha, n_best=n_best)
    longest = max([len(h.tokens) for hypotheses in results for h in hypotheses] + [1])
    tokens = np.full((len(results), n_best, longest), -1, dtype=np.int64)
    log_probs = np.full((len(results), n_best), np.nan)
    for b, hypotheses in enumerate(results):
        for n, hypothesis in enumerate(hypotheses[:n_best]):
            tokens[b, n, :len(hypothesis.tokens)] = hypothesis.tokens
            log_probs[b, n] = hypothesis.log_prob
    return {"tokens": tokens, "log_prob": log_probs}


WORDS = ["the", "cat", "sat", "on", "mat", "a", "dog", "ran"]


def probe_clipped_matches(rng, sentences: int = 20, words: int = 6, longest: int = 9, pairs=None) -> dict:
    """Exercise 11.2: (clipped matches, total) for n = 1..4 over random (or given) sentence pairs."""
    from minitransformer.bleu import clipped_ngram_matches

    if pairs is None:
        pairs = [(list(rng.choice(WORDS[:words], size=rng.integers(0, longest))),
                  list(rng.choice(WORDS[:words], size=rng.integers(1, longest)))) for _ in range(sentences)]
    counts = [[list(clipped_ngram_matches([str(w) for w in h], [str(w) for w in r], n)) for n in range(1, 5)]
              for h, r in pairs]
    return {"matches and totals": np.asarray(counts, dtype=np.int64).reshape(len(pairs), 4, 2)}


def probe_merge_pair(rng, sequences=None, pair=(0, 1), new_id: int = 9, count: int = 50, symbols: int = 3,
                     longest: int = 12) -> dict:
    """Exercise 11.3: merge_pair on given or random id sequences (results padded with −1)."""
    from minitransformer.data.raw_bpe import merge_pair

    if sequences is None:
        sequences = [[int(i) for i in rng.integers(0, symbols, size=rng.integers(0, longest))] for _ in range(count)]
    merged = [list(merge_pair(list(s), tuple(pair), new_id)) for s in sequences]
    table = np.full((len(merged), max([len(m) for m in merged] + [1])), -1, dtype=np.int64)
    for row, ids in enumerate(merged):
        table[row, :len(ids)] = ids
    return {"merged": table, "lengths": np.asarray([len(m) for m in merged], dtype=np.int64)}


def probe_alignment_error_rate(rng, heads=None, rows: int = 4, sources: int = 5, links: int = 6) -> dict:
    """Exercise 12.1: the AER of given or random heads against given or random gold links."""
    from minitransformer.alignment_scores import alignment_error_rate

    if heads is None:
        heads = []
        for _ in range(20):
            weights = rng.dirichlet(np.ones(sources), size=rows)
            gold = sorted({(int(s), int(t)) for s, t in zip(rng.integers(0, sources, links),
                                                             rng.integers(0, rows, links))})
            heads.append((weights.tolist(), gold))
    rates = [alignment_error_rate(np.asarray(w), [tuple(link) for link in gold]) for w, gold in heads]
    return {"aer": np.asarray(rates, dtype=np.float64)}


def probe_flops(rng, sizes) -> dict:
    """Exercise 12.2: the FLOPs of one encoder layer for each (d_model, d_ff, source length)."""
    from minitransformer.flops import encoder_layer_flops

    return {"flops": np.asarray([float(encoder_layer_flops(*size)) for size in sizes])}


def _call_here(module: str, function: str, *arguments) -> tuple:
    """Call ``module.function(*arguments)`` in this process; its results as a tuple."""
    import importlib

    result = getattr(importlib.import_module(module), function)(*arguments)
    return tuple(result) if isinstance(result, tuple) else (result,)


def probe_call(rng, module: str, function: str, arguments) -> dict:
    """One call of a staged case (STAGED): ``module.function`` of the package on the given arrays, alone in its
    process (``result 0``, ``result 1``... are what it returned)."""
    if not module.startswith("minitransformer."):
        raise ValueError(f"a staged call runs the package's functions only, not {module}")
    values = [np.asarray(a, dtype=float) for a in arguments]
    return {f"result {i}": np.asarray(r) for i, r in enumerate(_call_here(module, function, *values))}


FLASH = "minitransformer.functional.flash_attention"


def staged_online_softmax(rng, rows: int, length: int, d_v: int, cuts, scale: float = 4.0, scores=None,
                          masked=None):
    """Exercise 13.1 as a staged probe: yields each call (module, function, arguments), is sent its results,
    and returns the outputs. The grader runs each call in a fresh sandbox, which sees that block and the
    running state and nothing of the blocks before it: only the state can carry the past (online means online)."""
    if scores is None:
        scores = scale * rng.standard_normal((rows, length))
        if masked is not None:                       # −∞ at a random share of positions (whole blocks sometimes)
            scores[rng.random((rows, length)) < masked] = -np.inf
            # but each row keeps a finite score in its first block: a row masked everywhere has the state it
            # started with as its answer (a step that does nothing would pass), and a row whose first blocks are
            # all masked brings no past to the next one (a step that ignores the state would pass)
            first = np.isneginf(scores[:, cuts[0]:cuts[1]]).all(axis=1)
            empty = np.flatnonzero(first)
            scores[empty, rng.integers(cuts[0], cuts[1], empty.size)] = scale * rng.standard_normal(empty.size)
    scores = np.asarray(scores, dtype=float)
    values = rng.standard_normal((scores.shape[1], d_v))
    state = (np.full((scores.shape[0], 1), -np.inf), np.zeros((scores.shape[0], 1)),
             np.zeros((scores.shape[0], d_v)))
    for start, stop in zip(cuts[:-1], cuts[1:]):
        state = yield FLASH, "online_softmax_step", (*state, scores[:, start:stop], values[start:stop])
        if len(state) != 3:
            raise ValueError(f"online_softmax_step must return 3 arrays (row_max, row_sum, weighted), not {len(state)}")
    out, log_sum_exp = yield FLASH, "finish_rows", state
    return {"out": np.asarray(out), "log_sum_exp": np.asarray(log_sum_exp)}


def probe_online_softmax(rng, **params) -> dict:
    """Exercise 13.1 in one process (the teacher's casebook): staged_online_softmax with every call made here."""
    return drive(staged_online_softmax(rng, **params))


def drive(probe) -> dict:
    """Run a staged probe's calls in this process; its outputs."""
    try:
        call = next(probe)
        while True:
            module, function, arguments = call
            call = probe.send(_call_here(module, function, *arguments))
    except StopIteration as finished:
        return finished.value


def probe_flash_delta(rng, batch: int, queries: int, keys: int, d_v: int) -> dict:
    """Exercise 13.2: D = rowsum(gA ⊙ A) from O and gO."""
    from minitransformer.functional.flash_attention import flash_delta

    weights = rng.random((batch, queries, keys))
    weights /= weights.sum(axis=-1, keepdims=True)
    values, g_out = rng.standard_normal((batch, keys, d_v)), rng.standard_normal((batch, queries, d_v))
    return {"delta": np.asarray(flash_delta(g_out, weights @ values))}


def probe_flash_backward(rng, q_shape, k_shape, v_shape, causal: bool = True, block_size: int = 4) -> dict:
    """Exercise 13.2: FlashAttention's backward, which uses the student's D."""
    import minitransformer.functional as F

    arrays = [rng.standard_normal(q_shape), rng.standard_normal(k_shape), rng.standard_normal(v_shape)]
    return _gradient_case(rng, lambda a, b, c: F.flash_attention(a, b, c, causal=causal, block_size=block_size),
                          arrays, [True] * 3)


def probe_causal_prefix(rng, lead, length: int, d_k: int, d_v: int, chunk: int) -> dict:
    """Exercise 13.3: num and den of causal linear attention by prefix sums, chunk by chunk."""
    from minitransformer.functional.linear_attention import causal_prefix_attention

    shape = tuple(lead) + (length,)
    phi_q, phi_k = rng.random(shape + (d_k,)), rng.random(shape + (d_k,))
    v = rng.standard_normal(shape + (d_v,))
    num, den, _ = causal_prefix_attention(phi_q, phi_k, v, chunk)
    return {"num": np.asarray(num), "den": np.asarray(den)}


def probe_linear_attention(rng, shape) -> dict:
    """Exercise 13.3: causal linear attention end to end (its output is built from num and den)."""
    import minitransformer as mt
    import minitransformer.functional as F

    q, k, v = (mt.Tensor(rng.standard_normal(shape)) for _ in range(3))
    return {"out": np.asarray(F.linear_attention(q, k, v, causal=True).data)}


def probe_recurrent_step(rng, lead, d_k: int, d_v: int) -> dict:
    """Exercise 13.4: one step of linear attention's recurrence, from a random state."""
    from minitransformer.functional.linear_attention import recurrent_step

    shape = tuple(lead)
    phi_q, phi_k, v = rng.random(shape + (d_k,)), rng.random(shape + (d_k,)), rng.standard_normal(shape + (d_v,))
    kv, z = rng.random(shape + (d_k, d_v)), rng.random(shape + (d_k,))
    num, den, kv, z = recurrent_step(phi_q, phi_k, v, kv, z)
    return {"num": np.asarray(num), "den": np.asarray(den), "kv": np.asarray(kv), "z": np.asarray(z)}


def probe_linear_decoding(rng, shape, steps) -> dict:
    """Exercise 13.4: linear attention decoded a few positions at a time from its running state."""
    from minitransformer.functional.linear_attention import linear_attention_step

    q, k, v = (rng.standard_normal(shape) for _ in range(3))
    state, outs, start = None, [], 0
    for size in steps:
        rows = slice(start, start + size)
        out, state = linear_attention_step(q[..., rows, :], k[..., rows, :], v[..., rows, :], state)
        outs.append(np.asarray(out.data))
        start += size
    return {"out": np.concatenate(outs, axis=-2), "kv": np.asarray(state[0]), "z": np.asarray(state[1])}


def probe_longformer(rng, length: int, window: int, dilation: int, global_tokens, causal: bool = False) -> dict:
    """Exercise 13.5: Longformer's pattern as a boolean (n, n) mask."""
    import minitransformer.functional as F

    mask = F.longformer_pattern(length, window, dilation, global_tokens, causal, device="cpu")
    return {"mask": np.asarray(mask)}


PROBES = {name.removeprefix("probe_"): value for name, value in list(globals().items()) if name.startswith("probe_")}
# probes the grader runs itself, each call of the student's function in a fresh sandbox (sandbox.run_cases)
STAGED = {"online_softmax": staged_online_softmax}

# -- the public cases: the inputs of the public tests --------------------------------------------------------------
def _case(exercise: str, name: str, probe: str, **params) -> dict:
    return {"exercise": exercise, "name": name, "probe": probe, "params": params}


SHAPES_2_1 = [((3, 1), (2, 3, 4)), ((4,), (3, 4)), ((), (2, 3)), ((1, 1), (2, 3)), ((2, 1, 4), (2, 3, 4)),
              ((1, 3, 1), (5, 2, 3, 4))]
MATMUL = [((2, 3), (3, 4)), ((2, 2, 3), (2, 3, 4)), ((2, 2, 3), (3, 4)), ((3,), (3, 4)), ((2, 3), (3,)),
          ((3,), (3,))]


def public_cases(exercise_id: str) -> list[dict]:
    """The public cases of an exercise (the inputs of its public tests), without ids or seeds."""
    e = exercise_id
    cases = {
        "1.1": [_case(e, "the cube t·t·t", "numerical_gradient", function="cube", shapes=[[3, 4]], which=0),
                _case(e, "p·q, input 0", "numerical_gradient", function="mul", shapes=[[2, 3], [2, 3]], which=0),
                _case(e, "p·q, input 1", "numerical_gradient", function="mul", shapes=[[2, 3], [2, 3]], which=1),
                _case(e, "gradcheck of x² with a right and a wrong backward", "gradcheck_verdicts", shape=[5])],
        "1.2": [_case(e, f"p / q, {needs} needs a gradient", "gradient", operation="div", shapes=[[3, 4], [3, 4]],
                      needs=[needs in ("both", "numerator"), needs in ("both", "denominator")], low=[None, 0.5])
                for needs in ("both", "numerator", "denominator")]
        + [_case(e, "t / 4", "gradient", operation="div-by-4", shapes=[[2, 3]], low=0.5),
           _case(e, "1 / t", "gradient", operation="one-over", shapes=[[2, 3]], low=0.5)],
        "2.1": [_case(e, f"unbroadcast to {s} from {t}", "unbroadcast", shape=list(s), target=list(t))
                for s, t in SHAPES_2_1]
        + [_case(e, f"(2, 1, 3) {op} (4, 1)", "gradient", operation=name, shapes=[[2, 1, 3], [4, 1]])
           for op, name in (("+", "add"), ("·", "mul"))],
        "2.2": [_case(e, f"{a} @ {b}", "gradient", operation="matmul", shapes=[list(a), list(b)]) for a, b in MATMUL]
        + [_case(e, "only A needs a gradient", "gradient", operation="matmul", shapes=[[2, 3], [3, 2]],
                 needs=[True, False]),
           _case(e, "only B needs a gradient", "gradient", operation="matmul-swapped", shapes=[[2, 3], [3, 2]],
                 needs=[True, False])],
        "2.3": [_case(e, f"sum over {axis}, keepdims={keep}", "reduction", reduction="sum", shape=[2, 3, 4],
                      axis=axis, keepdims=keep) for axis, keep in [(None, False), (1, False), ([0, 2], True),
                                                                   (-1, True)]]
        + [_case(e, f"max over {axis}, keepdims={keep}", "reduction", reduction="max", shape=[2, 3, 4], axis=axis,
                 keepdims=keep) for axis, keep in [(None, False), (1, False), (-1, True)]]
        + [_case(e, "tied maxima", "reduction", reduction="max", shape=[3, 3], axis=1,
                 ties=[[1.0, 3.0, 3.0], [2.0, 0.0, -1.0], [5.0, 5.0, 5.0]])],
        "2.4": [_case(e, name, "getitem", shape=[3, 4], index=index) for name, index in [
            ("a slice", {"slice": [1, 3]}), ("an int and a slice", [{"int": 1}, {"slice": [None, None, 2]}]),
            ("repeated rows", {"array": [0, 2, 0, 0]}), ("repeated pairs", [{"array": [1, 1]}, {"array": [2, 2]}]),
            ("columns", [{"slice": [None]}, {"array": [3, 0, 3]}])]]
        + [_case(e, "a row read three times", "getitem", shape=[3, 2], index={"array": [0, 0, 2, 0]})],
        "4.1": [_case(e, f"softmax over axis {a}", "gradient", operation="softmax", shapes=[[2, 3, 4]], axis=a)
                for a in (-1, 0, 1)],
        "4.2": [_case(e, f"log-softmax over axis {a}", "gradient", operation="log-softmax", shapes=[[2, 3, 4]],
                      axis=a) for a in (-1, 1)],
        "4.3": [_case(e, f"smoothing {s}, ignore_index {i}", "cross_entropy", shape=[6, 5], targets=[1, 0, 4, 2, 0, 3],
                      smoothing=s, ignore_index=i) for s in (0.0, 0.1, 0.4) for i in (None, 0)]
        + [_case(e, "a batch of sequences", "cross_entropy", shape=[2, 3, 4], targets=[[1, 2, 0], [3, 0, 0]],
                 smoothing=0.1, ignore_index=0)],
        "5.1": [_case(e, "(2, 3, 5) with γ and β", "layer_norm", shape=[2, 3, 5]),
                _case(e, "(4, 6) without γ and β", "layer_norm", shape=[4, 6], affine=False),
                _case(e, "one row (1, 3)", "layer_norm", shape=[1, 3], affine=False)],
        "6.1": [_case(e, "a padding mask", "attention", batch=2, heads=2, queries=4, keys=5, d_k=3, mask="padding",
                      lengths=[5, 3]),
                _case(e, "a lower-triangular mask", "attention", batch=2, heads=2, queries=4, keys=4, d_k=3,
                      mask="causal"),
                _case(e, "a query with every key masked", "attention", batch=1, heads=1, queries=3, keys=4, d_k=3,
                      mask="empty-row")],
        "6.2": [_case(e, "no mask", "attention_backward", q_shape=[2, 2, 3, 4], k_shape=[2, 2, 5, 4],
                      v_shape=[2, 2, 5, 3]),
                _case(e, "a mask and broadcast keys", "attention_backward", q_shape=[2, 2, 3, 4], k_shape=[1, 1, 4, 4],
                      v_shape=[1, 1, 4, 2], mask_shape=[2, 1, 1, 4])],
        "6.3": [_case(e, f"size {n}", "causal_mask", size=n) for n in (1, 2, 5)],
        "6.4": [_case(e, "T = 3 queries, S = 5 keys", "additive_score", batch=2, queries=3, keys=5, hidden=4),
                _case(e, "one decoder step, saturated units", "additive_score", batch=3, queries=1, keys=4, hidden=5,
                      scale=3.0)],
        "7.1": [_case(e, "B=2, T=3, h=4, d_k=2", "heads", batch=2, length=3, heads=4, d_k=2),
                _case(e, "B=2, T=3, h=3, d_k=2", "heads", batch=2, length=3, heads=3, d_k=2)],
        "8.1": [_case(e, f"length {n}, d_model {d}", "sinusoidal", length=n, d_model=d) for n, d in [(6, 8), (3, 5), (20, 6)]],
        "10.1": [_case(e, f"d_model {d}, warmup {w}, factor {f}", "noam", d_model=d, warmup=w, factor=f,
                       steps=[1, w // 2, w, 2 * w, 9 * w]) for d, w, f in [(512, 4000, 1.0), (64, 10, 2.0)]]
        + [_case(e, "step() sets the optimizer's rate", "noam", d_model=16, warmup=3, factor=1.0, steps=[1])],
        "11.1": [_case(e, f"the greedy trap, α = {a}", "beam_search", rows={BOS: {3: 0.6, 4: 0.4},
                                                                         3: {5: 0.4, 3: 0.3, 4: 0.3},
                                                                         4: {EOS: 0.9, 5: 0.1}, 5: {EOS: 0.9, 5: 0.1}},
                       alpha=a) for a in (0.0, 0.6)]
        + [_case(e, "a beam of one", "beam_search", vocab=6, sources=[[7, 7, 7], [7, 0, 0]], beam_size=1, max_len=6),
           _case(e, "three best, sorted", "beam_search", rows={BOS: {3: 0.5, 4: 0.3, EOS: 0.2}, 3: {EOS: 1.0},
                                                               4: {EOS: 1.0}}, sources=[[7]], beam_size=3, n_best=3),
           _case(e, "an early eos does not cost a live beam", "beam_search",
                 rows={BOS: {EOS: 0.4, 3: 0.35, 4: 0.25}, 3: {EOS: 0.5, 5: 0.5}, 4: {EOS: 1.0}, 5: {EOS: 1.0}},
                 sources=[[7]], beam_size=2, n_best=2)],
        "11.2": [_case(e, f"random sentences, seed {n}", "clipped_matches") for n in range(3)]
        + [_case(e, "a repeated word", "clipped_matches", pairs=[[["the"] * 7, "the cat is on the mat".split()]])],
        "11.3": [_case(e, "the examples of the docstring", "merge_pair", pair=[260, 261], new_id=300,
                       sequences=[[262, 260, 261, 263, 260, 261], [261, 260], []]),
                 _case(e, "overlapping pairs", "merge_pair", pair=[260, 260], new_id=300,
                       sequences=[[260, 260, 260], [260, 260, 260, 260]])]
        + [_case(e, f"random sequences, seed {n}", "merge_pair") for n in range(3)],
        "12.1": [_case(e, "a perfect head", "alignment_error_rate",
                       heads=[[np.eye(4).tolist(), [[i, i] for i in range(4)]]]),
                 _case(e, "phrase links are possible links", "alignment_error_rate",
                       heads=[[[[0.1, 0.8, 0.1], [0.0, 0.0, 1.0]], [[0, 0], [1, 0], [2, 1]]]]),
                 _case(e, "random heads", "alignment_error_rate")],
        "12.2": [_case(e, f"d_model {d}, d_ff {f}, length {n}", "flops", sizes=[[d, f, n]])
                 for d, f, n in [(4, 8, 3), (512, 2048, 25), (128, 512, 11.5)]],
        "13.1": [_case(e, f"cuts {cuts}", "online_softmax", rows=3, length=7, d_v=2, cuts=cuts)
                 for cuts in ([0, 7], [0, 4, 7], [0, 1, 2, 5, 7])]
        + [_case(e, "huge scores and a fully masked block", "online_softmax", rows=2, length=4, d_v=2, cuts=[0, 2, 4],
                 scores=[[-math.inf, -math.inf, 1e4, 1e4 - 1], [-math.inf] * 4])],
        "13.2": [_case(e, "D from O and gO", "flash_delta", batch=2, queries=4, keys=6, d_v=3),
                 _case(e, "the flash backward", "flash_backward", q_shape=[1, 2, 7, 3], k_shape=[1, 2, 9, 3],
                       v_shape=[1, 2, 9, 2])],
        "13.3": [_case(e, f"chunk {c}", "causal_prefix", lead=[2], length=8, d_k=3, d_v=4, chunk=c) for c in (1, 3, 64)]
        + [_case(e, "causal linear attention", "linear_attention", shape=[1, 2, 9, 3])],
        "13.4": [_case(e, "one step", "recurrent_step", lead=[2], d_k=3, d_v=4)]
        + [_case(e, f"decoding in steps of {steps}", "linear_decoding", shape=[1, 2, 7, 3], steps=steps)
           for steps in ([1] * 7, [3, 4])],
        "13.5": [_case(e, f"n {n}, w {w}, d {d}, global {g}", "longformer", length=n, window=w, dilation=d,
                       global_tokens=list(g), causal=c)
                 for n, w, d, g, c in [(9, 1, 1, (), False), (12, 2, 3, (0, 6), False), (10, 2, 2, (3,), True),
                                       (8, 1, 2, (5,), False)]],
    }
    if e not in cases:
        raise KeyError(f"no grading cases for Exercise {exercise_id}")
    return [dict(c, params=_jsonable(c["params"])) for c in cases[e]]


# -- hidden cases: the same probes, settings the public tests do not show, drawn from the teacher's seed -----------
def _shape(rng, ndim: int, low: int = 1, high: int = 5) -> list[int]:
    return [int(n) for n in rng.integers(low, high, ndim)]


def _broadcast_pair(rng) -> tuple[list[int], list[int]]:
    """Two shapes that really broadcast: the smaller lacks leading axes or has a 1 where the other does not."""
    target = _shape(rng, int(rng.integers(1, 5)), 2, 4)
    small = target
    while small == target:
        small = [1 if rng.random() < 0.4 else n for n in target][int(rng.integers(0, len(target) + 1)):]
    return small, target


# A backward exercise's large hidden case: numerical differentiation (one or two forwards per input element,
# about 10⁵ elements here, a millisecond or more a forward) cannot finish in the case's time; the derived
# backward takes milliseconds. No central values there (the grader's own would not finish either).
LARGE = {
    "1.2": lambda r: _case("1.2", "large", "gradient", operation="div", shapes=[[512, 256], [512, 256]],
                           low=[None, 0.5], central=False),
    "2.2": lambda r: _case("2.2", "large", "gradient", operation="matmul", shapes=[[256, 256], [256, 256]],
                           central=False),
    "2.3": lambda r: _case("2.3", "large", "reduction", reduction=["sum", "max"][int(r.integers(0, 2))],
                           shape=[1024, 256], axis=int(r.integers(0, 2)), central=False),
    "2.4": lambda r: _case("2.4", "large", "getitem", shape=[1024, 256],
                           index={"array": [int(x) for x in r.integers(0, 1024, 2048)]}, central=False),
    "4.1": lambda r: _case("4.1", "large", "gradient", operation="softmax", shapes=[[512, 256]], axis=-1,
                           central=False),
    "4.2": lambda r: _case("4.2", "large", "gradient", operation="log-softmax", shapes=[[512, 256]], axis=-1,
                           central=False),
    "4.3": lambda r: _case("4.3", "large", "cross_entropy", shape=[2048, 64],
                           targets=[int(x) for x in r.integers(0, 64, 2048)], smoothing=0.1, ignore_index=0,
                           central=False),
    # long rows: perturbing one column of every row at once (rows are independent) still takes 2·d forwards
    "5.1": lambda r: _case("5.1", "large", "layer_norm", shape=[16, 16384], central=False),
    "6.2": lambda r: _case("6.2", "large", "attention_backward", q_shape=[1, 1, 256, 64], k_shape=[1, 1, 256, 64],
                           v_shape=[1, 1, 256, 64], central=False),
    "6.4": lambda r: _case("6.4", "large", "additive_score", batch=1, queries=64, keys=64, hidden=128,
                           central=False),
}


def hidden_cases(exercise_id: str, rng, count: int = 8, large: bool = False) -> list[dict]:
    """``count`` hidden cases of an exercise drawn with ``rng`` (the teacher's), without ids or seeds; with
    ``large`` (the casebook's), a backward exercise's next-to-last one is large (LARGE)."""
    e, made = exercise_id, []
    for n in range(count):
        r = np.random.default_rng(rng.integers(2 ** 32))
        if e in LARGE and large and n == count - 2:
            made.append(LARGE[e](r))
        elif e == "1.1":
            function = ["cube", "mul", "div", "tanh-mul", "matmul"][n % 5]
            if function == "cube":
                made.append(_case(e, "t·t·t", "numerical_gradient", function=function, shapes=[_shape(r, 2)], which=0))
            elif function == "matmul":
                i, j, k = (int(x) for x in r.integers(1, 5, 3))
                made.append(_case(e, "p @ q", "numerical_gradient", function=function, shapes=[[i, j], [j, k]],
                                  which=int(r.integers(0, 2))))
            else:
                shape = _shape(r, int(r.integers(1, 4)))
                made.append(_case(e, f"{function}", "numerical_gradient", function=function, shapes=[shape, shape],
                                  which=int(r.integers(0, 2)), low=0.5 if function == "div" else None))
        elif e == "1.2":
            shape = _shape(r, int(r.integers(1, 4)))
            kind = ["div", "div", "div-by-4", "one-over"][n % 4]
            if kind == "div":
                needs = [[True, True], [True, False], [False, True]][int(r.integers(0, 3))]
                made.append(_case(e, "p / q", "gradient", operation="div", shapes=[shape, shape], needs=needs,
                                  low=[None, 0.5]))
            else:
                made.append(_case(e, kind, "gradient", operation=kind, shapes=[shape], low=0.5))
        elif e == "2.1":
            small, target = _broadcast_pair(r)
            pair = [small, target] if r.random() < 0.5 else [target, small]
            made.append(_case(e, f"{pair[0]} ⊕ {pair[1]}", "gradient", operation=["add", "mul"][n % 2], shapes=pair))
        elif e == "2.2":
            i, j, k = (int(x) for x in r.integers(1, 5, 3))
            batch = _shape(r, int(r.integers(0, 3)), 1, 4)
            a, b = [*batch, i, j], [j, k]
            if n % 4 == 1:                    # B broadcast over a batch axis of A's
                batch = _shape(r, int(r.integers(1, 3)), 2, 4)
                a, b = [*batch, i, j], [*[1 if m == 0 or r.random() < 0.5 else batch[m] for m in range(len(batch))],
                                        j, k]
            elif n % 4 == 2:
                a = [j]
            elif n % 4 == 3:
                a, b = [*batch, i, j], [j]
            made.append(_case(e, f"{a} @ {b}", "gradient", operation="matmul", shapes=[a, b],
                              needs=[bool(r.random() < 0.85), True]))
        elif e == "2.3":
            shape = _shape(r, int(r.integers(1, 4)), 2, 5)
            axes = [a for a in range(len(shape)) if r.random() < 0.5] or None
            if n == count - 1:
                ties = r.integers(0, 3, (3, 4)).astype(float).tolist()
                made.append(_case(e, "tied maxima", "reduction", reduction="max", shape=[3, 4], axis=1, ties=ties))
            else:
                kind = ["sum", "max"][n % 2]
                made.append(_case(e, f"{kind} over {axes}", "reduction", reduction=kind, shape=shape, axis=axes,
                                  keepdims=bool(r.random() < 0.5)))
        elif e == "2.4":
            rows, cols = (int(x) for x in r.integers(2, 6, 2))
            picks = [int(x) for x in r.integers(0, rows, int(r.integers(2, 7)))]
            index = [{"array": picks}, {"slice": [None, None, int(r.integers(1, 3))]}] if n % 4 == 0 else \
                {"array": picks} if n % 4 == 1 else \
                [{"int": picks[0]}, {"slice": [int(r.integers(0, cols)), None]}] if n % 4 == 3 else \
                [{"array": picks}, {"array": [int(x) for x in r.integers(0, cols, len(picks))]}]
            made.append(_case(e, "fancy indexing with repeats", "getitem", shape=[rows, cols], index=index))
        elif e in ("4.1", "4.2"):
            shape = _shape(r, int(r.integers(1, 4)), 2, 6)
            made.append(_case(e, "random", "gradient", operation="softmax" if e == "4.1" else "log-softmax",
                              shapes=[shape], axis=int(r.integers(-len(shape), len(shape)))))
        elif e == "4.3":
            rows, classes = int(r.integers(2, 8)), int(r.integers(2, 7))
            targets = [int(x) for x in r.integers(0, classes, rows)]
            made.append(_case(e, "random", "cross_entropy", shape=[rows, classes], targets=targets,
                              smoothing=float(r.choice([0.0, 0.05, 0.2, 0.5])),
                              ignore_index=[None, 0, classes - 1][n % 3]))
        elif e == "5.1":
            made.append(_case(e, "random", "layer_norm", shape=_shape(r, int(r.integers(1, 4)), 1, 6) + [
                int(r.integers(2, 7))], affine=bool(n % 3)))
        elif e == "6.1":
            queries, keys = (int(x) for x in r.integers(1, 6, 2))
            made.append(_case(e, "random", "attention", batch=int(r.integers(1, 3)), heads=int(r.integers(1, 3)),
                              queries=queries, keys=keys, d_k=int(r.integers(1, 4)),
                              mask=["padding", "random", "causal"][n % 3]))
        elif e == "6.2":
            b, h, t, s, d = (int(x) for x in r.integers(1, 4, 5))
            made.append(_case(e, "random", "attention_backward", q_shape=[b, h, t, d], k_shape=[b, h, s, d],
                              v_shape=[b, h, s, int(r.integers(1, 4))],
                              mask_shape=[b, 1, t, s] if n % 2 else None))
        elif e == "6.3":
            made.append(_case(e, "random size", "causal_mask", size=int(r.integers(1, 9))))
        elif e == "6.4":
            b, t, k, a = (int(x) for x in r.integers(1, 5, 4))
            made.append(_case(e, "random", "additive_score", batch=b, queries=t, keys=k, hidden=a,
                              scale=float(r.choice([0.3, 1.0, 4.0]))))
        elif e == "7.1":
            made.append(_case(e, "random", "heads", batch=int(r.integers(1, 3)), length=int(r.integers(1, 5)),
                              heads=int(r.integers(1, 5)), d_k=int(r.integers(1, 4))))
        elif e == "8.1":
            made.append(_case(e, "random", "sinusoidal", length=int(r.integers(1, 40)), d_model=int(r.integers(1, 17))))
        elif e == "10.1":
            d, w, f = int(r.choice([16, 64, 256, 1024])), int(r.integers(2, 5000)), float(r.choice([0.5, 1.0, 2.0, 7.0]))
            made.append(_case(e, "random", "noam", d_model=d, warmup=w, factor=f,
                              steps=sorted({int(x) for x in r.integers(1, 10 * w, 6)} | {w})))
        elif e == "11.1":
            made.append(_case(e, "a random Markov model", "beam_search", vocab=int(r.integers(5, 8)),
                              sources=[[7] * int(r.integers(1, 4))] * int(r.integers(1, 3)),
                              beam_size=(beam := int(r.integers(2, 5))), alpha=float(r.choice([0.0, 0.6, 1.0])),
                              n_best=beam, max_len=int(r.integers(3, 8))))
        elif e == "11.2":
            made.append(_case(e, "random sentences", "clipped_matches", words=int(r.integers(2, 8)),
                              longest=int(r.integers(2, 12))))
        elif e == "11.3":
            made.append(_case(e, "random sequences", "merge_pair", pair=[int(x) for x in r.integers(0, 3, 2)],
                              new_id=9, symbols=int(r.integers(2, 4)), longest=int(r.integers(1, 16))))
        elif e == "12.1":
            made.append(_case(e, "random heads", "alignment_error_rate", rows=int(r.integers(1, 7)),
                              sources=int(r.integers(1, 7)), links=int(r.integers(1, 10))))
        elif e == "12.2":
            made.append(_case(e, "random sizes", "flops", sizes=[[int(r.integers(1, 1025)), int(r.integers(1, 4097)),
                                                                  float(r.integers(1, 200)) / 2] for _ in range(4)]))
        elif e == "13.1":
            length = int(r.integers(2, 12))
            cuts = sorted({0, length, *(int(x) for x in r.integers(1, length, int(r.integers(1, 4))))})
            made.append(_case(e, "random blocks", "online_softmax", rows=int(r.integers(1, 5)), length=length,
                              d_v=int(r.integers(1, 4)), cuts=cuts, scale=float(r.choice([1.0, 10.0, 100.0])),
                              masked=[None, 0.3, 0.7][n % 3]))
        elif e == "13.2":
            if n % 2:
                made.append(_case(e, "random", "flash_delta", batch=int(r.integers(1, 3)), queries=int(r.integers(1, 6)),
                                  keys=int(r.integers(1, 7)), d_v=int(r.integers(1, 4))))
            else:
                t, s = (int(x) for x in r.integers(2, 9, 2))
                made.append(_case(e, "random", "flash_backward", q_shape=[1, 1, t, 2], k_shape=[1, 1, s, 2],
                                  v_shape=[1, 1, s, int(r.integers(1, 3))], causal=bool(s >= t and n % 4 == 0),
                                  block_size=int(r.integers(2, 5))))
        elif e == "13.3":
            if n % 4 == 3:
                made.append(_case(e, "random", "linear_attention", shape=[1, int(r.integers(1, 3)),
                                                                            int(r.integers(1, 10)), 2]))
            else:
                made.append(_case(e, "random", "causal_prefix", lead=_shape(r, int(r.integers(0, 3)), 1, 3),
                                  length=int(r.integers(1, 12)), d_k=int(r.integers(1, 4)), d_v=int(r.integers(1, 4)),
                                  chunk=int(r.integers(1, 6))))
        elif e == "13.4":
            if n % 2:
                made.append(_case(e, "random", "recurrent_step", lead=_shape(r, int(r.integers(0, 3)), 1, 3),
                                  d_k=int(r.integers(1, 5)), d_v=int(r.integers(1, 5))))
            else:
                length = int(r.integers(1, 10))
                cuts = sorted({0, length, *(int(x) for x in r.integers(1, max(length, 2), int(r.integers(0, 3))))})
                made.append(_case(e, "random", "linear_decoding", shape=[int(r.integers(1, 3)), 1, length,
                                                                         int(r.integers(1, 4))],
                                  steps=[b - a for a, b in zip(cuts, cuts[1:]) if b > a]))
        elif e == "13.5":
            length = int(r.integers(1, 24))
            made.append(_case(e, "random", "longformer", length=length, window=int(r.integers(1, 5)),
                              dilation=int(r.integers(1, 4)), causal=bool(n % 3 == 0),
                              global_tokens=sorted({int(x) for x in r.integers(0, length, int(r.integers(0, 3)))})))
        else:
            raise KeyError(f"no grading cases for Exercise {exercise_id}")
    return [dict(c, params=_jsonable(c["params"])) for c in made]


def _jsonable(value):
    """Tuples as lists and dict keys as strings, as JSON will give them back (so a case is the same after a trip)."""
    return json.loads(json.dumps(value))


def numbered(cases: list[dict], kind: str, seed: int) -> list[dict]:
    """Give each case an id (``public-03``), its kind and a seed of its own derived from ``seed``."""
    seeds = np.random.default_rng(seed).integers(2 ** 31, size=len(cases))
    return [dict(case, id=f"{kind}-{n:02d}", kind=kind, seed=int(s)) for n, (case, s) in enumerate(zip(cases, seeds), 1)]


# -- running cases (in the sandbox, or in the teacher's process for the expected outputs) ------------------------
class CaseTimeout(BaseException):
    """A case ran past its CPU seconds (a BaseException, so a bare ``except Exception`` does not swallow it)."""


def _on_alarm(signum, frame):
    raise CaseTimeout("the case ran past its time limit")


def run_case(spec: dict) -> dict[str, np.ndarray]:
    """The outputs of one case from the package on the import path (plain arrays only)."""
    return plain_outputs(PROBES[spec["probe"]](np.random.default_rng(spec["seed"]), **spec["params"]))


def plain_outputs(outputs: dict) -> dict[str, np.ndarray]:
    """A probe's outputs as plain arrays of numbers (TypeError for anything else)."""
    plain = {}
    for name, value in outputs.items():
        array = np.asarray(value)
        if array.dtype.kind not in "biuf":
            raise TypeError(f"{name} is not an array of numbers (dtype {array.dtype})")
        plain[name] = array
    return plain


NOTEBOOK_CELL = "<your cell>"


def _package_frames(error: BaseException) -> list[dict]:
    """Where in the package (or a notebook's cell) an error passed, innermost last: file, line, function, code."""
    frames = []
    for frame in traceback.extract_tb(error.__traceback__):
        path = Path(frame.filename)
        if "ipykernel_" in frame.filename or frame.filename.startswith("<ipython-input"):   # a notebook's cell
            frames.append({"file": NOTEBOOK_CELL, "line": frame.lineno, "function": frame.name,
                           "code": (frame.line or "")[:300]})
            continue
        if "minitransformer" not in path.parts or "exercises" in path.parts:
            continue
        relative = "/".join(path.parts[len(path.parts) - path.parts[::-1].index("minitransformer") - 1:])
        frames.append({"file": relative, "line": frame.lineno, "function": frame.name, "code": (frame.line or "")[:300]})
    return frames[-6:]


def describe_error(error: BaseException) -> dict:
    from .registry import RAISED, unsolved_in

    error = unsolved_in(error) or error     # behind gradcheck's BackwardFailed, say: an exercise not solved yet
    text = f"{type(error).__name__}: {error}"
    found = RAISED.search(text) if isinstance(error, NotImplementedError) else None
    return {"type": type(error).__name__, "message": str(error)[:500], "exercise": found.group(1) if found else None,
            "frames": _package_frames(error)}


def record(case_id: str, outputs: dict | None, error: dict | None, seconds: float) -> bytes:
    """One case's result as one JSON line: arrays as base64 .npy (saved without pickle)."""
    encoded = {}
    for name, array in (outputs or {}).items():
        if not NAME.match(name):
            raise ValueError(f"bad output name {name!r}")
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        encoded[name] = base64.b64encode(buffer.getvalue()).decode("ascii")
    return (json.dumps({"id": case_id, "outputs": encoded, "error": error, "seconds": round(seconds, 4)}) + "\n"
            ).encode("utf-8")


def run_all(specs: list[dict], stream, case_seconds: float = CASE_SECONDS) -> None:
    """Run every case in order, writing each one's record to the binary ``stream`` as soon as it is done.

    After STOP_AFTER_TIMEOUTS cases in a row ran out of time the rest are recorded as not run. ``case_seconds``
    0: no alarm here (the sandbox's grader kills a case's process from outside, sandbox.py); the alarm serves
    the teacher's own runs (the casebook), which the student's code never reaches.
    """
    signal.signal(signal.SIGALRM, _on_alarm)
    timeouts = 0
    for spec in specs:
        started = time.process_time()
        if timeouts >= STOP_AFTER_TIMEOUTS:
            stream.write(record(spec["id"], None, {"type": "CaseTimeout", "message": "not run: the cases before it ran "
                                                   "out of time", "exercise": None, "frames": []}, 0.0))
            stream.flush()
            continue
        try:
            if case_seconds:
                signal.setitimer(signal.ITIMER_REAL, case_seconds)
            try:
                outputs = run_case(spec)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            line = record(spec["id"], outputs, None, time.process_time() - started)
            timeouts = 0
        except (Exception, CaseTimeout) as caught:   # a student's exception is a result, not a crash of the run
            timeouts = timeouts + 1 if isinstance(caught, CaseTimeout) else 0
            line = record(spec["id"], None, describe_error(caught), time.process_time() - started)
        stream.write(line)
        stream.flush()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 3 or argv[1] != "--fd":
        print("usage: python -m minitransformer.exercises.cases SPECS.json --fd N", file=sys.stderr)
        return 2
    run = json.loads(Path(argv[0]).read_text(encoding="utf-8"))     # {"case_seconds": s, "specs": [...]}
    with os.fdopen(int(argv[2]), "wb") as stream:
        run_all(run["specs"], stream, run["case_seconds"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
