"""Write the student edition of the repository: every solution block replaced by a raise.

In the package (and any other Python file) a block under an exercise header

        # Exercise 5.1 — layer-norm backward (chapters/05-layers.md; graded by pytest -m ex_5_1)
        ### BEGIN SOLUTION
        ...
        ### END SOLUTION

becomes, at the same indentation,

        # Exercise 5.1 — layer-norm backward (chapters/05-layers.md; graded by pytest -m ex_5_1)
        raise NotImplementedError("Exercise 5.1: layer-norm backward — see chapters/05-layers.md")

The chapters (chapters/*.md, and the Japanese edition's chapters/ja/*.md, whose pointer is in Japanese)
lose the listings between ``<!-- BEGIN SOLUTION X.Y -->`` and ``<!-- END SOLUTION -->``.
In notebooks (notebooks/, notebooks/ja/, and their percent-format sources) the convention is nbgrader's:
a solution region in a code cell becomes ``# YOUR CODE HERE`` and
``raise NotImplementedError()``, one in a Markdown cell ``YOUR ANSWER HERE``.
Every other file is copied byte for byte.

``remove`` selects which exercises lose their solution (default: all). An
edition with one exercise removed is how ``tools/exercise_map.py`` finds the
tests that depend on it.
"""
from __future__ import annotations

import ast
import functools
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .registry import BEGIN, HEADER, ExerciseError, find_blocks, load_exercises, parse_file, parse_python

# the teacher's own files: never copied into an edition (the catalogue of mistakes quotes the solutions;
# the hidden cases' folder holds the expected outputs and the secret seed)
TEACHER_ONLY = {"minitransformer/exercises/mistakes.py"}
# in a spec (specs/ex_5_1.py) the catalogued mistakes sit between two comment lines at the start of a line; every
# edition keeps an empty MISTAKES in their place (written in two parts, so that this file holds no marker)
TEACHER_BEGIN = "# BEGIN TEACHER " + "ONLY"
TEACHER_END = "# END TEACHER " + "ONLY"
NO_MISTAKES = "MISTAKES = ()  # the catalogued mistakes quote the solution: the teacher's edition only"
HIDDEN_CASES = ".hidden-cases"
# walked past when the repository is not a git checkout
SKIPPED_DIRS = {".git", ".venv", "venv", "__pycache__", ".pytest_cache", ".hypothesis", ".ipynb_checkpoints",
                "build", "dist", "runs", ".mypy_cache", ".ruff_cache", HIDDEN_CASES}
NBGRADER_CODE = ("# YOUR CODE HERE", "raise NotImplementedError()")
NBGRADER_MARKDOWN = "YOUR ANSWER HERE"


@dataclass
class Edition:
    """What ``write_edition`` did: how many files it wrote and which blocks it replaced."""

    root: Path
    files: int = 0
    replaced: list[tuple[str, str, int]] = field(default_factory=list)   # (exercise id or "", path, line)


def repository_files(root: Path) -> list[str]:
    """Relative paths (forward slashes) of the files that make up the repository.

    In a git checkout: the tracked files plus untracked ones that are not
    ignored (so a file not yet committed travels too). Elsewhere: a walk of the
    tree that skips virtual environments, caches and build output.
    """
    root = Path(root)
    if (root / ".git").exists() and shutil.which("git"):
        result = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
                                 "--exclude-standard"], capture_output=True, check=False)
        if result.returncode == 0:
            names = sorted({name for name in result.stdout.decode("utf-8").split("\0") if name})
            return [name for name in names if (root / name).is_file() or (root / name).is_symlink()]
    found = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info"))
        for name in sorted(files):
            if name.endswith((".pyc", ".pyo")):
                continue
            found.append((Path(directory) / name).relative_to(root).as_posix())
    return found


def _wanted(exercise_id: str | None, remove: set[str] | None) -> bool:
    """Does this block lose its solution? Blocks without an id go only when everything goes."""
    if remove is None:
        return True
    return exercise_id is not None and exercise_id in remove


