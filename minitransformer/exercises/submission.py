"""Grade one exercise of a student's submission: ``python -m minitransformer.exercises grade ID --submission DIR``.

The student's code for the exercise is moved into a fresh copy of the
teacher's edition in which only that exercise is taken out; everything else
(every other solution, every test) is the teacher's. So a submission cannot
change the tests, an unsolved or wrong other exercise costs nothing here, and
the score is the share of the exercise's grading tests (marker ``grades_X`` in
tests/test_exercises.py) that pass, one point per test case.

Finding "the student's code" needs no markers: the student edition's file and
the submitted file are aligned line by line (difflib), and what the submission
holds between the exercise's header and the code that follows the stub is the
student's. Edits elsewhere in the file are ignored.
"""
from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

from .edition import strip_python, write_edition
from .registry import Exercise, ExerciseError, get_exercise

GRADING_FILE = "tests/test_exercises.py"


@dataclass
class TestResult:
    name: str          # the pytest id, tests/test_exercises.py::test_...[...]
    passed: bool
    output: str = ""   # why it failed, in a line or two


@dataclass
class Score:
    exercise: Exercise
    tests: list[TestResult] = field(default_factory=list)
    note: str = ""     # a problem that failed every test (code that does not import, a lost header)

    @property
    def points(self) -> int:
        return sum(t.passed for t in self.tests)

    @property
    def max_points(self) -> int:
        return len(self.tests)

    def text(self) -> str:
        e = self.exercise
        lines = [f"Exercise {e.id} — {e.title}: {self.points} of {self.max_points} grading tests pass"]
        if self.note:
            lines.append(f"  {self.note}")
        for test in self.tests:
            lines.append(f"  {'✓' if test.passed else '✗'} {test.name}")
            if not test.passed and test.output and not self.note:
                lines.append("      " + test.output.replace("\n", "\n      "))
        return "\n".join(lines)


def submission_root(folder: str | Path) -> Path:
    """The folder of a submission that holds ``minitransformer/`` (the repository, or the package folder itself)."""
    folder = Path(folder).resolve()
    if (folder / "minitransformer").is_dir():
        return folder
    if folder.name == "minitransformer" and folder.is_dir():
        return folder.parent
    raise ExerciseError(f"{folder} holds no minitransformer/ package folder: give the student's repository "
                        "(or its minitransformer/ folder) as --submission")


def transplant(stub_text: str, submitted_text: str, exercise_id: str) -> str:
    """``stub_text`` (the edition with only this exercise taken out) with each stub replaced by the student's code.

    The two texts are aligned line by line; for each stub (the header's notes and raise), the lines between the
    nearest aligned line before its raise and the nearest aligned line after it are taken from the submission
    (the notes above the raise stay when the student kept them: they are comments).
    """
    stub, submitted = stub_text.splitlines(keepends=True), submitted_text.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(None, stub, submitted, autojunk=False)
    aligned = {}
    for block in matcher.get_matching_blocks():
        for offset in range(block.size):
            aligned[block.a + offset] = block.b + offset
    raise_line = re.compile(r'^\s*raise NotImplementedError\("Exercise ' + re.escape(exercise_id) + r":")
    stubs = [number for number, line in enumerate(stub) if raise_line.match(line)]
    out, cursor = [], 0
    for line in stubs:
        before = max((i for i in aligned if i < line), default=None)
        after = min((i for i in aligned if i > line), default=None)
        if before is None or after is None or before < cursor - 1:
            raise ExerciseError("the submitted file differs too much from the student edition to find the "
                                f"code of Exercise {exercise_id}")
        out.extend(stub[cursor:before + 1])
        out.extend(submitted[aligned[before] + 1:aligned[after]])
        cursor = after
    out.extend(stub[cursor:])
    return "".join(out)


def graded_edition(root: Path, exercise: Exercise, submission: Path, out_dir: Path) -> Path:
    """Write the teacher's edition without ``exercise`` to ``out_dir`` and put the student's code for it in."""
    write_edition(root, out_dir, {exercise.id})
    for path in exercise.files:
        submitted = submission / path
        if not submitted.exists():
            raise ExerciseError(f"the submission has no {path}")
        stub_text = strip_python((root / path).read_text(encoding="utf-8"), path, {exercise.id})
        (out_dir / path).write_text(transplant(stub_text, submitted.read_text(encoding="utf-8"), exercise.id),
                                    encoding="utf-8")
    return out_dir


def _collect(edition: Path, marker: str) -> list[str]:
    """The ids of the test cases ``-m marker`` selects in the grading file (collected, not run)."""
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                             "-m", marker, GRADING_FILE], cwd=edition, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(edition)})
    tests = [line.strip() for line in result.stdout.splitlines() if line.startswith(GRADING_FILE + "::")]
    if not tests:
        raise RuntimeError(f"no grading tests for -m {marker} in {edition}:\n{result.stdout[-2000:]}"
                           f"\n{result.stderr[-2000:]}")
    return tests


