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


# Where the torch oracle tests are expected to run (.ci/run sets MT_REQUIRE_TORCH=1), a skip for want of
# torch fails instead: they are the only external check on our gradients, and must not vanish quietly.
REQUIRE_TORCH = os.environ.get("MT_REQUIRE_TORCH") == "1"
MISSING_TORCH = "could not import 'torch'"


def _fail_a_torch_skip(report) -> None:
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if REQUIRE_TORCH and report.skipped and MISSING_TORCH in reason:
        report.outcome = "failed"
        report.longrepr = f"MT_REQUIRE_TORCH=1 but the torch oracle cannot run: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_a_torch_skip(outcome.get_result())     # a module-level pytest.importorskip("torch")


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
    _fail_a_torch_skip(outcome.get_result())     # an importorskip("torch") inside a test
    classroom.explain_unsolved(item, call, outcome.get_result())


@pytest.fixture
def rng():
    """A seeded generator, so every test draws the same numbers on every run."""
    return np.random.default_rng(0)
