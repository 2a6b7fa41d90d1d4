"""An nbgrader course: ``python -m minitransformer.exercises nbgrader COURSE_DIR [--only IDS] [--assignment NAME=IDS]``.

Each assignment (one exercise, ``ex_X``, or a week's work of several, ``--assignment week-2=2.1,2.2``)
is written to ``COURSE_DIR/source/NAME/``:

* one notebook per exercise, ``ex_X.ipynb``: a locked setup cell that imports the package shipped with
  the assignment; the function that holds the exercise, dedented, as the solution cell (nbgrader's
  ``### BEGIN SOLUTION`` / ``### END SOLUTION`` are the markers the package uses already); a locked
  cell that installs the student's function into the package (``install`` below); and one graded cell
  per case, one point each: the public cases in the open, the hidden ones between nbgrader's
  ``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS`` (gone from the released notebook, put back
  when it is graded). A case cell only runs the case and shows its outputs as plain data;
* ``minitransformer/``: the package with every exercise taken out except the prerequisites of the
  assignment's exercises that are not in it (cases.NEEDS); a prerequisite that is in the assignment
  is the student's own, installed from its notebook;
* ``public_cases.jsonl``: the right outputs of the public cases, so that a student sees ✓ or why not.

Outside ``source/``, where no kernel looks: ``grading/X/`` (the teacher's casebook of each exercise:
the expected outputs of every case), ``mt_grading/`` (the judge and the sandbox, course_grading.py)
and ``nbgrader_config.py``, which runs every kernel of ``nbgrader autograde`` in bubblewrap (no network, no
other process, killed from outside at a case cell's or the notebook's time limit) and judges each case cell
in nbgrader's own process (TEACHING.md).
"""
from __future__ import annotations

import ast
import importlib
import json
import re
import shutil
import tempfile
import textwrap
from pathlib import Path

from .edition import write_edition
from .registry import Exercise, ExerciseError, load_exercises, parse_python

CONFIG = '''\
# nbgrader configuration written by python -m minitransformer.exercises nbgrader
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from mt_grading import AUTOGRADE  # noqa: E402  (the course's grading: kernels in bubblewrap, a judge outside them)

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = "minitransformer"
c.Execute.timeout = 60              # seconds per cell (a kernel also stops at 300 s of CPU time)
c.SandboxedExecute.case_seconds = 10    # seconds per case cell; past it (or the notebook's wall) the kernel is killed
c.SandboxedExecute.wall_seconds = 120   # seconds per notebook, the kernel's start included
c.Autograde.autograde_preprocessors = AUTOGRADE
c.JudgeCases.grading_dir = os.path.join(HERE, "grading")
# Only where bubblewrap cannot run: kernels without a sandbox (they then see this machine and your files)
# c.SandboxedKernelManager.unsafe = True
'''
MIME = "application/vnd.minitransformer.case+json"
PUBLIC = "public_cases.jsonl"


def assignment_name(exercise_id: str) -> str:
    return "ex_" + exercise_id.replace(".", "_")


# -- what runs inside the notebooks ------------------------------------------------------------------------------
def install(namespace: dict, targets: dict[str, str]) -> None:
    """Make the package run the student's functions: ``targets`` maps a name in ``namespace`` to "module:Qual.name".

    The function's code object is replaced in place, so every module that imported the function
    (``from .broadcasting import unbroadcast``) runs the student's code too, with the module's globals.
    """
    from .trial import resolve

    for name, target in targets.items():
        student = namespace.get(name)
        module_name, qualname = target.split(":")
        function = resolve(importlib.import_module(module_name), qualname)
        if not callable(student) or getattr(student, "__module__", None) == module_name:
            raise NameError(f"your cell did not define {name} (did it stop with an error, a SyntaxError?): run the "
                            f"cell with your {name} first; the package keeps its own {name} until then")
        function.__code__ = student.__code__
        print(f"installed your {name} as {module_name}.{qualname}")


