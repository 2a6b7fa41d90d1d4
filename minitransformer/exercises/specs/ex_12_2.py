"""Exercise 12.2 — the FLOPs of one encoder layer (chapters/12-looking-inside.md).

Its public tests, its grading cases and its catalogued mistakes (spec.py).
"""
from __future__ import annotations

import numpy as np

from ..spec import ExerciseSpec, case, mistake, parametrize


# -- the public tests (pytest -m grades_12_2) -------------------------------------------------------------------------
@parametrize("d_model, d_ff, length, flops", [
    (4, 8, 3, 304),                # 128 for the four projections + 48 for q·kᵀ and A·V + 128 for the two FFN matrices
    (512, 2048, 25, 6342656),      # 2097152 + 51200 + 4194304
    (128, 512, 11.5, 399104)])     # 131072 + 5888 + 262144
def test_encoder_layer_flops_count_every_product(d_model, d_ff, length, flops):
    from minitransformer.flops import encoder_layer_flops
    np.testing.assert_allclose(encoder_layer_flops(d_model, d_ff, length), flops, rtol=1e-6, atol=1e-12)


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def probe_flops(rng, sizes) -> dict:
    """The FLOPs of one encoder layer for each (d_model, d_ff, source length)."""
    from minitransformer.flops import encoder_layer_flops

    return {"flops": np.asarray([float(encoder_layer_flops(*size)) for size in sizes])}


PUBLIC = [case(f"d_model {d}, d_ff {f}, length {n}", "flops", sizes=[[d, f, n]])
          for d, f, n in [(4, 8, 3), (512, 2048, 25), (128, 512, 11.5)]]


def hidden_case(r, n: int, count: int) -> dict:
    return case("random sizes", "flops", sizes=[[int(r.integers(1, 1025)), int(r.integers(1, 4097)),
                                                 float(r.integers(1, 200)) / 2] for _ in range(4)])


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("one FLOP per multiply-add", "a multiply-add is 2 FLOPs: an (m × k)(k × n) product costs 2mkn",
            ("4 * 2 * d_model", "4 * d_model"), ("2 * 2 * source_len", "2 * source_len"),
            ("2 * 2 * d_model * d_ff", "2 * d_model * d_ff")),
    mistake("attention forgotten", "the scores q·kᵀ and the mix A·V cost 2·2·S·d_model too",
            (" + scores_and_mix", "")),
    mistake("one matrix of the FFN", "the feed-forward network has two matrices, W_1 (d × d_ff) and W_2 (d_ff × d)",
            ("2 * 2 * d_model * d_ff", "2 * d_model * d_ff")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("12.2", public=PUBLIC, hidden=hidden_case, probes=[probe_flops], mistakes=MISTAKES)
