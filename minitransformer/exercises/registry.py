"""The exercises, read from the source itself: the markers are the one source of truth.

A solution in the package looks like this (inside a function body, never at
module level, so that the student edition still imports):

    def backward(self, gy):
        x_hat, inv_std, weight = self.x_hat, self.inv_std, self.weight
        # Exercise 5.1 — layer-norm backward (chapters/05-layers.md; graded by pytest -m ex_5_1)
        ### BEGIN SOLUTION
        ...the lines the student writes...
        ### END SOLUTION
        return gx, g_weight, g_bias

The header comment names the exercise: its id, title, chapter and pytest
marker. It stays in the student edition, where the block between the two
marker lines becomes ``raise NotImplementedError("Exercise 5.1: ...")``; so
the registry can be read from either edition. An exercise may have several
blocks (split and merge of heads), each under its own identical header.

Each exercise also has a spec, ``specs/ex_5_1.py`` (spec.py): ``load_specs`` finds them by name and
joins them with the exercises the markers name.
"""
from __future__ import annotations

import ast
import copy
import dataclasses
import functools
import importlib
import io
import pkgutil
import re
import threading
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

# a marker is a comment line that holds exactly this text (spelled in two parts here, to be plain about it)
BEGIN = "### BEGIN " + "SOLUTION"
END = "### END " + "SOLUTION"

HEADER = re.compile(
    r"^(?P<indent>\s*)# Exercise (?P<id>\d+\.\d+) [—–-]+ (?P<title>.+?) "
    r"\((?P<chapter>chapters/[\w.-]+\.md); graded by pytest -m (?P<marker>ex_\d+_\d+)\)\s*$")
# how an unsolved exercise shows up in a traceback or a gradcheck message
RAISED = re.compile(r"NotImplementedError: Exercise (\d+\.\d+)")
PACKAGE = "minitransformer"
# one spec module per exercise (spec.py): specs/ex_5_1.py for Exercise 5.1
SPECS = "minitransformer.exercises.specs"
SPECS_DIR = "minitransformer/exercises/specs"


def unsolved_in(error: BaseException | None, seen: set[int] | None = None) -> NotImplementedError | None:
    """The NotImplementedError("Exercise ...") of an unsolved exercise inside ``error``, its cause or context
    chain, or its group; None if there is none. The package knows nothing of the classroom: gradcheck, for one,
    reports a backward that raised as BackwardFailed with the raised error as its cause, and this is how the
    classroom finds an unsolved exercise behind it (not a wrong gradient, but one not written yet)."""
    seen = seen if seen is not None else set()
    if error is None or id(error) in seen:
        return None
    seen.add(id(error))
    if isinstance(error, NotImplementedError) and str(error).startswith("Exercise "):
        return error
    for inner in (error.__cause__, error.__context__, *getattr(error, "exceptions", ())):
        found = unsolved_in(inner, seen)
        if found is not None:
            return found
    return None


class ExerciseError(ValueError):
    """A malformed solution block or header; the message names the file and line."""


@dataclass
class Block:
    """One solution block: lines ``begin``..``end`` (1-based, the marker lines included)."""

    path: str              # relative to the repository root, with forward slashes
    header_line: int       # the header comment, directly above ``begin``
    begin: int | None      # None in a student edition, where the block is gone
    end: int | None
    indent: str
    stub: bool = False     # the student edition's raise still stands under the header (not attempted)


@dataclass
class Exercise:
    id: str                # "5.1"
    title: str             # "layer-norm backward"
    chapter: str           # "chapters/05-layers.md"
    marker: str            # "ex_5_1"
    blocks: list[Block] = field(default_factory=list)

    @property
    def files(self) -> list[str]:
        return sorted({b.path for b in self.blocks})

    @property
    def file(self) -> str:
        return ", ".join(self.files)

    @property
    def has_solution(self) -> bool:
        """True when every block still holds its solution (the teacher's edition)."""
        return all(b.begin is not None for b in self.blocks)

    @property
    def grading_marker(self) -> str:
        return grading_marker(self.id)

    @property
    def unsolved(self) -> bool:
        """True while a block still holds the student edition's raise (nobody has written code there yet)."""
        return any(b.stub for b in self.blocks)

    def message(self) -> str:
        """The text of the NotImplementedError that replaces the solution in the student edition."""
        return f"Exercise {self.id}: {self.title} — see {self.chapter}"

    def sort_key(self) -> tuple[int, int]:
        major, minor = self.id.split(".")
        return int(major), int(minor)


