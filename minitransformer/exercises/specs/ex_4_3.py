"""Exercise 4.3 — label-smoothed cross-entropy backward (chapters/04-softmax-cross-entropy.md).

Its public tests, its grading cases and its catalogued mistakes (spec.py).
"""
from __future__ import annotations

import numpy as np

import minitransformer as mt
import minitransformer.functional as F

from ..cases import gradient_case
from ..spec import ExerciseSpec, case, mistake, parametrize, tensor


# -- the public tests (pytest -m grades_4_3) --------------------------------------------------------------------------
@parametrize("smoothing", [0.0, 0.1, 0.4])
@parametrize("ignore_index", [None, 0])
def test_cross_entropy_backward_gradcheck(rng, smoothing, ignore_index):
    logits = tensor(rng, 6, 5)
    targets = np.array([1, 0, 4, 2, 0, 3])          # with ignore_index=0, two rows are padding
    assert mt.gradcheck(lambda t: F.cross_entropy(t, targets, label_smoothing=smoothing,
                                                  ignore_index=ignore_index), [logits])


def test_cross_entropy_backward_over_a_batch_of_sequences(rng):
    logits = tensor(rng, 2, 3, 4)                   # (B, T, V)
    targets = np.array([[1, 2, 0], [3, 0, 0]])
    assert mt.gradcheck(lambda t: F.cross_entropy(t, targets, label_smoothing=0.1, ignore_index=0), [logits])


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def probe_cross_entropy(rng, shape, targets, smoothing: float, ignore_index=None, central: bool = True) -> dict:
    """The label-smoothed, padding-aware cross-entropy and its backward."""
    ids = np.asarray(targets)
    return gradient_case(rng, lambda t: F.cross_entropy(t, ids, label_smoothing=smoothing, ignore_index=ignore_index),
                         [rng.standard_normal(shape)], [True], central)


PUBLIC = ([case(f"smoothing {s}, ignore_index {i}", "cross_entropy", shape=[6, 5], targets=[1, 0, 4, 2, 0, 3],
                smoothing=s, ignore_index=i) for s in (0.0, 0.1, 0.4) for i in (None, 0)]
          + [case("a batch of sequences", "cross_entropy", shape=[2, 3, 4], targets=[[1, 2, 0], [3, 0, 0]],
                  smoothing=0.1, ignore_index=0)])


def hidden_case(r, n: int, count: int) -> dict:
    rows, classes = int(r.integers(2, 8)), int(r.integers(2, 7))
    targets = [int(x) for x in r.integers(0, classes, rows)]
    return case("random", "cross_entropy", shape=[rows, classes], targets=targets,
                smoothing=float(r.choice([0.0, 0.05, 0.2, 0.5])),
                ignore_index=[None, 0, classes - 1][n % 3])


def large_case(r) -> dict:
    return case("large", "cross_entropy", shape=[2048, 64],
                targets=[int(x) for x in r.integers(0, 64, 2048)], smoothing=0.1, ignore_index=0,
                central=False)


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("not divided by the count", "the loss is a mean over the counted rows: divide by their number (n_valid)",
            ("(gy / self.n_valid)", "(gy * 1.0)")),
    mistake("padding rows not zeroed", "rows whose target is ignore_index (padding) get no gradient at all",
            ("xp.where(self.valid, scale, 0)", "xp.where(self.valid, scale, scale)")),
    mistake("ε over every class", "with ignore_index set, ε is spread over the V − 1 classes other than the pad class, "
            "which gets none", ("spread = self._smoothing_classes(num_classes)", "spread = num_classes")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("4.3", public=PUBLIC, hidden=hidden_case, large=large_case, probes=[probe_cross_entropy],
                    mistakes=MISTAKES)
