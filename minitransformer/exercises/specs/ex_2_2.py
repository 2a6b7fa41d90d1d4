"""Exercise 2.2 — MatMul backward (chapters/02-tensors-broadcasting.md): its public tests, cases and mistakes (spec.py)."""
from __future__ import annotations

import minitransformer as mt

from ..spec import ExerciseSpec, case, mistake, parametrize, random_shape, tensor


# -- the public tests (pytest -m grades_2_2) --------------------------------------------------------------------------
MATMUL = [((2, 3), (3, 4)), ((2, 2, 3), (2, 3, 4)), ((2, 2, 3), (3, 4)), ((3,), (3, 4)), ((2, 3), (3,)),
          ((3,), (3,))]


@parametrize("a_shape, b_shape", MATMUL, ids=[f"{a}@{b}" for a, b in MATMUL])
def test_matmul_backward_gradcheck(rng, a_shape, b_shape):
    a, b = tensor(rng, *a_shape), tensor(rng, *b_shape)
    assert mt.gradcheck(lambda p, q: p @ q, [a, b])


def test_matmul_backward_when_only_one_side_needs_it(rng):
    a, b = tensor(rng, 2, 3), mt.Tensor(rng.standard_normal((3, 2)))
    assert mt.gradcheck(lambda p, q: p @ q, [a, b])
    assert mt.gradcheck(lambda p, q: q @ p, [a, b])


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
PUBLIC = ([case(f"{a} @ {b}", "gradient", operation="matmul", shapes=[list(a), list(b)]) for a, b in MATMUL]
          + [case("only A needs a gradient", "gradient", operation="matmul", shapes=[[2, 3], [3, 2]],
                  needs=[True, False]),
             case("only B needs a gradient", "gradient", operation="matmul-swapped", shapes=[[2, 3], [3, 2]],
                  needs=[True, False])])


def hidden_case(r, n: int, count: int) -> dict:
    i, j, k = (int(x) for x in r.integers(1, 5, 3))
    batch = random_shape(r, int(r.integers(0, 3)), 1, 4)
    a, b = [*batch, i, j], [j, k]
    if n % 4 == 1:                    # B broadcast over a batch axis of A's
        batch = random_shape(r, int(r.integers(1, 3)), 2, 4)
        a, b = [*batch, i, j], [*[1 if m == 0 or r.random() < 0.5 else batch[m] for m in range(len(batch))],
                                j, k]
    elif n % 4 == 2:
        a = [j]
    elif n % 4 == 3:
        a, b = [*batch, i, j], [j]
    return case(f"{a} @ {b}", "gradient", operation="matmul", shapes=[a, b],
                needs=[bool(r.random() < 0.85), True])


def large_case(r) -> dict:
    return case("large", "gradient", operation="matmul", shapes=[[256, 256], [256, 256]], central=False)


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("B not transposed", "dL/dA = G Bᵀ: B must be transposed (swapaxes(-1, -2)); G @ B does not even fit the "
            "shapes", ("gy @ b2.swapaxes(-1, -2)", "gy @ b2")),
    mistake("A not transposed", "dL/dB = Aᵀ G: A must be transposed", ("a2.swapaxes(-1, -2) @ gy", "a2 @ gy"),
            ("a2.reshape(-1, k).T @", "a2.reshape(-1, k) @")),
    mistake("broadcast batch of B not summed", "when B was broadcast over batch axes, its gradient must be summed over "
            "them (unbroadcast to B's shape)", ("unbroadcast(a2.swapaxes(-1, -2) @ gy, b2.shape)",
                                                "a2.swapaxes(-1, -2) @ gy")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("2.2", public=PUBLIC, hidden=hidden_case, large=large_case, needs={"2.1"}, mistakes=MISTAKES)
