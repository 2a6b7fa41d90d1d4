"""Lint the Japanese edition with textlint: the preset ja-technical-writing (です・ます) and the glossary's prh rules.

What it reads: chapters/ja/*.md (but the glossary, whose table lists the rejected spellings on purpose),
README.ja.md, and the Japanese Markdown cells (`# %% [markdown] ja`) of notebooks/src/*.py, the one place the
Japanese notebooks' text lives (notebooks/ja/*.ipynb are built from them). Each source's cells are linted as
one Markdown file and every message is reported at the source's own line. Math is not prose: textlint's
Markdown parser does not know `$$…$$` and `$…$`, so the copies it reads have display math blanked (lines kept)
and each inline formula written as the inline code `x` (a column after a formula is therefore approximate).

    npm ci                                   # textlint and its rules, pinned in package.json
    python tools/textlint_ja.py              # messages, then the count by rule; exit 1 if any
    python tools/textlint_ja.py --record     # also write the count by rule and file to RESULTS
    python tools/textlint_ja.py --fix FILE   # let textlint fix what it can (glossary terms, 一つ) in FILE

The configuration is .textlintrc.json; the prh rules, tools/textlint/prh-ja.yml, are written from the
glossary by tools/glossary_prh.py.
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from build_notebooks import parse_cells  # noqa: E402
import glossary_prh  # noqa: E402

TEXTLINT = ROOT / "node_modules" / ".bin" / "textlint"
CONFIG = ROOT / ".textlintrc.json"
RESULTS = ROOT / "benchmarks" / "book" / "results" / "textlint_ja.json"
RULE_PREFIX = "ja-technical-writing/"


def documents(root: Path = ROOT) -> list[Path]:
    """The Markdown files of the Japanese edition textlint reads as they are."""
    chapters = [p for p in sorted((root / "chapters" / "ja").glob("*.md")) if p.name != "glossary.md"]
    return chapters + [p for p in [root / "README.ja.md"] if p.is_file()]


def notebook_sources(root: Path = ROOT) -> list[Path]:
    return sorted((root / "notebooks" / "src").glob("*.py"))


def japanese_cells_as_markdown(source: Path) -> tuple[str, list[int]]:
    """A source's Japanese Markdown cells as one document, and for each of its lines the source's line number."""
    text, lines = [], []
    for cell in parse_cells(source.read_text(encoding="utf-8")):
        if cell.get("language") != "ja":
            continue
        for offset, line in enumerate(cell["source"].split("\n"), start=1):
            text.append(line)
            lines.append(cell["line"] + offset)
        text.append("")
        lines.append(cell["line"])
    return "\n".join(text) + "\n", lines


DISPLAY_MATH = re.compile(r"\$\$.*?\$\$", re.DOTALL)
INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\s)[^$\n]+?(?<![\s\\])\$(?!\d)")


def without_math(text: str) -> str:
    """The text with display math blanked, its line breaks kept, and each inline formula written as the inline code `x`."""
    text = DISPLAY_MATH.sub(lambda m: "\n" * m.group().count("\n"), text)
    return INLINE_MATH.sub("`x`", text)


def run_textlint(paths: list[Path], fix: bool = False) -> list[dict]:
    if not TEXTLINT.is_file():
        raise SystemExit(f"textlint is not installed ({TEXTLINT.relative_to(ROOT)} missing): run `npm ci` first")
    command = [str(TEXTLINT), "--config", str(CONFIG), "--format", "json", *(["--fix"] if fix else []),
               *map(str, paths)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, encoding="utf-8")
    if done.returncode not in (0, 1) or not done.stdout.strip():
        raise SystemExit(f"textlint failed (exit {done.returncode}):\n{done.stderr or done.stdout}")
    return json.loads(done.stdout)


def lint(root: Path = ROOT, only: list[Path] | None = None) -> list[dict]:
    """Every message as {file, line, column, rule, message}: file relative to ``root``, line in that file."""
    stale = glossary_prh.render(glossary_prh.prh_rules(glossary_prh.GLOSSARY.read_text(encoding="utf-8")))
    if glossary_prh.OUTPUT.read_text(encoding="utf-8") != stale:
        raise SystemExit("tools/textlint/prh-ja.yml is out of date with the glossary: run python tools/glossary_prh.py")
    files = {}
    with tempfile.TemporaryDirectory(prefix="textlint-ja-") as scratch:
        for number, path in enumerate(only or documents(root)):
            copy = Path(scratch) / f"{number:02d}-{path.name}"
            copy.write_text(without_math(path.read_text(encoding="utf-8")), encoding="utf-8")
            files[copy.resolve()] = (path, None)
        for source in ([] if only else notebook_sources(root)):
            text, lines = japanese_cells_as_markdown(source)
            copy = Path(scratch) / f"{source.stem}.ja.md"
            copy.write_text(without_math(text), encoding="utf-8")
            files[copy.resolve()] = (source, lines)
        messages = []
        for result in run_textlint(list(files)):
            path, lines = files[Path(result["filePath"]).resolve()]
            for m in result["messages"]:
                line = lines[m["line"] - 1] if lines else m["line"]
                name = path.resolve()
                name = name.relative_to(root.resolve()).as_posix() if name.is_relative_to(root.resolve()) else str(name)
                messages.append({"file": name, "line": line,
                                 "column": m["column"], "rule": m["ruleId"].removeprefix(RULE_PREFIX),
                                 "message": m["message"].split("\n")[0]})
    return messages


def counts(messages: list[dict]) -> dict:
    by_file: dict[str, Counter] = {}
    for m in messages:
        by_file.setdefault(m["file"], Counter())[m["rule"]] += 1
    return {"total": len(messages),
            "by_rule": dict(Counter(m["rule"] for m in messages).most_common()),
            "by_file": {f: dict(c.most_common()) for f, c in sorted(by_file.items())}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="lint only these Markdown files (default: the edition)")
    parser.add_argument("--record", action="store_true", help=f"write the counts to {RESULTS.relative_to(ROOT)}")
    parser.add_argument("--fix", action="store_true", help="let textlint fix what it can in FILES (Markdown only)")
    args = parser.parse_args(argv)
    if args.fix:
        if not args.files:
            parser.error("--fix needs the Markdown files to fix")
        run_textlint(args.files, fix=True)
    if args.record and args.files:
        parser.error("--record counts the whole edition: give no files")
    messages = lint(only=[f.resolve() for f in args.files] or None)
    for m in messages:
        print(f"{m['file']}:{m['line']}:{m['column']}: {m['rule']}: {m['message']}")
    summary = counts(messages)
    print(f"\n{summary['total']} errors: " + ", ".join(f"{rule} {n}" for rule, n in summary["by_rule"].items()))
    if args.record:
        textlint = json.loads((ROOT / "node_modules" / "textlint" / "package.json").read_text())["version"]
        record = {"command": "python tools/textlint_ja.py --record",
                  "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                  "textlint": textlint, **summary}
        RESULTS.write_text(json.dumps(record, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 1 if messages else 0


if __name__ == "__main__":
    sys.exit(main())