def _import_error(text: str) -> str:
    """The line of a crashed pytest run that says what went wrong (a SyntaxError and where)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    error = next((line.lstrip("E ").strip() for line in reversed(lines)
                  if re.match(r"^(E\s+)?\w+(Error|Exception)\b", line)), lines[-1] if lines else "unknown error")
    where = next((line for line in lines if re.search(r'File ".*minitransformer/.*", line \d+', line)), "")
    return f"the code does not import: {error}" + (f" ({where})" if where else "")


def grade_submission(exercise_id: str, submission: str | Path, root: Path, timeout: float = 600) -> Score:
    """Score the submission's code for one exercise on that exercise's grading tests."""
    from .grading import CollectionError, _explain, run_pytest

    exercise = get_exercise(exercise_id, root)
    if not exercise.has_solution:
        raise ExerciseError(f"{root} holds no solution of Exercise {exercise.id}: grade runs in the teacher's "
                            "edition")
    submission = submission_root(submission)
    score = Score(exercise)
    with tempfile.TemporaryDirectory(prefix="mt-grade-") as scratch:
        edition = Path(scratch) / "edition"
        write_edition(root, edition, {exercise.id})
        tests = _collect(edition, exercise.grading_marker)
        shutil.rmtree(edition)
        try:
            graded_edition(root, exercise, submission, edition)
        except ExerciseError as error:
            score.note = str(error)
            score.tests = [TestResult(t, False, score.note) for t in tests]
            return score
        try:
            results, process = run_pytest(edition, ["-q", "-m", exercise.grading_marker, GRADING_FILE],
                                          timeout=timeout)
        except RuntimeError as error:      # pytest could not start: the package does not import
            score.note = _import_error(str(error))
            score.tests = [TestResult(t, False, score.note) for t in tests]
            return score
        except subprocess.TimeoutExpired:
            score.note = f"the grading tests did not finish within {timeout:g} s"
            score.tests = [TestResult(t, False, score.note) for t in tests]
            return score
    if results["collection_errors"]:
        score.note = CollectionError(results["collection_errors"]).explain().splitlines()[0]
    for test in tests:
        entry = results["tests"].get(test)
        if entry is None:
            score.tests.append(TestResult(test, False, score.note or "did not run"))
        else:
            passed = entry["outcome"] == "passed"
            score.tests.append(TestResult(test, passed, "" if passed else _explain(entry, exercise.id)))
    return score


def junit_xml(score: Score) -> str:
    """JUnit XML with one testcase per grading test, each tagged with its exercise (a property and its class)."""
    e = score.exercise
    suites = ElementTree.Element("testsuites")
    suite = ElementTree.SubElement(suites, "testsuite", name=f"Exercise {e.id} — {e.title}",
                                   tests=str(score.max_points), failures=str(score.max_points - score.points),
                                   errors="0", skipped="0")
    properties = ElementTree.SubElement(suite, "properties")
    ElementTree.SubElement(properties, "property", name="exercise", value=e.id)
    for test in score.tests:
        function = test.name.split("::", 1)[1]
        case = ElementTree.SubElement(suite, "testcase", classname=f"exercise_{e.id.replace('.', '_')}",
                                      name=function, file=GRADING_FILE)
        case_properties = ElementTree.SubElement(case, "properties")
        ElementTree.SubElement(case_properties, "property", name="exercise", value=e.id)
        if not test.passed:
            failure = ElementTree.SubElement(case, "failure", message=test.output.splitlines()[0]
                                             if test.output else "failed")
            failure.text = test.output
    ElementTree.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ElementTree.tostring(suites, encoding="unicode") + "\n"


def gradescope_results(score: Score) -> dict:
    """Gradescope's autograder ``results.json``: one entry per grading test, one point each, tagged."""
    e = score.exercise
    return {
        "score": score.points,
        "max_score": score.max_points,
        "output": score.text(),
        "tests": [{"name": t.name.split("::", 1)[1], "number": e.id, "score": int(t.passed), "max_score": 1,
                   "status": "passed" if t.passed else "failed", "output": t.output, "tags": [f"exercise {e.id}"]}
                  for t in score.tests],
    }


def write_reports(score: Score, junitxml: str | None = None, gradescope: str | None = None) -> None:
    if junitxml:
        Path(junitxml).write_text(junit_xml(score), encoding="utf-8")
    if gradescope:
        Path(gradescope).write_text(json.dumps(gradescope_results(score), indent=1, ensure_ascii=False) + "\n",
                                    encoding="utf-8")
