"""What a chapter notebook says first: which copy of the package it runs, and which exercises it waits for.

The setup cell that tools/build_notebooks.py puts at the top of every notebook
puts the notebook's own repository first on ``sys.path`` and then calls
``report``, so that a kernel never runs a different installed copy silently.
"""
from __future__ import annotations

from pathlib import Path

from .registry import load_exercises


def report(needs: list[str] | None = None, chapter: str = "", language: str = "en") -> list[str]:
    """Print where minitransformer was imported from and the exercises in ``needs`` not solved there yet.

    ``needs``: the exercises this notebook's cells run (None: unknown). Returns the unsolved ones.
    ``language``: a translated notebook's; a chapter figure it saves (MT_SAVE_FIGURES=1) goes, in that
    language, to chapters/figures/LANGUAGE/ (minitransformer/figure_language.py), never over the English one.
    """
    import minitransformer

    if language != "en":
        from ..figure_language import install  # noqa: PLC0415
        install(language)

    package = Path(minitransformer.__file__).resolve().parent
    print(f"minitransformer from {package}")
    try:
        exercises = {e.id: e for e in load_exercises(package.parent)}
    except Exception as error:  # a malformed header must not stop the notebook; check will say more
        print(f"(could not read the exercises: {error})")
        return []
    unsolved = [i for i in (needs if needs is not None else exercises) if i in exercises and exercises[i].unsolved]
    if unsolved:
        own = [i for i in unsolved if exercises[i].chapter.endswith(f"/{chapter}.md")]
        others = [i for i in unsolved if i not in own]
        print(f"Not solved in this copy yet: Exercise{'s' * (len(unsolved) > 1)} {', '.join(unsolved)}"
              + (f" (from other chapters: {', '.join(others)})" if others and chapter else "") + ".")
        print("The cells that need them stop with NotImplementedError; solve them (python -m "
              "minitransformer.exercises check ID) and run the notebook again.")
    return unsolved
