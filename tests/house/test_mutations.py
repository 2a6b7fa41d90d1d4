"""A mutation for every backward: each Function with a deliberately wrong derivative must fail gradcheck.

For every ``Function`` in the package this file plants mistakes in its
``backward`` (by monkeypatching the class) and asserts that ``mt.gradcheck``
reports a **wrong value** (``GradientMismatch``). A mutant whose backward
*crashes* is a broken mutant, not a catch: gradcheck reports it as
``BackwardFailed`` and the test fails saying so.

Two kinds of mutant:
- generic, applied to every Function: the gradient zeroed, its sign flipped,
  one entry off by 1 %, and (for several inputs) one input's gradient dropped;
- specific, the mistakes a student would make: a missing factor, a wrong axis,
  a dropped term, the gradient sent to the wrong input.

Before each mutant the unbroken Function passes the very same check, so the
failure can only come from the planted mistake. ``test_every_function_has_mutants``
finds every Function subclass in the package and fails when one has fewer than
two mutants here or in another test file (a ``class Broken(ThatFunction)``).
"""
from __future__ import annotations

import ast
import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F
from minitransformer import ops
from minitransformer.backend import scatter_add
from minitransformer.functional.additive_attention import AdditiveScore
from minitransformer.functional.attention import ScaledDotProductAttention
from minitransformer.fast.dropout import FastGenerator
from minitransformer.fast.normalization import LayerNormGEMV
from minitransformer.functional.dropout import Dropout, Generator
from minitransformer.functional.flash_attention import FlashAttention
from minitransformer.functional.linear_attention import LinearAttention
from minitransformer.gradcheck import BackwardFailed, GradientMismatch
from package_modules import import_package
from minitransformer.functional.multi_head import PackedAttention
from minitransformer.ops import unbroadcast
from minitransformer.tensor import Function

lstm_module = importlib.import_module("minitransformer.functional.lstm")   # F.lstm is the function of that name
WRONG = r"gradient of input \d+ .* is wrong at \d+ of \d+ positions"


def leaf(rng, shape, low=None):
    data = rng.standard_normal(shape)
    if low is not None:            # keep away from a singularity (log, sqrt, division)
        data = np.abs(data) + low
    return mt.Tensor(data, requires_grad=True)


# -- how each Function is checked: inputs and the function of them -------------------------------
@dataclass
class Setup:
    function: type
    build: Callable          # rng -> (fn, inputs)
    label: str = ""


def _ties(rng):
    """a (3, 4) and b (4,) with a tie in row 0: Maximum's gradient splits there."""
    a, b = rng.standard_normal((3, 4)), rng.standard_normal(4)
    a[0, :2] = b[:2]
    return [mt.Tensor(a, requires_grad=True), mt.Tensor(b, requires_grad=True)]


def _max_input(rng):
    x = rng.standard_normal((3, 4))
    x[0, 1] = x[0, 3] = x[0].max() + 1.0      # two tied maxima in row 0
    return [mt.Tensor(x, requires_grad=True)]


CONDITION = np.array([[True, False, True, False], [False, False, True, True], [True, True, False, True]])
IDS = np.array([[1, 4, 1], [0, 1, 2]])        # id 1 read three times
TARGETS = np.array([1, 0, 4, 2, 0])           # two rows of padding id 0


def _attention(mask=None, dropout_p=0.0):
    def fn(q, k, v):   # a fresh generator per call: the same dropout mask every time gradcheck evaluates
        return ScaledDotProductAttention(mask, dropout_p, training=dropout_p > 0, generator=Generator(3))(q, k, v)
    return fn


def _qkv(rng):  # T = S = d: every transposition keeps the shape, so a wrong one is a wrong value
    return [leaf(rng, (2, 1, 3, 3)) for _ in range(3)]


LENGTHS_MASK = np.array([[True, True, True], [True, False, False]])   # row 1: one real token, two pads


def _lstm_inputs(rng, hidden=2):   # B = 2, T = 3: x_gates (B, T, 4H), state [h_0 | c_0] (B, 2H), weight_h (H, 4H)
    return [leaf(rng, (2, 3, 4 * hidden)), leaf(rng, (2, 2 * hidden)), leaf(rng, (hidden, 4 * hidden))]


