"""No second route to an answer: in the student edition, every other function or class that computes what an
exercise computes gets there through the exercise's own function, so it raises the exercise's
NotImplementedError until the exercise is solved (TEACHING.md: "other code answering an exercise must call the
exercise's function"). A submission cannot then answer an exercise by calling such code (tests/cheats.py,
"computes it by another route").

ROUTES lists the known ones per exercise, each a few lines run in a graded package (the student edition with the
exercise taken out); the proof is shown to catch a second route planted in a copy (the corpus AER computed by its
own formula, as it once was)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from minitransformer.exercises import casebook
from minitransformer.exercises.registry import get_exercise, load_exercises
from submissions import ROOT

pytestmark = pytest.mark.skipif(not any(e.has_solution for e in load_exercises(ROOT)),
                                reason="a student edition: every route already raises")

ROUTES = {
    "12.1": {"the corpus AER (AlignmentTally)": """
                 from minitransformer.alignment_scores import AlignmentTally
                 tally = AlignmentTally()
                 tally.add(np.eye(3), [(0, 0), (1, 1), (2, 2)])
                 tally.scores()
             """},
    "11.2": {"corpus statistics (bleu_stats)": """
                 from minitransformer.bleu import bleu_stats
                 bleu_stats(["the cat sat"], ["the cat sat"], tokenize="none")
             """,
             "sentence BLEU": """
                 from minitransformer.bleu import sentence_bleu
                 sentence_bleu("the cat sat", "the cat sat")
             """,
             "corpus BLEU": """
                 from minitransformer.bleu import corpus_bleu_score
                 corpus_bleu_score(["the cat sat"], ["the cat sat"])
             """},
    "13.1": {"the flash forward": """
                 import minitransformer.functional as F
                 q = np.random.default_rng(0).standard_normal((1, 1, 5, 2))
                 F.flash_attention(q, q, q, block_size=2)
             """},
    "5.1": {"the LayerNorm module's backward": """
                import minitransformer as mt
                from minitransformer.nn import LayerNorm
                x = mt.Tensor(np.random.default_rng(0).standard_normal((2, 4)), requires_grad=True)
                LayerNorm(4)(x).backward(np.ones((2, 4)))
            """,
            "the fast form (fast/normalization.py)": """
                import minitransformer as mt
                from minitransformer.fast.normalization import layer_norm
                x = mt.Tensor(np.random.default_rng(0).standard_normal((2, 4)), requires_grad=True)
                layer_norm(x).backward(np.ones((2, 4)))
            """},
}

RUN = """
import json, sys, textwrap
import numpy as np
found = {}
for name, code in json.loads(sys.argv[1]).items():
    try:
        exec(textwrap.dedent(code), {"np": np})
        found[name] = None
    except NotImplementedError as error:
        found[name] = str(error)
    except Exception as error:
        found[name] = f"{type(error).__name__}: {error}"
print(json.dumps(found))
"""


def routes_that_answer(package_root: Path, exercise_id: str) -> dict[str, str]:
    """The routes of ``exercise_id`` that do not reach its NotImplementedError in the package at ``package_root``:
    name -> what happened instead."""
    result = subprocess.run([sys.executable, "-c", RUN, json.dumps(ROUTES[exercise_id])], cwd=package_root,
                            env={**os.environ, "PYTHONPATH": str(package_root), "MPLBACKEND": "Agg"},
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.splitlines()[-1])
    return {name: why or "it returned an answer" for name, why in found.items()
            if not (why or "").startswith(f"Exercise {exercise_id}:")}


@pytest.mark.parametrize("exercise_id", sorted(ROUTES))
def test_every_other_route_to_an_answer_calls_the_exercises_function(exercise_id, tmp_path):
    package = casebook.graded_package(ROOT, tmp_path / "edition", get_exercise(exercise_id, ROOT), keep_own=False)
    assert routes_that_answer(package, exercise_id) == {}


def test_the_proof_finds_a_second_route_planted_in_the_edition(tmp_path):
    package = casebook.graded_package(ROOT, tmp_path / "edition", get_exercise("12.1", ROOT), keep_own=False)
    path = package / "minitransformer" / "alignment_scores.py"
    text = path.read_text(encoding="utf-8")
    planted = text.replace('"aer": alignment_error_rate(*self.as_one_sentence())',
                           '"aer": 1.0 - (self.sure_hits + self.hits) / (self.rows + self.sure)')
    assert planted != text
    path.write_text(planted, encoding="utf-8")
    assert list(routes_that_answer(package, "12.1")) == ["the corpus AER (AlignmentTally)"]


def test_the_corpus_aer_is_the_aer_of_one_sentence_with_the_same_counts():
    import numpy as np

    from minitransformer.alignment_scores import AlignmentTally

    rng = np.random.default_rng(3)
    for _ in range(20):
        tally = AlignmentTally()
        for _ in range(int(rng.integers(1, 5))):
            rows, columns = (int(n) for n in rng.integers(1, 6, 2))
            links = {(int(rng.integers(0, columns)), int(rng.integers(0, rows))) for _ in range(int(rng.integers(1, 8)))}
            tally.add(rng.dirichlet(np.ones(columns), size=rows), sorted(links))
        direct = 1.0 - (tally.sure_hits + tally.hits) / (tally.rows + tally.sure)
        assert tally.scores()["aer"] == pytest.approx(direct, abs=1e-12)
