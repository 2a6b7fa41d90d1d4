"""Exercise 11.3 — one merge step of the raw-text BPE (chapters/11-translator.md).

Its public tests, its grading cases and its catalogued mistakes (spec.py).
"""
from __future__ import annotations

import numpy as np

from minitransformer.data.raw_bpe import merge_pair

from ..spec import ExerciseSpec, case, mistake, parametrize


# -- the public tests (pytest -m grades_11_3) -------------------------------------------------------------------------
def test_a_merge_replaces_every_occurrence_left_to_right():
    space, a, b, c, ab = 262, 260, 261, 263, 300
    assert merge_pair([space, a, b, c, a, b], (a, b), ab) == [space, ab, c, ab]
    assert merge_pair([a, a, a], (a, a), ab) == [ab, a]                 # the overlap is left, as in training
    assert merge_pair([a, a, a, a], (a, a), ab) == [ab, ab]
    assert merge_pair([b, a], (a, b), ab) == [b, a] and merge_pair([], (a, b), ab) == []


@parametrize("seed", range(3))
def test_a_merge_keeps_the_text_and_leaves_no_mergeable_pair(seed):
    rng = np.random.default_rng(seed)
    for _ in range(50):
        ids = [int(i) for i in rng.integers(0, 3, size=rng.integers(0, 12))]
        merged = merge_pair(ids, (0, 1), 9)
        spelled = [x for i in merged for x in ([0, 1] if i == 9 else [i])]
        assert spelled == ids                                           # nothing lost, nothing added
        assert (0, 1) not in set(zip(merged, merged[1:]))               # every occurrence was merged
        assert merged.count(9) == "".join(map(str, ids)).count("01")


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def probe_merge_pair(rng, sequences=None, pair=(0, 1), new_id: int = 9, count: int = 50, symbols: int = 3,
                     longest: int = 12) -> dict:
    """merge_pair on given or random id sequences (results padded with −1)."""
    from minitransformer.data.raw_bpe import merge_pair

    if sequences is None:
        sequences = [[int(i) for i in rng.integers(0, symbols, size=rng.integers(0, longest))] for _ in range(count)]
    merged = [list(merge_pair(list(s), tuple(pair), new_id)) for s in sequences]
    table = np.full((len(merged), max([len(m) for m in merged] + [1])), -1, dtype=np.int64)
    for row, ids in enumerate(merged):
        table[row, :len(ids)] = ids
    return {"merged": table, "lengths": np.asarray([len(m) for m in merged], dtype=np.int64)}


PUBLIC = ([case("the examples of the docstring", "merge_pair", pair=[260, 261], new_id=300,
                sequences=[[262, 260, 261, 263, 260, 261], [261, 260], []]),
           case("overlapping pairs", "merge_pair", pair=[260, 260], new_id=300,
                sequences=[[260, 260, 260], [260, 260, 260, 260]])]
          + [case(f"random sequences, seed {n}", "merge_pair") for n in range(3)])


def hidden_case(r, n: int, count: int) -> dict:
    return case("random sequences", "merge_pair", pair=[int(x) for x in r.integers(0, 3, 2)],
                new_id=9, symbols=int(r.integers(2, 4)), longest=int(r.integers(1, 16)))


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("overlap merged", "after a merge, skip both tokens of the pair (i += 2): [a, a, a] with (a, a) gives "
            "[aa, a]", ("i += 2", "i += 1")),
    mistake("last token dropped", "the last token is kept when it is not part of a pair",
            ("while i < len(ids):", "while i < len(ids) - 1:")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("11.3", public=PUBLIC, hidden=hidden_case, probes=[probe_merge_pair], mistakes=MISTAKES)