SETUPS = {
    "Add": Setup(ops.Add, lambda r: (lambda a, b: ops.Add()(a, b), [leaf(r, (4, 3)), leaf(r, (3,))])),
    "Sub": Setup(ops.Sub, lambda r: (lambda a, b: ops.Sub()(a, b), [leaf(r, (4, 3)), leaf(r, (3,))])),
    "Mul": Setup(ops.Mul, lambda r: (lambda a, b: ops.Mul()(a, b), [leaf(r, (3, 2)), leaf(r, (3, 2))])),
    "Div": Setup(ops.Div, lambda r: (lambda a, b: ops.Div()(a, b), [leaf(r, (3, 2)), leaf(r, (3, 2), low=0.5)])),
    "Neg": Setup(ops.Neg, lambda r: (lambda x: ops.Neg()(x), [leaf(r, (3, 2))])),
    "Pow": Setup(ops.Pow, lambda r: (lambda x: ops.Pow(2.5)(x), [leaf(r, (3, 2), low=0.5)])),
    "Exp": Setup(ops.Exp, lambda r: (lambda x: ops.Exp()(x), [leaf(r, (3, 2))])),
    "Log": Setup(ops.Log, lambda r: (lambda x: ops.Log()(x), [leaf(r, (3, 2), low=0.5)])),
    "Sqrt": Setup(ops.Sqrt, lambda r: (lambda x: ops.Sqrt()(x), [leaf(r, (3, 2), low=0.5)])),
    "Tanh": Setup(ops.Tanh, lambda r: (lambda x: ops.Tanh()(x), [leaf(r, (3, 2))])),
    "Sigmoid": Setup(ops.Sigmoid, lambda r: (lambda x: ops.Sigmoid()(x), [leaf(r, (3, 2))])),
    "ReLU": Setup(ops.ReLU, lambda r: (lambda x: ops.ReLU()(x), [leaf(r, (3, 4))])),
    "Maximum": Setup(ops.Maximum, lambda r: (lambda a, b: ops.Maximum()(a, b), _ties(r))),
    "MatMul": Setup(ops.MatMul, lambda r: (lambda a, b: ops.MatMul()(a, b), [leaf(r, (2, 3, 3)), leaf(r, (3, 3))])),
    "Reshape": Setup(ops.Reshape, lambda r: (lambda x: ops.Reshape((3, 2))(x), [leaf(r, (2, 3))])),
    "Transpose": Setup(ops.Transpose, lambda r: (lambda x: ops.Transpose((1, 2, 0))(x), [leaf(r, (3, 3, 3))])),
    "BroadcastTo": Setup(ops.BroadcastTo, lambda r: (lambda x: ops.BroadcastTo((2, 3, 4))(x), [leaf(r, (3, 1))])),
    "Concatenate": Setup(ops.Concatenate, lambda r: (lambda *xs: ops.Concatenate(1)(*xs),
                                                     [leaf(r, (2, 2)), leaf(r, (2, 2)), leaf(r, (2, 3))])),
    "Stack": Setup(ops.Stack, lambda r: (lambda a, b: ops.Stack(0)(a, b), [leaf(r, (2, 2)), leaf(r, (2, 2))])),
    "Sum": Setup(ops.Sum, lambda r: (lambda x: ops.Sum(axis=0)(x), [leaf(r, (3, 3))])),
    "Mean": Setup(ops.Mean, lambda r: (lambda x: ops.Mean(axis=1)(x), [leaf(r, (3, 4))])),
    "Max": Setup(ops.Max, lambda r: (lambda x: ops.Max(axis=1)(x), _max_input(r))),
    "GetItem": Setup(ops.GetItem, lambda r: (lambda x: ops.GetItem(np.array([0, 2, 0]))(x), [leaf(r, (4, 3))])),
    "Where": Setup(ops.Where, lambda r: (lambda a, b: ops.Where(CONDITION)(a, b), [leaf(r, (3, 4)), leaf(r, (4,))])),
    "MaskedFill": Setup(ops.MaskedFill, lambda r: (lambda x: ops.MaskedFill(CONDITION, -3.0)(x), [leaf(r, (4,))])),
    "ToDevice": Setup(ops.ToDevice, lambda r: (lambda x: ops.ToDevice("cpu")(x), [leaf(r, (3, 2))])),
    "AsType": Setup(ops.AsType, lambda r: (lambda x: ops.AsType(np.float64)(x), [leaf(r, (3, 2))])),
    "LinearFunction": Setup(F.LinearFunction, lambda r: (lambda x, w, b: F.LinearFunction()(x, w, b),
                                                         [leaf(r, (2, 3, 4)), leaf(r, (4, 4)), leaf(r, (4,))])),
    "LinearFunction-relu": Setup(F.LinearFunction, lambda r: (lambda x, w, b: F.LinearFunction(relu=True)(x, w, b),
                                                              [leaf(r, (2, 3, 4)), leaf(r, (4, 4)), leaf(r, (4,))]),
                                 "with the FFN's ReLU fused"),
    "EmbeddingFunction": Setup(F.EmbeddingFunction, lambda r: (lambda w: F.EmbeddingFunction(IDS)(w),
                                                               [leaf(r, (5, 3))])),
    "ScaledDotProductAttention": Setup(ScaledDotProductAttention, lambda r: (_attention(), _qkv(r))),
    "ScaledDotProductAttention-dropout": Setup(
        ScaledDotProductAttention, lambda r: (_attention(dropout_p=0.4), _qkv(r)), "with dropout on the weights"),
    "ScaledDotProductAttention-mask": Setup(
        ScaledDotProductAttention, lambda r: (_attention(mask=np.tril(np.ones((3, 3), bool))), _qkv(r)),
        "with a causal mask"),
    # self-attention: one packed qkv (B, T, 3·h·d_k) with h = 2, d_k = 3; cross: q and a packed kv (B, S, 2·h·d_k)
    "PackedAttention": Setup(PackedAttention, lambda r: (
        lambda qkv: PackedAttention(2, np.tril(np.ones((3, 3), bool)))(qkv), [leaf(r, (2, 3, 18))])),
    "PackedAttention-cross": Setup(PackedAttention, lambda r: (
        lambda q, kv: PackedAttention(2)(q, kv), [leaf(r, (2, 3, 6)), leaf(r, (2, 4, 12))]), "cross-attention"),
    # chapter 6: the LSTM (forward, and right to left over a padded batch) and Bahdanau's additive score
    "LSTMFunction": Setup(lstm_module.LSTMFunction, lambda r: (lambda x, s, w: lstm_module.LSTMFunction()(x, s, w),
                                                               _lstm_inputs(r))),
    "LSTMFunction-mask-reverse": Setup(lstm_module.LSTMFunction, lambda r: (
        lambda x, s, w: lstm_module.LSTMFunction(LENGTHS_MASK, reverse=True)(x, s, w), _lstm_inputs(r)),
        "right to left, with padding"),
    "AdditiveScore": Setup(AdditiveScore, lambda r: (lambda q, k, v: AdditiveScore()(q, k, v),
                                                     [leaf(r, (2, 3, 4)), leaf(r, (2, 3, 4)), leaf(r, (4,))])),
    "LayerNormFunction": Setup(F.LayerNormFunction, lambda r: (lambda x, w, b: F.LayerNormFunction(1e-5)(x, w, b),
                                                               [leaf(r, (3, 5)), leaf(r, (5,)), leaf(r, (5,))])),
    # the speed work (minitransformer/fast/): each fast twin gets the mutants of its plain form
    "LayerNormGEMV": Setup(LayerNormGEMV, lambda r: (lambda x, w, b: LayerNormGEMV(1e-5)(x, w, b),
                                                     [leaf(r, (3, 5)), leaf(r, (5,)), leaf(r, (5,))])),
    "Dropout-fast": Setup(Dropout, lambda r: (lambda x: Dropout(0.4, FastGenerator(5))(x), [leaf(r, (4, 6))]),
                          "with the fast generator's mask"),
    "Softmax": Setup(F.Softmax, lambda r: (lambda x: F.Softmax(-1)(x), [leaf(r, (3, 4))])),
    "LogSoftmax": Setup(F.LogSoftmax, lambda r: (lambda x: F.LogSoftmax(-1)(x), [leaf(r, (3, 4))])),
    "CrossEntropy": Setup(F.CrossEntropy, lambda r: (lambda x: F.CrossEntropy(TARGETS, 0.1, 0)(x), [leaf(r, (5, 6))])),
    "LinearCrossEntropy": Setup(F.LinearCrossEntropy, lambda r: (
        lambda x, w, b: F.LinearCrossEntropy(TARGETS, 0.1, 0)(x, w, b), [leaf(r, (5, 4)), leaf(r, (4, 6)), leaf(r, (6,))])),
    "Dropout": Setup(Dropout, lambda r: (lambda x: Dropout(0.4, Generator(5))(x), [leaf(r, (4, 5))])),
    "DropoutAdd": Setup(F.DropoutAdd, lambda r: (lambda x, y: F.DropoutAdd(0.4, Generator(5))(x, y),
                                                 [leaf(r, (4, 5)), leaf(r, (4, 5))])),
    # chapter 13: lengths that are not multiples of the block or chunk, so the tiling's edges are checked too
    "FlashAttention": Setup(FlashAttention, lambda r: (lambda q, k, v: FlashAttention(causal=True, block_size=2)(q, k, v),
                                                       [leaf(r, (1, 2, 5, 3)) for _ in range(3)])),
    "LinearAttention": Setup(LinearAttention, lambda r: (lambda q, k, v: LinearAttention(causal=True, chunk=2)(q, k, v),
                                                         [leaf(r, (1, 2, 5, 3)) for _ in range(3)])),
}