def install_notebook(path: str, targets: dict[str, str], modules: list[str]) -> None:
    """Install the student's functions from another notebook of the assignment (an exercise this one needs)."""
    notebook = json.loads(Path(path).read_text(encoding="utf-8"))
    namespace: dict = {}
    use_module_names(namespace, modules)
    for cell in notebook["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("solution") and cell["cell_type"] == "code":
            source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            exec(compile(source, path, "exec"), namespace)
    install(namespace, targets)


def use_module_names(namespace: dict, modules: list[str]) -> None:
    """Give the notebook the names of the modules its functions come from (``Tensor``, ``EXTRA_LENGTH``, ...),
    which a ``def`` evaluates in its annotations and default values."""
    for module_name in modules:
        namespace.update({k: v for k, v in vars(importlib.import_module(module_name)).items()
                          if not k.startswith("__")})


def show_case(spec_json: str) -> None:
    """Run one case on the installed code and show its outputs as plain data (what the grader judges).

    For a public case, also compare them with the right outputs shipped with the assignment: ✓, or an
    AssertionError that says why.
    """
    import time

    from IPython.display import display

    from .cases import describe_error, record, run_case
    from .judge import decode_result, judge_case

    spec = json.loads(spec_json)
    started = time.process_time()
    try:
        line = record(spec["id"], run_case(spec), None, time.process_time() - started)
    except Exception as error:
        line = record(spec["id"], None, describe_error(error), time.process_time() - started)
    data = json.loads(line)
    expected = _public_expected(spec["exercise"]).get(spec["id"])
    verdict = None
    if expected is not None:
        verdict = judge_case(spec, expected, decode_result(data)[1], spec["exercise"],
                             own={"<your cell>": (1, 10 ** 9)})
    text = f"{spec['id']}: " + ("ran; the grader compares its outputs" if verdict is None else
                                "✓" if verdict.passed else "✗")
    display({MIME: data, "text/plain": text}, raw=True)
    if verdict is not None and not verdict.passed:
        raise AssertionError(f"{spec['id']} ({spec['name']}): {verdict.why}")


def _public_expected(exercise_id: str) -> dict[str, dict]:
    from .judge import decode_result

    path = Path(PUBLIC)
    if not path.exists():
        return {}
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line) if line.strip() else None
        if entry and entry["exercise"] == exercise_id:
            case_id, outcome = decode_result(entry["record"])
            found[case_id] = outcome
    return found


# -- writing the course ----------------------------------------------------------------------------------------
def _enclosing_functions(root: Path, exercise: Exercise) -> list[tuple[str, str, str]]:
    """(module:qualname, name, dedented source) of each function that holds a block of ``exercise``."""
    from .trial import module_name

    found = []
    for block in exercise.blocks:
        text = (root / block.path).read_text(encoding="utf-8")
        tree = parse_python(text)
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
        qualname = ".".join(n.name for n in chain)
        source = textwrap.dedent("".join(lines))
        source = "\n".join(line for line in source.splitlines() if not line.startswith("@"))  # staticmethod etc.
        entry = (f"{module_name(block.path)}:{qualname}", function.name, source)
        if entry not in found:
            found.append(entry)
    names = [name for _, name, _ in found]
    if len(set(names)) != len(names):
        raise ExerciseError(f"Exercise {exercise.id}: two of its functions share a name ({names})")
    return found


def _cell(kind: str, source: str, cell_id: str, **nbgrader) -> dict:
    metadata = {"nbgrader": {"grade": False, "locked": False, "solution": False, "task": False, "schema_version": 3,
                             "grade_id": cell_id, **nbgrader}} if nbgrader else {}
    cell = {"cell_type": kind, "id": cell_id, "metadata": metadata, "source": source}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def _chapter_title(root: Path, exercise: Exercise) -> str:
    path = root / exercise.chapter
    first = path.read_text(encoding="utf-8").splitlines()[0] if path.exists() else ""
    return first.lstrip("# ").strip() or exercise.chapter


def _modules(functions) -> list[str]:
    return sorted({target.split(":")[0] for target, _, _ in functions})


def _targets(functions) -> str:
    return "{" + ", ".join(f"{name!r}: {target!r}" for target, name, _ in functions) + "}"


