"""A pytest plugin that writes the outcome of every test to a JSON file.

    MT_EXERCISE_RESULTS=/tmp/results.json python -m pytest -p minitransformer.exercises.pytest_results ...

The file maps each test id to {"outcome": "passed" | "failed" | "skipped",
"message": the failure text}; test modules skipped as a whole (an
``importorskip`` at module level) are listed under "skipped_modules".
``tools/exercise_map.py``, ``python -m minitransformer.exercises check`` and
the classroom tests read it. It works with pytest-xdist: the controller,
which sees every report, writes the file.
"""
from __future__ import annotations

import json
import os

ENVIRONMENT = "MT_EXERCISE_RESULTS"
_MESSAGE_LIMIT = 6000

_tests: dict[str, dict] = {}
_skipped_modules: list[str] = []
_collection_errors: dict[str, str] = {}


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
