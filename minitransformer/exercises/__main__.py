"""python -m minitransformer.exercises {list, student, check, grade, cases, nbgrader}: the classroom from the command line."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .edition import write_edition
from .pytest_support import load_map
from .registry import ExerciseError, load_exercises, repository_root


def _root(given: str | None) -> Path:
    root = Path(given).resolve() if given else repository_root()
    if not (root / "minitransformer").is_dir():
        raise SystemExit(f"{root} does not hold the minitransformer package; pass --root")
    return root


def enclosing_repository(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` that holds the package and its tests (a copy of the course)."""
    for folder in (start, *start.parents):
        if (folder / "minitransformer").is_dir() and (folder / "tests").is_dir():
            return folder
    return None


def _graded_root(given: str | None) -> Path:
    """The repository ``check`` grades: --root, or the one the current folder lies in; never another one.

    Grading the folder the command happens to be imported from would grade the teacher's package when it is
    installed and the student stands in notebooks/; so outside a copy of the course, check refuses.
    """
    if given:
        return _root(given)
    here = Path.cwd().resolve()
    root = enclosing_repository(here)
    if root is None:
        raise SystemExit(f"{here} is not inside a copy of the course (no folder above it holds minitransformer/ "
                         "and tests/): cd into your copy, or pass --root FOLDER")
    return root


def _grading_cases(root: Path, grading: dict[str, list[str]]) -> dict[str, int]:
    """Exercise -> how many test cases its grading tests are (parametrized ones counted once per case)."""
    import subprocess

    owner = {function: exercise for exercise, functions in grading.items() for function in functions}
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-m",
                             " or ".join(f"grades_{i.replace('.', '_')}" for i in grading), "tests/exercises/test_exercises.py"],
                            cwd=root, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(root)})
    counts: dict[str, int] = {}
    for line in result.stdout.splitlines():
        exercise = owner.get(line.strip().split("[")[0])
        if exercise:
            counts[exercise] = counts.get(exercise, 0) + 1
    return counts


def command_list(args) -> int:
    from .cases import public_cases
    from .casebook import HIDDEN_PER_EXERCISE
    from .grading import grading_tests, prerequisites

    root = _root(args.root)
    exercises = load_exercises(root)
    exercise_map = load_map(root)
    grading = grading_tests(root)
    needs = prerequisites(exercise_map, grading)
    cases = _grading_cases(root, grading)
    rows = [("id", "title", "chapter", "marker", "grading", "graded", "tests", "needs", "file")]
    for e in exercises:
        count = len(exercise_map.get(e.id, []))
        state = "" if e.has_solution else "  (unsolved here)" if e.unsolved else "  (attempted here)"
        prerequisite = ", ".join(sorted(needs.get(e.id, ()), key=lambda i: tuple(map(int, i.split("."))))) or "—"
        try:
            graded = f"{len(public_cases(e.id))}+{HIDDEN_PER_EXERCISE}"
        except KeyError:
            graded = "?"
        rows.append((e.id, e.title, e.chapter, f"-m {e.marker}", str(cases.get(e.id, "?")), graded,
                     str(count) if count else "?", prerequisite, e.file + state))
    widths = [max(len(row[i]) for row in rows) for i in range(8)]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[8])
    chapters = len({e.chapter for e in exercises})
    print(f"\n{len(exercises)} exercises in {chapters} chapters. grading: the test cases of its grading tests "
          "(pytest -m grades_X tests/exercises/test_exercises.py), what check runs; graded: the cases grade scores, public + "
          "hidden; tests: every test that needs it (-m ex_X); needs: the exercises its grading tests use.\n"
          "A student checks one with `python -m minitransformer.exercises check ID`; a teacher scores one with "
          "`python -m minitransformer.exercises grade ID --submission DIR`.")
    return 0


