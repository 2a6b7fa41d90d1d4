"""Exercise 7.1 — splitting and merging heads (chapters/07-multi-head.md).

Its public tests, its grading cases and its catalogued mistakes (spec.py).
"""
from __future__ import annotations

import numpy as np

import minitransformer as mt
from minitransformer.functional.multi_head import merge_heads, split_heads

from ..cases import gradient_case
from ..spec import ExerciseSpec, case, mistake, tensor


# -- the public tests (pytest -m grades_7_1) --------------------------------------------------------------------------
def test_head_i_holds_features_i_dk_to_i_plus_1_dk(rng):
    batch, length, heads, d_k = 2, 3, 4, 2
    x = rng.standard_normal((batch, length, heads * d_k))
    split = split_heads(mt.Tensor(x), heads)
    assert split.shape == (batch, heads, length, d_k)
    for i in range(heads):
        np.testing.assert_array_equal(split.data[:, i], x[:, :, i * d_k:(i + 1) * d_k])


def test_merge_undoes_split(rng):
    x = rng.standard_normal((2, 3, 8))
    np.testing.assert_array_equal(merge_heads(split_heads(mt.Tensor(x), 4)).data, x)
    heads = rng.standard_normal((2, 4, 3, 2))
    np.testing.assert_array_equal(split_heads(merge_heads(mt.Tensor(heads)), 4).data, heads)


def test_split_and_merge_gradcheck(rng):
    x, scale = tensor(rng, 2, 3, 6), mt.Tensor(rng.standard_normal((1, 3, 1, 2)))
    assert mt.gradcheck(lambda t: merge_heads(split_heads(t, 3) * scale), [x])


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def probe_heads(rng, batch, length, heads, d_k) -> dict:
    """split_heads, merge_heads and the gradient through both."""
    from minitransformer.nn.attention import merge_heads, split_heads

    x = rng.standard_normal((batch, length, heads * d_k))
    split = np.asarray(split_heads(mt.Tensor(x), heads).data)
    merged = np.asarray(merge_heads(mt.Tensor(rng.standard_normal((batch, heads, length, d_k)))).data)
    scale = mt.Tensor(rng.standard_normal((1, heads, 1, d_k)))
    outputs = gradient_case(rng, lambda t: merge_heads(split_heads(t, heads) * scale), [x], [True])
    return {"split": split, "merged": merged, **outputs}


PUBLIC = [case("B=2, T=3, h=4, d_k=2", "heads", batch=2, length=3, heads=4, d_k=2),
          case("B=2, T=3, h=3, d_k=2", "heads", batch=2, length=3, heads=3, d_k=2)]


def hidden_case(r, n: int, count: int) -> dict:
    return case("random", "heads", batch=int(r.integers(1, 3)), length=int(r.integers(1, 5)),
                heads=int(r.integers(1, 5)), d_k=int(r.integers(1, 4)))


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("split without the transpose", "(B, T, h·d_k) -> (B, T, h, d_k) -> transpose to (B, h, T, d_k): reshaping "
            "straight to (B, h, T, d_k) mixes positions and features",
            ("x = x.reshape(batch, length, n_heads, width // n_heads)",
             "x = x.reshape(batch, n_heads, length, width // n_heads)"), ("return x.transpose(0, 2, 1, 3)", "return x")),
    mistake("merge without the transpose", "merging transposes (B, h, T, d_k) back to (B, T, h, d_k) before the reshape",
            ("x = x.transpose(0, 2, 1, 3)", "x = x")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("7.1", public=PUBLIC, hidden=hidden_case, probes=[probe_heads], mistakes=MISTAKES)