# -- mutants: mutate(self, gy, correct) -> gradients, where correct(gy) runs the real backward -----
def _as_list(grads):
    return list(grads) if isinstance(grads, tuple) else [grads]


def _like(grads, original):
    return tuple(grads) if isinstance(original, tuple) else grads[0]


def zeroed(self, gy, correct):
    grads = correct(gy)
    return _like([None if g is None else g * 0 for g in _as_list(grads)], grads)


def sign_flipped(self, gy, correct):
    grads = correct(gy)
    return _like([None if g is None else -g for g in _as_list(grads)], grads)


def one_entry_off(self, gy, correct):
    """The largest entry of the first gradient 1 % too large: one slip in one place."""
    grads = correct(gy)
    listed = _as_list(grads)
    first = next(i for i, g in enumerate(listed) if g is not None)
    g = np.array(listed[first], copy=True)
    g[np.unravel_index(np.abs(g).argmax(), g.shape)] *= 1.01   # by index: reshape(-1) may copy
    listed[first] = g
    return _like(listed, grads)


def input_dropped(which):
    def mutate(self, gy, correct):
        grads = list(correct(gy))
        grads[which] = None          # as if that input needed no gradient
        return tuple(grads)
    mutate.__name__ = f"gradient of input {which} dropped"
    return mutate


