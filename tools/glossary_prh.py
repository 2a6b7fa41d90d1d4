"""Write the prh rules textlint checks the Japanese edition with, from the glossary, its one source.

chapters/ja/glossary.md has a table | English | 訳語 | 使わない表記 | 出典 |: every variant in the third column
becomes a prh pattern whose expected form is the one its cell names after an arrow, "注意層→アテンション層".
Every variant needs its arrow, and a variant without one is an error naming it: a guess from the row (the
most similar of "原言語、目的言語") once turned ターゲット言語 into 原言語, the opposite of what it means.

A variant written in katakana only is matched as a whole word: ロス (loss) is not found inside
クロスアテンション. A variant that is also part of an ordinary word names that word after it,
"文の対（除く：文の対応）→文対": the pattern then skips the variant where it is part of that word
(several words separated by ・). Nothing is written by hand in the output, tools/textlint/prh-ja.yml;
`--check` fails when it no longer matches the glossary.

    python tools/glossary_prh.py            # (re)write tools/textlint/prh-ja.yml
    python tools/glossary_prh.py --check    # exit 1 when it is out of date
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "chapters" / "ja" / "glossary.md"
OUTPUT = ROOT / "tools" / "textlint" / "prh-ja.yml"
HEADER = ["訳語", "使わない表記"]


def glossary_rows(text: str) -> list[tuple[str, list[str], list[str]]]:
    """(English, terms, rejected variants) of every row of the glossary's table."""
    rows = [line for line in text.splitlines() if line.startswith("|")]
    if not rows:
        raise ValueError("glossary: no table (| English | 訳語 | 使わない表記 |) found")
    header = [cell.strip() for cell in rows[0].strip().strip("|").split("|")]
    if header[1:3] != HEADER:
        raise ValueError(f"glossary: the table's columns must be English | 訳語 | 使わない表記, got {header}")
    table = []
    for number, row in enumerate(rows[2:], start=3):
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if len(cells) != len(header):
            raise ValueError(f"glossary: table row {number} has {len(cells)} cells, not {len(header)}: {row!r}")
        terms = [t.strip() for t in re.split(r"[,、/]", re.sub(r"（[^）]*）", "", cells[1])) if t.strip()]
        rejected = [v.strip() for v in re.split(r"[,、]", cells[2]) if v.strip()]
        table.append((cells[0], terms, rejected))
    return table


KATAKANA = "ァ-ヺー"
EXCEPT = re.compile(r"(?P<variant>.+?)（除く：(?P<words>[^）]+)）")


def split_exceptions(written: str) -> tuple[str, list[str]]:
    """"文の対（除く：文の対応）" -> ("文の対", ["文の対応"]): the variant and the ordinary words that contain it."""
    found = EXCEPT.fullmatch(written.strip())
    if not found:
        return written.strip(), []
    variant, words = found["variant"].strip(), [w.strip() for w in found["words"].split("・") if w.strip()]
    for word in words:
        if variant not in word:
            raise ValueError(f"glossary: the exception {word!r} does not contain the variant {variant!r}")
    return variant, words


def variant_regex(written: str) -> str:
    """The regular expression (JavaScript's and Python's alike) a variant is found with: a katakana variant
    as a whole word; one with exceptions ("文の対（除く：文の対応）") not where it is part of one of them."""
    variant, words = split_exceptions(written)
    body = re.escape(variant)
    if re.fullmatch(f"[{KATAKANA}・]+", variant):
        return f"(?<![{KATAKANA}]){body}(?![{KATAKANA}])"
    before_guards, after_guards = [], []
    for word in words:
        before, _, after = word.partition(variant)
        if before and after:       # both sides at once: the lookbehind looks ahead from where the variant starts
            before_guards.append(f"(?<!{re.escape(before)}(?={re.escape(variant + after)}))")
        elif before:
            before_guards.append(f"(?<!{re.escape(before)})")
        elif after:
            after_guards.append(f"(?!{re.escape(after)})")
        else:
            raise ValueError(f"glossary: the exception {word!r} is the variant itself")
    return "".join(before_guards) + body + "".join(after_guards)


def prh_rules(text: str) -> list[dict]:
    rules = []
    for english, terms, rejected in glossary_rows(text):
        for written in rejected:
            variant, arrow, expected = (part.strip() for part in written.partition("→"))
            if not arrow or not expected:
                raise ValueError(f"glossary ({english}): the rejected {variant!r} has no arrow naming the term to use "
                                 f"instead ({variant}→TERM, TERM one of {terms})")
            if split_exceptions(variant)[0] in expected:
                raise ValueError(f"glossary ({english}): the rejected {variant!r} is part of the term {expected!r}; "
                                 f"prh would flag the term itself")
            rules.append({"expected": expected, "pattern": variant, "regex": variant_regex(variant),
                          "english": english})
    return rules


def render(rules: list[dict]) -> str:
    lines = ["# Generated by tools/glossary_prh.py from chapters/ja/glossary.md: edit the glossary, not this file.",
             "version: 1", "rules:"]
    for rule in rules:
        pattern = rule["pattern"] if rule["regex"] == re.escape(rule["pattern"]) else f"/{rule['regex']}/"
        lines += [f"  - expected: {json.dumps(rule['expected'], ensure_ascii=False)}",
                  f"    pattern: {json.dumps(pattern, ensure_ascii=False)}",
                  f"    prh: {json.dumps('用語集（' + rule['english'] + '）', ensure_ascii=False)}"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when the rules file is out of date")
    args = parser.parse_args(argv)
    text = render(prh_rules(GLOSSARY.read_text(encoding="utf-8")))
    if args.check:
        if not OUTPUT.is_file() or OUTPUT.read_text(encoding="utf-8") != text:
            print(f"{OUTPUT.relative_to(ROOT)} is out of date with {GLOSSARY.relative_to(ROOT)}: "
                  f"run python tools/glossary_prh.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)} ({text.count('- expected')} rules)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
