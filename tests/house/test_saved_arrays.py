"""What a Function keeps for its backward, it keeps through ``save_for_backward`` (chapter 1).

``Tensor.backward`` frees each Function's ``saved_arrays`` once its backward has run, and that is the
whole of the engine's memory management: an array that forward parks on ``self`` instead (``self.x = x``)
outlives the step for as long as anything holds the Function, and the code teaches one thing while it
does another. The guard below watches every Function of the package in real forward and backward passes,
of every op (the setups of the mutation tests) and of whole models, and reports

* an array (or a list, tuple or dict holding one) that ``forward`` or ``backward`` sets on ``self``;
* an array that ``backward`` reads from ``self`` that is neither one of ``saved_arrays`` nor a setting the
  Function was given when it was made (a mask, ids, targets: inputs that take no gradient).

Settings that are not arrays (an axis, shapes, a probability, a flag) are ordinary attributes.
"""
from __future__ import annotations

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F
from minitransformer import backend, nn, ops
from minitransformer.fast.normalization import LayerNormGEMV
from minitransformer.tensor import Function
from test_mutations import SETUPS, _package_functions

ENGINE_ATTRIBUTES = {"saved_arrays", "inputs"}


def holds_array(value, depth: int = 0) -> bool:
    """An array, or a list, tuple or dict with an array inside (two levels deep)."""
    if backend.is_array(value):
        return True
    if depth < 2 and isinstance(value, (list, tuple)):
        return any(holds_array(item, depth + 1) for item in value)
    if depth < 2 and isinstance(value, dict):
        return any(holds_array(item, depth + 1) for item in value.values())
    return False


def arrays_in(value, depth: int = 0) -> list:
    if backend.is_array(value):
        return [value]
    if depth < 3 and isinstance(value, (list, tuple)):
        return [array for item in value for array in arrays_in(item, depth + 1)]
    if depth < 3 and isinstance(value, dict):
        return [array for item in value.values() for array in arrays_in(item, depth + 1)]
    return []


class SavedArraysGuard:
    """Instruments ``Function`` and every subclass for one test; ``problems`` lists what it found."""

    def __init__(self, monkeypatch, classes) -> None:
        self.problems: list[str] = []
        self.ran: set[type] = set()             # classes whose backward ran under the guard
        guard = self

        def setattr_(function, name, value):
            phase = function.__dict__.get("_phase")
            if phase and name not in ENGINE_ATTRIBUTES and holds_array(value):
                guard.problems.append(f"{type(function).__name__}.{phase[-1]} keeps an array on self.{name}")
            elif not function.__dict__.get("_forwarded"):     # before the first forward: a setting
                function.__dict__.setdefault("_settings", set()).add(name)
            object.__setattr__(function, name, value)

        def getattribute(function, name):
            value = object.__getattribute__(function, name)
            if name.startswith("__") or name in ENGINE_ATTRIBUTES or name in ("_phase", "_settings", "_forwarded"):
                return value
            phase = object.__getattribute__(function, "__dict__").get("_phase")
            if phase and phase[-1] == "backward" and holds_array(value):
                saved = {id(a) for a in arrays_in(object.__getattribute__(function, "saved_arrays"))}
                given = object.__getattribute__(function, "__dict__").get("_settings", set())
                if name not in given and not all(id(a) in saved for a in arrays_in(value)):
                    guard.problems.append(f"{type(function).__name__}.backward reads self.{name}, "
                                          "an array that forward did not save")
            return value

        def watched(method, phase):
            def run(function, *args, **kwargs):
                stack = function.__dict__.setdefault("_phase", [])
                stack.append(phase)
                function.__dict__["_forwarded"] = True
                try:
                    return method(function, *args, **kwargs)
                finally:
                    stack.pop()
                    if phase == "backward":
                        guard.ran.add(type(function))
            return run

        monkeypatch.setattr(Function, "__setattr__", setattr_)
        monkeypatch.setattr(Function, "__getattribute__", getattribute)
        for cls in classes:
            for name in ("forward", "backward"):
                if name in cls.__dict__:
                    monkeypatch.setattr(cls, name, watched(cls.__dict__[name], name))


