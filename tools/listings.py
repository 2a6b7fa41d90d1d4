"""Listings from the code: every code listing of the book (chapters/*.md and chapters/ja/*.md) that names its
source file holds lines of that file, so that a listing which drifts from the code fails, as a quoted number
that drifts from its results file does (tools/quoted_numbers.py).

    python tools/listings.py          # every drifted listing, one line each (exit 1 if any)
    python tools/listings.py --list   # every listing that names a file, and the file

A ```python block names its file in one of two ways:

* its first line is a comment that starts with the path: `# minitransformer/optim.py, Adam.step`. A name
  after the comma (a function, a class or Class.method of that file) narrows the search to that definition's
  lines; words after the name, or in parentheses after the path, are a note for the reader;
* or, without such a comment, the paragraph right before the block names exactly one .py file in backticks
  ("(`viterbi` in `minitransformer/data/unigram.py`):"); marker lines such as `<!-- BEGIN SOLUTION 2.2 -->`
  between the paragraph and the block are passed over.

A path is from the repository's root, or from the package's (`data/grammar/alignment.py`). A block that
names no file is an example or a sketch, and is not checked.

A listing passes when every non-blank line of it is a line of the file, in the file's order, compared with
indentation, runs of spaces and trailing comments left out (a trailing comment is the chapter's note to the
reader, like the prose around it; a full-line comment is compared). Three liberties, and no others:

* a signature may be shown on one line, without its type hints: `def forward(self, x, offset=0):` stands for
  `def forward(self, x: Tensor, offset: int = 0) -> Tensor:`, also when the file spreads it over lines;
* an elision line stands for lines left out: `...`, `…`, or a comment that starts with one of them
  (`# … the progress bar`);
* a comment line that is a definition's name (`# DecoderLayer.forward`) moves the listing on to that
  definition's lines.

tests/book/test_listings.py runs the check over both languages.
"""
from __future__ import annotations

import argparse
import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = ("chapters/*.md", "chapters/ja/*.md")
PACKAGE = "minitransformer"

FENCE = re.compile(r"^\s*```(?P<language>\w*)")
HEADER = re.compile(r"#\s*(?P<path>[\w./-]+\.py)\b(?:\s*\([^)]*\))?(?:\s*,\s*(?P<name>[A-Za-z_][\w.]*))?")
NAMED_FILE = re.compile(r"`(?P<path>[\w./-]+\.py)`")
MARKER_LINE = re.compile(r"^\s*<!--.*-->\s*$")
ELISION = re.compile(r"^(?:#\s*)?(?:\.\.\.|…)")


@dataclass
class Listing:
    chapter: Path
    begins: int                     # the chapter's line of the block's first line, 1-based
    line: int                       # the chapter's line of lines[0]
    lines: list[str]                # the block's lines, the naming comment left out
    file: str                       # as the chapter writes it
    name: str | None                # the definition the naming comment narrows to

    def where(self, root: Path = ROOT) -> str:
        chapter = self.chapter.relative_to(root) if self.chapter.is_relative_to(root) else self.chapter
        return f"{chapter}:{self.begins}"


def chapters(root: Path = ROOT) -> list[Path]:
    return sorted({p for pattern in CHAPTERS for p in root.glob(pattern)})


def listings_in(path: Path, text: str | None = None) -> list[Listing]:
    """The ```python blocks of one chapter that name their source file."""
    lines = (path.read_text(encoding="utf-8") if text is None else text).splitlines()
    found, i = [], 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if not fence:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not lines[end].lstrip().startswith("```"):
            end += 1
        body = lines[i + 1:end]
        if fence["language"] in ("python", "py"):
            first = next((n for n, line in enumerate(body) if line.strip()), None)
            header = HEADER.match(body[first].strip()) if first is not None else None
            if header:
                found.append(Listing(path, i + 2, i + 3 + first, body[first + 1:], header["path"], header["name"]))
            else:
                named = set(NAMED_FILE.findall(" ".join(paragraph_before(lines, i))))
                if len(named) == 1:
                    found.append(Listing(path, i + 2, i + 2, body, named.pop(), None))
        i = end + 1
    return found


def paragraph_before(lines: list[str], fence: int) -> list[str]:
    """The lines of the paragraph that ends right above line ``fence``: blank lines and marker lines
    (``<!-- BEGIN SOLUTION 2.2 -->``) between them and the block are passed over."""
    k = fence - 1
    while k >= 0 and (not lines[k].strip() or MARKER_LINE.match(lines[k])):
        k -= 1
    paragraph = []
    while k >= 0 and lines[k].strip() and not lines[k].lstrip().startswith("```"):
        paragraph.insert(0, lines[k])
        k -= 1
    return paragraph


def source_path(file: str, root: Path = ROOT) -> Path | None:
    for candidate in (root / file, root / PACKAGE / file):
        if candidate.is_file():
            return candidate
    return None


def normalise(line: str) -> str:
    """A line as the check compares it: its trailing comment gone (a full-line comment stays), indentation
    gone, runs of whitespace one space, no space just inside brackets."""
    if not line.lstrip().startswith("#"):
        line = code_part(line)
    line = " ".join(line.split())
    line = re.sub(r"([(\[{]) ", r"\1", line)
    return re.sub(r" ([)\]}])", r"\1", line)


