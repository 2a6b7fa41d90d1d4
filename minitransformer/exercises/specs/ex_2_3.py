"""Exercise 2.3 — sum and max backward (chapters/02-tensors-broadcasting.md).

Its public tests, its grading cases and its catalogued mistakes (spec.py).
"""
from __future__ import annotations

import numpy as np

import minitransformer as mt

from ..cases import gradient_case
from ..spec import ExerciseSpec, case, mistake, parametrize, random_shape, tensor


# -- the public tests (pytest -m grades_2_3) --------------------------------------------------------------------------
@parametrize("axis, keepdims", [(None, False), (1, False), ((0, 2), True), (-1, True)])
def test_sum_backward_gradcheck(rng, axis, keepdims):
    x = tensor(rng, 2, 3, 4)
    assert mt.gradcheck(lambda t: t.sum(axis=axis, keepdims=keepdims), [x])


@parametrize("axis, keepdims", [(None, False), (1, False), (-1, True)])
def test_max_backward_gradcheck(rng, axis, keepdims):
    x = tensor(rng, 2, 3, 4)   # distinct values: max is differentiable there
    assert mt.gradcheck(lambda t: t.max(axis=axis, keepdims=keepdims), [x])


def test_tied_maxima_share_the_gradient_equally():
    x = mt.Tensor(np.array([[1.0, 3.0, 3.0], [2.0, 0.0, -1.0], [5.0, 5.0, 5.0]]), requires_grad=True)
    upstream = np.array([6.0, 1.0, 3.0])
    x.max(axis=1).backward(upstream)
    winners = x.data == x.data.max(axis=1, keepdims=True)
    expected = winners * (upstream / winners.sum(axis=1))[:, None]
    np.testing.assert_allclose(x.grad, expected)


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def probe_reduction(rng, reduction: str, shape, axis=None, keepdims=False, ties=None, central: bool = True) -> dict:
    """Sum or max over ``axis``; ``ties``: a matrix with tied maxima (no central values there)."""
    data = np.asarray(ties, dtype=float) if ties is not None else rng.permutation(np.prod(shape)).reshape(shape) \
        + 0.1 * rng.random(shape)
    axis = tuple(axis) if isinstance(axis, list) else axis
    function = (lambda t: t.sum(axis=axis, keepdims=keepdims)) if reduction == "sum" else \
        (lambda t: t.max(axis=axis, keepdims=keepdims))
    return gradient_case(rng, function, [data], [True], central=ties is None and central)


PUBLIC = ([case(f"sum over {axis}, keepdims={keep}", "reduction", reduction="sum", shape=[2, 3, 4],
                axis=axis, keepdims=keep) for axis, keep in [(None, False), (1, False), ([0, 2], True),
                                                             (-1, True)]]
          + [case(f"max over {axis}, keepdims={keep}", "reduction", reduction="max", shape=[2, 3, 4], axis=axis,
                  keepdims=keep) for axis, keep in [(None, False), (1, False), (-1, True)]]
          + [case("tied maxima", "reduction", reduction="max", shape=[3, 3], axis=1,
                  ties=[[1.0, 3.0, 3.0], [2.0, 0.0, -1.0], [5.0, 5.0, 5.0]])])


def hidden_case(r, n: int, count: int) -> dict:
    shape = random_shape(r, int(r.integers(1, 4)), 2, 5)
    axes = [a for a in range(len(shape)) if r.random() < 0.5] or None
    if n == count - 1:
        ties = r.integers(0, 3, (3, 4)).astype(float).tolist()
        return case("tied maxima", "reduction", reduction="max", shape=[3, 4], axis=1, ties=ties)
    kind = ["sum", "max"][n % 2]
    return case(f"{kind} over {axes}", "reduction", reduction=kind, shape=shape, axis=axes,
                keepdims=bool(r.random() < 0.5))


def large_case(r) -> dict:
    return case("large", "reduction", reduction=["sum", "max"][int(r.integers(0, 2))],
                shape=[1024, 256], axis=int(r.integers(0, 2)), central=False)


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("ties not shared", "tied maxima share the gradient: each of k winners gets 1/k of it",
            ("winners / winners.sum(axis=self.axes, keepdims=True)", "winners")),
    mistake("sum's gradient not spread", "every summed x_i contributed once: copy gy to x's whole shape "
            "(broadcast_to)", ("xp_of(gy).broadcast_to(gy, self.shape)", "gy")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("2.3", public=PUBLIC, hidden=hidden_case, large=large_case, probes=[probe_reduction],
                    mistakes=MISTAKES)