def assignment_notebook(root: Path, exercise: Exercise, functions, specs: list[dict],
                        from_notebooks: list[tuple[str, list]] = ()) -> dict:
    """The notebook of one exercise; ``from_notebooks``: (notebook, functions) of the assignment's exercises it needs."""
    names = ", ".join(f"`{name}`" for _, name, _ in functions)
    public = sum(s["kind"] == "public" for s in specs)
    intro = (f"# Exercise {exercise.id} — {exercise.title}\n\n"
             f"Read *{_chapter_title(root, exercise)}* of the course book first (`{exercise.chapter}` in the "
             f"course's repository). Replace `raise NotImplementedError()` in {names} below with your code; the "
             "rest of the function is given. Then run every cell: each case cell below runs your code on one "
             f"case and scores one point. The {public} public cases tell you at once whether your code is right; "
             f"the {len(specs) - public} hidden ones run when your notebook is graded.")
    setup = ("# Setup (locked): the package shipped with this assignment, whatever else is installed\n"
             "import os, sys\n"
             "os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')\n"
             "sys.path.insert(0, os.getcwd())\n"
             "import minitransformer\n"
             "from minitransformer.exercises.nbgrader import install, install_notebook, use_module_names\n"
             f"use_module_names(globals(), {_modules(functions)!r})   # the names the functions below use\n"
             "print('minitransformer from', os.path.dirname(minitransformer.__file__))")
    cells = [_cell("markdown", intro, "intro"), _cell("code", setup, "setup", locked=True)]
    for notebook, needed in from_notebooks:
        cells.append(_cell("code", f"# Locked: this exercise uses your answer in {notebook}\n"
                                   f"install_notebook({notebook!r}, {_targets(needed)}, {_modules(needed)!r})",
                           f"uses-{Path(notebook).stem}", locked=True))
    for number, (_, name, source) in enumerate(functions):
        cells.append(_cell("code", source, f"solution-{number}" if len(functions) > 1 else "solution",
                           solution=True))
    cells.append(_cell("code", f"# Locked: your function(s) replace the package's\ninstall(globals(), "
                               f"{_targets(functions)})", "install", locked=True))
    prefix = assignment_name(exercise.id)
    for spec in specs:
        call = f"from minitransformer.exercises.nbgrader import show_case\nshow_case({json.dumps(spec)!r})"
        if spec["kind"] == "public":
            source = f"# {spec['id']}: {spec['name']} (one point)\n{call}"
        else:
            source = f"# {spec['id']}: a hidden case (one point)\n### BEGIN HIDDEN TESTS\n{call}\n### END HIDDEN TESTS"
        cells.append(_cell("code", source, f"{prefix}-{spec['id']}", grade=True, locked=True, points=1))
    return {"cells": cells, "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                                        "name": "python3"},
                                         "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


def _course_grading(course: Path) -> None:
    """The course's own grading package, mt_grading/: course_grading.py with the judge and the sandbox's command."""
    here = Path(__file__).resolve().parent
    target = course / "mt_grading"
    target.mkdir(exist_ok=True)
    shutil.copyfile(here / "course_grading.py", target / "__init__.py")
    for name in ("judge.py", "bwrap.py"):
        shutil.copyfile(here / name, target / name)


def write_course(root: Path, course_dir: str | Path, only: set[str] | None = None,
                 assignments: dict[str, list[str]] | None = None, cases_dir: str | Path | None = None) -> list[Path]:
    """Write ``course_dir``; return the assignment folders.

    ``assignments``: name -> exercise ids (a week's work); default: one assignment ``ex_X`` per exercise of
    ``only`` (default: every exercise).
    """
    from . import casebook
    from .cases import NEEDS

    root, course = Path(root).resolve(), Path(course_dir).resolve()
    every = {e.id: e for e in load_exercises(root)}
    if assignments is None:
        assignments = {assignment_name(i): [i] for i in every if only is None or i in only}
    unknown = {i for ids in assignments.values() for i in ids} - set(every)
    if unknown or not assignments:
        raise ExerciseError(f"no exercises to write (unknown: {sorted(unknown)}); the exercises are {sorted(every)}")
    missing = [i for ids in assignments.values() for i in ids if not every[i].has_solution]
    if missing:
        raise ExerciseError(f"{root} holds no solution of {missing}: the course is written from the teacher's edition")
    if (course / "source").exists() and any((course / "source").iterdir()):
        raise FileExistsError(f"{course / 'source'} is not empty; give a new course folder")
    course.mkdir(parents=True, exist_ok=True)
    (course / "nbgrader_config.py").write_text(CONFIG, encoding="utf-8")
    _course_grading(course)
    wanted = sorted({i for ids in assignments.values() for i in ids}, key=lambda i: tuple(map(int, i.split("."))))
    books = casebook.load(root, casebook.folder(root, cases_dir), [every[i] for i in wanted])
    for exercise_id in wanted:
        shutil.copytree(casebook.folder(root, cases_dir) / exercise_id, course / "grading" / exercise_id,
                        dirs_exist_ok=True)
    written = []
    for name, ids in assignments.items():
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise ExerciseError(f"assignment name {name!r}: use letters, digits, - _ and . only")
        ids = sorted(ids, key=lambda i: tuple(map(int, i.split("."))))
        kept = set().union(*(NEEDS.get(i, set()) for i in ids)) - set(ids)
        folder = course / "source" / name
        with tempfile.TemporaryDirectory(prefix="mt-nbgrader-") as scratch:
            edition = Path(scratch) / "edition"
            write_edition(root, edition, set(every) - kept, only=("minitransformer/",))
            folder.mkdir(parents=True)
            shutil.copytree(edition / "minitransformer", folder / "minitransformer",
                            ignore=shutil.ignore_patterns("__pycache__"))
        public_lines = []
        for exercise_id in ids:
            exercise = every[exercise_id]
            functions = _enclosing_functions(root, exercise)
            from_notebooks = [(f"{assignment_name(other)}.ipynb", _enclosing_functions(root, every[other]))
                              for other in ids if other in NEEDS.get(exercise_id, set())]
            notebook = assignment_notebook(root, exercise, functions, books[exercise_id].specs, from_notebooks)
            (folder / f"{assignment_name(exercise_id)}.ipynb").write_text(
                json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            public = {s["id"] for s in books[exercise_id].specs if s["kind"] == "public"}
            for line in (casebook.folder(root, cases_dir) / exercise_id / "expected.jsonl").read_text(
                    encoding="utf-8").splitlines():
                if line.strip() and json.loads(line)["record"]["id"] in public:
                    public_lines.append(json.dumps({"exercise": exercise_id, "record": json.loads(line)["record"]}))
        (folder / PUBLIC).write_text("\n".join(public_lines) + "\n", encoding="utf-8")
        written.append(folder)
    return written