def _saved(self):
    return self.saved_arrays


def _parts_swapped(gradient, width: int):
    """The first two parts (Q and K, or K and V) of a packed gradient (B, L, n·width) exchanged."""
    swapped = gradient.copy()
    swapped[..., :width], swapped[..., width:2 * width] = gradient[..., width:2 * width], gradient[..., :width]
    return swapped


def _linear_without_relu(s, gy, correct):
    s.relu = False             # the gradient flows through where the ReLU output was zero
    try:
        return correct(gy)
    finally:
        s.relu = True


SPECIFIC = {
    "LinearFunction-relu": {
        "the ReLU ignored on the way back": _linear_without_relu,
        "bias gradient summed before the ReLU": lambda s, gy, c: (*c(gy)[:2], gy.reshape(-1, gy.shape[-1]).sum(0)),
    },
    "PackedAttention": {
        "the queries' and keys' parts swapped in the packed gradient": lambda s, gy, c: (_parts_swapped(c(gy)[0], 6),),
    },
    "PackedAttention-cross": {
        "the keys' and values' parts swapped": lambda s, gy, c: (c(gy)[0], _parts_swapped(c(gy)[1], 6)),
        "no gradient for the packed keys and values": lambda s, gy, c: (c(gy)[0], None),
    },
    "FlashAttention": {
        "the queries' and keys' gradients swapped": lambda s, gy, c: (c(gy)[1], c(gy)[0], c(gy)[2]),
    },
    "LinearAttention": {
        "the queries' and keys' gradients swapped": lambda s, gy, c: (c(gy)[1], c(gy)[0], c(gy)[2]),
    },
    "Add": {
        "b's broadcast axis averaged, not summed":
            lambda s, gy, c: (unbroadcast(gy, s.shapes[0]), gy.mean(axis=0)),
        "a's gradient doubled (d(a+b)/da taken as 2)":
            lambda s, gy, c: (2 * unbroadcast(gy, s.shapes[0]), unbroadcast(gy, s.shapes[1])),
    },
    "Sub": {
        "b's gradient not negated":
            lambda s, gy, c: (unbroadcast(gy, s.shapes[0]), unbroadcast(gy, s.shapes[1])),
        "the minus sign on a instead of b":
            lambda s, gy, c: (unbroadcast(-gy, s.shapes[0]), unbroadcast(gy, s.shapes[1])),
    },
    "Mul": {
        "factors swapped (ga = gy·a)": lambda s, gy, c: (gy * _saved(s)[0], gy * _saved(s)[1]),
        "upstream gradient forgotten": lambda s, gy, c: (_saved(s)[1] + 0 * gy, _saved(s)[0] + 0 * gy),
    },
    "Div": {
        "gb without the square (−a/b)": lambda s, gy, c: (c(gy)[0], -gy * _saved(s)[0] / _saved(s)[1]),
        "gb with the wrong sign (+a/b²)": lambda s, gy, c: (c(gy)[0], gy * _saved(s)[0] / _saved(s)[1] ** 2),
        "ga multiplied by b, not divided": lambda s, gy, c: (gy * _saved(s)[1], c(gy)[1]),
    },
    "Neg": {
        "upstream gradient forgotten (returns −1)": lambda s, gy, c: -np.ones_like(gy),
    },
    "Pow": {
        "exponent not lowered (c·x^c)": lambda s, gy, c: gy * s.c * _saved(s)[0] ** s.c,
        "factor c dropped (x^(c−1))": lambda s, gy, c: gy * _saved(s)[0] ** (s.c - 1),
    },
    "Exp": {
        "factor e^x dropped": lambda s, gy, c: gy,
        "e^x applied twice": lambda s, gy, c: gy * _saved(s)[0] ** 2,
    },
    "Log": {
        "multiplied by x, not divided": lambda s, gy, c: gy * _saved(s)[0],
        "derivative taken as −1/x²": lambda s, gy, c: -gy / _saved(s)[0] ** 2,
    },
    "Sqrt": {
        "the 2 forgotten (1/√x)": lambda s, gy, c: gy / _saved(s)[0],
        "derivative taken as 1/(2x)": lambda s, gy, c: gy / (2 * _saved(s)[0] ** 2),
    },
    "Tanh": {
        "square dropped (1 − y)": lambda s, gy, c: gy * (1 - _saved(s)[0]),
        "sign of the square (1 + y²)": lambda s, gy, c: gy * (1 + _saved(s)[0] ** 2),
    },
    "Sigmoid": {
        "factor (1 − σ) dropped": lambda s, gy, c: gy * _saved(s)[0],
        "tanh's derivative used (1 − σ²)": lambda s, gy, c: gy * (1 - _saved(s)[0] ** 2),
    },
    "ReLU": {
        "gradient passed everywhere": lambda s, gy, c: gy,
        "gradient where x < 0 instead": lambda s, gy, c: gy * ~_saved(s)[0],
    },
    "Maximum": {
        "both inputs get the whole gradient":
            lambda s, gy, c: (unbroadcast(gy, s.shapes[0]), unbroadcast(gy, s.shapes[1])),
        "winner and loser swapped": lambda s, gy, c: (
            unbroadcast(gy * (1 - _saved(s)[0]), s.shapes[0]), unbroadcast(gy * _saved(s)[0], s.shapes[1])),
        "a tie gives everything to a": lambda s, gy, c: (
            unbroadcast(gy * (_saved(s)[0] > 0), s.shapes[0]), unbroadcast(gy * (_saved(s)[0] == 0), s.shapes[1])),
    },
    "MatMul": {
        "B not transposed (gA = gY B)": lambda s, gy, c: (gy @ _saved(s)[1], c(gy)[1]),
        "shared weight from the first batch element only":
            lambda s, gy, c: (c(gy)[0], _saved(s)[0][0].T @ gy[0]),
    },
    "Reshape": {
        "transposed instead of reshaped back": lambda s, gy, c: gy.T.reshape(s.shape),
        "reshaped back in column-major order": lambda s, gy, c: gy.reshape(s.shape, order="F"),
    },
    "Transpose": {
        "the permutation, not its inverse": lambda s, gy, c: gy.transpose(s.axes),
        "not transposed back": lambda s, gy, c: gy,
    },
    "BroadcastTo": {
        "averaged over the copies, not summed": lambda s, gy, c: gy.mean(axis=(0, 2))[:, None],
        "one copy kept, the rest ignored": lambda s, gy, c: gy[0, :, :1],
    },
    "Concatenate": {
        "slices handed to the wrong inputs": lambda s, gy, c: (c(gy)[1], c(gy)[0], c(gy)[2]),
        "every input gets the first slice": lambda s, gy, c: (c(gy)[0], c(gy)[0], c(gy)[2]),
    },
    "Stack": {
        "slices taken along the wrong axis": lambda s, gy, c: tuple(np.take(gy, i, axis=1) for i in range(2)),
        "slices handed to the wrong inputs": lambda s, gy, c: c(gy)[::-1],
    },
    "Sum": {
        "averaged, not copied": lambda s, gy, c: c(gy) / s.shape[0],
        "reduced axis restored in the wrong place": lambda s, gy, c: np.broadcast_to(gy[:, None], s.shape),
    },
    "Mean": {
        "the count forgotten (sum's backward)": lambda s, gy, c: c(gy) * s.shape[1],
        "divided by the other axis's size": lambda s, gy, c: c(gy) * s.shape[1] / s.shape[0],
    },
    "Max": {
        "every entry gets the gradient": lambda s, gy, c: np.broadcast_to(gy[:, None], _saved(s)[0].shape),
        "each tied maximum gets all of it": lambda s, gy, c: gy[:, None] * (_saved(s)[0] > 0),
    },
    "GetItem": {
        "repeated rows assigned, not added": lambda s, gy, c: _assigned(s.shape, s.index, gy),
        "written to the first rows": lambda s, gy, c: _assigned(s.shape, slice(0, gy.shape[0]), gy),
    },
    "Where": {
        "gradients sent to the wrong side": lambda s, gy, c: (
            unbroadcast(np.where(s.condition, 0.0, gy), s.shapes[0]),
            unbroadcast(np.where(s.condition, gy, 0.0), s.shapes[1])),
        "both sides get the whole gradient": lambda s, gy, c: (gy, unbroadcast(gy, s.shapes[1])),
    },
    "MaskedFill": {
        "filled positions still pass gradient": lambda s, gy, c: unbroadcast(gy, s.shape),
        "mask read the wrong way round": lambda s, gy, c: unbroadcast(np.where(s.mask, gy, 0.0), s.shape),
        "broadcast copies averaged, not summed": lambda s, gy, c: np.where(s.mask, 0.0, gy).mean(axis=0),
    },
    "LinearFunction": {
        "W not transposed (gX = gY W)": lambda s, gy, c: (
            (gy.reshape(-1, 4) @ _saved(s)[1]).reshape(s.x_shape), c(gy)[1], c(gy)[2]),
        "gW transposed (gYᵀ X)": lambda s, gy, c: (c(gy)[0], gy.reshape(-1, 4).T @ _saved(s)[0], c(gy)[2]),
        "bias gradient from the first row only": lambda s, gy, c: (c(gy)[0], c(gy)[1], gy.reshape(-1, 4)[0]),
    },
    "EmbeddingFunction": {
        "repeated ids assigned, not added": lambda s, gy, c: _assigned(s.weight_shape, s.ids.reshape(-1),
                                                                       gy.reshape(-1, s.weight_shape[1])),
        "gradient sent to the next row": lambda s, gy, c: _scattered(s.weight_shape, (s.ids.reshape(-1) + 1) % 5,
                                                                     gy.reshape(-1, s.weight_shape[1])),
    },
    "ScaledDotProductAttention": {
        "gV = A gO (A not transposed)": lambda s, gy, c: (*c(gy)[:2], s.weights @ gy),
        "gK = gS Q (gS not transposed)": lambda s, gy, c: (c(gy)[0], _attention_gk_untransposed(s, gy), c(gy)[2]),
        "softmax centering term dropped": lambda s, gy, c: _attention_without_centering(s, gy),
    },
    "ScaledDotProductAttention-dropout": {
        "gV through the weights before dropout": lambda s, gy, c: (*c(gy)[:2], s.weights.swapaxes(-1, -2) @ gy),
        "gQ and gK forget the dropout mask": lambda s, gy, c: (*_attention_without_dropout(s, gy), c(gy)[2]),
    },
    "ScaledDotProductAttention-mask": {
        "the 1/√d_k forgotten in gQ": lambda s, gy, c: (c(gy)[0] / s.scale, *c(gy)[1:]),
        "gK scaled by 1/√d_k twice": lambda s, gy, c: (c(gy)[0], c(gy)[1] * s.scale, c(gy)[2]),
    },
    "LSTMFunction": {
        "the cell's gradient through h_t forgotten": lambda s, gy, c: _lstm_with("cell_backward", _cell_no_h_path,
                                                                                  c, gy),
        "the forget gate through tanh's derivative": lambda s, gy, c: _lstm_with("cell_backward", _cell_tanh_forget,
                                                                                  c, gy),
        "g_c(t−1) = g_c, the forget gate ignored": lambda s, gy, c: _lstm_with("cell_backward", _cell_no_forget,
                                                                                c, gy),
        "g_W_h from h_t instead of h_(t−1)": lambda s, gy, c: _lstm_with("_previous_hidden", _current_hidden, c, gy),
    },
    "LSTMFunction-mask-reverse": {
        "backpropagation through time walks the steps in the wrong order":
            lambda s, gy, c: _with_attribute(s, "reverse", not s.reverse, c, gy),
        "padded steps do not pass the gradient on": lambda s, gy, c: _with_attribute(s, "mask", None, c, gy),
    },
    "AdditiveScore": {
        "tanh's derivative dropped (g_u = g_e v)": lambda s, gy, c: _additive_without_tanh(s, gy),
        "g_q and g_k summed over the wrong axes": lambda s, gy, c: (c(gy)[1], c(gy)[0], c(gy)[2]),
        "g_v without the upstream gradient (Σ a)": lambda s, gy, c: (*c(gy)[:2], _saved(s)[0].sum(axis=(0, 1, 2))),
    },
    "LayerNormFunction": {
        "bias gradient dropped": lambda s, gy, c: (*c(gy)[:2], None),
        "bias gradient averaged over rows, not summed": lambda s, gy, c: (*c(gy)[:2], gy.mean(axis=0)),
        "path through the mean dropped": lambda s, gy, c: _layer_norm_without_mean(s, gy, c),
        "1/σ forgotten": lambda s, gy, c: (c(gy)[0] / _saved(s)[1], *c(gy)[1:]),
    },
    "Softmax": {
        "centering term dropped (gy ⊙ y)": lambda s, gy, c: gy * _saved(s)[0],
        "sum over the wrong axis":
            lambda s, gy, c: _saved(s)[0] * (gy - (gy * _saved(s)[0]).sum(axis=0, keepdims=True)),
    },
    "LogSoftmax": {
        "Σ gy forgotten (gy − softmax)": lambda s, gy, c: gy - np.exp(_saved(s)[0]),
        "sum over the wrong axis": lambda s, gy, c: gy - np.exp(_saved(s)[0]) * gy.sum(axis=0, keepdims=True),
    },
    "CrossEntropy": {
        "mean over all rows, padding counted": lambda s, gy, c: c(gy) * s.n_valid / len(s.valid),
        "label smoothing forgotten in backward": lambda s, gy, c: _cross_entropy_unsmoothed(s, gy),
        "padding rows still get gradient": lambda s, gy, c: _cross_entropy_padding_kept(s, gy, c),
    },
    "LinearCrossEntropy": {    # its derivative is taken in forward; backward only scales it by gy
        "upstream gradient ignored": lambda s, gy, c: _saved(s),
        "gy applied twice to gW": lambda s, gy, c: (c(gy)[0], c(gy)[1] * gy, c(gy)[2]),
    },
    "DropoutAdd": {
        "the residual's identity path dropped too": lambda s, gy, c: (c(gy)[1], c(gy)[1]),
        "gradient of y not dropped": lambda s, gy, c: (gy, gy / (1 - s.p)),
    },
    "Dropout": {
        "1/(1 − p) scale forgotten": lambda s, gy, c: gy * _saved(s)[0],
        "gradient not dropped": lambda s, gy, c: gy / (1 - s.p),
    },
}


