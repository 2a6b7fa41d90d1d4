"""Build the chapter notebooks from their sources.

Each notebook is written as a plain Python file in the "percent" format, which
diffs and reviews like code:

    # %% [markdown]
    # # Chapter 1 — Autograd from scratch
    # Text of a Markdown cell, each line behind "# ".

    # %%
    import minitransformer as mt      # a code cell

``notebooks/src/NN-name.py`` becomes ``notebooks/NN-name.ipynb`` (outputs
empty; CI executes them). Run ``python tools/build_notebooks.py`` after editing
a source; ``--check`` fails when a notebook is out of date.

The Japanese edition shares the code: right after every Markdown cell a source
may give its Japanese twin, a cell headed ``# %% [markdown] ja``. The English
notebook is built from the other cells; ``notebooks/ja/NN-name.ipynb`` has the
same code cells with every Markdown cell replaced by its twin. A source with
some twins must have one for every Markdown cell (an error names the first one
without); a source with none builds only the English notebook.

A chapter's exercises are listed once, in its chapter (the ``## Exercises`` section of
``chapters/NN-name.md``, ``## 演習`` of ``chapters/ja/NN-name.md``): a notebook's Markdown cell that holds
the line ``{{exercises}}`` gets that section's text in its place, in the notebook's language, so that a
chapter and its notebook number the same exercises the same way.

Every notebook gets one setup cell, written here and in no source, before its
first code cell: it puts the notebook's own repository first on ``sys.path``
(so a kernel never runs another installed copy of the package, such as the
teacher's next to a student edition), prints where the package came from, and
names the classroom exercises the notebook runs that are not solved in that
copy yet. Which exercises each notebook runs is recorded in
``notebooks/src/exercises.json`` by ``--trace-exercises``, which executes every
notebook once (quick mode) and notes which solution blocks run.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "notebooks" / "src"
NOTEBOOKS = ROOT / "notebooks"
TRANSLATIONS = {"ja": NOTEBOOKS / "ja"}       # language -> the folder of its notebooks
NEEDS_FILE = SOURCES / "exercises.json"

SETUP_CELL = """\
# Setup (added by tools/build_notebooks.py): this repository's minitransformer first, whatever else is installed
import pathlib, sys
_here = pathlib.Path.cwd().resolve()
sys.path.insert(0, str(next((p for p in (_here, *_here.parents) if (p / "minitransformer").is_dir()), _here)))
from minitransformer.exercises.notebook import report as _report
_unsolved = _report(needs={needs}, chapter={chapter!r}{language})"""
# a translated notebook runs the English notebook's code, which reads files relative to notebooks/
TRANSLATED_SETUP = """
import os   # the code below is the English notebook's: it reads files relative to notebooks/
os.chdir(next((p / "notebooks" for p in (_here, *_here.parents) if (p / "notebooks" / "src").is_dir()), _here))"""


EXERCISES = "{{exercises}}"
EXERCISE_HEADINGS = {"en": "## Exercises", "ja": "## 演習"}


def chapter_of(stem: str, language: str) -> Path:
    return ROOT / "chapters" / ("" if language == "en" else language) / f"{stem}.md"


def chapter_exercises(stem: str, language: str) -> str:
    """The text of a chapter's exercise section (without its heading), links made to work from notebooks/."""
    import re

    path = chapter_of(stem, language)
    heading = EXERCISE_HEADINGS[language]
    lines = path.read_text(encoding="utf-8").split("\n") if path.exists() else []
    if heading not in lines:
        raise SourceError(f"{path.relative_to(ROOT)} has no `{heading}` section for its notebook's {EXERCISES}")
    body = []
    for line in lines[lines.index(heading) + 1:]:
        if line.startswith("## "):
            break
        body.append(line)
    text = "\n".join(body).strip("\n")
    chapters = "../chapters/" if language == "en" else f"../../chapters/{language}/"
    return re.sub(r"\]\((?!https?:|\.\./|#)([\w.-]+\.md(?:#[\w-]*)?)\)", lambda m: f"]({chapters}{m.group(1)})", text)


