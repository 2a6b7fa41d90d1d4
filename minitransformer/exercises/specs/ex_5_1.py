"""Exercise 5.1 — layer-norm backward (chapters/05-layers.md): its public tests, cases and mistakes (spec.py)."""
from __future__ import annotations

import minitransformer as mt
import minitransformer.functional as F

from ..cases import gradient_case
from ..spec import ExerciseSpec, case, mistake, random_shape, tensor


# -- the public tests (pytest -m grades_5_1) --------------------------------------------------------------------------
def test_layer_norm_backward_gradcheck(rng):
    x, weight, bias = tensor(rng, 2, 3, 5), tensor(rng, 5), tensor(rng, 5)
    assert mt.gradcheck(lambda a, w, b: F.layer_norm(a, w, b), [x, weight, bias])


def test_layer_norm_backward_without_affine_and_with_one_row(rng):
    assert mt.gradcheck(lambda a: F.layer_norm(a), [tensor(rng, 4, 6)])
    assert mt.gradcheck(lambda a: F.layer_norm(a), [tensor(rng, 1, 3)])


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def probe_layer_norm(rng, shape, affine: bool = True, central: bool = True) -> dict:
    """Layer norm over the last axis, with or without γ and β."""
    dim = shape[-1]
    if affine:
        arrays = [rng.standard_normal(shape), rng.standard_normal(dim), rng.standard_normal(dim)]
        return gradient_case(rng, lambda a, w, b: F.layer_norm(a, w, b), arrays, [True] * 3, central)
    return gradient_case(rng, lambda a: F.layer_norm(a), [rng.standard_normal(shape)], [True], central)


PUBLIC = [case("(2, 3, 5) with γ and β", "layer_norm", shape=[2, 3, 5]),
          case("(4, 6) without γ and β", "layer_norm", shape=[4, 6], affine=False),
          case("one row (1, 3)", "layer_norm", shape=[1, 3], affine=False)]


def hidden_case(r, n: int, count: int) -> dict:
    return case("random", "layer_norm", shape=random_shape(r, int(r.integers(1, 4)), 1, 6) + [
        int(r.integers(2, 7))], affine=bool(n % 3))


def large_case(r) -> dict:
    return case("large", "layer_norm", shape=[16, 16384], central=False)


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("mean(g) term forgotten", "gx = (1/σ)(g − mean(g) − x̂ ⊙ mean(g ⊙ x̂)): the mean(g) term (through the "
            "mean μ) is missing", ("g - mean_g - x_hat", "g - x_hat")),
    mistake("x̂ term forgotten", "gx = (1/σ)(g − mean(g) − x̂ ⊙ mean(g ⊙ x̂)): the x̂ ⊙ mean(g ⊙ x̂) term (through "
            "σ) is missing", (" - x_hat * mean_g_x_hat)", ")")),
    mistake("1/σ forgotten", "every term of gx is divided by σ (multiplied by inv_std)", ("gx = inv_std * (g", "gx = (g")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("5.1", public=PUBLIC, hidden=hidden_case, large=large_case, probes=[probe_layer_norm],
                    mistakes=MISTAKES)
