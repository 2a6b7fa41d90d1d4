"""Grading cases: what ``grade`` runs of a student's code, as plain data in and plain data out.

A case is a small JSON object, ``{"id", "exercise", "probe", "params", "seed"}``. Its probe makes the
inputs from the seed, calls the package it finds on the import path (the student's, in the sandbox)
and returns named NumPy arrays: the outputs of a forward, or for a backward the output, the gradient
of each input (``grad:i``) and the values of Σ upstream ⊙ f(x ± ε e_k) of the *same* forward at every
coordinate (``fd:i``), from which the grader computes central differences itself.

This module holds what every exercise shares: the probes several exercises use (a backward's
gradient case, a staged call), the public and hidden cases of an exercise made from its spec, and
the running of cases. What is one exercise's own (its probe, its public cases, its hidden-case
generator, its prerequisites) is in its spec, specs/ex_5_1.py (spec.py).

Nothing here holds an answer or an expected value: the grader (judge.py) compares these outputs with
the ones the teacher's reference gave for the same case, in its own process. Public cases are the
inputs of the public tests; hidden cases are drawn from the teacher's secret seed (casebook.py), with
sizes and settings the public tests do not show.

    python -m minitransformer.exercises.cases RUN.json --fd N        # what the sandbox runs

writes one JSON line per case to file descriptor N, as soon as the case is done: its outputs (arrays
as base64 ``.npy``, saved without pickle), or the error and where in the package it was raised.
"""
from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

import numpy as np

from .judge import NAME
from .registry import load_specs, spec_for

EPS = 1e-6                 # the central-difference step of every fd:i output
CASE_SECONDS = 10          # seconds one case may take before it is stopped
STOP_AFTER_TIMEOUTS = 2    # after this many cases in a row ran out of time, the others are not run


# -- the probes several exercises use; each returns {name: array} ------------------------------------------------
def scalar(value) -> np.ndarray:
    """A number as a 0-d float64 array (a probe's outputs are arrays)."""
    return np.asarray(float(value), dtype=np.float64)


def random_arrays(rng, shapes, low=None):
    """One array per shape: standard normal, or uniform in [low, low + 1) when ``low`` is given."""
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


def gradient_case(rng, fn, arrays, needs, central: bool = True) -> dict:
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


def named_operation(name: str):
    """The function a case names: "div" is p / q, "softmax" the package's softmax ..."""
    import minitransformer.functional as F

    return {"div": lambda p, q: p / q, "div-by-4": lambda t: t / 4.0, "one-over": lambda t: 1.0 / t,
            "add": lambda p, q: p + q, "mul": lambda p, q: p * q, "matmul": lambda p, q: p @ q,
            "matmul-swapped": lambda p, q: q @ p, "cube": lambda t: t * t * t,
            "tanh-mul": lambda p, q: (p * q).tanh(),
            "softmax": F.softmax, "log-softmax": F.log_softmax}[name]


def probe_gradient(rng, operation: str, shapes, needs=None, low=None, axis=None, central: bool = True) -> dict:
    """A backward exercise: ``operation`` on random inputs of ``shapes`` (``low``: per input, entries in [low, low+1))."""
    lows = low if isinstance(low, list) else [low] * len(shapes)
    arrays = [random_arrays(rng, [shape], lo)[0] for shape, lo in zip(shapes, lows)]
    function = named_operation(operation)
    if axis is not None:
        base, function = function, (lambda t: base(t, axis=axis))
    return gradient_case(rng, function, arrays, needs or [True] * len(shapes), central)


def call_here(module: str, function: str, *arguments) -> tuple:
    """Call ``module.function(*arguments)`` in this process; its results as a tuple."""
    import importlib

    result = getattr(importlib.import_module(module), function)(*arguments)
    return tuple(result) if isinstance(result, tuple) else (result,)


def probe_call(rng, module: str, function: str, arguments) -> dict:
    """One call of a staged case (a spec's ``staged``): ``module.function`` of the package on the given arrays,
    alone in its process (``result 0``, ``result 1``... are what it returned)."""
    if not module.startswith("minitransformer."):
        raise ValueError(f"a staged call runs the package's functions only, not {module}")
    values = [np.asarray(a, dtype=float) for a in arguments]
    return {f"result {i}": np.asarray(r) for i, r in enumerate(call_here(module, function, *values))}


def drive(probe) -> dict:
    """Run a staged probe's calls in this process; its outputs."""
    try:
        call = next(probe)
        while True:
            module, function, arguments = call
            call = probe.send(call_here(module, function, *arguments))
    except StopIteration as finished:
        return finished.value


# probes several exercises use, by name (``probe_gradient`` is "gradient"); an exercise's own are in its spec
SHARED_PROBES = {name.removeprefix("probe_"): value for name, value in list(globals().items())
                 if name.startswith("probe_")}


def find_probe(name: str, exercise_id: str | None = None):
    """The probe a case names: a shared one, or one of its exercise's spec (only that spec is imported: the
    sandbox runs one exercise's cases)."""
    if name in SHARED_PROBES:
        return SHARED_PROBES[name]
    owners = [spec_for(exercise_id)] if exercise_id else load_specs().values()
    for owner in owners:
        if name in owner.probe_table:
            return owner.probe_table[name]
    raise KeyError(f"no probe {name!r}" + (f" in the spec of Exercise {exercise_id}" if exercise_id else ""))


def __getattr__(name: str):
    """NEEDS, PROBES and STAGED, gathered from the specs when first asked for (after this module is imported:
    the specs import it)."""
    if name not in ("NEEDS", "PROBES", "STAGED"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    specs = load_specs().values()
    if name == "NEEDS":         # exercise -> the exercises whose solutions its cases need besides its own
        return {s.id: set(s.needs) for s in specs if s.needs}
    if name == "PROBES":        # every probe by name
        return {**SHARED_PROBES, **{n: f for s in specs for n, f in s.probe_table.items()}}
    # STAGED: the probes the grader runs itself, each call in a fresh sandbox (sandbox.run_cases)
    return {n: f for s in specs for n, f in s.staged_table.items()}


# -- an exercise's cases, from its spec ---------------------------------------------------------------------------
def _made(exercise_id: str, made: dict) -> dict:
    """A case of the spec's (``spec.case``) as the grader keeps it: with its exercise, its parameters as JSON
    gives them back."""
    return {"exercise": exercise_id, **made, "params": _jsonable(made["params"])}


def public_cases(exercise_id: str) -> list[dict]:
    """The public cases of an exercise (the inputs of its public tests), without ids or seeds."""
    return [_made(exercise_id, c) for c in spec_for(exercise_id).public]


def hidden_cases(exercise_id: str, rng, count: int = 8, large: bool = False) -> list[dict]:
    """``count`` hidden cases of an exercise drawn with ``rng`` (the teacher's), without ids or seeds, each from
    a generator of its own; with ``large`` (the casebook's), a backward exercise's next-to-last one is large."""
    spec, made = spec_for(exercise_id), []
    for n in range(count):
        r = np.random.default_rng(rng.integers(2 ** 32))
        if spec.large is not None and large and n == count - 2:
            made.append(spec.large(r))
        else:
            made.append(spec.hidden(r, n, count))
    return [_made(exercise_id, c) for c in made]


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
    probe = find_probe(spec["probe"], spec.get("exercise"))
    return plain_outputs(probe(np.random.default_rng(spec["seed"]), **spec["params"]))


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
