"""Exercise 8.1 — the sinusoidal encoding (chapters/08-positional-encoding.md).

Its public tests, its grading cases and its catalogued mistakes (spec.py).
"""
from __future__ import annotations

import math

import numpy as np

from minitransformer.nn.positional import sinusoidal_table

from ..spec import ExerciseSpec, case, mistake, parametrize


# -- the public tests (pytest -m grades_8_1) --------------------------------------------------------------------------
@parametrize("length, d_model", [(6, 8), (3, 5)])
def test_sinusoidal_table_follows_section_3_5(length, d_model):
    table = sinusoidal_table(length, d_model)
    assert table.shape == (length, d_model)
    for pos in range(length):
        for column in range(d_model):
            angle = pos / 10000 ** ((column - column % 2) / d_model)
            expected = math.sin(angle) if column % 2 == 0 else math.cos(angle)
            assert abs(table[pos, column] - expected) <= 1e-12, (pos, column)


def test_a_shift_by_k_positions_is_one_fixed_rotation(rng):
    d_model, k = 6, 3
    table = sinusoidal_table(20, d_model)
    # fit R on some positions, then predict the others: PE(pos + k) = PE(pos) R for every pos
    rotation, *_ = np.linalg.lstsq(table[:8], table[k:8 + k], rcond=None)
    np.testing.assert_allclose(table[8:20 - k] @ rotation, table[8 + k:], atol=1e-8)


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def probe_sinusoidal(rng, length: int, d_model: int) -> dict:
    """The table of §3.5."""
    from minitransformer.nn.positional import sinusoidal_table

    return {"table": np.asarray(sinusoidal_table(length, d_model))}


PUBLIC = [case(f"length {n}, d_model {d}", "sinusoidal", length=n, d_model=d) for n, d in [(6, 8), (3, 5), (20, 6)]]


def hidden_case(r, n: int, count: int) -> dict:
    return case("random", "sinusoidal", length=int(r.integers(1, 40)), d_model=int(r.integers(1, 17)))


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("sin and cos swapped", "even columns 2i are sin, odd columns 2i+1 are cos",
            ("numpy.sin(angles[:, 0::2])", "numpy.cos(angles[:, 0::2])"),
            ("numpy.cos(angles[:, 1::2])", "numpy.sin(angles[:, 1::2])")),
    mistake("a frequency per column", "columns 2i and 2i+1 share one frequency, 10000^(−2i/d_model)",
            ("numpy.arange(d_model) // 2 * 2", "numpy.arange(d_model)")),
    mistake("exponent's sign", "the frequencies fall with i: ω_i = 10000^(−2i/d_model)",
            ("-math.log(10000.0)", "math.log(10000.0)")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("8.1", public=PUBLIC, hidden=hidden_case, probes=[probe_sinusoidal], mistakes=MISTAKES)
