"""The mistakes students really make, exercise by exercise, and the verdict each should get.

Each exercise's spec lists its own (specs/ex_5_1.py, between ``# BEGIN TEACHER ONLY`` and
``# END TEACHER ONLY``): a mistake is a small edit of the solution block's own lines (``old`` ->
``new``, every occurrence inside the exercise's blocks), so the catalogue quotes the solutions. This
module gathers them and makes the edits; like the catalogue, it is the teacher's only (the student
edition leaves it out, edition.TEACHER_ONLY, and keeps ``MISTAKES = ()`` in the specs).

The teacher's casebook (casebook.py) runs each mistake on every case and keeps what it gives, so that
``grade`` can name a wrong result that equals a known mistake's; tests/exercises/test_mistakes.py feeds each
mistake in as a submission and checks that its verdict names it.
"""
from __future__ import annotations

from .registry import load_specs, spec_path
from .spec import Mistake

__all__ = ["CATALOGUE", "Mistake", "mutate"]


def __getattr__(name: str):
    """CATALOGUE: exercise id -> its catalogued mistakes, gathered from the specs when first asked for."""
    if name != "CATALOGUE":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return {exercise_id: list(spec.mistakes) for exercise_id, spec in load_specs().items()}


def mutate(texts: dict[str, str], exercise_id: str, mistake: Mistake) -> dict[str, str]:
    """The files (path -> text) holding the exercise's solution blocks, with the mistake's edits made in them.

    Each edit replaces every occurrence of its ``old`` inside the exercise's blocks (marker lines
    excluded) and must find at least one.
    """
    from .registry import parse_file

    changed = {}
    found = {old: False for old, _ in mistake.edits}
    for path, text in texts.items():
        lines = text.splitlines(keepends=True)
        blocks = [b for info, b in parse_file(text, path) if info["id"] == exercise_id and b.begin is not None]
        for block in sorted(blocks, key=lambda b: -b.begin):
            inner = "".join(lines[block.begin:block.end - 1])
            for old, new in mistake.edits:
                if old in inner:
                    found[old] = True
                    inner = inner.replace(old, new)
            lines[block.begin:block.end - 1] = [inner]
        changed[path] = "".join(lines)
    missing = [old for old, seen in found.items() if not seen]
    if missing:
        raise ValueError(f"Exercise {exercise_id}, mistake {mistake.name!r}: {missing[0]!r} is not in its solution "
                         f"any more; update MISTAKES in {spec_path(exercise_id)}")
    return changed
