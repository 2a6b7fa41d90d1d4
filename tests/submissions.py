"""Students' repositories as handed in, for the grader's tests: the student edition's files with a stub replaced."""
from __future__ import annotations

import hashlib
import os
import textwrap
from pathlib import Path

from minitransformer.exercises.edition import repository_files, strip_python
from minitransformer.exercises.registry import get_exercise, parse_file

ROOT = Path(__file__).resolve().parents[1]
# where the grader's sandbox must be tested (.ci/run sets it), a missing bubblewrap fails its tests instead of
# skipping them
REQUIRE_SANDBOX = os.environ.get("MT_REQUIRE_SANDBOX") == "1"


def stub_line(exercise_id: str) -> str:
    return f'raise NotImplementedError("Exercise {exercise_id}:'


def make_submission(folder: Path, exercise_id: str, code) -> Path:
    """``folder`` holding the student edition's files of the exercise, with its stubs replaced.

    ``code``: None (left blank), one text for every stub, or a list with one text per stub (in the order of
    the exercise's files and, in each, of the stubs).
    """
    exercise = get_exercise(exercise_id, ROOT)
    codes = list(code) if isinstance(code, list) else None
    for path in exercise.files:
        text = strip_python((ROOT / path).read_text(encoding="utf-8"), path)
        lines = text.splitlines(keepends=True)
        stubs = [n for n, line in enumerate(lines) if line.lstrip().startswith(stub_line(exercise_id))]
        assert stubs, f"{path} has no stub of Exercise {exercise_id}"
        for n in reversed(stubs):
            mine = codes[len(stubs) - 1 - list(reversed(stubs)).index(n)] if codes is not None else code
            if mine is not None:
                indent = lines[n][:len(lines[n]) - len(lines[n].lstrip())]
                lines[n] = textwrap.indent(textwrap.dedent(mine).strip("\n") + "\n", indent)
        if codes is not None:
            codes = codes[len(stubs):]
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text("".join(lines), encoding="utf-8")
    return folder


def solution_bodies(exercise_id: str, texts: dict[str, str] | None = None) -> list[str]:
    """The lines of each of the exercise's solution blocks (dedented), in file and block order: what a student
    who solved it wrote. ``texts``: other versions of the files (a catalogued mistake made in them)."""
    exercise = get_exercise(exercise_id, ROOT)
    bodies = []
    for path in exercise.files:
        text = (texts or {}).get(path) or (ROOT / path).read_text(encoding="utf-8")
        lines = text.splitlines(keepends=True)
        blocks = [b for info, b in parse_file(text, path) if info["id"] == exercise_id and b.begin is not None]
        for block in sorted(blocks, key=lambda b: b.begin):
            bodies.append(textwrap.dedent("".join(lines[block.begin:block.end - 1])))
    return bodies


def fingerprint_of_files(*folders: Path) -> str:
    """A hash of every file under ``folders`` (the repository's own files for a git checkout)."""
    digest = hashlib.sha256()
    for folder in folders:
        names = repository_files(folder) if (folder / ".git").exists() else \
            sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
        for name in names:
            path = folder / name
            if path.is_file():
                digest.update(name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()
