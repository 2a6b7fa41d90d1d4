"""Shared test settings: the gpu marker; the classroom markers.

A ``gpu`` test runs on CuPy where CuPy sees a GPU, and everywhere else on the
device double (tests/device_double.py), a strict stand-in for CuPy with no GPU
behind it: the same test then proves the device discipline, not the speed or
the kernels.

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

# the exercises' public tests live in their specs, inside the package (tests/exercises/test_exercises.py collects
# them): their asserts explain themselves as a test module's do
pytest.register_assert_rewrite("minitransformer.exercises.specs")

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


REAL_GPU = mt.cuda_available()


def pytest_report_header(config):
    return "gpu tests: on CuPy and a GPU" if REAL_GPU else \
        "gpu tests: on the device double (no GPU here; tests/device_double.py)"


def pytest_collection_modifyitems(config, items):
    classroom.apply_exercise_map(config, items)


@pytest.fixture(autouse=True)
def _gpu_tests_without_a_gpu_use_the_device_double(request):
    if "gpu" in request.node.keywords and not REAL_GPU:
        import device_double  # noqa: PLC0415

        device_double.on_device_double(request.getfixturevalue("monkeypatch"), default_device="cpu")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_a_torch_skip(outcome.get_result())     # an importorskip("torch") inside a test
    classroom.explain_unsolved(item, call, outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    with classroom.graded_backwards_guarded(item):   # a grading test: no graph built inside a graded backward
        yield


@pytest.fixture
def rng():
    """A seeded generator, so every test draws the same numbers on every run."""
    return np.random.default_rng(0)