def marker_for(exercise_id: str) -> str:
    """"5.1" -> "ex_5_1"."""
    return "ex_" + exercise_id.replace(".", "_")


def grading_marker(exercise_id: str) -> str:
    """"5.1" -> "grades_5_1": the marker of the tests that score the exercise (tests/exercises/test_exercises.py)."""
    return "grades_" + exercise_id.replace(".", "_")


def comment_lines(text: str) -> dict[int, str] | None:
    """Line number -> text of the lines of Python source that hold nothing but a comment.

    Markers and headers count only as real comments, so a docstring that shows
    an example block (like this module's) is not mistaken for one. None when the
    text does not tokenize (then every line is a candidate).
    """
    found = _comment_lines(text)
    return None if found is None else dict(found)


@functools.lru_cache(maxsize=1024)
def _comment_lines(text: str) -> tuple | None:
    """comment_lines, remembered per text (the grader reads the same files many times)."""
    found = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT and not token.line[:token.start[1]].strip():
                found[token.start[0]] = token.string
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    return tuple(found.items())


def find_blocks(text: str, path: str = "<text>", python: bool = True) -> list[tuple[int, int, str]]:
    """(begin, end, indent) of every solution block in ``text`` (1-based lines, marker lines included).

    ``python``: only comment lines count (not lines inside strings). Raises
    ExerciseError for an unclosed, nested or stray marker, or mismatched indentation.
    """
    comments = comment_lines(text) if python and BEGIN in text else None
    blocks, open_at, open_indent = [], None, ""
    for number, line in enumerate(text.splitlines(), start=1):
        if comments is not None and number not in comments:
            continue
        stripped = line.strip()
        if stripped == BEGIN:
            if open_at is not None:
                raise ExerciseError(f"{path}:{number}: a second {BEGIN!r} before the {END!r} of the block "
                                    f"opened at line {open_at}")
            open_at, open_indent = number, line[:len(line) - len(line.lstrip())]
        elif stripped == END:
            if open_at is None:
                raise ExerciseError(f"{path}:{number}: {END!r} without a {BEGIN!r} above it")
            indent = line[:len(line) - len(line.lstrip())]
            if indent != open_indent:
                raise ExerciseError(f"{path}:{number}: {END!r} is indented differently from its {BEGIN!r} "
                                    f"at line {open_at}")
            blocks.append((open_at, number, open_indent))
            open_at = None
    if open_at is not None:
        raise ExerciseError(f"{path}:{open_at}: {BEGIN!r} is never closed by {END!r}")
    return blocks


_PARSING = threading.Lock()


def parse_python(source: str) -> ast.Module:
    """ast.parse, one thread at a time: CPython 3.11's parser is not safe to run from several threads at
    once ("AST constructor recursion depth mismatch"), and editions are written by a thread pool."""
    with _PARSING:
        return ast.parse(source)


def _check_inside_function(source: str, path: str, begin: int, end: int, indent: str) -> None:
    """A block at module or class level would raise on import in the student edition: refuse it."""
    lines = source.splitlines()
    code = [n for n in range(begin + 1, end) if lines[n - 1].strip() and not lines[n - 1].lstrip().startswith("#")]
    if not code:
        raise ExerciseError(f"{path}:{begin}: this solution block is empty")
    try:
        tree = parse_python(source)
    except SyntaxError as error:
        raise ExerciseError(f"{path}:{error.lineno}: cannot parse: {error.msg}") from None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.body[0].lineno <= code[0] and code[-1] <= node.end_lineno and len(indent) > node.col_offset:
                return
    raise ExerciseError(f"{path}:{begin}: this solution block is not inside a function body; the student "
                        "edition would raise NotImplementedError on import. Move it into a function.")