def _assigned(shape, index, values):
    out = np.zeros(shape)
    out[index] = values
    return out


def _scattered(shape, index, values):
    out = np.zeros(shape)
    scatter_add(out, index, values)
    return out


def _attention_gk_untransposed(s, g_out):
    q, _, v, weights, _ = _saved(s)
    g_scores = g_out @ v.swapaxes(-1, -2)
    g_scores = weights * (g_scores - (g_scores * weights).sum(axis=-1, keepdims=True)) * s.scale
    return g_scores @ q


def _attention_without_centering(s, g_out):
    q, k, v, weights, _ = _saved(s)
    g_scores = (g_out @ v.swapaxes(-1, -2)) * weights * s.scale
    return g_scores @ k, g_scores.swapaxes(-1, -2) @ q, weights.swapaxes(-1, -2) @ g_out


def _attention_without_dropout(s, g_out):
    q, k, v, weights, _ = _saved(s)
    g_scores = g_out @ v.swapaxes(-1, -2)
    g_scores = weights * (g_scores - (g_scores * weights).sum(axis=-1, keepdims=True)) * s.scale
    return g_scores @ k, g_scores.swapaxes(-1, -2) @ q


def _with_attribute(owner, name, value, correct, gy):
    """Run the real backward with ``owner.name`` set to ``value`` (a broken helper, a flag), then put it back."""
    kept = getattr(owner, name)
    setattr(owner, name, value)
    try:
        return correct(gy)
    finally:
        setattr(owner, name, kept)


