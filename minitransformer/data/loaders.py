"""Readers for real parallel corpora: aligned line files and tab-separated files.

Files may be plain or gzip-compressed (name ending in .gz) and must be UTF-8.
Every problem is reported as a ``CorpusError`` naming the file and, where it
applies, the line.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path
from typing import Iterator

from .corpus import Corpus

SPLIT_NAMES = ("train", "dev", "test")
# Three-letter codes of the tatoeba_manythings folders ("fra-eng") -> two-letter codes.
ISO_639_3_TO_1 = {"eng": "en", "fra": "fr", "deu": "de", "jpn": "ja", "spa": "es", "ita": "it",
                  "por": "pt", "rus": "ru", "cmn": "zh", "kor": "ko", "nld": "nl", "tur": "tr"}


BYTE_ORDER_MARK = "\ufeff"


class CorpusError(ValueError):
    """A corpus file is missing, unreadable or malformed."""


def likely_encoding(head: bytes) -> str:
    """What text with NUL bytes probably is, from its first bytes: UTF-16 or UTF-32 (with or without a
    byte-order mark; an ASCII letter in UTF-16-LE is the letter and a NUL), else binary data."""
    for mark, name in ((b"\xff\xfe\x00\x00", "UTF-32-LE with a byte-order mark"),
                       (b"\x00\x00\xfe\xff", "UTF-32-BE with a byte-order mark"),
                       (b"\xff\xfe", "UTF-16-LE with a byte-order mark"),
                       (b"\xfe\xff", "UTF-16-BE with a byte-order mark")):
        if head.startswith(mark):
            return name
    nuls = [head[i::4].count(0) for i in range(4)]           # NULs at each place of the 4-byte groups
    most = 0.9 * max(len(head) // 4, 1)
    if nuls[2] >= most and nuls[3] >= most:                   # a character of the BMP: lo hi 0 0
        return "UTF-32-LE without a byte-order mark"
    if nuls[0] >= most and nuls[1] >= most:                   # 0 0 hi lo
        return "UTF-32-BE without a byte-order mark"
    even, odd = nuls[0] + nuls[2], nuls[1] + nuls[3]
    if odd > 2 * even and odd >= len(head) // 4:              # an ASCII letter and a NUL: lo 0
        return "UTF-16-LE without a byte-order mark"
    if even > 2 * odd and even >= len(head) // 4:
        return "UTF-16-BE without a byte-order mark"
    return "binary data, or text in an encoding other than UTF-8"


def nul_error(where: str, head: bytes) -> str:
    """The message for text that holds NUL bytes: no text does, so it was saved in another encoding."""
    return f"{where}: holds NUL bytes, so it is not UTF-8 text; it looks like {likely_encoding(head)}: save it as UTF-8"


def _iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield (line number from 1, line without its line break) of a UTF-8 file, plain or .gz.

    A line ends at "\n", "\r\n" or a lone "\r" (files saved by old Mac editors): Python's universal
    newlines, and no other character, so a U+2028 inside a sentence stays in it. A byte-order mark at the
    start of the file (Windows' "UTF-8 with BOM") is not text and is dropped.
    """
    path = Path(path)
    if not path.exists():
        raise CorpusError(f"{path}: file not found")
    if path.is_dir():
        raise CorpusError(f"{path}: is a directory, expected a text file")
    opener = gzip.open if path.suffix == ".gz" else open
    number = 0
    try:
        with opener(path, "rb") as f:
            for raw in f:                                   # pieces that end at "\n" (or at the end of the file)
                raw = raw[:-1] if raw.endswith(b"\n") else raw
                raw = raw[:-1] if raw.endswith(b"\r") else raw
                if b"\0" in raw:                            # UTF-16 of ASCII text is valid UTF-8, a NUL between letters
                    with opener(path, "rb") as again:
                        raise CorpusError(nul_error(f"{path} line {number + 1}", again.read(4096)))
                for piece in raw.split(b"\r"):              # lone carriage returns end lines too
                    number += 1
                    try:
                        line = piece.decode("utf-8")
                    except UnicodeDecodeError as error:
                        utf16 = number == 1 and piece[:2] in (b"\xff\xfe", b"\xfe\xff")   # a byte-order mark
                        raise CorpusError(f"{path} line {number}: not valid UTF-8 ({error.reason} "
                                          f"at byte {error.start})" + (f"; it looks like {likely_encoding(piece)}: "
                                                                       "save it as UTF-8" if utf16 else "")) from None
                    yield number, line[1:] if number == 1 and line.startswith(BYTE_ORDER_MARK) else line
    except (EOFError, OSError) as error:  # includes gzip.BadGzipFile
        raise CorpusError(f"{path}: cannot read ({error})") from None


def _check_limit(limit: int | None) -> None:
    if limit is not None and limit < 0:    # a negative slice end would drop pairs from the end instead
        raise CorpusError(f"limit must be a number of pairs >= 0, got {limit}")


def read_lines(path: str | Path, limit: int | None = None) -> list[str]:
    """The lines of a text file (plain or .gz), at most ``limit`` of them."""
    _check_limit(limit)
    lines = []
    for number, line in _iter_lines(path):
        if limit is not None and number > limit:
            break
        lines.append(line)
    return lines


def read_parallel(src_path: str | Path, tgt_path: str | Path,
                  limit: int | None = None) -> list[tuple[str, str]]:
    """Pairs from two line-aligned files (line i of one translates line i of the other).

    The files must have the same number of lines (checked over the whole files,
    even with ``limit``) and no empty line.
    """
    _check_limit(limit)
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise CorpusError(f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}; "
                          "aligned files need one sentence per line on both sides")
    for path, lines in ((src_path, src), (tgt_path, tgt)):
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                raise CorpusError(f"{path} line {number}: empty sentence")
    pairs = list(zip(src, tgt))
    return pairs if limit is None else pairs[:limit]