def names_produced(text: str, begin: int, end: int) -> list[str]:
    """The names a solution block (lines ``begin``..``end``) assigns or updates that the code after it reads.

    What the student's replacement must set: in the stub they are named, so that nobody has to guess
    that the lines below expect ``flat_index`` and ``flat_value``.
    """
    try:
        tree = parse_python(text)
    except SyntaxError:
        return []
    function = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno < begin <= node.end_lineno:
            if function is None or node.lineno > function.lineno:
                function = node
    if function is None:
        return []
    written = []
    for node in ast.walk(function):
        if not begin < getattr(node, "lineno", 0) < end:
            continue
        target = None
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            target = node.id
        elif isinstance(node, (ast.Subscript, ast.Attribute)) and isinstance(node.ctx, ast.Store):
            base = node.value
            while isinstance(base, (ast.Subscript, ast.Attribute)):
                base = base.value
            if isinstance(base, ast.Name) and base.id != "self":
                target = base.id
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                target = f"self.{node.attr}"          # read by another method (forward -> backward)
        if target and target not in written:
            written.append(target)
    read_after = {node.id for node in ast.walk(function)
                  if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.lineno > end}
    read_after |= {f"self.{node.attr}" for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                   and isinstance(node.ctx, ast.Load) and isinstance(node.value, ast.Name)
                   and node.value.id == "self" and not begin < node.lineno < end}
    return [name for name in written if name in read_after]


def block_returns(text: str, begin: int, end: int) -> bool:
    """Does the solution block end its function with a ``return``?"""
    try:
        tree = parse_python(text)
    except SyntaxError:
        return False
    return any(isinstance(node, ast.Return) and begin < node.lineno < end for node in ast.walk(tree))


@functools.lru_cache(maxsize=4096)
def stub_notes(text: str, begin: int, end: int, exercise_id: str | None) -> tuple[str, ...]:
    """The comment lines the student edition puts between an exercise's header and its raise (remembered per text:
    the grader writes the same editions many times)."""
    notes = [f"# (keep the comment line above: it is how `check {exercise_id}` finds this exercise)"]
    produced = names_produced(text, begin, end)
    if block_returns(text, begin, end):
        notes.append("# Replace the raise with code that returns the result.")
    elif produced:
        notes.append(f"# Replace the raise with code that sets {', '.join(produced)} (the lines below use "
                     f"{'it' if len(produced) == 1 else 'them'}).")
    return tuple(notes)


# A fast form (minitransformer/fast/) that computes what an exercise computes would answer it in the student
# edition. Its lines sit between these two markers, and the edition replaces them by a `pass` under the class,
# which then inherits the plain form: the student's own code is what every model runs.
FAST_FORM = "### BEGIN FAST " + "FORM OF"       # written in two parts, so that this file holds no marker
FAST_BEGIN = re.compile(r"^(?P<indent>[ \t]*)" + FAST_FORM + r" (?P<id>\d+\.\d+)[ \t]*\r?$")
FAST_END = re.compile(r"^[ \t]*### END FAST " + r"FORM[ \t]*\r?$")


def fast_form_blocks(text: str, path: str) -> list[tuple[str, int, int, str]]:
    """(exercise id, first line, last line, indent) of each fast form's block, lines counted from 1."""
    blocks, open_at = [], None
    for number, line in enumerate(text.splitlines(), start=1):
        begin, end = FAST_BEGIN.match(line), FAST_END.match(line)
        if begin:
            if open_at is not None:
                raise ExerciseError(f"{path}:{number}: a fast form begins inside the one begun at line {open_at[1]}")
            open_at = (begin["id"], number, begin["indent"])
        elif end:
            if open_at is None:
                raise ExerciseError(f"{path}:{number}: ### END FAST FORM without a BEGIN above it")
            blocks.append((open_at[0], open_at[1], number, open_at[2]))
            open_at = None
    if open_at is not None:
        raise ExerciseError(f"{path}:{open_at[1]}: {FAST_FORM} {open_at[0]} is never closed")
    return blocks


def strip_fast_forms(text: str, path: str, remove: set[str] | None = None, report: Edition | None = None) -> str:
    """The student version of a file with fast forms: each one of a removed exercise becomes a `pass`."""
    if FAST_FORM not in text:
        return text
    lines = text.splitlines(keepends=True)
    newline = "\r\n" if lines[0].endswith("\r\n") else "\n"
    out, cursor = [], 0
    for exercise_id, begin, end, indent in fast_form_blocks(text, path):
        if not _wanted(exercise_id, remove):
            continue
        out.extend(lines[cursor:begin - 1])
        out.append(f"{indent}pass  # the plain form of Exercise {exercise_id} runs here: its fast form would "
                   f"answer the exercise{newline}")
        cursor = end
        if report is not None:
            report.replaced.append((exercise_id, path, begin))
    out.extend(lines[cursor:])
    return "".join(out)