def _lstm_with(name, broken, correct, gy):
    """The real backward with one helper of functional/lstm.py replaced by a broken one."""
    return _with_attribute(lstm_module, name, broken, correct, gy)


def _cell_no_h_path(gates, c_prev, tanh_c, g_h, g_c):
    return _correct_cell(gates, c_prev, tanh_c, g_h, g_c, through_h=False)


def _cell_tanh_forget(gates, c_prev, tanh_c, g_h, g_c):
    g_z, g_c_prev = _correct_cell(gates, c_prev, tanh_c, g_h, g_c)
    hidden = c_prev.shape[-1]
    f = gates[:, hidden:2 * hidden]
    g_z[:, hidden:2 * hidden] *= (1 - f * f) / (f * (1 - f))       # 1 − f² in place of σ' = f(1 − f)
    return g_z, g_c_prev


def _cell_no_forget(gates, c_prev, tanh_c, g_h, g_c):
    g_z, g_c_prev = _correct_cell(gates, c_prev, tanh_c, g_h, g_c)
    hidden = c_prev.shape[-1]
    return g_z, g_c_prev / gates[:, hidden:2 * hidden]              # g_c, not g_c ⊙ f


def _correct_cell(gates, c_prev, tanh_c, g_h, g_c, through_h=True):
    hidden = c_prev.shape[-1]
    i, f, g, o = (gates[:, k * hidden:(k + 1) * hidden] for k in range(4))
    if through_h:
        g_c = g_c + g_h * o * (1 - tanh_c ** 2)
    g_z = np.concatenate([g_c * g * i * (1 - i), g_c * c_prev * f * (1 - f), g_c * i * (1 - g ** 2),
                          g_h * tanh_c * o * (1 - o)], axis=1)
    return g_z, g_c * f


