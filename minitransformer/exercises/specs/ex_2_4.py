"""Exercise 2.4 — getitem backward (scatter-add) (chapters/02-tensors-broadcasting.md).

Its public tests, its grading cases and its catalogued mistakes (spec.py).
"""
from __future__ import annotations

import numpy as np

import minitransformer as mt

from ..cases import gradient_case
from ..spec import ExerciseSpec, case, mistake, parametrize, tensor


# -- the public tests (pytest -m grades_2_4) --------------------------------------------------------------------------
INDICES = {"slice": (slice(1, 3),), "int-and-slice": (1, slice(None, None, 2)),
           "repeated-rows": (np.array([0, 2, 0, 0]),), "repeated-pairs": (np.array([1, 1]), np.array([2, 2])),
           "columns": (slice(None), np.array([3, 0, 3]))}


@parametrize("name", list(INDICES))
def test_getitem_backward_gradcheck(rng, name):
    x = tensor(rng, 3, 4)
    index = INDICES[name]
    assert mt.gradcheck(lambda t: t[index if len(index) > 1 else index[0]], [x])


def test_a_row_read_three_times_gets_three_gradients(rng):
    x = tensor(rng, 3, 2)
    x[np.array([0, 0, 2, 0])].backward(np.ones((4, 2)))
    reads = np.bincount([0, 0, 2, 0], minlength=3)[:, None] * np.ones((1, 2))
    np.testing.assert_array_equal(x.grad, reads)


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def _index(spec):
    """A JSON index ({"slice": [a, b, c]}, {"int": n}, {"array": [...]}, or a list of them) as a NumPy index."""
    def one(part):
        if "slice" in part:
            return slice(*part["slice"])
        if "int" in part:
            return part["int"]
        return np.asarray(part["array"])
    return tuple(one(p) for p in spec) if isinstance(spec, list) else one(spec)


def probe_getitem(rng, shape, index, central: bool = True) -> dict:
    """x[index] and its backward (a scatter-add where positions repeat)."""
    where = _index(index)
    return gradient_case(rng, lambda t: t[where], [rng.standard_normal(shape)], [True], central)


PUBLIC = ([case(name, "getitem", shape=[3, 4], index=index) for name, index in [
                ("a slice", {"slice": [1, 3]}), ("an int and a slice", [{"int": 1}, {"slice": [None, None, 2]}]),
                ("repeated rows", {"array": [0, 2, 0, 0]}), ("repeated pairs", [{"array": [1, 1]}, {"array": [2, 2]}]),
                ("columns", [{"slice": [None]}, {"array": [3, 0, 3]}])]]
          + [case("a row read three times", "getitem", shape=[3, 2], index={"array": [0, 0, 2, 0]})])


def hidden_case(r, n: int, count: int) -> dict:
    rows, cols = (int(x) for x in r.integers(2, 6, 2))
    picks = [int(x) for x in r.integers(0, rows, int(r.integers(2, 7)))]
    index = [{"array": picks}, {"slice": [None, None, int(r.integers(1, 3))]}] if n % 4 == 0 else \
        {"array": picks} if n % 4 == 1 else \
        [{"int": picks[0]}, {"slice": [int(r.integers(0, cols)), None]}] if n % 4 == 3 else \
        [{"array": picks}, {"array": [int(x) for x in r.integers(0, cols, len(picks))]}]
    return case("fancy indexing with repeats", "getitem", shape=[rows, cols], index=index)


def large_case(r) -> dict:
    return case("large", "getitem", shape=[1024, 256],
                index={"array": [int(x) for x in r.integers(0, 1024, 2048)]}, central=False)


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("repeats overwrite", "a position read several times gets the sum of their gradients: gx[index] = gy (or "
            "+= gy) keeps only one of them; add them (scatter_add, np.add.at)",
            ("scatter_add(gx, self.index, gy)", "gx[self.index] = gy")),
    mistake("basic index not filled", "for a slice or an int index the gradient must still be put where x was read",
            ("gx[self.index] = gy ", "pass ")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("2.4", public=PUBLIC, hidden=hidden_case, large=large_case, probes=[probe_getitem],
                    mistakes=MISTAKES)