def parse_file(text: str, path: str) -> list[tuple[dict, Block]]:
    """Every exercise header in one Python file, with its block (if the solution is still there)."""
    lines = text.splitlines()
    blocks = {begin: (end, indent) for begin, end, indent in find_blocks(text, path)}
    comments = comment_lines(text)
    found = []
    for index, line in enumerate(lines):
        if comments is not None and index + 1 not in comments:
            continue
        match = HEADER.match(line)
        if not match:
            if line.lstrip().startswith("# Exercise ") and "graded by pytest -m" in line:
                raise ExerciseError(f"{path}:{index + 1}: exercise header not understood; write it as "
                                    "'# Exercise 5.1 — title (chapters/05-layers.md; graded by pytest -m ex_5_1)'")
            continue
        info = match.groupdict()
        if info["marker"] != marker_for(info["id"]):
            raise ExerciseError(f"{path}:{index + 1}: Exercise {info['id']} must be graded by marker "
                                f"{marker_for(info['id'])}, not {info['marker']}")
        below = index + 2  # 1-based number of the line under the header
        if below in blocks:
            end, indent = blocks.pop(below)
            if indent != info["indent"]:
                raise ExerciseError(f"{path}:{below}: the solution block is indented differently from its header")
            _check_inside_function(text, path, below, end, indent)
            block = Block(path, index + 1, below, end, indent)
        else:
            following = [line.strip() for line in lines[index + 1:index + 4]]
            code = next((line for line in following if line and not line.startswith("#")), "")
            stub = code.startswith(f'raise NotImplementedError("Exercise {info["id"]}:')
            block = Block(path, index + 1, None, None, info["indent"], stub)
        found.append((info, block))
    if blocks:
        begin = min(blocks)
        raise ExerciseError(f"{path}:{begin}: solution block without an exercise header directly above it")
    return found


def package_sources(root: Path) -> list[Path]:
    """The Python files of the package under ``root``, in a stable order."""
    return sorted(p for p in (root / PACKAGE).rglob("*.py") if "__pycache__" not in p.parts)


def load_exercises(root: str | Path | None = None) -> list[Exercise]:
    """All exercises of the package under ``root`` (default: the repository holding this package), by id."""
    root = Path(root) if root is not None else repository_root()
    sources = package_sources(root)
    state = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in sources)
    return copy.deepcopy(_load_exercises(root, state))


@functools.lru_cache(maxsize=64)
def _load_exercises(root: Path, state: tuple) -> list[Exercise]:
    """load_exercises, remembered while no file of the package changes (``state``: their paths, times and sizes)."""
    exercises: dict[str, Exercise] = {}
    for source in (Path(path) for path, _, _ in state):
        text = source.read_text(encoding="utf-8")
        if "# Exercise " not in text:
            continue
        relative = source.relative_to(root).as_posix()
        for info, block in parse_file(text, relative):
            exercise = exercises.get(info["id"])
            if exercise is None:
                exercise = exercises[info["id"]] = Exercise(info["id"], info["title"], info["chapter"],
                                                            info["marker"])
            elif (exercise.title, exercise.chapter) != (info["title"], info["chapter"]):
                raise ExerciseError(f"{relative}:{block.header_line}: Exercise {info['id']} is titled "
                                    f"{info['title']!r} ({info['chapter']}) here but {exercise.title!r} "
                                    f"({exercise.chapter}) in {exercise.blocks[0].path}")
            exercise.blocks.append(block)
    return sorted(exercises.values(), key=Exercise.sort_key)


def get_exercise(exercise_id: str, root: str | Path | None = None) -> Exercise:
    """One exercise by id ("5.1"; "ex_5_1" and "5_1" are accepted too)."""
    wanted = exercise_id.removeprefix("ex_").replace("_", ".")
    exercises = load_exercises(root)
    for exercise in exercises:
        if exercise.id == wanted:
            return exercise
    known = ", ".join(e.id for e in exercises)
    raise KeyError(f"no Exercise {exercise_id!r}; the exercises are {known}")


def repository_root() -> Path:
    """The folder that holds the package (and, in a checkout, tests/ and chapters/)."""
    return Path(__file__).resolve().parents[2]


