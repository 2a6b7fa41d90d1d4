"""A pytest plugin that writes the outcome of every test to a JSON file.

    MT_EXERCISE_RESULTS=/tmp/results.json python -m pytest -p minitransformer.exercises.pytest_results ...

The file maps each test id to {"outcome": "passed" | "failed" | "skipped",
"message": the failure text, "exception": "Type: message" of the exception
that failed it, "ratio": analytic ÷ numeric gradient when a gradient check
failed by one constant factor}; test modules skipped as a whole (an
``importorskip`` at module level) are listed under "skipped_modules".
``tools/exercise_map.py``, ``python -m minitransformer.exercises check`` and
the classroom tests read it. It works with pytest-xdist: the controller,
which sees every report, writes the file (the extra fields travel as report
attributes).

"exception" is taken from the exception object, not from pytest's text: that
text also echoes the source lines around the failure, which a pattern could
mistake for the error.
"""
from __future__ import annotations

import json
import os

import pytest

from .judge import constant_ratio

ENVIRONMENT = "MT_EXERCISE_RESULTS"
_MESSAGE_LIMIT = 6000

_tests: dict[str, dict] = {}
_skipped_modules: list[str] = []
_collection_errors: dict[str, str] = {}


def where_raised(error: BaseException) -> str | None:
    """"file:line:  code" of the package line that raised the innermost cause of ``error`` (a backward's own
    line, not the gradient check that reported it), or None."""
    import traceback
    from pathlib import Path

    seen = set()
    while error.__cause__ is not None and id(error) not in seen:
        seen.add(id(error))
        error = error.__cause__
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        parts = Path(frame.filename).parts
        if "minitransformer" in parts and "exercises" not in parts:
            relative = "/".join(parts[len(parts) - parts[::-1].index("minitransformer") - 1:])
            return f"{relative}:{frame.lineno}:  {(frame.line or '').strip()}"
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None or not report.failed:
        return
    error = call.excinfo.value
    report.mt_exception = f"{type(error).__name__}: {error}"[:_MESSAGE_LIMIT]
    report.mt_where = where_raised(error)
    if hasattr(error, "analytic") and hasattr(error, "numeric"):   # a GradcheckError
        try:
            report.mt_ratio = constant_ratio(error.analytic, error.numeric)
        except Exception:   # the verdict only loses a hint
            report.mt_ratio = None


def pytest_collectreport(report) -> None:
    if report.failed:
        _collection_errors[report.nodeid] = report.longreprtext[-_MESSAGE_LIMIT:]
    elif report.skipped:
        _skipped_modules.append(report.nodeid)


def pytest_runtest_logreport(report) -> None:
    entry = _tests.setdefault(report.nodeid, {"outcome": "passed", "message": ""})
    if report.failed:
        if entry["outcome"] != "failed":   # keep the first failure (the call's, not a teardown's)
            entry["outcome"] = "failed"
            entry["message"] = report.longreprtext[-_MESSAGE_LIMIT:]
            entry["exception"] = getattr(report, "mt_exception", None)
            entry["ratio"] = getattr(report, "mt_ratio", None)
            entry["where"] = getattr(report, "mt_where", None)
    elif report.skipped and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"


def pytest_sessionfinish(session) -> None:
    if hasattr(session.config, "workerinput"):   # an xdist worker: the controller writes the file
        return
    path = os.environ.get(ENVIRONMENT)
    if not path:
        return
    with open(path, "w", encoding="utf-8") as file:
        json.dump({"tests": _tests, "skipped_modules": sorted(_skipped_modules),
                   "collection_errors": _collection_errors}, file, indent=1, ensure_ascii=False)
