"""An exercise as one object: its spec, one module per exercise in ``specs/`` (``specs/ex_5_1.py``).

The markers in the package hold an exercise's solution and name it (registry.py); its chapter teaches
it. Everything else the classroom knows about it is in its spec module:

* its public tests: the module's ``test_*`` functions. tests/exercises/test_exercises.py collects them
  with the grading marker ``grades_5_1``; ``@parametrize`` below records pytest's parametrization
  without importing pytest, because a spec is imported in the grader's sandbox too, which has none;
* one ``SPEC = ExerciseSpec(...)``: its public cases (the public tests' inputs, as plain data), its
  hidden-case generator (with the large case of a backward), its prerequisites, the probes only it
  uses (a probe several exercises share is in cases.py), and its catalogued mistakes;
* the mistakes themselves, between ``# BEGIN TEACHER ONLY`` and ``# END TEACHER ONLY``: they quote the
  solution, so the student edition keeps ``MISTAKES = ()`` there (edition.py).

The registry finds the spec modules by their names (no list to keep) and refuses a spec without
markers or markers without a spec (registry.load_specs).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np


@dataclass(frozen=True)
class Mistake:
    name: str                                   # short, unique within its exercise
    verdict: str                                # what the student reads
    edits: tuple[tuple[str, str], ...]          # (old, new), applied in order inside the exercise's blocks


def mistake(name: str, verdict: str, *edits: tuple[str, str]) -> Mistake:
    """A catalogued mistake: a small edit of the solution block's own lines (``old`` -> ``new``, each
    occurrence inside the exercise's blocks), and the verdict a student who made it should read."""
    return Mistake(name, verdict, tuple(edits))


def case(name: str, probe: str, **params) -> dict:
    """A grading case without its exercise, id or seed: what it is, the probe that runs it, the probe's
    parameters (plain JSON data: the case travels to the sandbox and back)."""
    return {"name": name, "probe": probe, "params": params}


def parametrize(argnames: str, argvalues, **options):
    """pytest.mark.parametrize, recorded on the test function; tests/exercises/test_exercises.py applies it.
    Written above a test as pytest's would be (several stack the same way)."""
    def record(function):
        function.parametrize = [(argnames, list(argvalues), options), *getattr(function, "parametrize", [])]
        return function
    return record


@dataclass(frozen=True)
class ExerciseSpec:
    """What the classroom knows of one exercise besides its solution (the markers) and its chapter."""

    id: str                                                     # "5.1"; its module is specs/ex_5_1.py
    public: tuple[dict, ...]                                    # case(...) each: the public tests' inputs
    hidden: Callable[[np.random.Generator, int, int], dict]     # hidden case n of count, from its own generator
    large: Callable[[np.random.Generator], dict] | None = None  # a backward's large case (numerics cannot finish)
    needs: frozenset[str] = frozenset()     # the exercises whose solutions its cases need besides its own
    probes: tuple[Callable, ...] = ()       # ``probe_<name>`` functions only this exercise uses
    staged: tuple[Callable, ...] = ()       # ``staged_<name>``: a probe the grader runs call by call (sandbox.py)
    mistakes: tuple[Mistake, ...] = ()      # the catalogued mistakes (the teacher's edition only)
    tests: tuple[Callable, ...] = field(default=(), compare=False)   # its public tests, filled in by the registry

    def __post_init__(self) -> None:
        for name in ("public", "probes", "staged", "mistakes", "tests"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "needs", frozenset(self.needs))

    @property
    def probe_table(self) -> dict[str, Callable]:
        """Probe name -> function (``probe_layer_norm`` is "layer_norm"): what a case names."""
        return {f.__name__.removeprefix("probe_"): f for f in self.probes}

    @property
    def staged_table(self) -> dict[str, Callable]:
        """Probe name -> its staged form (``staged_online_softmax`` is "online_softmax"), which the grader runs
        call by call; the probe of the same name makes every call in one process (the teacher's casebook)."""
        return {f.__name__.removeprefix("staged_"): f for f in self.staged}


# -- small helpers the hidden-case generators share ------------------------------------------------------------
def random_shape(rng, ndim: int, low: int = 1, high: int = 5) -> list[int]:
    """A random shape of ``ndim`` axes, each in [low, high)."""
    return [int(n) for n in rng.integers(low, high, ndim)]


def tensor(rng, *dims, low=None):
    """A float64 Tensor that requires a gradient (for the public tests); entries in [low, low + 1) when ``low``
    is given. tests/exercises/test_device_double_grading.py puts a device twin in its place."""
    import minitransformer as mt

    data = rng.standard_normal(dims) if low is None else low + rng.random(dims)
    return mt.Tensor(data, requires_grad=True)
