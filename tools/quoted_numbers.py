"""Quoted numbers: each measured number quoted in README.md, chapters/ and benchmarks/*/*.md (and in
the Japanese edition: README.ja.md, chapters/ja/) names the results file that holds it, in an HTML
comment right after it (a "fig" marker; pictures are chapters/figures/, see tools/captions.py):

    reached **36.48**<!-- fig small_parallel_enja_en-ja.json:test_bleu --> test BLEU
    92.4<!-- fig default_run.json:test_exact_match x100 --> %

FILE is in the results/ folder beside the script that measured it (benchmarks/GROUP/results/; a name is
unique across the groups, so the marker names the file alone), KEY.PATH walks the JSON
(list items by index: history.4.dev_bleu_greedy), and an optional `x100` scales a fraction to a
percentage (`x1e-6` quotes a count in millions, `x1e-4` in the ten thousands of Japanese 万, `xMiB` a count
of bytes in MiB). The quoted text must equal the value rounded to as many decimals as the text shows
(thousands separators allowed). Markdown renders the comment as nothing.

    python tools/quoted_numbers.py check                 # every quoted figure against its file (exit 1 on a mismatch)
    python tools/quoted_numbers.py update                # rewrite the quoted figures from the files
    python tools/quoted_numbers.py where default_run.json[:KEY]   # every place that quotes a file (or one key)
    python tools/quoted_numbers.py record-run runs/enja  # copy a training run's results.json into default_run.json, then update

Numbers may be written in scientific form, `4e-11` or `8.03·10¹²`, and a marker may follow a hexadecimal
digest instead of a number (`a3f09c1d2e4b<!-- fig heads.json:run.weights -->`): the text must then equal
the string in the file. A KEY of the form A/B quotes the ratio of two values of the file
(`libraries.minitransformer.seconds_per_iter/libraries.pytorch.seconds_per_iter`).

Any other string of a results file (a machine's name, a generated sample) is quoted between two comments,
and the text between them must equal the string: on one line,

    <!-- quote tinyshakespeare.json:machine.kind -->AVX-512 CPU; NumPy's OpenBLAS kernel SkylakeX<!-- end quote -->

or, for a string of several lines, as a fenced block whose lines are the string's:

    <!-- quote japanese_lm.json:samples.0.text -->
    ```text
    私は学生です。
    ```
    <!-- end quote -->

Code is skipped (fenced or indented blocks, `inline code`): a `fig` marker there would print.
tests/book/test_quoted_numbers.py runs `check`; the command line's `check` also runs the generated tables
(tools/regions.py), the unmarked-number check (tools/unmarked.py) and the captions (tools/captions.py).

A results file is found by its name alone (`results_path`): the tools never build a path to one.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from book_files import (DIGEST, DOCUMENTS, MARKER, NUMBER, RESULTS, ROOT, FigureError,  # noqa: E402,F401
                        documents, load_results, results_path)

RUN_RESULTS = RESULTS / "book" / "results"          # where record-run writes default_run.json

SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
SCALES = {"x100": 100, "x1e-6": 1e-6, "x1e-4": 1e-4, "xMiB": 2 ** -20}
INLINE_CODE = re.compile(r"`[^`]*`")
# the fields of a run's results.json that the README and chapter 11 quote
RUN_FIELDS = ("steps", "train_seconds", "wall_seconds", "test_bleu", "test_exact_match",
              "test_heldout_bleu", "test_heldout_exact_match", "final_model")


@dataclass
class Quote:
    path: Path
    line: int
    text: str
    file: str
    key: str
    scale: str | None               # x100, x1e-6, x1e-4 or xMiB
    span: tuple[int, int]          # of the quoted number in the document's text

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path}:{self.line}"


def quotes_in(path: Path, text: str | None = None) -> list[Quote]:
    """The markers of one Markdown document, outside fenced code blocks."""
    text = path.read_text(encoding="utf-8") if text is None else text
    found, offset, fenced = [], 0, False
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and not line.startswith("    "):          # indented lines are code too
            line = INLINE_CODE.sub(lambda m: " " * len(m.group()), line)   # `code` spans: same offsets
            matches = list(MARKER.finditer(line))
            if len(matches) != line.count("<!-- fig "):
                raise FigureError(f"{path.name if not path.is_relative_to(ROOT) else path.relative_to(ROOT)}:{number}: a `<!-- fig FILE.json:KEY -->` marker that is malformed "
                                  f"or does not follow a number directly")
            for m in matches:
                found.append(Quote(path, number, m["text"], m["file"], m["key"], m["scale"],
                                   (offset + m.start("text"), offset + m.end("text"))))
        offset += len(line)
    return found


def lookup(file: str, key: str, results: Path = RESULTS) -> object:
    if "/" in key:                            # A/B: the ratio of two numbers of the file
        numerator, denominator = (lookup(file, part, results) for part in key.split("/", 1))
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (numerator, denominator)):
            raise FigureError(f"{file}: {key}: a ratio needs two numbers, got {numerator!r} and {denominator!r}")
        if denominator == 0:
            raise FigureError(f"{file}: {key}: the denominator is 0")
        return numerator / denominator
    value = load_results(file, results)
    parts = key.split(".")
    while parts:
        part = parts.pop(0)
        if isinstance(value, list) and part.lstrip("-").isdigit() and -len(value) <= int(part) < len(value):
            value = value[int(part)]
            continue
        if isinstance(value, dict):   # the longest key that matches, so that a key may hold a dot ("0.6")
            for n in range(len(parts), -1, -1):
                if ".".join([part, *parts[:n]]) in value:
                    part = ".".join([part, *parts[:n]])
                    del parts[:n]
                    break
        if isinstance(value, dict) and part in value:
            value = value[part]
        else:
            raise FigureError(f"{file}: no key {key!r} (stopped at {part!r})")
    return value


def render(value: object, like: str, scale: str | bool | None) -> str:
    """The value written the way ``like`` is written: its number of decimals, its thousands separators,
    its scientific form (4e-11, 8.03·10¹²); a string (a digest) stays as it is."""
    if isinstance(value, str) and re.fullmatch(DIGEST, like):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FigureError(f"value {value!r} is not a number")
    if scale:
        value = value * (100 if scale is True else SCALES[scale])
    mantissa = re.split(r"e|·10", like)[0]
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    if "e" in like or "·10" in like:
        digits, exponent = f"{value:.{decimals}e}".split("e")
        exponent = str(int(exponent))
        return f"{digits}e{exponent}" if "e" in like else f"{digits}·10{exponent.translate(SUPERSCRIPT)}"
    return f"{value:,.{decimals}f}" if "," in like else f"{value:.{decimals}f}"


QUOTE = re.compile(r"<!-- quote (?P<file>[\w.-]+\.json):(?P<key>[^\s>]+) -->(?P<body>.*?)<!-- end quote -->", re.DOTALL)
FENCED_BODY = re.compile(r"\n```[^\n`]*\n(?P<text>.*?)\n?```\n\Z", re.DOTALL)


@dataclass
class StringQuote:
    path: Path
    line: int
    text: str                      # as the document writes it (a fenced block: its lines)
    file: str
    key: str
    span: tuple[int, int]          # of the text in the document

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path}:{self.line}"


def string_quotes_in(path: Path, text: str | None = None) -> list[StringQuote]:
    """The `<!-- quote FILE.json:KEY -->…<!-- end quote -->` regions of one document: on one line, the text
    between the comments; over several, the lines of the fenced block between them."""
    text = path.read_text(encoding="utf-8") if text is None else text
    found = []
    for m in QUOTE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        start, body = m.start("body"), m["body"]
        if "\n" in body:
            fenced = FENCED_BODY.fullmatch(body)
            if not fenced:
                raise FigureError(f"{path.name}:{line}: a quote of several lines must be one fenced block "
                                  f"(```) between `<!-- quote {m['file']}:{m['key']} -->` and `<!-- end quote -->`, "
                                  f"each on a line of its own")
            span = (start + fenced.start("text"), start + fenced.end("text"))
        else:
            span = (start, m.end("body"))
        found.append(StringQuote(path, line, text[span[0]:span[1]], m["file"], m["key"], span))
    if text.count("<!-- quote ") != len(found):
        raise FigureError(f"{path.name}: a `<!-- quote FILE.json:KEY -->` without its `<!-- end quote -->`, "
                          f"or malformed")
    return found


def quoted_string(file: str, key: str, results: Path = RESULTS) -> str:
    value = lookup(file, key, results)
    if not isinstance(value, str):
        raise FigureError(f"{file}: {key} is {value!r}, not a string; quote a number with `<!-- fig -->`")
    if "```" in value:
        raise FigureError(f"{file}: {key} holds ```, which would end its fenced block")
    return value


def check(root: Path = ROOT, results: Path = RESULTS) -> list[str]:
    """One line per quoted figure that does not match its source."""
    problems = []
    for path in documents(root):
        try:
            quotes = quotes_in(path)
        except FigureError as error:
            problems.append(str(error))
            continue
        for quote in quotes:
            try:
                expected = render(lookup(quote.file, quote.key, results), quote.text, quote.scale)
            except FigureError as error:
                problems.append(f"{quote.where}: {error}")
                continue
            if expected != quote.text:
                problems.append(f"{quote.where}: quotes {quote.text}, {quote.file}:{quote.key} says {expected}")
        try:
            strings = string_quotes_in(path)
        except FigureError as error:
            problems.append(str(error))
            continue
        for quote in strings:
            try:
                expected = quoted_string(quote.file, quote.key, results)
            except FigureError as error:
                problems.append(f"{quote.where}: {error}")
                continue
            if expected != quote.text:
                problems.append(f"{quote.where}: quotes {quote.text!r}, {quote.file}:{quote.key} says {expected!r}")
    return problems


def update(root: Path = ROOT, results: Path = RESULTS) -> list[str]:
    """Rewrite every quoted figure from its source; the changed places, one line each."""
    changed = []
    for path in documents(root):
        text = path.read_text(encoding="utf-8")
        edits = []
        for quote in quotes_in(path, text):
            new = render(lookup(quote.file, quote.key, results), quote.text, quote.scale)
            if new != quote.text:
                edits.append((quote.span, new))
                changed.append(f"{quote.where}: {quote.text} -> {new} ({quote.file}:{quote.key})")
        for quote in string_quotes_in(path, text):
            new = quoted_string(quote.file, quote.key, results)
            if new != quote.text:
                edits.append((quote.span, new))
                changed.append(f"{quote.where}: {quote.text!r} -> {new!r} ({quote.file}:{quote.key})")
        for (start, end), new in sorted(edits, reverse=True):
            text = text[:start] + new + text[end:]
        if edits:
            path.write_text(text, encoding="utf-8")
    return changed


def _this_machine() -> dict:
    """benchmarks/common.py's record of this machine (CPU, OpenBLAS kernel, load). record-run runs right after
    the training it records (tools/regenerate.py's default_run step), so this is the machine that trained."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from common import machine_record  # noqa: PLC0415 - only record-run needs the benchmarks' helpers

    return machine_record()


def record_run(run: Path, results: Path = RUN_RESULTS) -> dict:
    """Copy the quoted fields of RUN/results.json into default_run.json, with this machine's record."""
    source = run / "results.json"
    if not source.is_file():
        raise FigureError(f"{source}: no results.json (is {run} a finished training run?)")
    summary = json.loads(source.read_text(encoding="utf-8"))
    record = {"source": f"python tools/quoted_numbers.py record-run {run}",
              "command": f"python -m minitransformer train --out {run}"}
    record.update({k: summary[k] for k in RUN_FIELDS if k in summary})
    record["machine"] = _this_machine()      # the README names the BLAS kernel its figures come from
    record["epochs"] = round(summary["epochs"], 1)
    record["step_seconds"] = round(summary["train_seconds"] / summary["steps"], 3)
    record["history"] = [{"epoch": h["epoch"], "step": h["step"], "dev_bleu_greedy": round(h["dev_bleu_greedy"], 1)}
                         for h in summary.get("history", [])]
    (results / "default_run.json").write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="every quoted figure against its results file; unmarked numbers; captions")
    sub.add_parser("update", help="rewrite the quoted figures from their results files")
    where = sub.add_parser("where", help="every place that quotes FILE (or FILE:KEY)")
    where.add_argument("source")
    record = sub.add_parser("record-run", help="copy a training run's results into default_run.json, then update")
    record.add_argument("run", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            import captions  # noqa: PLC0415 - the two other checks, which import only book_files
            import unmarked  # noqa: PLC0415

            problems = check() + unmarked.check() + captions.check()
            print("\n".join(problems) or "every quoted figure matches its results file, every measured number "
                                          "names one, and every figure's caption names its source")
            return 1 if problems else 0
        if args.command == "where":
            file, _, key = args.source.partition(":")
            for path in documents():
                for q in [*quotes_in(path), *string_quotes_in(path)]:
                    if q.file == file and (not key or q.key == key or q.key.startswith(key + ".")):
                        print(f"{q.where}: {q.text} ({q.file}:{q.key})")
            return 0
        if args.command == "record-run":
            record_run(args.run)
            print(f"wrote {RUN_RESULTS / 'default_run.json'}")
        print("\n".join(update()) or "no quoted figure changed")
        return 0
    except FigureError as error:
        print(f"figures: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
