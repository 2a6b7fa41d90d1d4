"""The nbgrader route, proven with nbgrader itself (TEACHING.md's recipe): the generated course, released,
handed in and autograded with its kernels in bubblewrap and its judge in nbgrader's own process.

Correct, wrong, blank and syntax-error notebooks score full, partial, 0 and 0; a week's assignment of
several exercises scores each notebook and their total; every exercise's reference scores full marks;
and the cheats of tests/cheats.py, with the nbgrader route's own (the helper redefined in the solution
cell, source/ read by path, the expected outputs in grading/ read by path), score 0 and change no file.
A kernel has grade's protections: no graph built in a graded backward, no fork (a submission that is right
only where it can fork scores 0), and a case cell that hangs, whatever it catches, is killed from outside.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cheats import CHEATS, GRADE_CHEATS, GRADE_TARGETS, SPECIFIC, TARGETS, cheat_code
from minitransformer.exercises import sandbox
from submissions import REQUIRE_SANDBOX
from minitransformer.exercises.registry import get_exercise, load_exercises
from submissions import ROOT, fingerprint_of_files

# the catalogue quotes the solutions: the teacher's edition only (a student edition skips this file)
mistakes = pytest.importorskip("minitransformer.exercises.mistakes", reason="a student edition: no catalogue")
CATALOGUE, mutate = mistakes.CATALOGUE, mistakes.mutate

pytestmark = [pytest.mark.later,
              pytest.mark.skipif(not any(e.has_solution for e in load_exercises(ROOT)),
                                 reason="a student edition: there are no solutions to grade with"),
              pytest.mark.skipif(sandbox.bubblewrap_problem() is not None and not REQUIRE_SANDBOX,
                                 reason=f"no sandbox here: {sandbox.bubblewrap_problem()}")]
STUB = "# YOUR CODE HERE\n{indent}raise NotImplementedError()"


@pytest.fixture(scope="module")
def cases_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("casebook")


@pytest.fixture
def nbgrader_path(monkeypatch):
    """nbgrader installed, and the scripts next to this Python (alembic, which nbgrader's gradebook runs) on PATH."""
    pytest.importorskip("nbgrader", reason="nbgrader is not installed (.ci/run installs it before the later step)")
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))


def _course(tmp_path, cases_dir, assignments: dict[str, list[str]], limits: str = "") -> Path:
    from minitransformer.exercises.nbgrader import write_course

    course = tmp_path / "course"
    write_course(ROOT, course, assignments=assignments, cases_dir=cases_dir)
    if limits:
        with open(course / "nbgrader_config.py", "a", encoding="utf-8") as config:
            config.write(limits)
    for name in assignments:
        _nbgrader(course, "generate_assignment", name, "--force")
    return course


def _nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": ""}       # nbgrader's own process needs no minitransformer
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, capture_output=True, text=True,
                            env=environment, timeout=1800)    # a hang that no limit stops fails, not blocks, CI
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def _solutions(course: Path, assignment: str, notebook: str) -> list[str]:
    data = json.loads((course / "source" / assignment / f"{notebook}.ipynb").read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in data["cells"] if c["metadata"].get("nbgrader", {}).get("solution")]


def _released(course: Path, assignment: str, notebook: str) -> list[str]:
    data = json.loads((course / "release" / assignment / f"{notebook}.ipynb").read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in data["cells"] if c["metadata"].get("nbgrader", {}).get("solution")]


def _answer(released: str, body: str | None) -> str:
    """The released solution cell with the stub replaced by ``body`` (indented like the stub)."""
    if body is None:
        return released
    found = re.search(r"^(?P<indent>[ \t]*)# YOUR CODE HERE\n[ \t]*raise NotImplementedError\(\)", released, re.M)
    indented = "\n".join(found["indent"] + line if line else line for line in body.strip("\n").splitlines())
    return released[:found.start()] + indented + released[found.end():]


def _hand_in(course: Path, assignment: str, notebook: str, student: str, sources: list[str] | None) -> None:
    folder = course / "submitted" / student / assignment
    if not folder.exists():
        shutil.copytree(course / "release" / assignment, folder)
    path = folder / f"{notebook}.ipynb"
    data = json.loads(path.read_text(encoding="utf-8"))
    cells = [c for c in data["cells"] if c["metadata"].get("nbgrader", {}).get("solution")]
    for cell, source in zip(cells, sources or []):
        cell["source"] = source
    path.write_text(json.dumps(data), encoding="utf-8")


