"""Run the tests of an exercise and turn pytest's results into a verdict a student can act on."""
from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .pytest_results import ENVIRONMENT
from .pytest_support import MAP_FILE, load_map
from .registry import RAISED, Exercise, load_exercises

GRADING_FILE = "tests/test_exercises.py"
# the suite as the exercise map sees it: no notebooks (they run whole chapters), no classroom tests, no GPU
SUITE_ARGS = ["-m", "not gpu", "--ignore=tests/test_notebooks.py", "--ignore=tests/test_classroom.py", "tests"]

GRADCHECK = re.compile(
    r"gradient of input (?P<input>\d+)(?: \((?P<name>[^)]*)\))? with shape (?P<shape>\([^)]*\)) is wrong at "
    r"(?P<bad>\d+) of (?P<size>\d+) positions; worst at index (?P<index>\([^)]*\)): analytic (?P<analytic>\S+), "
    r"numeric (?P<numeric>\S+) \(\|difference\| (?P<difference>[^ ]+)")
BACKWARD_FAILED = re.compile(r"backward\(\) failed: (?P<error>[^\n]+)")


def grading_tests(root: Path) -> dict[str, list[str]]:
    """Exercise id -> ids of the test functions in tests/test_exercises.py that carry its marker explicitly.

    (The marker also reaches other tests, through the exercise map; these are the ones written to grade it.)
    """
    path = Path(root) / GRADING_FILE
    if not path.exists():
        return {}
    found: dict[str, list[str]] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            text = ast.unparse(decorator)
            match = re.fullmatch(r"pytest\.mark\.ex_(\d+)_(\d+)", text)
            if match:
                found.setdefault(f"{match[1]}.{match[2]}", []).append(f"{GRADING_FILE}::{node.name}")
    return found


def is_grading_test(test: str, functions: list[str]) -> bool:
    """Is ``test`` (maybe parametrized: name[...]) one of ``functions``?"""
    return test.split("[")[0] in functions


def xdist_available() -> bool:
    return importlib.util.find_spec("xdist") is not None


def run_pytest(root: Path, args: list[str], workers: int = 0, env: dict | None = None,
               timeout: float | None = None) -> tuple[dict, subprocess.CompletedProcess]:
    """Run pytest in ``root`` (as its own process, importing the package found there); return the results file.

    ``workers`` > 1 uses pytest-xdist when it is installed. The results are
    {"tests": {id: {"outcome", "message"}}, "skipped_modules": [...], "collection_errors": {...}}.
    """
    root = Path(root)
    with tempfile.TemporaryDirectory() as scratch:
        results = Path(scratch) / "results.json"
        environment = dict(os.environ if env is None else env)
        environment[ENVIRONMENT] = str(results)
        environment["PYTHONPATH"] = str(root) + os.pathsep + environment.get("PYTHONPATH", "")
        environment.setdefault("MPLBACKEND", "Agg")
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p",
                   "minitransformer.exercises.pytest_results", *args]
        if workers > 1 and xdist_available():
            command += ["-n", str(workers)]
        process = subprocess.run(command, cwd=root, env=environment, capture_output=True, text=True,
                                 timeout=timeout)
        if not results.exists():
            raise RuntimeError(f"pytest wrote no results (exit code {process.returncode}):\n"
                               f"{process.stdout[-3000:]}\n{process.stderr[-3000:]}")
        return json.loads(results.read_text(encoding="utf-8")), process


def unsolved_exercise(message: str) -> str | None:
    """The id of the unsolved exercise a failure message names, if any."""
    match = RAISED.search(message)
    return match.group(1) if match else None


def explain_failure(message: str) -> str:
    """One or two readable lines about why a test failed: the gradient that is wrong and by how much."""
    match = GRADCHECK.search(message)
    if match:
        g = match.groupdict()
        name = f" ({g['name']})" if g["name"] else ""
        return (f"the gradient of input {g['input']}{name}, shape {g['shape']}, is wrong at {g['bad']} of "
                f"{g['size']} positions;\n      worst at index {g['index']}: your backward gives {g['analytic']}, "
                f"the numerical gradient {g['numeric']} (off by {g['difference']})")
    match = BACKWARD_FAILED.search(message)
    if match:
        return f"your backward raised {match['error']}"
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for line in lines:   # the report of tests/conftest.py for a test that waits for an unsolved exercise
        if line.startswith("needs Exercise") or line.endswith("this test grades it."):
            return line
    errors = [line[1:].strip() for line in lines if line.startswith("E ")]
    if errors:
        return errors[0] if len(errors) == 1 else f"{errors[0]} ... {errors[-1]}"
    return lines[-1] if lines else "failed"


@dataclass
class Verdict:
    exercise: Exercise
    grading_passed: list[str] = field(default_factory=list)
    grading_failed: dict[str, str] = field(default_factory=dict)    # test -> explanation
    dependent_passed: list[str] = field(default_factory=list)
    dependent_failed: dict[str, str] = field(default_factory=dict)
    waiting: dict[str, list[str]] = field(default_factory=dict)     # other exercise id -> tests waiting for it
    unsolved: list[str] = field(default_factory=list)               # tests that still hit this exercise's raise
    skipped: int = 0
    grading: set[str] = field(default_factory=set)                  # the exercise's own grading tests

    @property
    def solved(self) -> bool:
        return not (self.grading_failed or self.dependent_failed or self.unsolved or self.waiting_grading)

    @property
    def waiting_grading(self) -> list[str]:
        return [t for tests in self.waiting.values() for t in tests if t in self.grading]


