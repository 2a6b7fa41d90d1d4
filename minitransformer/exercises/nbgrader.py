"""An nbgrader course, one assignment per exercise: ``python -m minitransformer.exercises nbgrader COURSE_DIR``.

For Exercise X the generator writes ``COURSE_DIR/source/ex_X/`` holding

* ``ex_X.ipynb``: a setup cell (locked) that imports the package shipped with
  the assignment; the function that holds the exercise, dedented, as the
  solution cell (nbgrader's ``### BEGIN SOLUTION`` / ``### END SOLUTION`` are
  the markers the package uses already); a locked cell that installs the
  student's function into the package (``install`` below); and one autograded
  cell per grading test case (one point each), run in-process by pytest;
* ``minitransformer/``: the package with Exercise X and every exercise that is
  not a prerequisite of X taken out (so a submission whose cell does not even
  compile is graded on the stub, never on the teacher's solution, and the
  assignment gives away only the prerequisites' solutions);
* ``tests/`` and ``pytest.ini``: the grading tests; nbgrader's autograde
  copies these files from ``source/`` over whatever the student submitted.

Then ``nbgrader generate_assignment ex_X`` and ``nbgrader autograde ex_X``
work as usual (tests/test_classroom.py runs both on generated submissions).
"""
from __future__ import annotations

import ast
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from .edition import write_edition
from .registry import Exercise, ExerciseError, load_exercises

GRADING_FILE = "tests/test_exercises.py"
CONFIG = '''\
# nbgrader configuration written by python -m minitransformer.exercises nbgrader
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "minitransformer"
c.Execute.timeout = 600            # a gradient check of a slow solution may take a while
'''
PYTEST_INI = "[pytest]\naddopts = -p no:cacheprovider\n"


def assignment_name(exercise_id: str) -> str:
    return "ex_" + exercise_id.replace(".", "_")


# -- what runs inside the notebooks ------------------------------------------------------------------------------
def install(namespace: dict, targets: dict[str, str]) -> None:
    """Make the package run the student's functions: ``targets`` maps a name in ``namespace`` to "module:Qual.name".

    The function's code object is replaced in place, so every module that imported the function
    (``from .broadcasting import unbroadcast``) runs the student's code too, with the module's globals.
    """
    for name, target in targets.items():
        student = namespace.get(name)
        if not callable(student):
            raise NameError(f"{name} is not defined: run the cell with your {name} first (it must define it "
                            "without errors)")
        module_name, qualname = target.split(":")
        owner = importlib.import_module(module_name)
        *path, attribute = qualname.split(".")
        for part in path:
            owner = getattr(owner, part)
        function = vars(owner)[attribute] if isinstance(owner, type) else getattr(owner, attribute)
        function = getattr(function, "__func__", function)      # a staticmethod or classmethod
        function.__code__ = student.__code__
        print(f"installed your {name} as {module_name}.{qualname}")


def use_module_names(namespace: dict, modules: list[str]) -> None:
    """Give the notebook the names of the modules its functions come from (``Tensor``, ``EXTRA_LENGTH``, ...),
    which a ``def`` evaluates in its annotations and default values."""
    for module_name in modules:
        namespace.update({k: v for k, v in vars(importlib.import_module(module_name)).items()
                          if not k.startswith("__")})


def run_test(test_id: str) -> None:
    """Run one grading test in this process (where the student's code is installed); fail the cell if it fails."""
    import pytest

    code = pytest.main(["-q", "--no-header", "-p", "no:cacheprovider", test_id])
    assert code == 0, f"{test_id} did not pass"


# -- writing the course ----------------------------------------------------------------------------------------
def _enclosing_functions(root: Path, exercise: Exercise) -> list[tuple[str, str, str]]:
    """(module:qualname, name, dedented source) of each function that holds a block of ``exercise``."""
    found = []
    for block in exercise.blocks:
        text = (root / block.path).read_text(encoding="utf-8")
        tree = ast.parse(text)
        chain: list = []

        def visit(node, parents):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.ClassDef)) and \
                        child.lineno < block.begin <= child.end_lineno:
                    chain[:] = [*parents, child]
                    visit(child, [*parents, child])

        visit(tree, [])
        functions = [n for n in chain if isinstance(n, ast.FunctionDef)]
        if not functions or len(functions) > 1 or not all(isinstance(n, ast.ClassDef) for n in chain[:-1]):
            raise ExerciseError(f"{block.path}:{block.begin}: Exercise {exercise.id}'s block is not in a plain "
                                "function or method, which an nbgrader cell could replace")
        function = functions[0]
        first = min([function.lineno, *(d.lineno for d in function.decorator_list)])
        last = max([function.end_lineno, *(b.end for b in exercise.blocks               # a closing marker
                                           if b.path == block.path and function.lineno < b.begin <= function.end_lineno)])
        lines = text.splitlines(keepends=True)[first - 1:last]
        module = block.path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        qualname = ".".join(n.name for n in chain)
        source = textwrap.dedent("".join(lines))
        source = "\n".join(line for line in source.splitlines() if not line.startswith("@"))  # staticmethod etc.
        entry = (f"{module}:{qualname}", function.name, source)
        if entry not in found:
            found.append(entry)
    names = [name for _, name, _ in found]
    if len(set(names)) != len(names):
        raise ExerciseError(f"Exercise {exercise.id}: two of its functions share a name ({names})")
    return found