def strip_teacher_only(text: str, path: str) -> str:
    """``text`` with its teacher-only region (a spec's catalogued mistakes) replaced by an empty MISTAKES."""
    if TEACHER_BEGIN not in text:
        return text
    out, open_at = [], None
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if line.startswith(TEACHER_BEGIN):
            if open_at is not None:
                raise ExerciseError(f"{path}:{number}: {TEACHER_BEGIN!r} inside the region opened at line {open_at}")
            open_at = number
        elif line.rstrip() == TEACHER_END:
            if open_at is None:
                raise ExerciseError(f"{path}:{number}: {TEACHER_END!r} without a {TEACHER_BEGIN!r} above it")
            out.append(NO_MISTAKES + ("\r\n" if line.endswith("\r\n") else "\n"))
            open_at = None
        elif open_at is None:
            out.append(line)
        elif number == open_at + 1 and not line.startswith("MISTAKES = ("):
            raise ExerciseError(f"{path}:{number}: a teacher-only region holds MISTAKES = (...) and nothing else")
    if open_at is not None:
        raise ExerciseError(f"{path}:{open_at}: {TEACHER_BEGIN!r} is never closed by {TEACHER_END!r}")
    return "".join(out)


def strip_python(text: str, path: str, remove: set[str] | None = None, report: Edition | None = None) -> str:
    """The student version of one Python file (package code or a notebook's percent source)."""
    text = strip_teacher_only(strip_fast_forms(text, path, remove, report), path)
    if BEGIN not in text:
        return text
    lines = text.splitlines(keepends=True)
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    in_package = path.startswith("minitransformer/")
    if in_package:
        headed = {block.begin: (info["id"], info["title"], info["chapter"])
                  for info, block in parse_file(text, path) if block.begin is not None}
    else:
        headed = {}
        for begin, _, _ in find_blocks(text, path):
            match = HEADER.match(lines[begin - 2]) if begin >= 2 else None
            if match:
                headed[begin] = (match["id"], match["title"], match["chapter"])
    out, cursor = [], 0
    for begin, end, indent in find_blocks(text, path):
        exercise_id, title, chapter = headed.get(begin, (None, None, None))
        if not _wanted(exercise_id, remove):
            continue
        out.extend(lines[cursor:begin - 1])
        if in_package:
            message = f"Exercise {exercise_id}: {title} — see {chapter}"
            out.extend(indent + line + newline for line in stub_notes(text, begin, end, exercise_id))
            out.append(f"{indent}raise NotImplementedError({json.dumps(message, ensure_ascii=False)})"
                       + newline)
        else:  # a notebook source: nbgrader's convention, so that it builds to the stripped notebook
            out.extend(indent + line + newline for line in NBGRADER_CODE)
        cursor = end
        if report is not None:
            report.replaced.append((exercise_id or "", path, begin))
    out.extend(lines[cursor:])
    return "".join(out)


def _strip_cell(source: str, cell_type: str, path: str) -> tuple[str, int]:
    """nbgrader's release step for one cell: (new source, number of regions replaced)."""
    lines = source.splitlines(keepends=True)
    blocks = find_blocks(source, path)
    out, cursor = [], 0
    for begin, end, indent in blocks:
        out.extend(lines[cursor:begin - 1])
        tail = "\n" if lines[end - 1].endswith("\n") else ""
        if cell_type == "code":
            out.append("\n".join(indent + line for line in NBGRADER_CODE) + tail)
        else:
            out.append(indent + NBGRADER_MARKDOWN + tail)
        cursor = end
    out.extend(lines[cursor:])
    return "".join(out), len(blocks)


def strip_notebook(text: str, path: str, remove: set[str] | None = None, report: Edition | None = None) -> str:
    """The student version of one .ipynb: solution regions of code and Markdown cells replaced.

    Notebook regions carry no exercise id, so they are replaced only when every exercise is removed.
    """
    if BEGIN not in text or remove is not None:
        return text
    notebook = json.loads(text)
    changed = False
    for number, cell in enumerate(notebook.get("cells", [])):
        source = cell.get("source", "")
        joined = "".join(source) if isinstance(source, list) else source
        if BEGIN not in joined:
            continue
        new, count = _strip_cell(joined, cell.get("cell_type", "code"), f"{path} (cell {number})")
        if count:
            changed = True
            cell["source"] = new.splitlines(keepends=True) if isinstance(source, list) else new
            if report is not None:
                report.replaced.extend(("", f"{path} (cell {number})", 0) for _ in range(count))
    if not changed:
        return text
    indent = 1 if text.startswith("{\n \"") else None
    return json.dumps(notebook, indent=indent, ensure_ascii=False) + ("\n" if text.endswith("\n") else "")


# in a chapter (or TEACHING.md) the code that answers an exercise sits between these two HTML comment lines:
#     <!-- BEGIN SOLUTION 5.1 -->
#     ```python
#     ...
#     ```
#     <!-- END SOLUTION -->
# the student edition replaces them with a pointer to the stub; the derivation and formulas around them stay
MARKDOWN_BEGIN = re.compile(r"^<!-- BEGIN SOLUTION (?P<id>\d+\.\d+) -->\s*$")
MARKDOWN_END = re.compile(r"^<!-- END SOLUTION -->\s*$")