def grade(exercise: Exercise, results: dict, functions: list[str]) -> Verdict:
    """Sort the results of ``pytest -m ex_X``; ``functions`` are the exercise's own grading tests."""
    verdict = Verdict(exercise)
    for test, entry in sorted(results["tests"].items()):
        outcome, message = entry["outcome"], entry["message"]
        grading = is_grading_test(test, functions)
        if grading:
            verdict.grading.add(test)
        if outcome == "skipped":
            verdict.skipped += 1
        elif outcome == "passed":
            (verdict.grading_passed if grading else verdict.dependent_passed).append(test)
        else:
            other = unsolved_exercise(message)
            if other == exercise.id:
                verdict.unsolved.append(test)
            elif other is not None:
                verdict.waiting.setdefault(other, []).append(test)
            else:
                (verdict.grading_failed if grading else verdict.dependent_failed)[test] = explain_failure(message)
    return verdict


def format_verdict(verdict: Verdict, titles: dict[str, str]) -> str:
    e = verdict.exercise
    out = [f"Exercise {e.id} — {e.title}", f"  chapter: {e.chapter}    code: {e.file}    marker: -m {e.marker}", ""]
    n_grading = len(verdict.grading_passed) + len(verdict.grading_failed) + \
        sum(t in verdict.grading for t in verdict.unsolved) + len(verdict.waiting_grading)
    out.append(f"  its grading tests ({GRADING_FILE}): {len(verdict.grading_passed)} of {n_grading} passed")
    n_dependent = len(verdict.dependent_passed) + len(verdict.dependent_failed) + \
        sum(t not in verdict.grading for t in verdict.unsolved) + \
        sum(t not in verdict.grading for tests in verdict.waiting.values() for t in tests)
    if n_dependent:
        out.append(f"  other tests that use it: {len(verdict.dependent_passed)} of {n_dependent} passed")
    if verdict.skipped:
        out.append(f"  skipped: {verdict.skipped} (optional dependencies or no GPU)")
    if verdict.unsolved:
        out += ["", f"  Not solved yet: {len(verdict.unsolved)} tests still reach the NotImplementedError in {e.file}."]
    failed = {**verdict.grading_failed, **verdict.dependent_failed}
    if failed:
        out += ["", "  Failing because of this exercise:"]
        for test, why in list(failed.items())[:12]:
            out += [f"    ✗ {test}", f"      {why}"]
        if len(failed) > 12:
            out.append(f"    ... and {len(failed) - 12} more")
    if verdict.waiting:
        out += ["", "  Waiting for other exercises (not counted against this one):"]
        for other, tests in sorted(verdict.waiting.items()):
            out.append(f"    Exercise {other} ({titles.get(other, '?')}): {len(tests)} test{'s' * (len(tests) != 1)}")
    out.append("")
    if verdict.solved:
        out.append(f"Verdict: Exercise {e.id} is solved ✓" +
                   (" (some tests that also use it wait for other exercises)" if verdict.waiting else ""))
    elif verdict.waiting_grading and not (verdict.grading_failed or verdict.unsolved):
        firsts = ", ".join(sorted({o for o, ts in verdict.waiting.items() if any(t in verdict.grading
                                                                                  for t in ts)}))
        out.append(f"Verdict: not gradable yet — solve Exercise {firsts} first.")
    elif verdict.unsolved and not failed:
        out.append(f"Verdict: not attempted yet — replace the raise in {e.file} with your code.")
    else:
        out.append(f"Verdict: not yet — {len(failed) + len(verdict.unsolved)} tests fail because of Exercise {e.id}.")
    return "\n".join(out)


def check(exercise_id: str, root: Path, workers: int = 2) -> tuple[Verdict, str]:
    """Run ``pytest -m ex_X`` for one exercise in ``root``; return the verdict and its text."""
    exercises = load_exercises(root)
    wanted = exercise_id.removeprefix("ex_").replace("_", ".")
    exercise = next((e for e in exercises if e.id == wanted), None)
    if exercise is None:
        raise KeyError(f"no Exercise {exercise_id!r}; the exercises are {', '.join(e.id for e in exercises)}")
    tests = load_map(root).get(exercise.id, [])
    files = sorted({t.split("::")[0] for t in tests} | {GRADING_FILE})
    files = [f for f in files if (root / f).exists()]
    results, process = run_pytest(root, ["-q", "-m", exercise.marker, *files],
                                  workers=workers if len(tests) > 40 else 0)
    if results["collection_errors"]:
        raise RuntimeError("the tests could not be collected:\n" + "\n".join(results["collection_errors"].values()))
    verdict = grade(exercise, results, grading_tests(root).get(exercise.id, []))
    return verdict, format_verdict(verdict, {e.id: e.title for e in exercises})


__all__ = ["run_pytest", "grade", "check", "explain_failure", "Verdict", "MAP_FILE"]