def with_exercises(cells: list[dict], stem: str, language: str) -> list[dict]:
    """``cells`` with each ``{{exercises}}`` line replaced by the chapter's exercise section."""
    out = []
    for cell in cells:
        if cell["cell_type"] == "markdown" and EXERCISES in cell["source"]:
            cell = dict(cell, source=cell["source"].replace(EXERCISES, chapter_exercises(stem, language)))
        out.append(cell)
    return out


class SourceError(ValueError):
    """A notebook source whose Japanese cells do not pair up with its English Markdown cells."""


def parse_cells(text: str) -> list[dict]:
    """Split percent-format text into notebook cells.

    Each cell: ``cell_type``, ``source``, ``line`` (of its ``# %%`` header) and, for a Markdown cell headed
    ``# %% [markdown] LANG``, ``language``. Empty cells are dropped, except translations (an empty one is
    an error for ``split_languages`` to name).
    """
    cells: list[dict] = []
    kind, language, start, lines = None, None, 0, []

    def flush() -> None:
        if kind is None:
            return
        body = "\n".join(lines).strip("\n")
        if kind == "markdown":
            body = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in body.split("\n"))
        if body.strip() or language:
            cell = {"cell_type": kind, "source": body, "line": start}
            if language:
                cell["language"] = language
            cells.append(cell)

    for number, line in enumerate(text.split("\n"), start=1):
        if line.startswith("# %%"):
            flush()
            header = line[4:].split()
            kind = "markdown" if header[:1] == ["[markdown]"] else "code"
            language = header[1] if kind == "markdown" and len(header) > 1 else None
            start, lines = number, []
        elif kind is not None:
            lines.append(line)
    flush()
    return cells


def split_languages(cells: list[dict], name: str = "source") -> dict[str, list[dict]]:
    """The cells of each edition: ``{"en": [...], "ja": [...]}``; only ``en`` when the source has no twins.

    A twin must follow its English Markdown cell directly, and once a source has any twin in a language,
    every English Markdown cell needs one: a chapter changed in English without its translation fails here.
    """
    languages = sorted({cell["language"] for cell in cells if "language" in cell})
    for language in languages:
        if language not in TRANSLATIONS:
            raise SourceError(f"{name}: `# %% [markdown] {language}` names a language without an edition "
                              f"(known: {', '.join(TRANSLATIONS)})")
    english = [cell for cell in cells if "language" not in cell]
    editions = {"en": english}
    for language in languages:
        edition = []
        for i, cell in enumerate(cells):
            if cell.get("language") == language:
                previous = cells[i - 1] if i else None
                if previous is None or previous["cell_type"] != "markdown" or "language" in previous:
                    raise SourceError(f"{name}:{cell['line']}: a `# %% [markdown] {language}` cell must follow "
                                      f"the English Markdown cell it translates")
                if not cell["source"].strip():
                    raise SourceError(f"{name}:{cell['line']}: the `# %% [markdown] {language}` cell is empty")
            elif "language" not in cell:
                if cell["cell_type"] == "markdown":
                    twin = cells[i + 1] if i + 1 < len(cells) else None
                    if twin is None or twin.get("language") != language:
                        raise SourceError(f"{name}:{cell['line']}: this Markdown cell has no `# %% [markdown] "
                                          f"{language}` twin right after it (the English text changed without "
                                          f"its translation?)")
                    edition.append(dict(cell, source=twin["source"]))
                else:
                    edition.append(cell)
        editions[language] = edition
    return editions


MAX_CELL_LINES = 30          # non-blank lines: a code cell longer than this teaches more than one step
SETTING_CALLS = {"setdefault", "filterwarnings", "simplefilter", "set_printoptions", "seterr", "use",
                 "set_default_dtype", "update"}     # calls that only configure (os.environ.update, rcParams.update)
SETTING_NAMES = {"QUICK", "SAVE_FIGURES"}


def _is_setting(node) -> bool:
    """An import, or a statement that only configures: a constant or quick-mode assignment, an environment
    or library switch. Anything that computes something a reader should look at is not a setting."""
    import ast

    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        func = node.value.func
        return isinstance(func, ast.Attribute) and func.attr in SETTING_CALLS
    if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
        if "environ" in ast.dump(node.value) or "getenv" in ast.dump(node.value):
            return True
        allowed = (ast.Constant, ast.Tuple, ast.List, ast.IfExp, ast.UnaryOp, ast.USub, ast.Load,
                   ast.Compare, ast.Eq, ast.NotEq)
        return all(isinstance(n, allowed) or (isinstance(n, ast.Name) and n.id in SETTING_NAMES)
                   for n in ast.walk(node.value))
    return False


