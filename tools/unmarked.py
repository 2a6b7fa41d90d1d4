"""No measured number without its source: find the numbers in the book that look measured and carry no
`<!-- fig FILE.json:KEY -->` marker (tools/quoted_numbers.py), in both languages.

    python tools/unmarked.py              # every unmarked measured number, one line each (exit 1 if any)
    python tools/unmarked.py --list       # the exempt numbers and why (tools/exempt_numbers.json)

What counts as measured, outside code, math, links and HTML comments:

* every number in a table's body, except in its first column (the row's label);
* a number followed by a unit: a time (s, ms, µs, minutes, hours, 秒, 分, 時間), memory (MiB, GB, …), a
  rate (GFLOP/s, tokens/s, steps/s), FLOPs, a percentage, a ratio (×, x, times, 倍), a multiplier of a
  count (k, M, million, 万, 億) or a count the README and TEACHING.md give (exercises, tests, chapters);
* a number next to a score's name: BLEU, chrF, PPL, perplexity, F1, accuracy, AER (a score *is* a
  measurement);
* a number in scientific form (4e-11, 8.03·10¹²);
* a decimal number (0.861) that does not follow `=` (P_drop = 0.1 defines, it does not report);
* a count written with thousands separators (4,481 or 1,224,570) that is neither round (20,000) nor a
  power of two (16,384);
* a number with its unit joined by a hyphen ("a 20-second run", "a 7.5-M model");
* a number spelled out in words before a unit ("about five hours", "three points ahead", "a
  one-million-parameter model"; in Japanese kanji numerals, 五時間, 三ポイント), and "a point" as a
  difference ("within about a point", "more than a point"): the measured number is then written in
  digits with its marker, or the sentence says it without one;
* an integer in prose that repeats a figure of a table above it in the same document ("in 964 s" after
  a table that holds 964): quoted a second time, it needs the marker a second time.

Not measured: section numbers (§3.2.1, "12.1 Exercises"), exercise ids (Exercise 12.1, 演習 12.1), chapter,
equation, table and figure numbers, versions (NumPy 2.4), and the tables a script writes between
`<!-- begin: FILE.json -->` and `<!-- end: FILE.json -->` (tests/functional/test_long_sequences.py compares them with
their script's rendering; the Japanese copy must hold the same numbers in the same order, checked here).

What looks measured but is not (the paper's constants, each with its section or table; settings of a
preset; arithmetic on definitions; tolerances) is listed in tools/exempt_numbers.json, each entry with
the documents it applies to (by file name, so a chapter and its Japanese twin share it) and why. An
entry that no longer matches anything is reported too, so the list cannot silently outgrow the book.
A number that cannot be sourced is rewritten, not exempted.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from book_files import MARKER, ROOT, documents  # noqa: E402

EXEMPT = Path(__file__).resolve().parent / "exempt_numbers.json"

NUMBER = re.compile(r"(?<![\w.,/§#^_{\\-])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE]-?\d+|·10[⁻]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+)?"
                    r"(?![\w]|\.\d|,\d{3})")
UNIT = re.compile(
    r"[\s-]?(?:%|％|×(?!\s*\d)|x(?![\w]|\s*\d)|ms\b|s\b|sec\b|seconds?\b|minutes?\b|min\b|hours?\b|h\b|days?\b|µs|us\b|ns\b"
    r"|[KMGT]i?B\b|kB\b|bytes?\b|[GTP]?FLOPs?(?:/s)?|tok(?:ens)?/s|steps/s|batches/s|sentences/s|GB/s|TB/s"
    r"|(?:(?:target |source )?tokens|steps|sentences|batches|words) (?:a|per) second\b|parameters\b"
    r"|times\b|k\b|M\b|million\b|billion\b|thousand\b|BLEU\b|chrF|points?\b|F1\b"
    r"|(?:graded )?exercises\b|tests\b|chapters\b|notebooks\b"
    r"|秒|分(?!の)|時間|日|倍|パーセント|ポイント|万|億|問|件)")
SCORE_BEFORE = re.compile(r"(?:BLEU|chrF\+*|PPL|perplexity|F1|accuracy|AER|パープレキシティ|正解率)[\s:：(（]*$")
NOT_A_MEASUREMENT_BEFORE = re.compile(
    r"(?:§|§\d+(?:\.\d+)*[–-]|[Ss]ections?\s*|Exercises?\s*|演習\s*|[Cc]hapters?\s*|第\s*|[Ee]q\.\s*|[Ee]qs\.\s*|式\s*"
    r"|Tables?\s*|表\s*|Figures?\s*|図\s*"
    r"|[Vv]ersion\s*|NumPy\s*|PyTorch\s*|Python\s*|CUDA\s*|torch\s*|sacrebleu\s*|arXiv:|ex_|step-)$")
ROUND = re.compile(r"\d{1,3}(?:,000)+|\d{1,3},\d00")
NOT_A_MEASUREMENT_AFTER = re.compile(r"\s*(?:節|章|秒あたり|分間の)")     # 4.3 節, 第 12 章, 1 秒あたり (per second)
# a table cell that is a value: a number (± a number, / a number, a range), with a unit or a marker
VALUE_CELL = re.compile(r"\s*(?:\*\*)?[~≈<>≤≥]?\s*[-−]?\d[\d,.]*(?:e-?\d+|·10\S+)?(?:\*\*)?"
                        r"(?:\s*(?:±|/|–|-|to)\s*[-−]?\d[\d,.]*(?:\*\*)?)*\s*(?:[^\s|\d(][^|(]{0,12})?\s*(?:\([^|]*\))?\s*")


# numbers spelled out in words, before a unit: "five hours", "three points ahead", "one-million-parameter"
WORD_NUMBER = (r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen"
               r"|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand"
               r"|million|billion|half|a dozen)")
SPELLED_UNIT = (r"(?:seconds?|minutes?|hours?|days?|points?|percent|per cent|BLEU|times (?:faster|slower|as|more|less|the)"
                r"|(?:million|thousand)-?parameters?|parameters?|MiB|GiB|(?:target )?tokens (?:a|per) second)")
SPELLED_NUMBER = rf"(?P<number>{WORD_NUMBER}(?:[\s-](?:and[\s-])?{WORD_NUMBER})*)"
HEDGE = r"(?:about|around|roughly|some|nearly|almost|over|under|more than|less than|within|at least|at most|only|just|by)"
COMPARED = (r"(?:points?|BLEU points?) (?:ahead|behind|apart|higher|lower|better|worse|above|below|more|less)"
            r"|times (?:faster|slower|as (?:long|much|fast|slow|many|large|big)|more|less|longer|shorter|larger|smaller)")
SPELLED = [re.compile(rf"(?<![\w-]){form}\b", re.IGNORECASE) for form in (
    rf"{HEDGE}\s+(?:a\s+)?{SPELLED_NUMBER}[\s-]{SPELLED_UNIT}",                                  # about five hours
    rf"{SPELLED_NUMBER}-(?:{SPELLED_UNIT}|[a-z]+-(?:parameter|step|word|token|minute|hour|second)s?)",  # one-million-parameter
    rf"{SPELLED_NUMBER}\s(?:{COMPARED})")]                                                       # three points ahead
A_POINT = re.compile(r"\b(?:about|within|than|by|of|only|nearly|almost)\s+(?:about\s+)?(?P<number>a (?:point|BLEU point))\b")
# kanji numerals before a unit (五時間, 三ポイント, 二倍); 十分 (enough) and 二分 (halving, 二分探索) are words
KANJI_NUMBER = re.compile(r"(?:(?<![一-龯々])|(?<=約))(?![一二三四五六七八九十百千万億]*分[の五])(?P<number>(?!十分|二分)[一二三四五六七八九十百千]+(?:万|億)?)\s?"
                          r"(?=秒|分(?!の)|時間|日(?!本)|倍|パーセント|ポイント|万|億)")


def blank(match: re.Match) -> str:
    return " " * len(match.group())


SKIPPED = [re.compile(p) for p in (
    r"<!--.*?-->",                  # markers and comments
    r"`[^`]*`",                     # inline code
    r"\$\$.*?\$\$", r"\$[^$]+\$",   # math
    r"\]\([^)]*\)",                 # link and image targets
    r"https?://\S+",
)]


@dataclass
class Hit:
    path: Path
    line: int
    text: str                # the number as written
    why: str                 # which rule found it
    context: str
    table: str | None = None   # the header row of the table it stands in
    column: int | None = None  # its column there, 1 = the first
    relative: str = ""         # the document's path from the repository root

    def where(self, root: Path = ROOT) -> str:
        return f"{self.path.relative_to(root).as_posix() if self.path.is_relative_to(root) else self.path.name}:{self.line}"


@dataclass
class Exemption:
    files: list[str]
    why: str
    numbers: list[str] = field(default_factory=list)
    table: list[str] = field(default_factory=list)     # substrings of a table's header row (one per language)
    columns: list[int] = field(default_factory=list)   # 1-based; empty: every column
    used: set = field(default_factory=set)

    def applies_to(self, hit: Hit) -> bool:
        # a name (12-looking-inside.md) covers a chapter and its Japanese twin; a path (benchmarks/speed/speed.md)
        # one document
        if not any(fnmatch.fnmatch(hit.relative if "/" in pattern else hit.path.name, pattern)
                   for pattern in self.files):
            return False
        if self.table:
            if hit.table is None or not any(t in hit.table for t in self.table):
                return False
            if self.columns and hit.column not in self.columns:
                return False
            self.used.add("table")
            return True
        if hit.text in self.numbers:
            self.used.add(hit.text)
            return True
        return False

    def unused(self) -> list[str]:
        if self.table:
            return [] if "table" in self.used else [f"the table headed {self.table}"]
        return [n for n in self.numbers if n not in self.used]


def load_exemptions(path: Path = EXEMPT) -> list[Exemption]:
    entries = json.loads(path.read_text(encoding="utf-8"))
    exemptions = []
    for i, entry in enumerate(entries):
        unknown = set(entry) - {"in", "numbers", "table", "columns", "why"}
        if unknown or not entry.get("why") or not entry.get("in") or not (entry.get("numbers") or entry.get("table")):
            raise ValueError(f"{path.name}, entry {i + 1}: needs 'in' (file names), 'why', and 'numbers' or 'table'"
                             + (f"; unknown fields {sorted(unknown)}" if unknown else ""))
        files = [entry["in"]] if isinstance(entry["in"], str) else entry["in"]
        table = [entry["table"]] if isinstance(entry.get("table"), str) else entry.get("table", [])
        exemptions.append(Exemption(files, entry["why"], [str(n) for n in entry.get("numbers", [])], table,
                                    entry.get("columns", [])))
    return exemptions


def regions(text: str) -> dict[str, tuple[list[str], Counter]]:
    """Generated tables: results file -> (the numbers of its table rows in order, the numbers of its prose)."""
    found = {}
    for m in re.finditer(r"<!-- begin: (\S+) -->(.*?)<!-- end: \1 -->", text, re.DOTALL):
        lines = m.group(2).splitlines()
        rows = [n for line in lines if line.strip().startswith("|") for n in NUMBER.findall(line)]
        prose = Counter(n for line in lines if not line.strip().startswith("|") for n in NUMBER.findall(line))
        found[m.group(1)] = (rows, prose)
    return found


def same_numbers(english: tuple[list[str], Counter], japanese: tuple[list[str], Counter]) -> bool:
    """The tables hold the same numbers in the same order; the Japanese prose holds every English number
    (and may hold a few more: 1 回の, 3 つの)."""
    return english[0] == japanese[0] and not (english[1] - japanese[1])


MATH = re.compile(r"\$\$.*?\$\$|(?<![\\$])\$(?!\$)(?:[^$\n]|\n(?!\s*\n))+?(?<!\\)\$", re.DOTALL)
FENCED = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.DOTALL | re.MULTILINE)


def without_math(text: str) -> str:
    """The text with its $…$ and $$…$$ math blanked out (line breaks kept), outside fenced code: an inline
    formula may run over a line break."""
    keep = [(m.start(), m.end()) for m in FENCED.finditer(text)]

    def blank_math(m: re.Match) -> str:
        if any(a <= m.start() < b for a, b in keep):
            return m.group()
        return re.sub(r"[^\n]", " ", m.group())
    return MATH.sub(blank_math, text)


def candidates(path: Path, text: str | None = None) -> list[Hit]:
    """Every number of a document that looks measured and carries no marker (exemptions not applied)."""
    text = path.read_text(encoding="utf-8") if text is None else text
    originals = text.splitlines()
    hits, fenced, generated, table = [], False, False, None
    table_figures: set[str] = set()      # the numbers of the tables seen so far: quoted again in prose, they need a marker
    lines = without_math(text).splitlines()
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if fenced or line.startswith("    ") or line.startswith("\t"):
            continue
        if "<!-- begin: " in line:
            generated = True
        if "<!-- end: " in line:
            generated = False
            continue
        if generated or stripped.startswith("#"):
            continue
        if not stripped.startswith("|"):
            table = None
        elif table is None:
            table = originals[number - 1].strip()   # the header row, as written
            continue
        if re.fullmatch(r"\|[\s|:-]+\|?", stripped):
            continue
        clean = MARKER.sub(blank, line)
        for pattern in SKIPPED:
            clean = pattern.sub(blank, clean)
        cells = None
        if table is not None:
            bars = [i for i, c in enumerate(clean) if c == "|"]
            cells = bars
        for m in NUMBER.finditer(clean):
            written = m.group()
            before, after = clean[:m.start()], clean[m.end():]
            if not after.strip() and number < len(lines) and not cells:     # a unit wrapped onto the next line
                after = " " + unrendered(MARKER.sub(blank, lines[number])).lstrip()
            if NOT_A_MEASUREMENT_BEFORE.search(before[-12:]) or NOT_A_MEASUREMENT_AFTER.match(after):
                continue
            column = None
            if cells is not None:
                column = sum(1 for b in cells if b < m.start())      # 1 = the first column
                if column <= 1:
                    continue                                          # the row's label
            why = None
            if column is not None and VALUE_CELL.fullmatch(cell_at(clean, cells, m.start())):
                why = "in a table"
            elif UNIT.match(after):
                why = "has a unit"
            elif SCORE_BEFORE.search(before[-20:]):
                why = "is a score"
            elif "e" in written.lower() or "·10" in written:
                why = "scientific form"
            elif "." in written and not re.search(r"[=≤≥<>]\s*$", before):
                why = "a decimal"
            elif "," in written and not ROUND.fullmatch(written) \
                    and int(written.replace(",", "")) & (int(written.replace(",", "")) - 1) != 0:
                why = "a count"
            if why is None and cells is None and written in table_figures and not re.search(r"[=≤≥<>×–〜~-]\s*$", before) \
                    and not re.match(r"\s*(?:[×x]\s*\d|[–〜~-])", after):
                why = "repeats a table's figure"
            if why:
                hits.append(Hit(path, number, written, why, line[max(0, m.start() - 40):m.end() + 25].strip(),
                                table, column))
        if cells is not None:       # a table's measured figures (those with a marker), quoted again below it
            table_figures.update(m["text"] for m in MARKER.finditer(line) if measured_looking(m["text"]))
        for pattern, why in [*((form, "spelled out") for form in SPELLED), (A_POINT, "spelled out"),
                             (KANJI_NUMBER, "in kanji numerals")]:
            for m in pattern.finditer(clean):
                if originals[number - 1][:m.start()].rstrip().endswith("-->"):
                    continue          # "1.4<!-- fig … --> million parameters": the number is the marked one before
                if any(h.line == number and h.why == why and h.text == m.group("number") for h in hits):
                    continue          # two forms found the same words
                hits.append(Hit(path, number, m.group("number"), why,
                                line[max(0, m.start() - 40):m.end() + 25].strip(), table, None))
    return hits


def measured_looking(written: str) -> bool:
    """A table figure that, quoted again, reads as a measurement: not a small count, a round number or a power
    of two (a setting: 16 heads, 256 wide, 1,000 steps)."""
    if not re.fullmatch(r"[\d,]+(?:\.\d+)?", written):
        return False           # a digest, or scientific form: found on its own when quoted again
    if "." in written:
        return True
    whole = int(written.replace(",", ""))
    return whole >= 10 and not re.fullmatch(r"[1-9]0*", str(whole)) and whole & (whole - 1) != 0


def unrendered(text: str) -> str:
    for pattern in SKIPPED:
        text = pattern.sub(blank, text)
    return text


def cell_at(line: str, bars: list[int], position: int) -> str:
    """The text of the table cell around ``position`` (between the bars before and after it)."""
    left = max((b for b in bars if b < position), default=-1)
    right = min((b for b in bars if b > position), default=len(line))
    return line[left + 1:right]


def twin_of(path: Path, root: Path) -> Path | None:
    if path.parent.name == "ja" and path.parent.parent.name == "chapters":
        return path.parent.parent / path.name
    return None


def check(root: Path = ROOT, exempt: Path = EXEMPT) -> list[str]:
    """One line per unmarked measured number, per exemption that matches nothing, and per Japanese generated
    table whose numbers differ from its English twin's."""
    exemptions = load_exemptions(exempt)
    problems = []
    for path in documents(root):
        text = path.read_text(encoding="utf-8")
        for hit in candidates(path, text):
            hit.relative = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
            if not any(e.applies_to(hit) for e in exemptions):
                problems.append(f"{hit.where(root)}: {hit.text} ({hit.why}) has no <!-- fig FILE.json:KEY --> marker: "
                                f"…{hit.context}…")
        twin = twin_of(path, root)
        if twin is not None and twin.is_file():
            english = regions(twin.read_text(encoding="utf-8"))
            for name, numbers in regions(text).items():
                if name not in english or not same_numbers(english[name], numbers):
                    problems.append(f"{path.relative_to(root)}: the table generated from {name} does not hold the "
                                    f"same numbers as in {twin.relative_to(root)}")
    for entry in exemptions:
        for what in entry.unused():
            problems.append(f"{exempt.name}: the exemption of {what} in {entry.files} ({entry.why}) matches "
                            f"nothing any more: remove it")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print the exempt numbers and why")
    args = parser.parse_args(argv)
    if args.list:
        for entry in load_exemptions():
            what = " ".join(entry.numbers) if entry.numbers else f"table {entry.table} columns {entry.columns or 'all'}"
            print(f"{', '.join(entry.files)}: {what}\n    {entry.why}")
        return 0
    problems = check()
    print("\n".join(problems) or "every measured number carries its source")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
