"""Exercise 13.4 — the recurrent step of linear attention (chapters/13-long-sequences.md).

Its public tests, its grading cases and its catalogued mistakes (spec.py).
"""
from __future__ import annotations

import numpy as np

from ..spec import ExerciseSpec, case, mistake, parametrize, random_shape


# -- the public tests (pytest -m grades_13_4) -------------------------------------------------------------------------
def test_one_recurrent_step_adds_the_position_to_the_state_and_reads_it(rng):
    from minitransformer.functional.linear_attention import recurrent_step

    phi_q, phi_k, v = rng.random((2, 3)), rng.random((2, 3)), rng.standard_normal((2, 4))
    kv, z = rng.random((2, 3, 4)), rng.random((2, 3))
    num, den, new_kv, new_z = recurrent_step(phi_q, phi_k, v, kv, z)
    np.testing.assert_allclose(new_kv, kv + phi_k[:, :, None] * v[:, None, :], rtol=1e-12)   # S + φ(k) vᵀ
    np.testing.assert_allclose(new_z, z + phi_k, rtol=1e-12)
    np.testing.assert_allclose(num, np.einsum("bd,bde->be", phi_q, new_kv), rtol=1e-12)      # the position sees itself
    np.testing.assert_allclose(den[:, 0], np.einsum("bd,bd->b", phi_q, new_z), rtol=1e-12)       # φ(q)·z
    assert den.shape == (2, 1)


@parametrize("steps", [[1] * 7, [3, 4]])
def test_decoding_step_by_step_equals_the_causal_pass(rng, steps):
    from minitransformer.functional.linear_attention import linear_attention_step

    q, k, v = (rng.standard_normal((1, 2, 7, 3)) for _ in range(3))
    phi = lambda x: np.where(x > 0, x + 1, np.exp(np.minimum(x, 0)))      # noqa: E731  (elu + 1)
    similarity = np.tril(phi(q) @ phi(k).swapaxes(-1, -2))                 # φ(q_i)·φ(k_j) for j ≤ i
    full = similarity @ v / similarity.sum(axis=-1, keepdims=True)        # the causal pass, spelled out
    state, outs, start = None, [], 0
    for size in steps:
        out, state = linear_attention_step(q[..., start:start + size, :], k[..., start:start + size, :],
                                           v[..., start:start + size, :], state)
        outs.append(out.data)
        start += size
    np.testing.assert_allclose(np.concatenate(outs, axis=-2), full, rtol=1e-10, atol=1e-12)


# -- the cases `grade` scores: public (the tests' inputs) and hidden ---------------------------------------
def probe_linear_decoding(rng, shape, steps) -> dict:
    """Linear attention decoded a few positions at a time from its running state."""
    from minitransformer.functional.linear_attention import linear_attention_step

    q, k, v = (rng.standard_normal(shape) for _ in range(3))
    state, outs, start = None, [], 0
    for size in steps:
        rows = slice(start, start + size)
        out, state = linear_attention_step(q[..., rows, :], k[..., rows, :], v[..., rows, :], state)
        outs.append(np.asarray(out.data))
        start += size
    return {"out": np.concatenate(outs, axis=-2), "kv": np.asarray(state[0]), "z": np.asarray(state[1])}


def probe_recurrent_step(rng, lead, d_k: int, d_v: int) -> dict:
    """One step of linear attention's recurrence, from a random state."""
    from minitransformer.functional.linear_attention import recurrent_step

    shape = tuple(lead)
    phi_q, phi_k, v = rng.random(shape + (d_k,)), rng.random(shape + (d_k,)), rng.standard_normal(shape + (d_v,))
    kv, z = rng.random(shape + (d_k, d_v)), rng.random(shape + (d_k,))
    num, den, kv, z = recurrent_step(phi_q, phi_k, v, kv, z)
    return {"num": np.asarray(num), "den": np.asarray(den), "kv": np.asarray(kv), "z": np.asarray(z)}


PUBLIC = ([case("one step", "recurrent_step", lead=[2], d_k=3, d_v=4)]
          + [case(f"decoding in steps of {steps}", "linear_decoding", shape=[1, 2, 7, 3], steps=steps)
             for steps in ([1] * 7, [3, 4])])


def hidden_case(r, n: int, count: int) -> dict:
    if n % 2:
        return case("random", "recurrent_step", lead=random_shape(r, int(r.integers(0, 3)), 1, 3),
                    d_k=int(r.integers(1, 5)), d_v=int(r.integers(1, 5)))
    length = int(r.integers(1, 10))
    cuts = sorted({0, length, *(int(x) for x in r.integers(1, max(length, 2), int(r.integers(0, 3))))})
    return case("random", "linear_decoding", shape=[int(r.integers(1, 3)), 1, length, int(r.integers(1, 4))],
                steps=[b - a for a, b in zip(cuts, cuts[1:]) if b > a])


# BEGIN TEACHER ONLY (the catalogued mistakes quote the solution: the student edition keeps MISTAKES = ())
MISTAKES = (
    mistake("read before the update", "position i sees itself: add φ(k_i) v_iᵀ and φ(k_i) to the state first, then "
            "read it with φ(q_i)", ("num = (phi_q[..., None, :] @ kv)[..., 0, :]", "num = (phi_q[..., None, :] @ (kv - "
                                    "phi_k[..., :, None] * v[..., None, :]))[..., 0, :]"),
            ("den = (phi_q * z).sum(", "den = (phi_q * (z - phi_k)).sum(")),
    mistake("outer product the wrong way", "the state S = Σ φ(k) vᵀ is d_k × d_v: φ(k) is the column, v the row",
            ("phi_k[..., :, None] * v[..., None, :]", "v[..., :, None] * phi_k[..., None, :]")),
    mistake("normaliser not carried", "z = Σ φ(k) is a running sum too: add φ(k_i) to it at every step",
            ("z = z + phi_k", "z = phi_k")),
)
# END TEACHER ONLY

SPEC = ExerciseSpec("13.4", public=PUBLIC, hidden=hidden_case, probes=[probe_linear_decoding, probe_recurrent_step],
                    mistakes=MISTAKES)
