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
NEEDS_FILE = SOURCES / "exercises.json"

SETUP_CELL = """\
# Setup (added by tools/build_notebooks.py): this repository's minitransformer first, whatever else is installed
import pathlib, sys
_here = pathlib.Path.cwd().resolve()
sys.path.insert(0, str(next((p for p in (_here, *_here.parents) if (p / "minitransformer").is_dir()), _here)))
from minitransformer.exercises.notebook import report as _report
_report(needs={needs}, chapter={chapter!r})"""


def parse_cells(text: str) -> list[dict]:
    """Split percent-format text into notebook cells."""
    cells: list[dict] = []
    kind, lines = None, []

    def flush() -> None:
        if kind is None:
            return
        body = "\n".join(lines).strip("\n")
        if kind == "markdown":
            body = "\n".join(line[2:] if line.startswith("# ") else line.lstrip("#") for line in body.split("\n"))
        if body.strip():
            cells.append({"cell_type": kind, "source": body})

    for line in text.split("\n"):
        if line.startswith("# %%"):
            flush()
            kind, lines = ("markdown" if "[markdown]" in line else "code"), []
        elif kind is not None:
            lines.append(line)
    flush()
    return cells


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


def with_setup(cells: list[dict], name: str, needs: list[str] | None) -> list[dict]:
    """``cells`` with the setup cell before the first code cell."""
    setup = {"cell_type": "code", "source": SETUP_CELL.format(needs=needs, chapter=name)}
    first_code = next((i for i, cell in enumerate(cells) if cell["cell_type"] == "code"), len(cells))
    return cells[:first_code] + [setup] + cells[first_code:]


def render(source: Path, needs: dict[str, list[str]] | None = None) -> str:
    needs = exercise_needs() if needs is None else needs
    cells = with_setup(parse_cells(source.read_text(encoding="utf-8")), source.stem, needs.get(source.stem))
    return json.dumps(to_notebook(cells), indent=1, ensure_ascii=False) + "\n"


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
    stale = []
    for source in sorted(SOURCES.glob("*.py")):
        target = NOTEBOOKS / (source.stem + ".ipynb")
        text = render(source)
        if args.check:
            if not target.exists() or target.read_text(encoding="utf-8") != text:
                stale.append(target.name)
        else:
            target.write_text(text, encoding="utf-8")
            print(f"wrote {target.relative_to(ROOT)}")
    if stale:
        print("out of date (run python tools/build_notebooks.py):", ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
