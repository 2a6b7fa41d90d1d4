"""Exercise 10.1 — the warm-up schedule, eq. 3 (chapters/10-training.md): its public tests, cases and mistakes (spec.py)."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

import minitransformer as mt

from ..cases import scalar
from ..spec import ExerciseSpec, case, mistake, parametrize


# -- the public tests (pytest -m grades_10_1) -------------------------------------------------------------------------
class _Holder:
    lr = 0.0


@parametrize("d_model, warmup, factor", [(512, 4000, 1.0), (64, 10, 2.0)])
def test_noam_rate_rises_linearly_then_decays_as_inverse_square_root(d_model, warmup, factor):
    schedule = mt.optim.NoamSchedule(_Holder(), d_model, warmup=warmup, factor=factor)
    peak = factor * (d_model * warmup) ** -0.5
    np.testing.assert_allclose(schedule.rate(warmup), peak, rtol=1e-12, atol=0)
    for step in (1, warmup // 2, warmup):          # rate ∝ step during warm-up
        np.testing.assert_allclose(schedule.rate(step), peak * step / warmup, rtol=1e-12, atol=0)
    for step in (warmup, 2 * warmup, 9 * warmup):  # rate ∝ step^-0.5 after it
        np.testing.assert_allclose(schedule.rate(step), peak * math.sqrt(warmup / step), rtol=1e-12, atol=0)


def test_noam_step_sets_the_optimizers_rate():
    holder = _Holder()
    schedule = mt.optim.NoamSchedule(holder, 16, warmup=3)
    rates = [schedule.step() for _ in range(6)]
    assert holder.lr == rates[-1]
    assert rates.index(max(rates)) == 2            # the peak is at step = warmup


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def probe_noam(rng, d_model: int, warmup: int, factor: float, steps) -> dict:
    """The rate at ``steps``, and the rates step() sets on the optimizer."""
    holder = SimpleNamespace(lr=0.0)
    schedule = mt.optim.NoamSchedule(holder, d_model, warmup=warmup, factor=factor)
    rates = [float(schedule.rate(step)) for step in steps]
    stepped = [float(schedule.step()) for _ in range(min(6, 2 * warmup))]
    return {"rate": np.asarray(rates), "step": np.asarray(stepped), "optimizer lr": scalar(holder.lr)}


PUBLIC = ([case(f"d_model {d}, warmup {w}, factor {f}", "noam", d_model=d, warmup=w, factor=f,
                steps=[1, w // 2, w, 2 * w, 9 * w]) for d, w, f in [(512, 4000, 1.0), (64, 10, 2.0)]]
          + [case("step() sets the optimizer's rate", "noam", d_model=16, warmup=3, factor=1.0, steps=[1])])


def hidden_case(r, n: int, count: int) -> dict:
    d, w, f = int(r.choice([16, 64, 256, 1024])), int(r.integers(2, 5000)), float(r.choice([0.5, 1.0, 2.0, 7.0]))
    return case("random", "noam", d_model=d, warmup=w, factor=f,
                steps=sorted({int(x) for x in r.integers(1, 10 * w, 6)} | {w}))


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("factor forgotten", "the rate is multiplied by the schedule's factor", ("self.factor * ", "")),
    mistake("warm-up exponent", "during warm-up the rate is step · warmup^−1.5 (times d_model^−0.5)",
            ("self.warmup ** -1.5", "self.warmup ** -0.5")),
    mistake("max instead of min", "eq. 3 takes the smaller of step^−0.5 and step · warmup^−1.5", ("min(", "max(")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("10.1", public=PUBLIC, hidden=hidden_case, probes=[probe_noam], mistakes=MISTAKES)