def markdown_pointer(exercise_id: str, files: str = "", language: str = "en") -> str:
    if language == "ja":        # the Japanese edition's chapters (chapters/ja/)
        where = f"（`{files}`）" if files else ""
        return (f"> **演習 {exercise_id}** — このコードはあなたが書く部分です{where}。何を作ればよいかはそこのスタブに"
                f"書いてあります。`python -m minitransformer.exercises check {exercise_id}` で確かめてください。\n")
    where = f" in `{files}`" if files else ""
    return (f"> **Exercise {exercise_id}** — this code is yours to write{where}: the stub there says what it must "
            f"produce. Check it with `python -m minitransformer.exercises check {exercise_id}`.\n")


def document_language(path: str) -> str:
    """"ja" for the Japanese edition's documents (chapters/ja/, README.ja.md), else "en"."""
    return "ja" if path.startswith("chapters/ja/") or path.endswith(".ja.md") else "en"


def strip_markdown(text: str, path: str, remove: set[str] | None = None, report: Edition | None = None,
                   files: dict[str, str] | None = None) -> str:
    """The student version of a chapter: each marked solution listing replaced by a pointer to the stub."""
    if "<!-- BEGIN SOLUTION" not in text:
        return text
    out, open_at, exercise_id = [], None, None
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        begin, end = MARKDOWN_BEGIN.match(line), MARKDOWN_END.match(line)
        if begin:
            if open_at is not None:
                raise ExerciseError(f"{path}:{number}: a second solution marker before the END of line {open_at}")
            open_at, exercise_id = number, begin["id"]
            if not _wanted(exercise_id, remove):
                out.append(line)
            continue
        if end:
            if open_at is None:
                raise ExerciseError(f"{path}:{number}: <!-- END SOLUTION --> without a BEGIN above it")
            if _wanted(exercise_id, remove):
                out.append(markdown_pointer(exercise_id, (files or {}).get(exercise_id, ""), document_language(path)))
                if report is not None:
                    report.replaced.append((exercise_id, path, open_at))
            else:
                out.append(line)
            open_at = None
            continue
        if open_at is None or not _wanted(exercise_id, remove):
            out.append(line)
    if open_at is not None:
        raise ExerciseError(f"{path}:{open_at}: <!-- BEGIN SOLUTION {exercise_id} --> is never closed")
    return "".join(out)


def shipped(name: str) -> bool:
    """Does the file ``name`` (relative, forward slashes) go into an edition? Not the teacher's own files."""
    return name not in TEACHER_ONLY and HIDDEN_CASES not in name.split("/")


def write_edition(root: str | Path, out_dir: str | Path, remove: set[str] | None = None,
                  only: tuple[str, ...] | None = None) -> Edition:
    """Copy the repository at ``root`` to ``out_dir`` with the solutions of ``remove`` (default all) taken out.

    ``out_dir`` must not exist or be empty. Files under ``out_dir`` are never
    copied into themselves when it lies inside ``root``. ``only``: copy just the
    files under these prefixes (``("minitransformer/",)``: the package). The
    teacher's own files (TEACHER_ONLY, the hidden cases) are never copied.
    """
    root, out_dir = Path(root).resolve(), Path(out_dir).resolve()
    if out_dir == root:
        raise ValueError("the student edition needs its own folder, not the repository itself")
    if out_dir.exists() and any(out_dir.iterdir()):
        raise FileExistsError(f"{out_dir} is not empty; give a new or empty folder for the edition")
    report = Edition(out_dir)
    try:
        files = {e.id: e.file for e in load_exercises(root)}
    except ExerciseError:
        files = {}
    skip_prefix = out_dir.relative_to(root).as_posix() + "/" if out_dir.is_relative_to(root) else None
    for name in repository_files(root):
        if skip_prefix and name.startswith(skip_prefix) or not shipped(name) or \
                only is not None and not name.startswith(only):
            continue
        source, target = root / name, out_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith((".py", ".ipynb", ".md")) and not source.is_symlink():
            text = source.read_bytes().decode("utf-8")
            if name.endswith(".md"):
                new = strip_markdown(text, name, remove, report, files)
            else:
                new = (strip_python if name.endswith(".py") else strip_notebook)(text, name, remove, report)
            if new != text:
                target.write_bytes(new.encode("utf-8"))
                shutil.copymode(source, target)
                report.files += 1
                continue
        shutil.copy2(source, target, follow_symlinks=False)
        report.files += 1
    return report