def cell_problems(cells: list[dict], name: str = "source") -> list[str]:
    """What keeps a notebook from teaching one step a cell: a code cell over ``MAX_CELL_LINES`` lines, or a
    cell that only configures (nothing but imports and settings, at least one setting). Infrastructure
    belongs in ``minitransformer/notebook_support.py``; a cell of imports alone says what the notebook uses."""
    import ast

    problems = []
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        where = f"{name}:{cell['line']}"
        lines = sum(1 for line in cell["source"].split("\n") if line.strip())     # blank lines are free
        if lines > MAX_CELL_LINES:
            problems.append(f"{where}: a code cell of {lines} lines (non-blank; at most {MAX_CELL_LINES}: split it into "
                            f"steps, or move what is not the lesson into minitransformer/notebook_support.py)")
        try:
            body = ast.parse(cell["source"]).body
        except SyntaxError:
            continue                        # executing the notebook reports it
        imports = (ast.Import, ast.ImportFrom)
        if body and all(_is_setting(node) for node in body) and not all(isinstance(n, imports) for n in body):
            problems.append(f"{where}: a cell that only configures (imports and settings): move the settings "
                            f"into minitransformer/notebook_support.py or next to the step that uses them")
    return problems


def to_notebook(cells: list[dict]) -> dict:
    out = []
    for i, cell in enumerate(cells):
        source = cell["source"].split("\n")
        source = [line + "\n" for line in source[:-1]] + [source[-1]]
        entry = {"cell_type": cell["cell_type"], "id": f"cell-{i}", "metadata": {}, "source": source}
        if cell["cell_type"] == "code":
            entry.update(execution_count=None, outputs=[])
        out.append(entry)
    return {
        "cells": out,
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def exercise_needs() -> dict[str, list[str]]:
    """Notebook name -> the exercises its cells run (from --trace-exercises); empty when never traced."""
    return json.loads(NEEDS_FILE.read_text(encoding="utf-8"))["notebooks"] if NEEDS_FILE.exists() else {}


def with_setup(cells: list[dict], name: str, needs: list[str] | None, language: str = "en") -> list[dict]:
    """``cells`` with the setup cell before the first code cell."""
    setup = SETUP_CELL.format(needs=needs, chapter=name, language="" if language == "en" else f", language={language!r}")
    if language != "en":
        setup += TRANSLATED_SETUP
    first_code = next((i for i, cell in enumerate(cells) if cell["cell_type"] == "code"), len(cells))
    return cells[:first_code] + [{"cell_type": "code", "source": setup}] + cells[first_code:]


def render_all(source: Path, needs: dict[str, list[str]] | None = None) -> dict[str, str]:
    """Language -> notebook text, for every edition the source has (English always)."""
    needs = exercise_needs() if needs is None else needs
    name = source.relative_to(ROOT).as_posix() if source.is_relative_to(ROOT) else source.name
    editions = split_languages(parse_cells(source.read_text(encoding="utf-8")), name)
    return {language: json.dumps(to_notebook(with_setup(with_exercises(cells, source.stem, language), source.stem,
                                                        needs.get(source.stem), language)),
                                 indent=1, ensure_ascii=False) + "\n"
            for language, cells in editions.items()}


def render(source: Path, needs: dict[str, list[str]] | None = None, language: str = "en") -> str:
    """The notebook text of one edition (KeyError when the source has no cells in that language)."""
    return render_all(source, needs)[language]


def targets(source: Path, language: str) -> Path:
    return (NOTEBOOKS if language == "en" else TRANSLATIONS[language]) / (source.stem + ".ipynb")


TRACER = """\
import json as _json, os as _os, sys as _sys
_blocks = _json.loads({blocks!r})            # "file:first line of the function" -> [[begin, end, id], ...]
_seen = set()
def _lines(frame, event, arg):
    if event == "line":
        for begin, end, exercise in _blocks[frame.f_code.co_filename + ":" + str(frame.f_code.co_firstlineno)]:
            if begin < frame.f_lineno < end:
                _seen.add(exercise)
    return _lines
def _calls(frame, event, arg):
    return _lines if frame.f_code.co_filename + ":" + str(frame.f_code.co_firstlineno) in _blocks else None
_sys.settrace(_calls)
import threading as _threading; _threading.settrace(_calls)"""


def _block_table(root: Path) -> dict[str, list]:
    """"path:first line of the enclosing function" -> the solution blocks inside it, for the tracer."""
    import ast

    sys.path.insert(0, str(root))
    from minitransformer.exercises.registry import load_exercises

    table: dict[str, list] = {}
    for exercise in load_exercises(root):
        for block in exercise.blocks:
            path = root / block.path
            tree = ast.parse(path.read_text(encoding="utf-8"))
            functions = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                         and node.lineno < block.begin <= node.end_lineno]
            function = max(functions, key=lambda node: node.lineno)
            first = min([function.lineno, *(d.lineno for d in function.decorator_list)])
            table.setdefault(f"{path.resolve()}:{first}", []).append([block.begin, block.end, exercise.id])
    return table