def _current_hidden(states, state, hidden, reverse):
    return states[:, :, :hidden]                                    # h_t: the state the step wrote, not read


SPECIFIC["LayerNormGEMV"] = SPECIFIC["LayerNormFunction"]
SPECIFIC["Dropout-fast"] = SPECIFIC["Dropout"]


def _additive_without_tanh(s, gy):
    hidden, v = _saved(s)
    g_pre = gy[..., None] * v
    return g_pre.sum(axis=2), g_pre.sum(axis=1), hidden.reshape(-1, len(v)).T @ gy.reshape(-1)


def _layer_norm_without_mean(s, gy, c):
    gx, gw, gb = c(gy)
    _, inv_std, weight = _saved(s)
    return gx + inv_std * (gy * weight).mean(axis=-1, keepdims=True), gw, gb


def _cross_entropy_unsmoothed(s, gy):
    exps, row_sum, valid, safe_targets = _saved(s)
    grad = exps / row_sum[:, None]
    grad[np.arange(len(grad)), safe_targets] -= 1
    return grad * np.where(valid, gy / s.n_valid, 0)[:, None]


def _cross_entropy_padding_kept(s, gy, correct):
    exps, row_sum, valid, safe_targets = _saved(s)
    s.saved_arrays = exps, row_sum, np.ones_like(valid), safe_targets   # every row counted (the mean still over n_valid)
    return correct(gy)