def _grading_cases(edition: Path, exercise: Exercise) -> list[str]:
    """The grading test cases of ``exercise`` as pytest ids, collected in ``edition``."""
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                             "-m", exercise.grading_marker, GRADING_FILE], cwd=edition, capture_output=True,
                            text=True, env={**os.environ, "PYTHONPATH": str(edition)})
    cases = [line.strip() for line in result.stdout.splitlines() if line.startswith(GRADING_FILE + "::")]
    if not cases:
        raise ExerciseError(f"Exercise {exercise.id}: no grading tests collected:\n{result.stdout[-2000:]}"
                            f"{result.stderr[-2000:]}")
    return cases


def _cell(kind: str, source: str, cell_id: str, **nbgrader) -> dict:
    metadata = {"nbgrader": {"grade": False, "locked": False, "solution": False, "task": False, "schema_version": 3,
                             "grade_id": cell_id, **nbgrader}} if nbgrader else {}
    cell = {"cell_type": kind, "id": cell_id, "metadata": metadata, "source": source}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def assignment_notebook(exercise: Exercise, functions: list[tuple[str, str, str]], cases: list[str]) -> dict:
    modules = sorted({target.split(":")[0] for target, _, _ in functions})
    setup = ("# Setup (locked): the package shipped with this assignment, whatever else is installed\n"
             "import os, sys\n"
             "os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')\n"
             "sys.path.insert(0, os.getcwd())\n"
             "import minitransformer\n"
             "from minitransformer.exercises.nbgrader import install, run_test, use_module_names\n"
             f"use_module_names(globals(), {modules!r})   # the names the functions below use\n"
             "print('minitransformer from', os.path.dirname(minitransformer.__file__))")
    names = ", ".join(f"`{name}`" for _, name, _ in functions)
    intro = (f"# Exercise {exercise.id} — {exercise.title}\n\n"
             f"Read `{exercise.chapter}` first. Replace `raise NotImplementedError()` in {names} below with your "
             "code; the rest of the function is given. Then run every cell: the last cells run the grading "
             f"tests (one point each) against your code, installed into `{exercise.file}`.")
    cells = [_cell("markdown", intro, "intro"), _cell("code", setup, "setup", locked=True)]
    for number, (_, name, source) in enumerate(functions):
        cells.append(_cell("code", source, f"solution-{number}" if len(functions) > 1 else "solution",
                           solution=True))
    targets = "{" + ", ".join(f"{name!r}: {target!r}" for target, name, _ in functions) + "}"
    cells.append(_cell("code", f"# Locked: your function(s) replace the package's\ninstall(globals(), {targets})",
                       "install", locked=True))
    for number, case in enumerate(cases):
        name = re.sub(r"[^A-Za-z0-9_-]+", "-", case.split("::", 1)[1]).strip("-")[:48]
        cells.append(_cell("code", f"run_test({case!r})", f"test-{number:02d}-{name}", grade=True, locked=True,
                           points=1))
    return {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                        "name": "python3"},
                                         "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def prerequisites_of(root: Path) -> dict[str, set[str]]:
    from .grading import grading_tests, prerequisites
    from .pytest_support import load_map

    return prerequisites(load_map(root), grading_tests(root))


def write_course(root: Path, course_dir: str | Path, only: set[str] | None = None) -> list[Path]:
    """Write ``course_dir`` (nbgrader_config.py and source/ex_X/ for each exercise); return the assignment folders."""
    root, course = Path(root).resolve(), Path(course_dir).resolve()
    exercises = [e for e in load_exercises(root) if only is None or e.id in only]
    if not exercises:
        raise ExerciseError(f"no exercises to write (asked for {sorted(only or [])})")
    missing = [e.id for e in exercises if not e.has_solution]
    if missing:
        raise ExerciseError(f"{root} holds no solution of {missing}: the course is written from the teacher's edition")
    if (course / "source").exists() and any((course / "source").iterdir()):
        raise FileExistsError(f"{course / 'source'} is not empty; give a new course folder")
    course.mkdir(parents=True, exist_ok=True)
    if not (course / "nbgrader_config.py").exists():
        (course / "nbgrader_config.py").write_text(CONFIG, encoding="utf-8")
    every = {e.id for e in load_exercises(root)}
    needs = prerequisites_of(root)
    written = []
    for exercise in exercises:
        folder = course / "source" / assignment_name(exercise.id)
        with tempfile.TemporaryDirectory(prefix="mt-nbgrader-") as scratch:
            edition = Path(scratch) / "edition"
            write_edition(root, edition, every - needs.get(exercise.id, set()))
            cases = _grading_cases(edition, exercise)
            folder.mkdir(parents=True)
            shutil.copytree(edition / "minitransformer", folder / "minitransformer",
                            ignore=shutil.ignore_patterns("__pycache__"))
            (folder / "tests").mkdir()
            for name in ("conftest.py", "test_exercises.py"):
                shutil.copy2(edition / "tests" / name, folder / "tests" / name)
        (folder / "pytest.ini").write_text(PYTEST_INI, encoding="utf-8")
        notebook = assignment_notebook(exercise, _enclosing_functions(root, exercise), cases)
        (folder / f"{assignment_name(exercise.id)}.ipynb").write_text(
            json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(folder)
    return written
