"""Counts the README, TEACHING.md and the chapters quote, read from the code: the exercises, the chapters
and notebooks, and the sizes of the models the chapters describe. Writes benchmarks/book/results/counts.json.

    python benchmarks/book/book_counts.py          # a few seconds; nothing is timed

* exercises: how many graded exercises the registry holds (minitransformer/exercises), in how many chapters;
* chapters, notebooks: the book's chapters (chapters/NN-*.md) and notebook sources (notebooks/src);
* models: for the presets the chapters describe, the parameters (a count) and the parameter arrays (what an
  all-reduce per array would be called for, chapter 14), with the vocabulary each is used with.

tests/book/test_unmarked.py checks that the file says what the code says today, so a new exercise or a
changed preset cannot leave the README's count behind.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
RESULTS = Path(__file__).resolve().parent / "results" / "counts.json"

# name: (preset, vocabulary). The default model with the default run's 1,000; with the Tatoeba recipe's 4,000
# (chapter 11); the paper's sizes with the vocabulary chapter 14 gives them ("our 16,000-token vocabulary")
MODELS = {"small": ("small", 1000), "small_tatoeba": ("small", 4000), "base": ("base", 16000), "big": ("big", 16000)}


def model_counts(preset: str, vocab: int) -> dict:
    """Parameters and parameter arrays of a preset's model (tied embeddings, post-LN), by chapter 9's
    formula, so that no weights are made; tests/book/test_unmarked.py checks it against a built model."""
    from minitransformer.presets import MODELS as SIZES  # noqa: PLC0415

    sizes = SIZES[preset]
    d, d_ff, n = sizes["d_model"], sizes["d_ff"], sizes["n_layers"]
    attention, ffn = 4 * (d * d + d), (d * d_ff + d_ff) + (d_ff * d + d)
    parameters = n * (attention + ffn + 2 * 2 * d) + n * (2 * attention + ffn + 3 * 2 * d) + vocab * d
    # arrays: per encoder layer 4 Linear (2 each) + FFN (4) + 2 LayerNorms (4); decoder 8 + 4 + 6; embedding 1;
    # the final LayerNorms of a pre-LN stack are absent in the paper's post-LN model
    arrays = n * (8 + 4 + 4) + n * (16 + 4 + 6) + 1
    return {"vocab": vocab, "parameters": parameters, "parameter_arrays": arrays}


def counts() -> dict:
    from minitransformer.exercises.registry import load_exercises  # noqa: PLC0415

    exercises = load_exercises(ROOT)
    return {"command": "python benchmarks/book/book_counts.py",
            "exercises": len(exercises), "exercise_chapters": len({e.chapter for e in exercises}),
            "chapters": len(list((ROOT / "chapters").glob("[0-9][0-9]-*.md"))),
            "notebooks": len(list((ROOT / "notebooks" / "src").glob("[0-9][0-9]-*.py"))),
            "models": {name: model_counts(preset, vocab) for name, (preset, vocab) in MODELS.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    found = counts()
    args.results.write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(found, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