def read_tsv(path: str | Path, limit: int | None = None) -> list[tuple[str, str]]:
    """Pairs from the first two tab-separated columns of each line (more columns are ignored)."""
    _check_limit(limit)
    pairs = []
    for number, line in _iter_lines(path):
        if limit is not None and number > limit:
            break
        columns = line.split("\t")
        if len(columns) < 2:
            raise CorpusError(f"{path} line {number}: expected at least 2 tab-separated columns, "
                              f"found {len(columns)}: {line[:60]!r}")
        first, second = columns[0], columns[1]
        if not first.strip() or not second.strip():
            raise CorpusError(f"{path} line {number}: empty sentence in column "
                              f"{1 if not first.strip() else 2}")
        pairs.append((first, second))
    return pairs


def _find(directory: Path, stem: str) -> Path | None:
    """``directory/stem`` or ``directory/stem.gz``, whichever exists; both is refused: which one holds the
    corpus meant (the other may be an old copy) is not for the reader to guess."""
    found = [candidate for candidate in (directory / stem, directory / f"{stem}.gz") if candidate.is_file()]
    if len(found) == 2:
        raise CorpusError(f"{directory}: both {found[0].name} and {found[1].name} exist; keep the one that holds "
                          "the corpus and move the other away")
    return found[0] if found else None


def _require(directory: Path, stem: str) -> Path:
    found = _find(directory, stem)
    if found is None:
        raise CorpusError(f"{directory}: missing {stem} (or {stem}.gz)")
    return found


def _aligned_file_languages(directory: Path) -> list[str]:
    """Language codes xx of files train.xx / train.xx.gz in ``directory``."""
    pattern = re.compile(r"^train\.([a-z]{2,3})(\.gz)?$")
    return sorted({m.group(1) for p in directory.iterdir() if (m := pattern.match(p.name))})


def _language_from_folder(directory: Path) -> str | None:
    """'fra-eng' -> 'fr' (tatoeba_manythings folder names)."""
    m = re.fullmatch(r"([a-z]{3})-eng", directory.name)
    if m is None:
        return None
    return ISO_639_3_TO_1.get(m.group(1), m.group(1))


def _foreign_from_direction(direction: str | None) -> str | None:
    if direction is None:
        return None
    parts = direction.split("-")
    if len(parts) != 2 or "en" not in parts or parts[0] == parts[1]:
        raise CorpusError(f"direction {direction!r} must look like 'en-xx' or 'xx-en'")
    return parts[1] if parts[0] == "en" else parts[0]


def load_corpus(path: str | Path, direction: str | None = None, limit: int | None = None) -> Corpus:
    """Load a corpus folder into a ``Corpus`` of (english, foreign) pairs.

    Two layouts are recognised:
    - aligned line files {train,dev,test}.{en,xx}[.gz] (small_parallel_enja);
    - tab-separated {train,dev,test}.tsv[.gz] with columns english<TAB>foreign
      (tatoeba_manythings/xxx-eng; the foreign code comes from the folder name).
    ``direction`` ("en-xx" or "xx-en") becomes the corpus' default direction;
    ``limit`` caps the number of pairs read per split.
    """
    directory = Path(path)
    if not directory.exists():
        raise CorpusError(f"{directory}: corpus folder not found")
    if not directory.is_dir():
        raise CorpusError(f"{directory}: expected a corpus folder, got a file")
    _check_limit(limit)
    wanted = _foreign_from_direction(direction)

    tsv = _find(directory, "train.tsv")
    aligned = sorted(p.name for p in directory.iterdir()
                     if re.fullmatch(r"train\.[a-z]{2,3}(\.gz)?", p.name) and not p.name.startswith("train.tsv"))
    if tsv is not None and aligned:
        raise CorpusError(f"{directory}: holds two corpora, {tsv.name} and the aligned files {', '.join(aligned)}; "
                          "keep one layout in the folder")
    if tsv is not None:
        foreign = _language_from_folder(directory) or wanted or "xx"
        splits = {name: read_tsv(_require(directory, f"{name}.tsv"), limit) for name in SPLIT_NAMES}
    else:
        languages = _aligned_file_languages(directory)
        if "en" not in languages or len(languages) < 2:
            raise CorpusError(f"{directory}: expected train.en and train.xx (aligned line files) "
                              f"or train.tsv (english<TAB>foreign), optionally gzipped; "
                              f"found {sorted(p.name for p in directory.iterdir())}")
        others = [lang for lang in languages if lang != "en"]
        if wanted is not None and wanted not in others:
            raise CorpusError(f"{directory}: direction {direction!r} needs train.{wanted}[.gz]; "
                              f"found languages {languages}")
        if wanted is None and len(others) > 1:
            raise CorpusError(f"{directory}: several languages {others}; pass direction='en-xx'")
        foreign = wanted or others[0]
        splits = {name: read_parallel(_require(directory, f"{name}.en"),
                                      _require(directory, f"{name}.{foreign}"), limit)
                  for name in SPLIT_NAMES}

    if wanted is not None and wanted != foreign:
        raise CorpusError(f"{directory}: holds en-{foreign} pairs, not the requested {direction!r}")
    return Corpus(train=splits["train"], dev=splits["dev"], test=splits["test"], test_heldout=[],
                  languages=("en", foreign), direction=direction or f"en-{foreign}",
                  name=directory.name)
