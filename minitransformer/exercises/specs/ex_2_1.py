"""Exercise 2.1 — unbroadcast (chapters/02-tensors-broadcasting.md): its public tests, cases and mistakes (spec.py)."""
from __future__ import annotations

import numpy as np

import minitransformer as mt
from minitransformer.ops.broadcasting import unbroadcast

from ..spec import ExerciseSpec, case, mistake, parametrize, random_shape, tensor


# -- the public tests (pytest -m grades_2_1) --------------------------------------------------------------------------
SHAPES = [((3, 1), (2, 3, 4)), ((4,), (3, 4)), ((), (2, 3)), ((1, 1), (2, 3)), ((2, 1, 4), (2, 3, 4)),
          ((1, 3, 1), (5, 2, 3, 4))]


@parametrize("shape, target", SHAPES, ids=[f"{s}->{t}" for s, t in SHAPES])
def test_unbroadcast_is_the_adjoint_of_broadcasting(rng, shape, target):
    # <broadcast(x), g> = <x, unbroadcast(g)> for every x and g: unbroadcast is broadcasting's transpose
    x, g = rng.standard_normal(shape), rng.standard_normal(target)
    reduced = unbroadcast(g, shape)
    assert reduced.shape == shape
    np.testing.assert_allclose(np.sum(np.broadcast_to(x, target) * g), np.sum(x * reduced), rtol=1e-10)


def test_broadcast_add_and_mul_gradchecks(rng):
    a, b = tensor(rng, 2, 1, 3), tensor(rng, 4, 1)
    assert mt.gradcheck(lambda p, q: p + q, [a, b])
    assert mt.gradcheck(lambda p, q: p * q, [a, b])


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def probe_unbroadcast(rng, shape, target) -> dict:
    """Unbroadcast of a random gradient of shape ``target`` back to ``shape``."""
    from minitransformer.ops.broadcasting import unbroadcast

    return {"reduced": np.asarray(unbroadcast(rng.standard_normal(target), tuple(shape)))}


PUBLIC = ([case(f"unbroadcast to {s} from {t}", "unbroadcast", shape=list(s), target=list(t))
           for s, t in SHAPES]
          + [case(f"(2, 1, 3) {op} (4, 1)", "gradient", operation=name, shapes=[[2, 1, 3], [4, 1]])
             for op, name in (("+", "add"), ("·", "mul"))])


def _broadcast_pair(rng) -> tuple[list[int], list[int]]:
    """Two shapes that really broadcast: the smaller lacks leading axes or has a 1 where the other does not."""
    target = random_shape(rng, int(rng.integers(1, 5)), 2, 4)
    small = target
    while small == target:
        small = [1 if rng.random() < 0.4 else n for n in target][int(rng.integers(0, len(target) + 1)):]
    return small, target


def hidden_case(r, n: int, count: int) -> dict:
    small, target = _broadcast_pair(r)
    pair = [small, target] if r.random() < 0.5 else [target, small]
    return case(f"{pair[0]} ⊕ {pair[1]}", "gradient", operation=["add", "mul"][n % 2], shapes=pair)


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("leading axes kept", "the axes broadcasting put in front of the shape must be summed away first",
            ("grad = grad.sum(axis=tuple(range(leading)))", "pass")),
    mistake("stretched axes dropped", "a size-1 axis that broadcasting stretched must be summed with keepdims=True, so "
            "that it stays as size 1", ("keepdims=True", "keepdims=False")),
    mistake("mean instead of sum", "each input value was used once per copy: its gradient is the sum of the copies' "
            "gradients, not their mean", (".sum(", ".mean(")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("2.1", public=PUBLIC, hidden=hidden_case, probes=[probe_unbroadcast], mistakes=MISTAKES)