@pytest.fixture
def guard(monkeypatch):
    return SavedArraysGuard(monkeypatch, _package_functions())


def test_every_functions_backward_reads_only_what_forward_saved(guard):
    for key, setup in SETUPS.items():
        fn, inputs = setup.build(np.random.default_rng(0))
        out = fn(*inputs)
        out.backward(np.random.default_rng(1).standard_normal(out.shape))
    assert guard.problems == []
    assert guard.ran == _package_functions()          # every Function ran its backward: no vacuous pass


def _model(attention: str) -> nn.Transformer:
    config = nn.TransformerConfig(src_vocab_size=11, tgt_vocab_size=11, d_model=8, n_heads=2, d_ff=16, n_layers=1,
                                  dropout=0.2, attention=attention,
                                  attention_window=2 if attention == "local" else None,
                                  attention_dropout=0.2 if attention == "softmax" else 0.0)
    return nn.Transformer(config)


@pytest.mark.parametrize("attention", ["softmax", "flash", "local", "linear"])
def test_a_whole_models_training_step_keeps_arrays_only_through_save_for_backward(guard, attention):
    model = _model(attention)
    src = np.array([[3, 4, 5, 6, 2], [7, 8, 2, 0, 0]])
    tgt_in, tgt_out = np.array([[1, 5, 6, 9], [1, 4, 0, 0]]), np.array([[5, 6, 9, 2], [4, 2, 0, 0]])
    model.loss(src, tgt_in, tgt_out, label_smoothing=0.1).backward()            # the fused output layer and loss
    logits = model(src, tgt_in)
    F.cross_entropy(logits, tgt_out, label_smoothing=0.1, ignore_index=0).backward()   # the two-Function form
    assert guard.problems == []
    assert {F.LinearCrossEntropy, F.CrossEntropy, F.DropoutAdd, LayerNormGEMV} <= guard.ran   # the model's layer norm


class KeepsItsInput(ops.Tanh):
    """A Function that parks an array on self instead of saving it: the engine never frees it."""

    def forward(self, x):
        self.x = x
        return np.tanh(x)

    def backward(self, gy):
        return gy * (1 - np.tanh(self.x) ** 2)


class ReadsAnArrayItNeverSaved(ops.Tanh):
    def backward(self, gy):
        (y,) = self.saved_arrays
        return gy * (1 - y * y) + 0 * self.stash


def test_the_guard_catches_a_planted_array_on_self(monkeypatch):
    guard = SavedArraysGuard(monkeypatch, [ops.Tanh, KeepsItsInput, ReadsAnArrayItNeverSaved])
    x = mt.Tensor(np.linspace(-1, 1, 4), requires_grad=True)
    KeepsItsInput()(x).sum().backward()
    assert guard.problems == ["KeepsItsInput.forward keeps an array on self.x",
                              "KeepsItsInput.backward reads self.x, an array that forward did not save"]
    assert mt.gradcheck(lambda x: KeepsItsInput()(x), [x])      # right numbers: only the guard can tell

    guard.problems.clear()
    function = ReadsAnArrayItNeverSaved()
    out = function(x)
    function.stash = np.ones(4)                # set between forward and backward, never saved
    out.sum().backward()
    assert guard.problems == ["ReadsAnArrayItNeverSaved.backward reads self.stash, an array that forward did "
                              "not save"]


def test_the_guard_lets_settings_and_saved_arrays_through(monkeypatch):
    guard = SavedArraysGuard(monkeypatch, [ops.MaskedFill, ops.Tanh])
    x = mt.Tensor(np.linspace(-1, 1, 4), requires_grad=True)
    ops.MaskedFill(np.array([True, False, False, True]), 0.0)(ops.Tanh()(x)).sum().backward()
    assert guard.problems == [] and guard.ran == {ops.MaskedFill, ops.Tanh}
