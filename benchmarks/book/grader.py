"""The grader, measured: the time ``grade`` takes per exercise in its sandbox, and the cheat table.

    python benchmarks/book/grader.py                     # every exercise, and the cheats on both routes
    python benchmarks/book/grader.py --skip-nbgrader     # the nbgrader route needs nbgrader (pip install -e ".[classroom]")

For every exercise it grades the reference solution, handed in as a student's repository, with
``grade_submission`` (the graded package written, the student's code put in, the cases run in bubblewrap,
the outputs judged), timing each exercise once the casebook exists (the casebook's own making is timed
apart). Then it hands in each cheat of tests/cheats.py for one exercise each of chapters 2, 12 and 13 and
records its score on ``grade`` and on the nbgrader course's sandboxed recipe. Everything goes to
benchmarks/book/results/grader.json, which TEACHING.md quotes.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results" / "grader.json"
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from cheats import CHEATS, TARGETS, cheat_code  # noqa: E402
from submissions import make_submission, solution_bodies  # noqa: E402

from minitransformer.exercises import casebook, sandbox  # noqa: E402
from minitransformer.exercises.registry import load_exercises  # noqa: E402
from minitransformer.exercises.submission import grade_submission  # noqa: E402


def grade_times(scratch: Path, cases: Path) -> dict:
    exercises = load_exercises(ROOT)
    started = time.monotonic()
    casebook.load(ROOT, cases, exercises, workers=2)
    made = time.monotonic() - started
    seconds, points = {}, {}
    for exercise in exercises:
        submission = make_submission(scratch / f"correct-{exercise.id}", exercise.id, solution_bodies(exercise.id))
        started = time.monotonic()
        grade = grade_submission(exercise.id, submission, ROOT, cases)
        seconds[exercise.id] = round(time.monotonic() - started, 2)
        points[exercise.id] = [grade.points, grade.max_points]
    values = list(seconds.values())
    return {"casebook_seconds": round(made, 1), "per_exercise": seconds, "reference_points": points,
            "median": round(statistics.median(values), 2), "max": max(values), "total": round(sum(values), 1)}


def cheats_on_grade(scratch: Path, cases: Path) -> dict:
    limits = sandbox.Limits(cpu_seconds=15, case_seconds=3, wall_seconds=60, memory_bytes=2 * 2 ** 30)
    table = {}
    for name in CHEATS:
        for exercise_id, target in TARGETS.items():
            code = cheat_code(name, target, ROOT, cases, scratch / "written-by-a-submission")
            folder = scratch / f"cheat-{re.sub(r'[^a-z0-9]+', '-', name)}-{exercise_id}"
            grade = grade_submission(exercise_id, make_submission(folder, exercise_id, code), ROOT, cases,
                                     limits=limits)
            table.setdefault(name, {})[exercise_id] = [grade.points, grade.max_points]
    return table


def cheats_on_nbgrader(scratch: Path, cases: Path) -> dict:
    sys.path.insert(0, str(ROOT / "tests" / "exercises"))    # the nbgrader route's test module
    import test_nbgrader as route

    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    table = {}
    for exercise_id, target in TARGETS.items():
        name = f"ex_{exercise_id.replace('.', '_')}"
        course = route._course(scratch / f"nbgrader-{exercise_id}", cases, {name: [exercise_id]},
                               limits="c.Execute.timeout = 10\nc.SandboxedKernelManager.cpu_seconds = 20\n")
        released = route._released(course, name, name)
        students = {}
        for cheat in CHEATS:
            body = cheat_code(cheat, target, ROOT, cases, scratch / "written-by-a-submission")
            students[cheat] = [route._answer(r, body) for r in released]
        for cheat, (body, after) in route.NBGRADER_CHEATS.items():
            import textwrap

            filled = {"course": str(course), "exercise": exercise_id, "garbage": target.garbage}
            code = textwrap.dedent(body).format(**filled) if body else target.garbage
            students[cheat] = [route._answer(r, code) + textwrap.dedent(after) for r in released]
        ids = {cheat: re.sub(r"[^a-z0-9]+", "-", cheat) for cheat in students}
        for cheat, sources in students.items():
            route._hand_in(course, name, name, ids[cheat], sources)
        subprocess.run([sys.executable, "-m", "nbgrader", "autograde", name], cwd=course, capture_output=True,
                       env={**os.environ, "PYTHONPATH": ""})
        scores = route._scores(course, name, list(ids.values()))
        for cheat, student in ids.items():
            table.setdefault(cheat, {})[exercise_id] = list(scores[student]["total"])
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-nbgrader", action="store_true", help="only the grade route")
    args = parser.parse_args()
    problem = sandbox.bubblewrap_problem()
    if problem:
        raise SystemExit(f"the grader's sandbox cannot run here: {problem}")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="mt-bench-grader-") as scratch:
        scratch, cases = Path(scratch), Path(scratch) / "casebook"
        results = {"source": "python benchmarks/book/grader.py",
                   "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                            text=True).stdout.strip(),
                   "cpus": os.cpu_count(), "python": platform.python_version(),
                   "bubblewrap": subprocess.run(["bwrap", "--version"], capture_output=True, text=True).stdout.strip(),
                   "load_before": [round(x, 2) for x in load_before]}
        results["grade_seconds"] = grade_times(scratch, cases)
        results["cheats"] = {"grade": cheats_on_grade(scratch, cases)}
        if not args.skip_nbgrader:
            results["cheats"]["nbgrader"] = cheats_on_nbgrader(scratch, cases)
        results["load_after"] = [round(x, 2) for x in os.getloadavg()]
    RESULTS.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(results["grade_seconds"], indent=1))
    for route, table in results["cheats"].items():
        for cheat, scores in table.items():
            print(f"{route:9} {cheat:55} " + "  ".join(f"{e}: {p}/{m}" for e, (p, m) in scores.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
