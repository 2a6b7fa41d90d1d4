"""Grade a submission: ``python -m minitransformer.exercises grade 2.1,2.2 --submission DIR``.

For each exercise, the student's code for it (found by aligning their file with the student edition:
whatever lies between the exercise's header and the code after the stub) is put into the graded
package: the student edition with only the exercise's prerequisites solved (its spec's needs). That package
runs the exercise's cases in a sandbox (sandbox.py: bubblewrap, read-only, no network, limits), and
only plain arrays come back; the grader compares them with the reference's outputs from the teacher's
casebook (casebook.py) in its own process (judge.py). One point per case, public and hidden.

So a submission cannot see or change the tests, the reference or the expected outputs, a patched
comparison in its own process changes nothing, and an unsolved or wrong other exercise costs nothing.
"""
from __future__ import annotations

import difflib
import json
import re
import tempfile
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field
from pathlib import Path

from . import casebook, sandbox
from .judge import judge_case
from .registry import Exercise, ExerciseError, get_exercise, load_exercises


@dataclass
class CaseResult:
    id: str                    # "public-03", "hidden-05"
    kind: str                  # "public" or "hidden"
    name: str                  # what the case is (the public ones: the public test's setting)
    passed: bool
    why: str = ""              # why it failed, in a few lines
    mistake: str | None = None  # the catalogued mistake it matches
    seconds: float | None = None

    @property
    def title(self) -> str:
        return f"{self.id} {self.name}" if self.kind == "public" else self.id


@dataclass
class Score:
    exercise: Exercise
    cases: list[CaseResult] = field(default_factory=list)
    note: str = ""             # a problem that failed every case (code that does not compile, a lost header, a crash)
    timed_out: list[str] = field(default_factory=list)    # the cases stopped from outside at their time limit

    @property
    def points(self) -> int:
        return sum(c.passed for c in self.cases)

    @property
    def max_points(self) -> int:
        return len(self.cases)

    def count(self, kind: str) -> tuple[int, int]:
        chosen = [c for c in self.cases if c.kind == kind]
        return sum(c.passed for c in chosen), len(chosen)

    def text(self) -> str:
        e = self.exercise
        (pp, pn), (hp, hn) = self.count("public"), self.count("hidden")
        lines = [f"Exercise {e.id} — {e.title}: {self.points} of {self.max_points} cases pass "
                 f"(public {pp} of {pn}, hidden {hp} of {hn})"]
        if self.note:
            lines.append("  " + self.note.replace("\n", "\n  "))
        if self.timed_out:
            lines.append(f"  timed out (stopped from outside at the case's time limit): {', '.join(self.timed_out)}")
        shown = set()
        for case in self.cases:
            lines.append(f"  {'✓' if case.passed else '✗'} {case.title}")
            if not case.passed and case.why and not self.note:
                if case.why in shown:
                    lines.append("      (the same as above)")
                else:
                    shown.add(case.why)
                    lines.append("      " + case.why.replace("\n", "\n      "))
        return "\n".join(lines)


@dataclass
class Grade:
    """The scores of an assignment: one per exercise, and their total."""

    scores: list[Score] = field(default_factory=list)

    @property
    def points(self) -> int:
        return sum(s.points for s in self.scores)

    @property
    def max_points(self) -> int:
        return sum(s.max_points for s in self.scores)

    def text(self) -> str:
        parts = [s.text() for s in self.scores]
        if len(self.scores) > 1:
            each = ", ".join(f"{s.exercise.id}: {s.points} of {s.max_points}" for s in self.scores)
            parts.append(f"Total: {self.points} of {self.max_points} ({each})")
        return "\n\n".join(parts)


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
    """``stub_text`` (the edition with only this exercise taken out) with each stub replaced by the student's code."""
    return transplant_spans(stub_text, submitted_text, exercise_id)[0]