def mutants():
    for key, setup in SETUPS.items():
        generic = {"zeroed": zeroed, "sign flipped": sign_flipped, "one entry off by 1 %": one_entry_off}
        if setup.label:   # a second setup of the same Function: its own mistakes only
            generic = {}
        n_inputs = len(setup.build(np.random.default_rng(0))[1])
        if n_inputs > 1 and not setup.label:
            generic.update({f"gradient of input {i} dropped": input_dropped(i) for i in range(n_inputs)})
        for name, mutate in {**generic, **SPECIFIC.get(key, {})}.items():
            yield pytest.param(key, mutate, id=f"{key}: {name}")


def _patched(function: type, mutate):
    correct_backward = function.backward

    def backward(self, gy):
        return mutate(self, gy, lambda g: correct_backward(self, g))
    return backward


@pytest.mark.parametrize("key,mutate", list(mutants()))
def test_a_wrong_backward_fails_gradcheck_as_a_wrong_value(key, mutate, monkeypatch):
    setup = SETUPS[key]
    fn, inputs = setup.build(np.random.default_rng(0))
    assert mt.gradcheck(fn, inputs), "the unbroken Function must pass the same check"
    monkeypatch.setattr(setup.function, "backward", _patched(setup.function, mutate))
    try:
        mt.gradcheck(fn, inputs)
    except BackwardFailed as crash:
        pytest.fail(f"broken mutant: its backward crashed instead of returning a wrong gradient ({crash})")
    except GradientMismatch as caught:
        assert re.search(WRONG, str(caught)), str(caught)
    else:
        pytest.fail("mutant survived: gradcheck passed a wrong backward")


# -- the harness itself -------------------------------------------------------------------------
def test_a_crashing_mutant_is_not_counted_as_caught(rng, monkeypatch):
    """BackwardFailed and GradientMismatch are both GradcheckErrors, but only the second is a catch."""
    fn, inputs = SETUPS["Tanh"].build(rng)
    monkeypatch.setattr(ops.Tanh, "backward", lambda self, gy: self.no_such_attribute)
    with pytest.raises(BackwardFailed, match=r"backward\(\) failed: AttributeError"):
        mt.gradcheck(fn, inputs)
    with pytest.raises(mt.GradcheckError):          # still a GradcheckError for existing callers
        mt.gradcheck(fn, inputs)
    with pytest.raises(BackwardFailed):
        try:
            mt.gradcheck(fn, inputs)
        except GradientMismatch:
            pytest.fail("a crash was reported as a wrong value")


def _package_functions() -> set[type]:
    """Every Function subclass defined in the package (its modules imported first), but for the classroom's: an
    exercise's spec holds test fixtures (1.1's x² with a right and a wrong backward), not the engine's code."""
    import_package()          # modules whose optional extra is absent (nbgrader's course side) define no Function
    found, todo = set(), list(Function.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("minitransformer.") and not cls.__module__.startswith("minitransformer.exercises."):
            found.add(cls)
    return found


def _mutants_in_other_test_files() -> dict[str, int]:
    """Class name -> how many classes in tests/ subclass it (hand-written mutants such as ``class Broken(Exp)``)."""
    counts: dict[str, int] = {}
    for path in Path(__file__).resolve().parents[1].rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                for base in node.bases:
                    name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", None)
                    if name:
                        counts[name] = counts.get(name, 0) + 1
    return counts


def test_every_function_has_at_least_two_mutants():
    here: dict[type, int] = {}
    for param in mutants():
        function = SETUPS[param.values[0]].function
        here[function] = here.get(function, 0) + 1
    elsewhere = _mutants_in_other_test_files()
    functions = _package_functions()
    assert len(functions) >= 34, sorted(f.__name__ for f in functions)   # the import walk found them all
    uncovered = sorted(f"{f.__module__}.{f.__name__}" for f in functions
                       if here.get(f, 0) + elsewhere.get(f.__name__, 0) < 2)
    assert not uncovered, (f"these Functions have fewer than two mutation tests: {uncovered}; add a Setup and "
                           "mutants in tests/house/test_mutations.py (or a mutant subclass checked with match=)")
