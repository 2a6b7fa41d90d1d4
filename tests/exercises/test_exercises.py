"""The grading tests of the classroom exercises: each exercise's public tests, collected from its spec.

An exercise's public tests are the ``test_*`` functions of its spec, minitransformer/exercises/specs/ex_5_1.py
for Exercise 5.1 (see minitransformer/exercises/spec.py). They are collected here, each with its exercise's
grading marker ``grades_5_1``: ``pytest -m grades_5_1`` runs exactly the tests that score it (what
``python -m minitransformer.exercises check`` runs and counts). The wider marker ``ex_5_1`` is put on these
tests and on every other test of the suite that depends on the exercise (tests/exercise_map.json, applied by
tests/conftest.py). A grading test uses as few other exercises as it can: the backward exercises need the
numerical gradient (Exercise 1.1) and nothing else, the forward exercises need nothing.

Nothing here names an exercise: a new spec's tests are collected as they are written.
"""
from __future__ import annotations

import types

import pytest

from minitransformer.exercises.registry import grading_marker, load_specs


def collected(test, exercise_id: str):
    """A copy of a spec's test with its grading marker, and pytest's parametrization as the spec wrote it
    (a copy: the spec's own function stays as it is, however often this module is imported)."""
    copy = types.FunctionType(test.__code__, test.__globals__, test.__name__, test.__defaults__, test.__closure__)
    copy.__kwdefaults__, copy.__doc__, copy.__module__ = test.__kwdefaults__, test.__doc__, test.__module__
    for argnames, argvalues, options in reversed(getattr(test, "parametrize", [])):
        copy = pytest.mark.parametrize(argnames, argvalues, **options)(copy)
    return getattr(pytest.mark, grading_marker(exercise_id))(copy)


def _collect_every_spec() -> None:
    for spec in load_specs().values():
        for test in spec.tests:
            globals()[test.__name__] = collected(test, spec.id)


_collect_every_spec()
