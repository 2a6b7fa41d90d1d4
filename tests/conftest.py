"""Shared test settings: the gpu marker skips cleanly where CuPy sees no device; the classroom markers.

Classroom (see TEACHING.md): every exercise has a marker, ``pytest -m ex_5_1``,
put on the tests listed for it in tests/exercise_map.json; a test that fails
only because an exercise is not solved yet says which one, not a traceback.
"""
from __future__ import annotations

import os

# One BLAS thread per test process (and per CLI or notebook it starts): test workers
# run side by side, and BLAS threads waiting for a busy core slow everything down.
# Set before NumPy loads, which reads it once.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import minitransformer as mt  # noqa: E402
from minitransformer.exercises import pytest_support as classroom  # noqa: E402


def pytest_configure(config):
    classroom.register_markers(config)


def pytest_collection_modifyitems(config, items):
    classroom.apply_exercise_map(config, items)
    if mt.cuda_available():
        return
    skip = pytest.mark.skip(reason="needs CuPy and a CUDA GPU (pip install cupy-cuda12x or cupy-cuda13x)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    classroom.explain_unsolved(item, call, outcome.get_result())


@pytest.fixture
def rng():
    """A seeded generator, so every test draws the same numbers on every run."""
    return np.random.default_rng(0)