def _scores(course: Path, assignment: str, students) -> dict[str, dict[str, tuple[float, float]]]:
    """student -> {notebook: (score, max), "total": (score, max)}."""
    from nbgrader.api import Gradebook

    found = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student in students:
            submission = gradebook.find_submission(assignment, student)
            found[student] = {n.name: (n.score, n.max_score) for n in submission.notebooks}
            found[student]["total"] = (submission.score, submission.max_score)
    return found


def test_nbgrader_scores_honest_notebooks_and_a_weeks_assignment(tmp_path, cases_dir, nbgrader_path):
    course = _course(tmp_path, cases_dir, {"ex_10_1": ["10.1"], "week-2": ["2.1", "2.2"]})
    [solution] = _solutions(course, "ex_10_1", "ex_10_1")
    [released] = _released(course, "ex_10_1", "ex_10_1")
    body = "return self.factor * self.d_model ** -0.5 * min(step ** -0.5, step * self.warmup ** -1.5)"
    assert body in solution and body not in released and "BEGIN HIDDEN TESTS" not in \
        (course / "release/ex_10_1/ex_10_1.ipynb").read_text(encoding="utf-8")
    submissions = {"correct": [solution], "wrong": [_answer(released, body.replace("self.factor * ", ""))],
                   "blank": None, "syntax-error": [_answer(released, "return self.factor * * 2")]}
    for student, sources in submissions.items():
        _hand_in(course, "ex_10_1", "ex_10_1", student, sources)
    _nbgrader(course, "autograde", "ex_10_1")
    scores = {s: total["total"] for s, total in _scores(course, "ex_10_1", submissions).items()}
    full = scores["correct"][1]
    assert scores["correct"] == (full, full) and 0 < scores["wrong"][0] < full, scores
    assert scores["blank"][0] == scores["syntax-error"][0] == 0, scores
    # a week's work: 2.2 needs 2.1, which is the student's own here (installed from ex_2_1.ipynb)
    assert "def unbroadcast" not in (course / "release/week-2/minitransformer/ops/broadcasting.py").read_text() \
        or "NotImplementedError" in (course / "release/week-2/minitransformer/ops/broadcasting.py").read_text()
    for notebook in ("ex_2_1", "ex_2_2"):
        _hand_in(course, "week-2", notebook, "both", _solutions(course, "week-2", notebook))
    _hand_in(course, "week-2", "ex_2_2", "only-2.2", _solutions(course, "week-2", "ex_2_2"))
    _nbgrader(course, "autograde", "week-2")
    week = _scores(course, "week-2", ["both", "only-2.2"])
    assert all(score == maximum > 0 for score, maximum in week["both"].values()), week
    assert week["only-2.2"]["ex_2_1"][0] == 0 and 0 < week["only-2.2"]["ex_2_2"][0], week
    assert week["both"]["total"][1] == week["both"]["ex_2_1"][1] + week["both"]["ex_2_2"][1]


def test_nbgrader_gives_every_exercise_full_marks_for_the_teachers_solution(tmp_path, cases_dir, nbgrader_path):
    exercises = load_exercises(ROOT)
    course = _course(tmp_path, cases_dir, {f"ex_{e.id.replace('.', '_')}": [e.id] for e in exercises})
    for exercise in exercises:
        name = f"ex_{exercise.id.replace('.', '_')}"
        _hand_in(course, name, name, "teacher", _solutions(course, name, name))
    _nbgrader(course, "autograde", "ex_*")
    for exercise in exercises:
        name = f"ex_{exercise.id.replace('.', '_')}"
        score, maximum = _scores(course, name, ["teacher"])["teacher"]["total"]
        assert score == maximum > 0, f"{name}: {score} of {maximum}"


NBGRADER_CHEATS = {     # the route's own: (a body for the function, lines after the function in the same cell)
    "redefines the helper in the solution cell": (None, """
        import minitransformer.exercises.nbgrader as helpers
        helpers.show_case = lambda *args, **kwargs: None
        show_case = install = lambda *args, **kwargs: None
    """),
    "reads source/ by path": ("""
        import glob, json
        notebook = json.load(open(glob.glob({course!r} + "/source/*/*.ipynb")[0]))
        {garbage}
    """, ""),
    "reads grading/ by path": ("""
        expected = open({course!r} + "/grading/" + {exercise!r} + "/expected.jsonl").read()
        {garbage}
    """, ""),
}


