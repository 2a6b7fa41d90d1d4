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

from .judge import factor_in_words
from .pytest_results import ENVIRONMENT
from .pytest_support import MAP_FILE, load_map
from .registry import RAISED, SPECS_DIR, Exercise, load_exercises, parse_python

GRADING_FILE = "tests/exercises/test_exercises.py"
# the suite as the exercise map sees it: no notebooks (they run whole chapters), no classroom tests, no GPU, and
# not the proofs that take minutes (marker later: they grade and prove editions, they do not use the exercises)
SUITE_ARGS = ["-m", "not gpu and not later", "--ignore=tests/book/test_notebooks.py", "--ignore=tests/exercises/test_classroom.py",
              "tests"]

GRADCHECK = re.compile(
    r"gradient of input (?P<input>\d+)(?: \((?P<name>[^)]*)\))? with shape (?P<shape>\([^)]*\)) is wrong at "
    r"(?P<bad>\d+) of (?P<size>\d+) positions; worst at index (?P<index>\([^)]*\)): analytic (?P<analytic>\S+), "
    r"numeric (?P<numeric>\S+) \(\|difference\| (?P<difference>[^ ]+)")
BACKWARD_FAILED = re.compile(r"backward\(\) failed: (?P<error>[^\n]+)")
NUMERICAL_GRADIENT = "1.1"   # the exercise whose code is the *numeric* side of every gradient check


