"""Exercise 13.5 — Longformer's dilated window with global tokens (chapters/13-long-sequences.md).

Its public tests, its grading cases and its catalogued mistakes (spec.py).
"""
from __future__ import annotations

import numpy as np

import minitransformer.functional as F

from ..spec import ExerciseSpec, case, mistake, parametrize


# -- the public tests (pytest -m grades_13_5) -------------------------------------------------------------------------
@parametrize("n, w, d, g, causal", [(9, 1, 1, (), False), (12, 2, 3, (0, 6), False),
                                    (10, 2, 2, (3,), True)])
def test_the_longformer_pattern_pair_by_pair(n, w, d, g, causal):
    def allowed(i, j):
        return (any(j == i + d * m for m in range(-w, w + 1)) or i in g or j in g) and (j <= i or not causal)
    expected = np.array([[allowed(i, j) for j in range(n)] for i in range(n)])
    got = F.longformer_pattern(n, w, d, g, causal, device="cpu")
    assert got.shape == (n, n) and got.dtype == bool
    np.testing.assert_array_equal(got, expected)


def test_a_global_token_sees_everything_and_is_seen_by_everything():
    got = F.longformer_pattern(8, 1, 2, [5], device="cpu")
    assert got[5].all() and got[:, 5].all()
    assert got[0].sum() == 2 + 1                          # itself, key 2 (d = 2), and the global token 5


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def probe_longformer(rng, length: int, window: int, dilation: int, global_tokens, causal: bool = False) -> dict:
    """Longformer's pattern as a boolean (n, n) mask."""
    mask = F.longformer_pattern(length, window, dilation, global_tokens, causal, device="cpu")
    return {"mask": np.asarray(mask)}


PUBLIC = [case(f"n {n}, w {w}, d {d}, global {g}", "longformer", length=n, window=w, dilation=d,
               global_tokens=list(g), causal=c)
           for n, w, d, g, c in [(9, 1, 1, (), False), (12, 2, 3, (0, 6), False), (10, 2, 2, (3,), True),
                                 (8, 1, 2, (5,), False)]]


def hidden_case(r, n: int, count: int) -> dict:
    length = int(r.integers(1, 24))
    return case("random", "longformer", length=length, window=int(r.integers(1, 5)), dilation=int(r.integers(1, 4)),
                causal=bool(n % 3 == 0),
                global_tokens=sorted({int(x) for x in r.integers(0, length, int(r.integers(0, 3)))}))


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("dilation ignored", "a dilated window sees every d-th key only: j − i must be a multiple of d as well",
            (" & (offset % dilation == 0)", "")),
    mistake("window not stretched", "with dilation d the window reaches w·d positions a side, not w",
            ("<= window * dilation", "<= window")),
    mistake("global one way only", "a global token sees every position and every position sees it: both the row "
            "and the column", ("allowed | is_global | is_global.T", "allowed | is_global")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("13.5", public=PUBLIC, hidden=hidden_case, probes=[probe_longformer], mistakes=MISTAKES)