def command_student(args) -> int:
    root = _root(args.root)
    remove = None
    if args.only:
        known = {e.id for e in load_exercises(root)}
        remove = {part.strip().removeprefix("ex_").replace("_", ".") for part in args.only.split(",") if part.strip()}
        unknown = remove - known
        if unknown:
            raise SystemExit(f"unknown exercises {sorted(unknown)}; the exercises are {sorted(known)}")
    edition = write_edition(root, args.out_dir, remove)
    ids = sorted({i for i, _, _ in edition.replaced if i}, key=lambda i: tuple(map(int, i.split("."))))
    print(f"wrote the student edition to {edition.root}: {edition.files} files, "
          f"{len(edition.replaced)} solution blocks taken out ({len(ids)} exercises: {', '.join(ids)})")
    print(f"students run: cd {edition.root} && python -m minitransformer.exercises check {ids[0] if ids else 'ID'}")
    return 0


def command_check(args) -> int:
    from .grading import CollectionError, check

    root = _graded_root(args.root)
    print(f"grading the code in {root}", flush=True)
    try:
        verdict, text = check(args.exercise, root, workers=args.workers)
    except KeyError as error:
        raise SystemExit(str(error.args[0])) from None
    except CollectionError as error:
        print(error.explain())
        return 1
    print(text)
    return 0 if verdict.solved else 1


def _ids(parts: list[str]) -> list[str]:
    """"2.1,2.2" "ex_2_3" -> ["2.1", "2.2", "2.3"]."""
    return [p.strip().removeprefix("ex_").replace("_", ".") for part in parts for p in part.split(",") if p.strip()]


def command_grade(args) -> int:
    from .sandbox import Limits, SandboxUnavailable
    from .submission import grade_submission, write_reports

    root = _root(args.root)
    limits = Limits(cpu_seconds=args.cpu_seconds, case_seconds=args.case_seconds, wall_seconds=args.wall_seconds,
                    memory_bytes=args.memory_mb * 2 ** 20)
    try:
        grade = grade_submission(_ids(args.exercise), args.submission, root, args.cases,
                                 unsafe=args.unsafe_no_sandbox, limits=limits)
    except SandboxUnavailable as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    write_reports(grade, args.junitxml, args.gradescope)
    print(grade.text())
    return 0 if grade.points == grade.max_points else 1


def command_cases(args) -> int:
    from . import casebook

    root = _root(args.root)
    exercises = load_exercises(root)
    if args.exercise:
        wanted = _ids(args.exercise)
        exercises = [e for e in exercises if e.id in wanted]
    folder = casebook.folder(root, args.cases)
    if args.new_seed:
        casebook.secret_seed(folder, new=True)
    books = casebook.load(root, folder, exercises, hidden=args.hidden, refresh=True)
    counts = ", ".join(f"{i}: {sum(s['kind'] == 'public' for s in b.specs)}+"
                       f"{sum(s['kind'] == 'hidden' for s in b.specs)}" for i, b in books.items())
    print(f"wrote the casebook of {len(books)} exercises to {folder} (public+hidden cases: {counts}); keep it private")
    return 0