def trace_exercises() -> dict[str, list[str]]:
    """Run every notebook once in quick mode and record which exercises' solution blocks execute."""
    import os

    import nbclient
    import nbformat

    os.environ.update(MT_QUICK="1", MPLBACKEND="Agg",
                      PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    tracer = TRACER.format(blocks=json.dumps(_block_table(ROOT)))
    found = {}
    for source in sorted(SOURCES.glob("*.py")):
        notebook = nbformat.reads(render(source, needs={}), as_version=4)
        notebook.cells.insert(0, nbformat.v4.new_code_cell(tracer))
        notebook.cells.append(nbformat.v4.new_code_cell("_sys.settrace(None); print(_json.dumps(sorted(_seen)))"))
        client = nbclient.NotebookClient(notebook, timeout=900, kernel_name="python3",
                                         resources={"metadata": {"path": str(NOTEBOOKS)}})
        client.execute()
        text = "".join(output.get("text", "") for output in notebook.cells[-1].outputs)
        found[source.stem] = sorted(json.loads(text.strip().splitlines()[-1]),
                                    key=lambda i: tuple(map(int, i.split("."))))
        print(f"{source.stem}: {', '.join(found[source.stem]) or 'no exercise'}", flush=True)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if a notebook differs from its source")
    parser.add_argument("--trace-exercises", action="store_true",
                        help=f"run every notebook, record the exercises it runs in {NEEDS_FILE.relative_to(ROOT)}")
    args = parser.parse_args()
    if args.trace_exercises:
        about = ("Written by tools/build_notebooks.py --trace-exercises: the classroom exercises whose solution "
                 "blocks each notebook runs; its setup cell names those not yet solved.")
        NEEDS_FILE.write_text(json.dumps({"about": about, "notebooks": trace_exercises()}, indent=1) + "\n",
                              encoding="utf-8")
    stale, errors, expected = [], [], set()
    for source in sorted(SOURCES.glob("*.py")):
        try:
            editions = render_all(source)
        except SourceError as error:
            errors.append(str(error))
            continue
        for language, text in editions.items():
            target = targets(source, language)
            expected.add(target)
            if args.check:
                if not target.exists() or target.read_text(encoding="utf-8") != text:
                    stale.append(target.relative_to(NOTEBOOKS).as_posix())
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
                print(f"wrote {target.relative_to(ROOT)}")
    for folder in TRANSLATIONS.values():             # a translation whose source lost its twins
        for target in sorted(folder.glob("*.ipynb")):
            if target not in expected and not errors:
                if args.check:
                    stale.append(f"{target.relative_to(NOTEBOOKS).as_posix()} (its source has no translated cells)")
                else:
                    target.unlink()
                    print(f"removed {target.relative_to(ROOT)} (its source has no translated cells)")
    for error in errors:
        print(error, file=sys.stderr)
    if stale:
        print("out of date (run python tools/build_notebooks.py):", ", ".join(stale))
    return 1 if stale or errors else 0


if __name__ == "__main__":
    sys.exit(main())