def grading_tests(root: Path) -> dict[str, list[str]]:
    """Exercise id -> ids of its grading tests, the ``test_*`` functions of its spec (specs/ex_5_1.py), which
    tests/exercises/test_exercises.py collects with the marker ``grades_X``; read from the files, not imported.

    These score the exercise; its marker ``ex_X`` also reaches other tests, through the exercise map.
    """
    found: dict[str, list[str]] = {}
    for path in sorted((Path(root) / SPECS_DIR).glob("ex_*.py"), key=lambda p: [int(n) for n in p.stem.split("_")[1:]]):
        exercise_id = path.stem.removeprefix("ex_").replace("_", ".")
        for node in parse_python(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                found.setdefault(exercise_id, []).append(f"{GRADING_FILE}::{node.name}")
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
    {"tests": {id: {"outcome", "message", ...}}, "skipped_modules": [...], "collection_errors": {...}}.
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


def _error_summary(text: str) -> str:
    """The readable part of an exception's text: numpy's mismatch summary, not the arrays printed after it."""
    lines = [line.strip() for line in text.splitlines()]
    summary = [line for line in lines if line.startswith(("Not equal to", "Mismatched elements", "Max absolute",
                                                            "Max relative", "(shapes", "x and y nan"))]
    if summary:
        return "; ".join(summary)
    kept = [line for line in lines if line]
    return " / ".join(kept[:2])[:400] if kept else "failed"


def explain_failure(message: str, exception: str | None = None, ratio: float | None = None,
                    exercise_id: str | None = None, where: str | None = None) -> str:
    """One or two readable lines about why a test failed: the gradient that is wrong and by how much.

    ``exception`` is "Type: message" of the exception itself (see pytest_results); without it the ``E``
    lines of pytest's report are read, never the source lines it echoes. For Exercise 1.1 the
    numerical gradient is the student's code, so the words say so.
    """
    error_lines = "\n".join(line[1:].strip() for line in message.splitlines() if line.startswith("E "))
    text = exception or error_lines or message   # never the echoed source when pytest marked the error
    numeric_is_theirs = exercise_id == NUMERICAL_GRADIENT
    match = GRADCHECK.search(text)
    if match:
        g = match.groupdict()
        name = f" ({g['name']})" if g["name"] else ""
        if numeric_is_theirs:
            values = f"the backward gives {g['analytic']}, your numerical gradient {g['numeric']}"
        else:
            values = f"your backward gives {g['analytic']}, the numerical gradient {g['numeric']}"
        why = (f"the gradient of input {g['input']}{name}, shape {g['shape']}, is wrong at {g['bad']} of "
               f"{g['size']} positions;\n      worst at index {g['index']}: {values} (off by {g['difference']})")
        if ratio == 0:
            why += ("\n      your backward gives 0 at every position: is the gradient computed and returned?"
                    if not numeric_is_theirs else "")
        elif ratio is not None:
            if numeric_is_theirs:
                why += (f"\n      your numerical gradient is {factor_in_words(1 / ratio)} × the true one at every "
                        "position: a constant factor (the step is 2ε from x − ε to x + ε)")
            else:
                why += (f"\n      your backward is {factor_in_words(ratio)} × the true gradient at every position "
                        "(a constant factor)")
        return why
    match = BACKWARD_FAILED.search(text)
    if match:
        return f"your backward raised {match['error']}" + (f"\n      at {where}" if where else "")
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for line in lines:   # the report of tests/conftest.py for a test that waits for an unsolved exercise
        if line.startswith("needs Exercise") or line.endswith("this test grades it."):
            return line
    if text:
        return _error_summary(text)
    return lines[-1] if lines else "failed"


def _explain(entry: dict, exercise_id: str | None = None) -> str:
    return explain_failure(entry.get("message", ""), entry.get("exception"), entry.get("ratio"), exercise_id,
                           entry.get("where"))


# -- whose code is wrong -------------------------------------------------------------------------------------
def prerequisites(exercise_map: dict[str, list[str]], grading: dict[str, list[str]]) -> dict[str, set[str]]:
    """Exercise -> the other exercises its grading tests need (those that fail when only the other is unsolved)."""
    return {y: {z for z, tests in exercise_map.items()
                if z != y and any(is_grading_test(t, functions) for t in tests)}
            for y, functions in grading.items()}


def exercise_states(results: dict, grading: dict[str, list[str]]) -> dict[str, str]:
    """Exercise -> "solved", "unsolved" (still raises), "failing" (its grading tests fail) or "untested"."""
    states = {}
    for exercise_id, functions in grading.items():
        entries = [e for t, e in results["tests"].items() if is_grading_test(t, functions)]
        failed = [e for e in entries if e["outcome"] == "failed"]
        if not entries:
            states[exercise_id] = "untested"
        elif any(unsolved_exercise(e["message"]) == exercise_id for e in failed):
            states[exercise_id] = "unsolved"
        else:
            states[exercise_id] = "failing" if failed else "solved"
    return states


def culprits(test: str, checked: str, users: dict[str, set[str]], needs: dict[str, set[str]],
             states: dict[str, str]) -> set[str]:
    """The exercises to blame for the failure of ``test`` (a failure that names no unsolved exercise).

    Suspects are the exercises the test needs (the exercise map, the owner of a grading test, and the
    exercise being checked) whose own grading tests fail; of those, the ones none of whose prerequisites is
    a suspect too (a wrong numerical gradient fails every backward's grading tests: blame it, not them).
    With no suspect, the exercise being checked answers for it.
    """
    suspects = {y for y in users.get(test, set()) | {checked} if states.get(y) in ("failing", "unsolved")}
    roots = {y for y in suspects if not (needs.get(y, set()) & suspects)}
    return roots or {checked}


@dataclass
class Verdict:
    exercise: Exercise
    grading_passed: list[str] = field(default_factory=list)
    grading_failed: dict[str, str] = field(default_factory=dict)    # test -> explanation
    dependent_passed: list[str] = field(default_factory=list)
    dependent_failed: dict[str, str] = field(default_factory=dict)
    waiting: dict[str, list[str]] = field(default_factory=dict)     # other exercise id -> tests waiting for it
    blamed: dict[str, dict[str, str]] = field(default_factory=dict)  # other exercise -> {test: why}: its code fails
    unsolved: list[str] = field(default_factory=list)               # tests that still hit this exercise's raise
    skipped: int = 0
    grading: set[str] = field(default_factory=set)                  # the exercise's own grading tests
    ratios: list[float] = field(default_factory=list)               # constant analytic/numeric factors seen
    prerequisites: set[str] | None = None                            # what its grading tests need (None: unknown)

    @property
    def solved(self) -> bool:
        return not (self.grading_failed or self.dependent_failed or self.unsolved or self.waiting_grading)

    @property
    def waiting_grading(self) -> list[str]:
        """Grading tests that cannot pass before another exercise is solved or fixed."""
        others = [*self.waiting.values(), *(list(tests) for tests in self.blamed.values())]
        return [t for tests in others for t in tests if t in self.grading]


def grade(exercise: Exercise, results: dict, functions: list[str], exercise_map: dict | None = None,
          all_grading: dict[str, list[str]] | None = None) -> Verdict:
    """Sort the results of ``pytest -m ex_X``; ``functions`` are the exercise's own grading tests.

    Results of the other exercises' grading tests (when present) say whose code a failure is due to:
    a failing test that also needs another exercise whose own grading tests fail is that exercise's.
    """
    exercise_map = exercise_map or {}
    all_grading = dict(all_grading or {})
    all_grading[exercise.id] = functions
    users: dict[str, set[str]] = {}
    for other, tests in exercise_map.items():
        for test in tests:
            users.setdefault(test, set()).add(other)
    needs = prerequisites(exercise_map, all_grading)
    states = exercise_states(results, all_grading)
    mine = set(exercise_map.get(exercise.id, []))
    verdict = Verdict(exercise, prerequisites=needs.get(exercise.id) if exercise_map else None)
    for test, entry in sorted(results["tests"].items()):
        grading = is_grading_test(test, functions)
        if not grading and exercise_map and test not in mine:
            continue            # another exercise's grading test, run only to learn that exercise's state
        owners = {o for o, fs in all_grading.items() if is_grading_test(test, fs)}
        test_users = {test: users.get(test, set()) | owners}
        outcome, message = entry["outcome"], entry["message"]
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
                blamed = culprits(test, exercise.id, test_users, needs, states)
                if exercise.id in blamed:
                    if entry.get("ratio") is not None:
                        verdict.ratios.append(entry["ratio"])
                    (verdict.grading_failed if grading else verdict.dependent_failed)[test] = \
                        _explain(entry, exercise.id)
                else:
                    first = min(blamed, key=lambda i: tuple(map(int, i.split("."))))
                    verdict.blamed.setdefault(first, {})[test] = _explain(entry, first)
    return verdict


def format_verdict(verdict: Verdict, titles: dict[str, str], root: Path | None = None) -> str:
    """The report ``check`` prints: what was graded and the counts, the failures by whose code causes
    them, and a last line with the verdict."""
    strangers = _unneeded(verdict)
    out = _report_counts(verdict, root) + _report_failures(verdict, titles, strangers)
    out += ["", _verdict_line(verdict, strangers)]
    return "\n".join(out)


def _report_counts(verdict: Verdict, root: Path | None) -> list[str]:
    """The exercise, where its code is, and how many of its grading tests and of the tests that use it passed."""
    e = verdict.exercise
    out = [f"Exercise {e.id} — {e.title}"]
    if root is not None:
        out.append(f"  grading the code in: {root}")
    out += [f"  chapter: {e.chapter}    code: {e.file}    marker: -m {e.marker}", ""]
    n_grading = len(verdict.grading_passed) + len(verdict.grading_failed) + \
        sum(t in verdict.grading for t in verdict.unsolved) + len(verdict.waiting_grading)
    out.append(f"  its grading tests ({GRADING_FILE}): {len(verdict.grading_passed)} of {n_grading} passed")
    others_failing = [t for tests in verdict.blamed.values() for t in tests]
    n_dependent = len(verdict.dependent_passed) + len(verdict.dependent_failed) + \
        sum(t not in verdict.grading for t in verdict.unsolved) + \
        sum(t not in verdict.grading for tests in verdict.waiting.values() for t in tests) + \
        sum(t not in verdict.grading for t in others_failing)
    if n_dependent:
        out.append(f"  other tests that use it: {len(verdict.dependent_passed)} of {n_dependent} passed")
    if verdict.skipped:
        out.append(f"  skipped: {verdict.skipped} (optional dependencies or no GPU)")
    return out


def _report_failures(verdict: Verdict, titles: dict[str, str], strangers: list[str]) -> list[str]:
    """The failing tests, apart by cause: this exercise's code, another exercise's, an exercise not solved yet,
    and the exercises this code reaches that the reference solution does not need (``strangers``)."""
    e, out = verdict.exercise, []
    if verdict.unsolved:
        out += ["", f"  Not solved yet: {len(verdict.unsolved)} tests still reach the NotImplementedError in {e.file}."]
    failed = {**verdict.grading_failed, **verdict.dependent_failed}
    if failed:
        out += ["", "  Failing because of this exercise:"]
        for test, why in list(failed.items())[:12]:
            out += [f"    ✗ {_shown(test)}", f"      {why}"]
        if len(failed) > 12:
            out.append(f"    ... and {len(failed) - 12} more")
    if verdict.blamed:
        out += ["", "  Failing because of another exercise's code (not counted against this one):"]
        for other, tests in sorted(verdict.blamed.items(), key=lambda item: _number(item[0])):
            out.append(f"    Exercise {other} ({titles.get(other, '?')}): its own grading tests fail; "
                       f"{len(tests)} test{'s' * (len(tests) != 1)} here — run check {other}")
            test, why = next(iter(tests.items()))
            out += [f"      e.g. ✗ {_shown(test)}", f"        {why}"]
    if verdict.waiting:
        out += ["", "  Waiting for other exercises (not counted against this one):"]
        for other, tests in sorted(verdict.waiting.items(), key=lambda item: _number(item[0])):
            out.append(f"    Exercise {other} ({titles.get(other, '?')}): {len(tests)} test{'s' * (len(tests) != 1)}")
    if strangers:
        hint = (" (a backward computes a gradient only for the inputs that need one: self.inputs[i].requires_grad)"
                if "backward" in e.title else "")
        out += ["", f"  Your code for Exercise {e.id} reaches Exercise {', '.join(strangers)}, which its reference "
                    f"solution does not need: look for a computation it does not have to make{hint}."]
    return out


def _verdict_line(verdict: Verdict, strangers: list[str]) -> str:
    """Solved; not yet (and why); not gradable yet (what to solve or fix first); or not attempted yet."""
    e = verdict.exercise
    failed = {**verdict.grading_failed, **verdict.dependent_failed}
    n_failed = len(failed) + len(verdict.unsolved)
    if verdict.solved:
        return (f"Verdict: Exercise {e.id} is solved ✓" +
                (" (some tests that also use it wait for other exercises)" if verdict.waiting or verdict.blamed else ""))
    if strangers and not (verdict.grading_failed or verdict.unsolved):
        return (f"Verdict: not yet — your code for Exercise {e.id} needs Exercise {', '.join(strangers)}, which "
                f"Exercise {e.id} itself does not need.")
    if verdict.waiting_grading and not (verdict.grading_failed or verdict.unsolved):
        waiting = {o for o, ts in verdict.waiting.items() if any(t in verdict.grading for t in ts)}
        wrong = {o for o, ts in verdict.blamed.items() if any(t in verdict.grading for t in ts)}
        steps = []
        if waiting:
            steps.append("solve Exercise " + ", ".join(sorted(waiting, key=_number)))
        if wrong:
            steps.append("fix Exercise " + ", ".join(sorted(wrong, key=_number)) + " (its grading tests fail)")
        return f"Verdict: not gradable yet — {' and '.join(steps)} first."
    if verdict.unsolved and not failed:
        return f"Verdict: not attempted yet — replace the raise in {e.file} with your code."
    return (f"Verdict: not yet — {n_failed} test{'s' * (n_failed != 1)} fail because of Exercise {e.id}."
            + _constant_factor_note(verdict))


def _number(exercise_id: str) -> tuple[int, ...]:
    """"13.1" -> (13, 1): exercises in the book's order, 2.1 before 13.1."""
    return tuple(int(part) for part in exercise_id.split("."))


MUTATIONS_FILE = "tests/house/test_mutations.py"


def _shown(test: str) -> str:
    """A test id as a student should read it: a mutation test's bracket names a bug planted on purpose, not theirs."""
    if test.startswith(MUTATIONS_FILE + "::") and "[" in test:
        name, planted = test.split("[", 1)
        return f"{name} (it plants a bug on purpose, {planted.rstrip(']')!r}, and checks that the gradient checks " \
               "catch it: it fails when they do not)"
    return test


def _unneeded(verdict: Verdict) -> list[str]:
    """Exercises the checked exercise's own grading tests wait for although its reference needs none of them."""
    needs = verdict.prerequisites
    if needs is None:
        return []
    waiting = {o for o, ts in verdict.waiting.items() if any(t in verdict.grading for t in ts)}
    return sorted(waiting - needs, key=_number)


def _constant_factor_note(verdict: Verdict) -> str:
    """A sentence for the verdict when every wrong gradient is off by the same constant factor."""
    names = {factor_in_words(r) for r in verdict.ratios}
    if len(names) != 1 or len(verdict.ratios) < len(verdict.grading_failed):
        return ""
    factor = names.pop()
    if verdict.exercise.id == NUMERICAL_GRADIENT:
        return (f"\n  Every wrong gradient is off by one constant factor: your numerical gradient is "
                f"{factor_in_words(1 / verdict.ratios[0])} × the backward's. "
                "Look for a missing or extra constant (the two evaluations are 2ε apart).")
    return (f"\n  Every wrong gradient is off by one constant factor: yours is {factor} × the true one. "
            "Look for a missing or extra constant (a missing ½ gives 2, a missing 1/n gives n, "
            "a missing 1/√d_k gives √d_k).")


def check(exercise_id: str, root: Path, workers: int = 2) -> tuple[Verdict, str]:
    """Run ``pytest -m ex_X`` for one exercise in ``root``; return the verdict and its text.

    The grading tests of every exercise run too (they take a second): their outcomes say whose code a
    failing test is due to, so a wrong MatMul backward is not blamed on the numerical gradient.
    """
    exercises = load_exercises(root)
    wanted = exercise_id.removeprefix("ex_").replace("_", ".")
    exercise = next((e for e in exercises if e.id == wanted), None)
    if exercise is None:
        raise KeyError(f"no Exercise {exercise_id!r} in {root}; the exercises there are "
                       f"{', '.join(e.id for e in exercises)}. (If you deleted its '# Exercise {wanted} — …' "
                       "comment line, put it back: that line is how check finds the exercise.)")
    exercise_map = load_map(root)
    tests = exercise_map.get(exercise.id, [])
    files = sorted({t.split("::")[0] for t in tests} | {GRADING_FILE})
    files = [f for f in files if (root / f).exists()]
    selection = " or ".join([exercise.marker, *(e.grading_marker for e in exercises)])
    results, process = run_pytest(root, ["-q", "-m", selection, *files],
                                  workers=workers if len(tests) > 40 else 0)
    if results["collection_errors"]:
        raise CollectionError(results["collection_errors"])
    all_grading = grading_tests(root)
    verdict = grade(exercise, results, all_grading.get(exercise.id, []), exercise_map, all_grading)
    return verdict, format_verdict(verdict, {e.id: e.title for e in exercises})


class CollectionError(RuntimeError):
    """The tests could not be imported: usually a syntax error in the student's code."""

    def __init__(self, errors: dict[str, str]) -> None:
        self.errors = errors
        super().__init__("the tests could not be collected:\n" + "\n".join(errors.values()))

    def explain(self) -> str:
        """The error as a student needs it: the file, the line and what Python says is wrong there."""
        text = "\n".join(self.errors.values())
        lines = [line for line in text.splitlines() if line.strip()]
        where = next((re.sub(r"^E\s+", "", line.strip()) for line in lines if re.search(r'File ".*", line \d+', line)),
                     None)
        errors = [line[1:].strip() for line in lines if line.startswith("E ")]
        error = next((line for line in reversed(errors) if re.match(r"\w+(Error|Exception)\b", line)),
                     errors[-1] if errors else lines[-1] if lines else "unknown error")
        shown = [f"Your code does not import, so no test could run: {error}"]
        if where:
            shown.append(f"  at {where}")
        shown.append("Fix it (python -c 'import minitransformer' shows the same error), then check again.")
        return "\n".join(shown)


__all__ = ["run_pytest", "grade", "check", "explain_failure", "Verdict", "CollectionError", "MAP_FILE"]