# -- the specs: one module per exercise, found by name and joined with the markers ----------------------------------
def spec_path(exercise_id: str) -> str:
    """"5.1" -> "minitransformer/exercises/specs/ex_5_1.py"."""
    return f"{SPECS_DIR}/{marker_for(exercise_id)}.py"


def spec_for(exercise_id: str):
    """The spec of one exercise (spec.ExerciseSpec), importing its module only; KeyError when it has none."""
    return _spec_of(marker_for(exercise_id.removeprefix("ex_").replace("_", ".")))


@functools.lru_cache(maxsize=None)
def _spec_of(module_name: str):
    from .spec import ExerciseSpec

    try:
        module = importlib.import_module(f"{SPECS}.{module_name}")
    except ModuleNotFoundError as error:
        if error.name != f"{SPECS}.{module_name}":
            raise
        exercise_id = module_name.removeprefix("ex_").replace("_", ".")
        raise KeyError(f"no grading cases for Exercise {exercise_id}: it has no spec {SPECS_DIR}/{module_name}.py")
    where = f"{SPECS_DIR}/{module_name}.py"
    spec = getattr(module, "SPEC", None)
    if not isinstance(spec, ExerciseSpec):
        raise ExerciseError(f"{where} defines no SPEC = ExerciseSpec(...)")
    if marker_for(spec.id) != module_name:
        raise ExerciseError(f"{where} holds the spec of Exercise {spec.id}; name it {spec_path(spec.id)}")
    tests = [value for name, value in vars(module).items() if name.startswith("test_") and callable(value)
             and getattr(value, "__module__", None) == module.__name__]
    return dataclasses.replace(spec, tests=tuple(tests))


def load_specs() -> dict[str, object]:
    """Every exercise's spec, by id, in the book's order: the modules of specs/ (pkgutil: no list to keep),
    joined with the exercises the markers name. A spec without markers, markers without a spec, a probe or a
    public test named twice, or an unknown prerequisite is an ExerciseError naming both sides."""
    from . import specs as package

    names = sorted(m.name for m in pkgutil.iter_modules(package.__path__) if m.name.startswith("ex_"))
    found = {spec.id: spec for spec in (_spec_of(name) for name in names)}
    marked = {e.id: e for e in load_exercises()}
    for exercise_id in sorted(set(marked) - set(found), key=_book_order):
        places = ", ".join(f"{b.path}:{b.header_line}" for b in marked[exercise_id].blocks)
        raise ExerciseError(f"Exercise {exercise_id} is marked in the package ({places}) but has no spec: write "
                            f"{spec_path(exercise_id)} (TEACHING.md, \"Adding an exercise\")")
    for exercise_id in sorted(set(found) - set(marked), key=_book_order):
        raise ExerciseError(f"{spec_path(exercise_id)} is the spec of Exercise {exercise_id}, but no "
                            f"'# Exercise {exercise_id} — ...' header marks its solution in the package: add its "
                            "markers (registry.py) or remove the spec")
    _refuse_clashes(found)
    return {i: found[i] for i in sorted(found, key=_book_order)}


def _book_order(exercise_id: str) -> tuple[int, int]:
    major, minor = exercise_id.split(".")
    return int(major), int(minor)


def _refuse_clashes(found: dict) -> None:
    """Probe and test names are looked up by name across every spec: each must be one exercise's only (a probe
    several exercises share is in cases.py, and tests/exercises/test_specs.py checks that no spec shadows one)."""
    owners: dict[tuple[str, str], str] = {}
    for spec in found.values():
        for kind, names in (("probe", spec.probe_table), ("test", [t.__name__ for t in spec.tests])):
            for name in names:
                other = owners.setdefault((kind, name), spec_path(spec.id))
                if other != spec_path(spec.id):
                    raise ExerciseError(f"the {kind} {name!r} of {spec_path(spec.id)} is also in {other}: "
                                        "rename one")
        unknown = sorted(set(spec.needs) - set(found)) or sorted(set(spec.needs) & {spec.id})
        if unknown:
            raise ExerciseError(f"{spec_path(spec.id)} needs Exercise {unknown[0]}, which is not another exercise")
