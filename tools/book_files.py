"""What the book's checkers share: where the book and the results files are, the `<!-- fig FILE.json:KEY -->`
marker, and how a results file is found by its name.

tools/quoted_numbers.py (the quoted figures), tools/unmarked.py (numbers with no marker) and tools/captions.py
(the pictures' captions) each import this module and none imports another's, so each can be read and run
alone; `quoted_numbers.py check` runs the other two as well, importing them, and nothing imports it back.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks"                        # results files: benchmarks/GROUP/results/NAME.json
DOCUMENTS = ("README.md", "chapters/*.md", "benchmarks/*.md", "benchmarks/*/*.md", "TEACHING.md",
             "README.ja.md", "chapters/ja/*.md")          # a re-measured figure changes in both languages

NUMBER = r"-?\d[\d,]*(?:\.\d+)?(?:e-?\d+|·10[⁻]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)?"
DIGEST = r"(?<![\w.])[0-9a-f]*[a-f][0-9a-f]*(?![\w.])"                  # a hexadecimal digest, one letter at least
MARKER = re.compile(rf"(?P<text>{DIGEST}|{NUMBER})(?P<between>[*$]*)<!-- fig (?P<file>[\w.-]+\.json):(?P<key>[^\s>]+)"
                    rf"(?: (?P<scale>x100|x1e-6|x1e-4|xMiB))? -->")


class FigureError(Exception):
    """A marker that names a file or key that does not exist, or a value that is not a number."""


def documents(root: Path = ROOT) -> list[Path]:
    """The book's Markdown documents, both languages."""
    return sorted({p for pattern in DOCUMENTS for p in root.glob(pattern)})


def results_path(name: str, results: Path = RESULTS) -> Path:
    """The results file called ``name`` (``heads.json``): in ``results``, or else anywhere below it, so that
    results kept beside the scripts that wrote them are found by the same name. The one place that knows
    where results files live."""
    direct = results / name
    if direct.is_file():
        return direct
    below = sorted(p for p in results.rglob(name) if ".venv" not in p.parts)
    if len(below) > 1:
        raise FigureError(f"{name}: more than one results file of that name: {', '.join(map(str, below))}")
    if not below:
        raise FigureError(f"{name}: no such results file in {results}")
    return below[0]


def load_results(name: str, results: Path = RESULTS) -> dict:
    return json.loads(results_path(name, results).read_text(encoding="utf-8"))
