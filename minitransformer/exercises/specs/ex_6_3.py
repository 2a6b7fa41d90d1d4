"""Exercise 6.3 — the causal mask (chapters/06-attention.md): its public tests, cases and mistakes (spec.py)."""
from __future__ import annotations

import itertools

import numpy as np

import minitransformer as mt
import minitransformer.functional as F

from ..spec import ExerciseSpec, case, mistake, parametrize


# -- the public tests (pytest -m grades_6_3) --------------------------------------------------------------------------
@parametrize("size", [1, 2, 5])
def test_causal_mask_lets_position_i_see_positions_up_to_i(size):
    mask = np.asarray(F.causal_mask(size, device="cpu"))
    assert mask.shape == (1, 1, size, size) and mask.dtype == bool
    for i, j in itertools.product(range(size), repeat=2):
        assert mask[0, 0, i, j] == (j <= i), f"query {i}, key {j}"


def test_with_the_causal_mask_the_past_does_not_see_the_future(rng):
    q, k, v = (mt.Tensor(rng.standard_normal((2, 2, 5, 3))) for _ in range(3))
    out = F.scaled_dot_product_attention(q, k, v, mask=F.causal_mask(5, device="cpu"))
    k.data[:, :, 3:], v.data[:, :, 3:] = 100.0, -100.0   # change the future of position 2
    changed = F.scaled_dot_product_attention(q, k, v, mask=F.causal_mask(5, device="cpu"))
    np.testing.assert_array_equal(out.data[:, :, :3], changed.data[:, :, :3])


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def probe_causal_mask(rng, size: int) -> dict:
    """The causal mask, and attention under it."""
    mask = np.asarray(F.causal_mask(size, device="cpu"))
    q, k, v = (mt.Tensor(rng.standard_normal((2, 2, size, 3))) for _ in range(3))
    return {"mask": mask, "out": np.asarray(F.scaled_dot_product_attention(q, k, v, mask=mask).data)}


PUBLIC = [case(f"size {n}", "causal_mask", size=n) for n in (1, 2, 5)]


def hidden_case(r, n: int, count: int) -> dict:
    return case("random size", "causal_mask", size=int(r.integers(1, 9)))


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("future visible", "position i may see positions j ≤ i: that is the lower triangle (tril), not the upper",
            ("xp.tril(", "xp.triu(")),
    mistake("diagonal left out", "position i must also see itself (j = i): keep the diagonal",
            ("dtype=bool))", "dtype=bool), -1)")),
    mistake("no batch and head axes", "the mask is (1, 1, T, T), so that it broadcasts over the batch and the heads",
            ("[None, None]", "")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("6.3", public=PUBLIC, hidden=hidden_case, needs={"6.1"}, probes=[probe_causal_mask],
                    mistakes=MISTAKES)