def code_part(line: str) -> str:
    """``line`` up to its trailing comment: the first # outside a string."""
    quote = None
    for k, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            return line[:k]
    return line


@dataclass
class Source:
    """A file's lines, each with the forms a listing may show it in: the line itself and, where a
    definition starts, its signature on one line, with and without type hints."""
    forms: list[set[str]]
    spans: dict[str, tuple[int, int]]      # qualified name -> (first, last) line index of the definition


def read_source(path: Path) -> Source:
    text = path.read_text(encoding="utf-8")
    forms = [{normalise(line)} for line in text.splitlines()]
    spans: dict[str, tuple[int, int]] = {}
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return Source(forms, spans)

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qualified = f"{prefix}{child.name}"
                first = min([child.lineno] + [d.lineno for d in child.decorator_list]) - 1
                spans[qualified] = (first, child.end_lineno - 1)
                if not isinstance(child, ast.ClassDef):
                    forms[child.lineno - 1].update(signatures(text, child))
                visit(child, qualified + ".")

    visit(tree, "")
    return Source(forms, spans)


def signatures(text: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The definition's signature on one line, as the file writes it and with its type hints cut out."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def at(lineno: int, col: int) -> int:             # ast counts columns in UTF-8 bytes
        return starts[lineno - 1] + len(lines[lineno - 1].encode("utf-8")[:col].decode("utf-8"))

    begin = at(node.lineno, node.col_offset)
    cuts = []
    arguments = node.args
    for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                     *(a for a in (arguments.vararg, arguments.kwarg) if a)]:
        if argument.annotation is not None:       # "offset: int = 0" -> "offset=0"
            name_end = at(argument.lineno, argument.col_offset) + len(argument.arg)
            end = at(argument.annotation.end_lineno, argument.annotation.end_col_offset)
            default = re.match(r"\s*=\s*", text[end:])
            cuts.append((name_end, end + default.end(), "=") if default else (name_end, end, ""))
    if node.returns is not None:                   # ") -> Tensor:" -> "):"
        arrow = text.rindex("->", begin, at(node.returns.lineno, node.returns.col_offset))
        while text[arrow - 1].isspace():
            arrow -= 1
        cuts.append((arrow, at(node.returns.end_lineno, node.returns.end_col_offset), ""))
    plain = text
    for a, b, replacement in sorted(cuts, reverse=True):
        plain = plain[:a] + replacement + plain[b:]
    return {header for header in (one_line_header(text[begin:]), one_line_header(plain[begin:])) if header}


def one_line_header(text: str) -> str | None:
    """``def ...(...) ...:`` from the start of ``text``, its comments left out, on one line: up to the first
    colon outside brackets and strings."""
    code = " ".join(code_part(line) for line in text.splitlines())
    depth, quote = 0, None
    for k, ch in enumerate(code):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == ":" and depth == 0:
            return re.sub(r",\s*\)", ")", normalise(code[:k + 1]))     # a trailing comma of a long signature
    return None


def drift(listing: Listing, root: Path = ROOT) -> str | None:
    """None when the listing's lines are in its file in order; else why not, in one line."""
    where = listing.where(root)
    named = f"{listing.file}{', ' + listing.name if listing.name else ''}"
    path = source_path(listing.file, root)
    if path is None:
        return f"{where}: names {listing.file}, which does not exist"
    source = read_source(path)
    first, last = 0, len(source.forms) - 1
    if listing.name:
        if listing.name not in source.spans:
            return f"{where}: names {listing.name} in {listing.file}, which defines no such thing"
        first, last = source.spans[listing.name]
    position = first
    for offset, line in enumerate(listing.lines):
        wanted = normalise(line)
        if not wanted or ELISION.match(wanted):
            continue
        found = next((k for k in range(position, last + 1) if wanted in source.forms[k]), None)
        label = wanted[1:].strip() if wanted.startswith("#") else None
        if found is None and label in source.spans:           # "# DecoderLayer.forward": on to that definition
            position, last = source.spans[label]
            continue
        if found is None:
            above = any(wanted in forms for forms in source.forms[first:last + 1])
            return (f"{where}: listing of {named}: line {listing.line + offset} is not in the file"
                    f"{' after the lines before it' if above else ''}: {line.strip()}")
        position = found + 1
    return None


def check(root: Path = ROOT, skip: frozenset[str] = frozenset()) -> list[str]:
    """One line per listing that drifted from its file. ``skip``: chapters (file names) left unchecked."""
    problems = []
    for chapter in chapters(root):
        if chapter.name in skip:
            continue
        for listing in listings_in(chapter):
            problem = drift(listing, root)
            if problem:
                problems.append(problem)
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="every listing that names a file, and the file")
    args = parser.parse_args(argv)
    if args.list:
        for chapter in chapters():
            for listing in listings_in(chapter):
                print(f"{listing.where()}: {listing.file}{', ' + listing.name if listing.name else ''}")
        return 0
    problems = check()
    print("\n".join(problems) or "every listing that names its file holds that file's lines")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
