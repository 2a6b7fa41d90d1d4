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
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "notebooks" / "src"
NOTEBOOKS = ROOT / "notebooks"


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


def render(source: Path) -> str:
    return json.dumps(to_notebook(parse_cells(source.read_text(encoding="utf-8"))), indent=1,
                      ensure_ascii=False) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if a notebook differs from its source")
    args = parser.parse_args()
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
