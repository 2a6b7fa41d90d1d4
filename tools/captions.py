"""Every picture from the run it names: each figure of chapters/figures/ is drawn by a script from a results
file or a named run, and its caption says which.

    python tools/captions.py          # every problem, one line each (exit 1 if any)

chapters/figures/sources.json lists every figure:

    "12-cross-heads.png": {"drawn_by": "chapters/figures/make_12.py", "from": ["heads.json"], "run": "heads.json"}

* ``drawn_by``: the script (or notebook source) that draws it; its text must name the figure;
* ``from``: the results files it is drawn from (found by name, tools/book_files.py's ``results_path``), each
  named in the script's text; or, for a figure that measures nothing (an illustration, a formula, a
  seeded computation), ``"computed"`` and ``why``;
* ``run``: the results file that records the trained run a figure shows (benchmarks/runs.py's record under
  its ``run`` key). The script draws only from a run folder whose weights are the recorded ones.

In the chapters (both languages) every image is followed by its caption, the next paragraph, in italics.
A caption carries a `<!-- fig FILE.json:KEY -->` marker into each file its figure is drawn from, and the
caption of a figure of a trained run quotes the run's steps and the digest of its weights from the run's
results file: a caption that names a run whose results are gone or say otherwise fails here (or in
tools/quoted_numbers.py, which compares every marked value). "The default model" alone names no run.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from book_files import MARKER, RESULTS, ROOT, FigureError, load_results, results_path  # noqa: E402

FIGURES = ROOT / "chapters" / "figures"
SOURCES = FIGURES / "sources.json"
IMAGE = re.compile(r"^!\[[^\]]*\]\((?:\.\./)?figures/(?:ja/)?(?P<name>[^)\s]+\.png)\)\s*$")
VAGUE = re.compile(r"default (?:model|run)|既定のモデル|既定の学習|既定の実行")


def captions(text: str) -> list[tuple[int, str, str | None]]:
    """(line, figure name, caption or None) for every chapter image outside code."""
    lines, found, fenced = text.splitlines(), [], False
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if fenced or not (m := IMAGE.match(line.strip())):
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        paragraph = []
        while j < len(lines) and lines[j].strip():
            paragraph.append(lines[j].strip())
            j += 1
        caption = " ".join(paragraph)
        italic = caption.startswith(("*", "_")) and not caption.startswith(("* ", "**", "_ "))
        found.append((i + 1, m["name"], caption if italic else None))
    return found


def check(root: Path = ROOT, results: Path | None = None) -> list[str]:
    results = results or RESULTS
    figures = root / "chapters" / "figures"
    sources = json.loads((figures / "sources.json").read_text(encoding="utf-8"))
    problems = []
    drawn = {p.name for p in figures.glob("*.png")} | {p.name for p in (figures / "ja").glob("*.png")}
    for name in sorted(drawn - set(sources)):
        problems.append(f"chapters/figures/{name}: not in chapters/figures/sources.json (which script draws it, "
                        f"from what?)")
    for name, entry in sources.items():
        if name not in drawn:
            problems.append(f"sources.json: {name} is listed but not drawn")
            continue
        script = root / entry.get("drawn_by", "")
        if not entry.get("drawn_by") or not script.is_file():
            problems.append(f"sources.json: {name}: drawn_by {entry.get('drawn_by')!r} is not a file")
            continue
        code = script.read_text(encoding="utf-8")
        if Path(name).stem not in code:
            problems.append(f"sources.json: {name}: {entry['drawn_by']} does not draw it (its name is not in it)")
        origin = entry.get("from")
        if origin == "computed":
            if not entry.get("why"):
                problems.append(f"sources.json: {name}: a computed figure says why it measures nothing")
        elif not origin:
            problems.append(f"sources.json: {name}: 'from' names its results files, or is \"computed\"")
        else:
            for file in origin:
                try:
                    results_path(file, results)
                except FigureError as error:
                    problems.append(f"sources.json: {name}: {error}")
                if Path(file).stem not in code:
                    problems.append(f"sources.json: {name}: {entry['drawn_by']} does not read {file}")
        run = entry.get("run")
        if run:
            try:
                record = load_results(run, results).get("run")
            except FigureError as error:
                problems.append(f"sources.json: {name}: {error}")
                record = None
            if not isinstance(record, dict) or not record.get("weights"):
                problems.append(f"sources.json: {name}: {run} records no run (a 'run' with its 'weights')")
    for path in sorted((root / "chapters").glob("*.md")) + sorted((root / "chapters" / "ja").glob("*.md")):
        where = path.relative_to(root)
        for line, name, caption in captions(path.read_text(encoding="utf-8")):
            entry = sources.get(name, {})
            if caption is None:
                problems.append(f"{where}:{line}: {name} has no caption (the next paragraph, in italics)")
                continue
            quoted = {(m["file"], m["key"]) for m in MARKER.finditer(caption)}
            if entry.get("from") not in (None, "computed"):
                for file in entry["from"]:
                    if not any(f == file for f, _ in quoted):
                        problems.append(f"{where}:{line}: the caption of {name} quotes nothing from {file}, "
                                        f"which it is drawn from")
            run = entry.get("run")
            if run:
                for key in ("run.steps", "run.weights"):
                    if (run, key) not in quoted:
                        problems.append(f"{where}:{line}: the caption of {name} does not name its run by "
                                        f"{run}:{key}")
            elif VAGUE.search(caption):
                problems.append(f"{where}:{line}: the caption of {name} says 'the default model' but names no run")
    return problems


def main() -> int:
    problems = check()
    print("\n".join(problems) or "every figure names its script, its sources and, in its caption, its run")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