def transplant_spans(stub_text: str, submitted_text: str, exercise_id: str) -> tuple[str, list[tuple[int, int]]]:
    """The transplanted text, and the (first, last) lines (1-based) of the student's code in it.

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
    out, cursor, spans = [], 0, []
    for line in stubs:
        before = max((i for i in aligned if i < line), default=None)
        after = min((i for i in aligned if i > line), default=None)
        if before is None or after is None or before < cursor - 1:
            raise ExerciseError("the submitted file differs too much from the student edition to find the "
                                f"code of Exercise {exercise_id}")
        out.extend(stub[cursor:before + 1])
        theirs = submitted[aligned[before] + 1:aligned[after]]
        spans.append((len(out) + 1, len(out) + len(theirs)))
        out.extend(theirs)
        cursor = after
    out.extend(stub[cursor:])
    return "".join(out), spans


def _syntax_problem(text: str, path: str) -> str | None:
    """Compile (never run) the graded file; the SyntaxError in words, with its line, or None."""
    try:
        compile(text, path, "exec")
    except SyntaxError as error:
        line = (error.text or "").strip()
        return (f"your code does not compile: SyntaxError: {error.msg} at {path}:{error.lineno}"
                + (f":  {line}" if line else ""))
    return None


def _crash_note(run: sandbox.Run) -> str:
    """Why a run gave no result at all: the import error from its stderr, or how it ended."""
    lines = [line.strip() for line in run.stderr.splitlines() if line.strip()]
    error = next((line for line in reversed(lines) if re.match(r"^\w+(Error|Exception)\b", line)), "")
    ending = run.ending()
    return "the graded code did not run" + (f": {error[:300]}" if error else "") + (f" ({ending})" if ending else "")


def grade_exercise(root: Path, exercise: Exercise, submission: Path, book: casebook.Casebook, *,
                   unsafe: bool = False, secrets: list[Path] = (), limits: sandbox.Limits | None = None,
                   titles: dict[str, str] | None = None) -> Score:
    """Score the submission's code for one exercise on its casebook's cases, in a sandbox."""
    score = Score(exercise)
    results: dict[str, dict] = {}
    own: dict[str, tuple[int, int]] = {}
    with tempfile.TemporaryDirectory(prefix="mt-grade-") as scratch:
        edition = casebook.graded_package(root, Path(scratch) / "edition", exercise, keep_own=False)
        try:
            for path in exercise.files:
                submitted = submission / path
                if not submitted.exists():
                    raise ExerciseError(f"the submission has no {path}")
                text, spans = transplant_spans((edition / path).read_text(encoding="utf-8"),
                                               submitted.read_text(encoding="utf-8", errors="replace"), exercise.id)
                if spans:
                    own[path] = (min(a for a, _ in spans), max(b for _, b in spans))
                score.note = score.note or _syntax_problem(text, path) or ""
                (edition / path).write_text(text, encoding="utf-8")
        except ExerciseError as error:
            score.note = str(error)
        if not score.note:
            run = sandbox.run_cases(edition / "minitransformer", book.specs, unsafe=unsafe, secrets=list(secrets),
                                    limits=limits)
            results = run.results
            score.timed_out = list(run.timed_out)
            if not run.records and not run.timed_out:     # no case's process wrote a result: the code never ran
                score.note = _crash_note(run)
    for spec in book.specs:
        if score.note:
            score.cases.append(CaseResult(spec["id"], spec["kind"], spec["name"], False, score.note))
            continue
        got = results.get(spec["id"])
        verdict = judge_case(spec, book.expected[spec["id"]], got, exercise.id, book.mistakes_for(spec["id"]), own,
                             titles, hidden=spec["kind"] == "hidden")
        score.cases.append(CaseResult(spec["id"], spec["kind"], spec["name"], verdict.passed, verdict.why,
                                      verdict.mistake, got.get("seconds") if got else None))
    _numerics_gate(score, book.specs, results)
    return score


NUMERICS = ("the large case ran past its time limit: a derived backward takes milliseconds there, numerical "
            "differentiation (one or two forward passes per input element) cannot finish. A backward exercise asks "
            "for the derivation, so this exercise scores 0")


def _numerics_gate(score: Score, specs: list[dict], results: dict[str, dict]) -> None:
    """A backward exercise whose large case (its spec's large) ran out of time scores 0: its gradients came from
    numerical differentiation, not from a derivation (on the small cases the two look alike)."""
    large = [s["id"] for s in specs if s["name"] == "large"]
    errors = [(results.get(i) or {}).get("error") or {} for i in large]
    if score.note or not any(e.get("type") == "CaseTimeout" and not e.get("message", "").startswith("not run")
                             for e in errors):
        return
    score.note = NUMERICS
    for case in score.cases:
        case.passed, case.why = False, NUMERICS


def grade_submission(exercise_ids, submission: str | Path, root: Path, cases_dir: str | Path | None = None, *,
                     unsafe: bool = False, limits: sandbox.Limits | None = None, workers: int = 2) -> Grade:
    """Score the submission's code for each of ``exercise_ids`` (one exercise or an assignment of several)."""
    root = Path(root).resolve()
    ids = [exercise_ids] if isinstance(exercise_ids, str) else list(exercise_ids)
    exercises = [get_exercise(i, root) for i in ids]
    unsolved = [e.id for e in exercises if not e.has_solution]
    if unsolved:
        raise ExerciseError(f"{root} holds no solution of Exercise {', '.join(unsolved)}: grade runs in the "
                            "teacher's edition")
    if not unsafe:
        problem = sandbox.bubblewrap_problem()
        if problem:
            raise sandbox.SandboxUnavailable(
                f"{problem}. grade runs a student's code only inside bubblewrap; to run it with no sandbox at all "
                "(it then sees this machine and your files), pass --unsafe-no-sandbox")
    submission = submission_root(submission)
    cases = casebook.folder(root, cases_dir)
    books = casebook.load(root, cases, exercises, workers=workers)
    titles = {e.id: e.title for e in load_exercises(root)}
    return Grade([grade_exercise(root, e, submission, books[e.id], unsafe=unsafe, secrets=[root, cases],
                                 limits=limits, titles=titles) for e in exercises])


def junit_xml(grade: Grade) -> str:
    """JUnit XML: a test suite per exercise, a test case per case (with its time), each tagged with its exercise."""
    suites = ElementTree.Element("testsuites", tests=str(grade.max_points),
                                 failures=str(grade.max_points - grade.points))
    for score in grade.scores:
        e = score.exercise
        seconds = sum(c.seconds or 0.0 for c in score.cases)
        suite = ElementTree.SubElement(suites, "testsuite", name=f"Exercise {e.id} — {e.title}",
                                       tests=str(score.max_points), failures=str(score.max_points - score.points),
                                       errors="0", skipped="0", time=f"{seconds:.3f}")
        properties = ElementTree.SubElement(suite, "properties")
        ElementTree.SubElement(properties, "property", name="exercise", value=e.id)
        for case in score.cases:
            element = ElementTree.SubElement(suite, "testcase", classname=f"exercise_{e.id.replace('.', '_')}",
                                             name=case.title, time=f"{case.seconds or 0.0:.3f}")
            case_properties = ElementTree.SubElement(element, "properties")
            ElementTree.SubElement(case_properties, "property", name="exercise", value=e.id)
            ElementTree.SubElement(case_properties, "property", name="kind", value=case.kind)
            if not case.passed:
                failure = ElementTree.SubElement(element, "failure", message=case.why.splitlines()[0]
                                                 if case.why else "failed")
                failure.text = case.why
    ElementTree.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ElementTree.tostring(suites, encoding="unicode") + "\n"


def gradescope_results(grade: Grade) -> dict:
    """Gradescope's autograder ``results.json``: one test per case, one point each, numbered 2.2.1, 2.2.2, ..."""
    tests = []
    for score in grade.scores:
        e = score.exercise
        for number, case in enumerate(score.cases, 1):
            tests.append({"name": f"Exercise {e.id}: {case.title}", "number": f"{e.id}.{number}",
                          "score": int(case.passed), "max_score": 1, "status": "passed" if case.passed else "failed",
                          "output": case.why, "tags": [f"exercise {e.id}", case.kind],
                          # a hidden case's test (its output too) shows once the teacher publishes the grades
                          "visibility": "after_published" if case.kind == "hidden" else "visible"})
    return {"score": grade.points, "max_score": grade.max_points, "output": grade.text(), "tests": tests}


def write_reports(grade: Grade, junitxml: str | None = None, gradescope: str | None = None) -> None:
    if junitxml:
        Path(junitxml).write_text(junit_xml(grade), encoding="utf-8")
    if gradescope:
        Path(gradescope).write_text(json.dumps(gradescope_results(grade), indent=1, ensure_ascii=False) + "\n",
                                    encoding="utf-8")