@pytest.mark.parametrize("exercise_id", sorted(TARGETS))
def test_cheats_score_zero_on_the_sandboxed_nbgrader_recipe(exercise_id, tmp_path, cases_dir, nbgrader_path):
    import textwrap

    name = f"ex_{exercise_id.replace('.', '_')}"
    course = _course(tmp_path, cases_dir, {name: [exercise_id]},
                     limits="c.Execute.timeout = 10\nc.SandboxedExecute.case_seconds = 5\n"
                            "c.SandboxedKernelManager.cpu_seconds = 20\n")
    target, sentinel = TARGETS[exercise_id], tmp_path / "written-by-a-submission"
    released = _released(course, name, name)
    exercise = get_exercise(exercise_id, ROOT)
    texts = {path: (ROOT / path).read_text(encoding="utf-8") for path in exercise.files}
    wrong_text = mutate(texts, exercise_id, CATALOGUE[exercise_id][0])
    from submissions import solution_bodies

    students = {"correct": _solutions(course, name, name),
                "wrong": [_answer(r, b) for r, b in zip(released, solution_bodies(exercise_id, wrong_text))]}
    for cheat in [*CHEATS, *GRADE_CHEATS]:
        body = cheat_code(cheat, target, ROOT, cases_dir, sentinel)
        students[cheat] = [_answer(r, body) for r in released]
    for cheat, (body, after) in NBGRADER_CHEATS.items():
        filled = {"course": str(course), "exercise": exercise_id, "garbage": target.garbage}
        code = textwrap.dedent(body).format(**filled) if body else target.garbage
        students[cheat] = [_answer(r, code) + textwrap.dedent(after) for r in released]
    for student, sources in students.items():
        _hand_in(course, name, name, re.sub(r"[^a-z0-9]+", "-", student), sources)
    before = fingerprint_of_files(ROOT, cases_dir, course / "source", course / "grading")
    _nbgrader(course, "autograde", name)
    assert fingerprint_of_files(ROOT, cases_dir, course / "source", course / "grading") == before
    assert not sentinel.exists()
    scores = {s: v["total"] for s, v in _scores(course, name, [re.sub(r"[^a-z0-9]+", "-", s) for s in students]).items()}
    full = scores["correct"][1]
    assert scores.pop("correct") == (full, full) and 0 < scores.pop("wrong")[0] < full, scores
    assert all(score == 0 for score, _ in scores.values()), scores


def _autograded(course: Path, student: str, assignment: str, notebook: str) -> dict:
    return json.loads((course / "autograded" / student / assignment / f"{notebook}.ipynb").read_text(encoding="utf-8"))


def test_a_kernel_refuses_autograd_in_a_backward_and_forks_and_is_killed_at_a_case_cells_limit(tmp_path, cases_dir,
                                                                                                nbgrader_path):
    import textwrap

    from submissions import solution_bodies

    name = "ex_5_1"
    course = _course(tmp_path, cases_dir, {name: ["5.1"]}, limits="c.SandboxedExecute.case_seconds = 5\n")
    [released] = _released(course, name, name)
    [solution] = solution_bodies("5.1")
    forks = "import os\npid = os.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)\n" + solution
    hang = cheat_code("ignores the alarm and sleeps", GRADE_TARGETS["5.1"], ROOT, cases_dir, tmp_path / "unused")
    students = {"correct": _solutions(course, name, name),
                "autograd": [_answer(released, textwrap.dedent(SPECIFIC["calls the engine's autograd", "5.1"]))],
                "forks-then-solves": [_answer(released, forks)],       # right, where a fork is allowed
                "hangs": [_answer(released, hang)]}
    for student, sources in students.items():
        _hand_in(course, name, name, student, sources)
    _nbgrader(course, "autograde", name)
    scores = {s: v["total"] for s, v in _scores(course, name, students).items()}
    full = scores["correct"][1]
    assert scores.pop("correct") == (full, full) and all(score == 0 for score, _ in scores.values()), scores

    def text(student: str) -> str:
        return json.dumps(_autograded(course, student, name, name), ensure_ascii=False)

    assert "your backward built a graph" in text("autograd")
    assert "PermissionError" in text("forks-then-solves")           # fork refused by the kernel's seccomp filter
    cases = [c for c in _autograded(course, "hangs", name, name)["cells"]
             if c["metadata"].get("nbgrader", {}).get("grade")]
    assert len(cases) == full and sum(c.get("execution_count") is not None for c in cases) <= 1, \
        "the notebook went on after a case cell that hangs: the kernel was not killed at its limit"