def command_nbgrader(args) -> int:
    from .nbgrader import write_course

    root = _root(args.root)
    known = {e.id for e in load_exercises(root)}
    only = set(_ids([args.only])) if args.only else None
    assignments = None
    if args.assignment:
        assignments = {}
        for given in args.assignment:
            name, _, ids = given.partition("=")
            if not ids:
                raise SystemExit(f"--assignment {given!r}: write it as NAME=IDS, e.g. week-2=2.1,2.2,2.3")
            assignments[name.strip()] = _ids([ids])
    unknown = (only or set()) | {i for ids in (assignments or {}).values() for i in ids}
    if unknown - known:
        raise SystemExit(f"unknown exercises {sorted(unknown - known)}; the exercises are {sorted(known)}")
    folders = write_course(root, args.course_dir, only, assignments, args.cases)
    course = Path(args.course_dir).resolve()
    print(f"wrote {len(folders)} nbgrader assignment{'s' * (len(folders) != 1)} to {course / 'source'}: "
          + ", ".join(f.name for f in folders))
    print(f"next: cd {course} && nbgrader generate_assignment {folders[0].name} && "
          f"nbgrader release_assignment {folders[0].name}   (see TEACHING.md)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minitransformer.exercises",
                                     description="Classroom exercises: list them, write the student edition, grade.")
    parser.add_argument("--root", help="the repository (default: the one holding this package)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the exercises with their chapters, markers and number of tests")
    student = commands.add_parser("student", help="write the student edition (solutions replaced by raises)")
    student.add_argument("out_dir", help="a new or empty folder")
    student.add_argument("--only", help="comma-separated exercise ids to take out (default: all)")
    checker = commands.add_parser("check", help="run one exercise's tests (pytest -m ex_X) and explain the result")
    checker.add_argument("exercise", help="an exercise id such as 5.1")
    checker.add_argument("--workers", type=int, default=2, help="pytest-xdist workers for large test sets")
    grader = commands.add_parser("grade", help="score a submission's code for one exercise or an assignment of several "
                                               "on their public and hidden cases, in a sandbox")
    grader.add_argument("exercise", nargs="+", help="exercise ids such as 5.1, or an assignment: 2.1,2.2,2.3")
    grader.add_argument("--submission", required=True, help="the student's repository (or its minitransformer/)")
    grader.add_argument("--cases", help="the casebook folder (default: .hidden-cases/ in this repository)")
    grader.add_argument("--junitxml", help="also write JUnit XML here (each case tagged with its exercise)")
    grader.add_argument("--gradescope", help="also write Gradescope's results.json here")
    grader.add_argument("--unsafe-no-sandbox", action="store_true",
                        help="run the student's code without bubblewrap (it then sees this machine and your files)")
    grader.add_argument("--cpu-seconds", type=int, default=60, help="CPU time of one case's process (default 60)")
    grader.add_argument("--case-seconds", type=float, default=10,
                        help="wall-clock time of one case, killed from outside past it (default 10)")
    grader.add_argument("--wall-seconds", type=float, default=60,
                        help="wall-clock time of one exercise's grading; the cases after it are not run (default 60)")
    grader.add_argument("--memory-mb", type=int, default=3072, help="memory of one case's process (default 3072)")
    cases = commands.add_parser("cases", help="(re)make the teacher's casebook: public and hidden cases with the "
                                              "reference's outputs, and what each known mistake gives")
    cases.add_argument("exercise", nargs="*", help="exercise ids (default: all)")
    cases.add_argument("--cases", help="the casebook folder (default: .hidden-cases/ in this repository)")
    cases.add_argument("--hidden", type=int, default=8, help="hidden cases per exercise (default 8)")
    cases.add_argument("--new-seed", action="store_true", help="draw new hidden cases (a new secret seed)")
    course = commands.add_parser("nbgrader", help="write an nbgrader course: source/ex_X/ for each exercise, or "
                                                 "assignments of several")
    course.add_argument("course_dir", help="the nbgrader course folder (source/ must be new or empty)")
    course.add_argument("--only", help="comma-separated exercise ids (default: all)")
    course.add_argument("--assignment", action="append", help="NAME=IDS: one assignment of several exercises, "
                                                              "e.g. week-2=2.1,2.2,2.3 (repeat for more)")
    course.add_argument("--cases", help="the casebook folder (default: .hidden-cases/ in this repository)")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except BrokenPipeError:               # `list | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _run(args) -> int:
    try:
        return {"list": command_list, "student": command_student, "check": command_check, "grade": command_grade,
                "cases": command_cases, "nbgrader": command_nbgrader}[args.command](args)
    except (ExerciseError, FileExistsError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyError as error:
        print(f"error: {error.args[0]}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
