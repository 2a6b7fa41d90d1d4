"""The grading tests of the classroom exercises, one group per exercise (see TEACHING.md).

Each test carries its exercise's grading marker, ``grades_5_1`` for Exercise
5.1: ``pytest -m grades_5_1`` runs exactly the tests that score it (what
``python -m minitransformer.exercises grade`` runs). The wider marker
``ex_5_1`` is put on these tests and on every other test of the suite that
depends on the exercise (tests/exercise_map.json, applied by tests/conftest.py).
A grading test uses as few other exercises as it can: the backward exercises
need the numerical gradient (Exercise 1.1) and nothing else, the forward
exercises need nothing.
"""
from __future__ import annotations

import itertools
import math
from types import SimpleNamespace

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F
from minitransformer.bleu import clipped_ngram_matches
from minitransformer.data.raw_bpe import merge_pair
from minitransformer.decode import beam_search, greedy_decode, length_penalty
from minitransformer.functional.multi_head import merge_heads, split_heads
from minitransformer.nn.positional import sinusoidal_table
from minitransformer.ops.broadcasting import unbroadcast


def tensor(rng, *shape, low=None):
    """A float64 Tensor that requires a gradient; entries in [low, low + 1) when ``low`` is given."""
    data = rng.standard_normal(shape) if low is None else low + rng.random(shape)
    return mt.Tensor(data, requires_grad=True)


# -- Exercise 1.1: the numerical gradient ------------------------------------------------------------------
@pytest.mark.grades_1_1
def test_numerical_gradient_of_a_cube_is_three_x_squared(rng):
    x = tensor(rng, 3, 4)
    upstream = rng.standard_normal((3, 4))
    numeric = mt.numerical_gradient(lambda t: t * t * t, [x], 0, upstream, 1e-6)
    np.testing.assert_allclose(numeric, 3 * x.data ** 2 * upstream, rtol=1e-6, atol=1e-8)


@pytest.mark.grades_1_1
def test_numerical_gradient_of_each_input_of_a_product(rng):
    a, b = tensor(rng, 2, 3), tensor(rng, 2, 3)
    a_before, b_before = a.data.copy(), b.data.copy()
    upstream = rng.standard_normal((2, 3))
    np.testing.assert_allclose(mt.numerical_gradient(lambda p, q: p * q, [a, b], 0, upstream, 1e-6),
                               b_before * upstream, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(mt.numerical_gradient(lambda p, q: p * q, [a, b], 1, upstream, 1e-6),
                               a_before * upstream, rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(a.data, a_before)  # the inputs are left as they were (every nudge undone)
    np.testing.assert_array_equal(b.data, b_before)


class _Square(mt.Function):
    """x² with a backward that is right (factor 2) or wrong (factor 3)."""

    def __init__(self, factor: float) -> None:
        self.factor = factor

    def forward(self, x):
        self.x = x
        return x * x

    def backward(self, gy):
        return gy * self.factor * self.x


@pytest.mark.grades_1_1
def test_gradcheck_passes_a_right_backward_and_catches_a_wrong_one(rng):
    x = tensor(rng, 5)
    before = x.data.copy()
    assert mt.gradcheck(lambda t: _Square(2.0)(t), [x])
    np.testing.assert_array_equal(x.data, before)   # every perturbation was undone
    with pytest.raises(mt.GradcheckError, match="input 0"):
        mt.gradcheck(lambda t: _Square(3.0)(t), [x])


# -- Exercise 1.2: Div backward ---------------------------------------------------------------------------------
@pytest.mark.grades_1_2
@pytest.mark.parametrize("needs", ["both", "numerator", "denominator"])
def test_div_backward_gradcheck(rng, needs):
    a = tensor(rng, 3, 4)
    b = tensor(rng, 3, 4, low=0.5)       # away from zero
    a.requires_grad = needs in ("both", "numerator")
    b.requires_grad = needs in ("both", "denominator")
    assert mt.gradcheck(lambda p, q: p / q, [a, b])


@pytest.mark.grades_1_2
def test_div_by_a_number_and_of_a_number(rng):
    x = tensor(rng, 2, 3, low=0.5)
    assert mt.gradcheck(lambda t: t / 4.0, [x])
    assert mt.gradcheck(lambda t: 1.0 / t, [x])


# -- Exercise 2.1: unbroadcast --------------------------------------------------------------------------------
SHAPES = [((3, 1), (2, 3, 4)), ((4,), (3, 4)), ((), (2, 3)), ((1, 1), (2, 3)), ((2, 1, 4), (2, 3, 4)),
          ((1, 3, 1), (5, 2, 3, 4))]


@pytest.mark.grades_2_1
@pytest.mark.parametrize("shape, target", SHAPES, ids=[f"{s}->{t}" for s, t in SHAPES])
def test_unbroadcast_is_the_adjoint_of_broadcasting(rng, shape, target):
    # <broadcast(x), g> = <x, unbroadcast(g)> for every x and g: unbroadcast is broadcasting's transpose
    x, g = rng.standard_normal(shape), rng.standard_normal(target)
    reduced = unbroadcast(g, shape)
    assert reduced.shape == shape
    np.testing.assert_allclose(np.sum(np.broadcast_to(x, target) * g), np.sum(x * reduced), rtol=1e-10)


@pytest.mark.grades_2_1
def test_broadcast_add_and_mul_gradchecks(rng):
    a, b = tensor(rng, 2, 1, 3), tensor(rng, 4, 1)
    assert mt.gradcheck(lambda p, q: p + q, [a, b])
    assert mt.gradcheck(lambda p, q: p * q, [a, b])


# -- Exercise 2.2: MatMul backward ----------------------------------------------------------------------------
MATMUL = [((2, 3), (3, 4)), ((2, 2, 3), (2, 3, 4)), ((2, 2, 3), (3, 4)), ((3,), (3, 4)), ((2, 3), (3,)),
          ((3,), (3,))]


@pytest.mark.grades_2_2
@pytest.mark.parametrize("a_shape, b_shape", MATMUL, ids=[f"{a}@{b}" for a, b in MATMUL])
def test_matmul_backward_gradcheck(rng, a_shape, b_shape):
    a, b = tensor(rng, *a_shape), tensor(rng, *b_shape)
    assert mt.gradcheck(lambda p, q: p @ q, [a, b])


@pytest.mark.grades_2_2
def test_matmul_backward_when_only_one_side_needs_it(rng):
    a, b = tensor(rng, 2, 3), mt.Tensor(rng.standard_normal((3, 2)))
    assert mt.gradcheck(lambda p, q: p @ q, [a, b])
    assert mt.gradcheck(lambda p, q: q @ p, [a, b])


# -- Exercise 2.3: sum and max backward -------------------------------------------------------------------
@pytest.mark.grades_2_3
@pytest.mark.parametrize("axis, keepdims", [(None, False), (1, False), ((0, 2), True), (-1, True)])
def test_sum_backward_gradcheck(rng, axis, keepdims):
    x = tensor(rng, 2, 3, 4)
    assert mt.gradcheck(lambda t: t.sum(axis=axis, keepdims=keepdims), [x])


@pytest.mark.grades_2_3
@pytest.mark.parametrize("axis, keepdims", [(None, False), (1, False), (-1, True)])
def test_max_backward_gradcheck(rng, axis, keepdims):
    x = tensor(rng, 2, 3, 4)   # distinct values: max is differentiable there
    assert mt.gradcheck(lambda t: t.max(axis=axis, keepdims=keepdims), [x])


@pytest.mark.grades_2_3
def test_tied_maxima_share_the_gradient_equally():
    x = mt.Tensor(np.array([[1.0, 3.0, 3.0], [2.0, 0.0, -1.0], [5.0, 5.0, 5.0]]), requires_grad=True)
    upstream = np.array([6.0, 1.0, 3.0])
    x.max(axis=1).backward(upstream)
    winners = x.data == x.data.max(axis=1, keepdims=True)
    expected = winners * (upstream / winners.sum(axis=1))[:, None]
    np.testing.assert_allclose(x.grad, expected)


# -- Exercise 2.4: getitem backward (scatter-add) ------------------------------------------------------------------
INDICES = {"slice": (slice(1, 3),), "int-and-slice": (1, slice(None, None, 2)),
           "repeated-rows": (np.array([0, 2, 0, 0]),), "repeated-pairs": (np.array([1, 1]), np.array([2, 2])),
           "columns": (slice(None), np.array([3, 0, 3]))}


@pytest.mark.grades_2_4
@pytest.mark.parametrize("name", list(INDICES))
def test_getitem_backward_gradcheck(rng, name):
    x = tensor(rng, 3, 4)
    index = INDICES[name]
    assert mt.gradcheck(lambda t: t[index if len(index) > 1 else index[0]], [x])


@pytest.mark.grades_2_4
def test_a_row_read_three_times_gets_three_gradients(rng):
    x = tensor(rng, 3, 2)
    x[np.array([0, 0, 2, 0])].backward(np.ones((4, 2)))
    reads = np.bincount([0, 0, 2, 0], minlength=3)[:, None] * np.ones((1, 2))
    np.testing.assert_array_equal(x.grad, reads)


# -- Exercise 4.1: softmax backward ------------------------------------------------------------------------------
@pytest.mark.grades_4_1
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_backward_gradcheck(rng, axis):
    x = tensor(rng, 2, 3, 4)
    assert mt.gradcheck(lambda t: F.softmax(t, axis=axis), [x])


@pytest.mark.grades_4_1
def test_softmax_gradient_sums_to_zero_along_the_axis(rng):
    x = tensor(rng, 3, 5)
    F.softmax(x, axis=-1).backward(rng.standard_normal((3, 5)))
    np.testing.assert_allclose(x.grad.sum(axis=-1), 0.0, atol=1e-12)


# -- Exercise 4.2: log-softmax backward ------------------------------------------------------------------------
@pytest.mark.grades_4_2
@pytest.mark.parametrize("axis", [-1, 1])
def test_log_softmax_backward_gradcheck(rng, axis):
    x = tensor(rng, 2, 3, 4)
    assert mt.gradcheck(lambda t: F.log_softmax(t, axis=axis), [x])


# -- Exercise 4.3: label-smoothed cross-entropy backward -------------------------------------------------------
@pytest.mark.grades_4_3
@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.4])
@pytest.mark.parametrize("ignore_index", [None, 0])
def test_cross_entropy_backward_gradcheck(rng, smoothing, ignore_index):
    logits = tensor(rng, 6, 5)
    targets = np.array([1, 0, 4, 2, 0, 3])          # with ignore_index=0, two rows are padding
    assert mt.gradcheck(lambda t: F.cross_entropy(t, targets, label_smoothing=smoothing,
                                                  ignore_index=ignore_index), [logits])


@pytest.mark.grades_4_3
def test_cross_entropy_backward_over_a_batch_of_sequences(rng):
    logits = tensor(rng, 2, 3, 4)                   # (B, T, V)
    targets = np.array([[1, 2, 0], [3, 0, 0]])
    assert mt.gradcheck(lambda t: F.cross_entropy(t, targets, label_smoothing=0.1, ignore_index=0), [logits])


# -- Exercise 5.1: layer-norm backward --------------------------------------------------------------------------
@pytest.mark.grades_5_1
def test_layer_norm_backward_gradcheck(rng):
    x, weight, bias = tensor(rng, 2, 3, 5), tensor(rng, 5), tensor(rng, 5)
    assert mt.gradcheck(lambda a, w, b: F.layer_norm(a, w, b), [x, weight, bias])


@pytest.mark.grades_5_1
def test_layer_norm_backward_without_affine_and_with_one_row(rng):
    assert mt.gradcheck(lambda a: F.layer_norm(a), [tensor(rng, 4, 6)])
    assert mt.gradcheck(lambda a: F.layer_norm(a), [tensor(rng, 1, 3)])


# -- Exercise 6.1: masking the attention scores ------------------------------------------------------------------
def _qkv(rng, batch=2, heads=2, queries=4, keys=5, d_k=3):
    return (mt.Tensor(rng.standard_normal((batch, heads, queries, d_k))),
            mt.Tensor(rng.standard_normal((batch, heads, keys, d_k))),
            mt.Tensor(rng.standard_normal((batch, heads, keys, d_k))))


@pytest.mark.grades_6_1
def test_a_padding_mask_equals_attending_to_the_real_keys_only(rng):
    q, k, v = _qkv(rng)
    lengths = [5, 3]
    mask = (np.arange(5)[None, :] < np.array(lengths)[:, None])[:, None, None, :]   # (B, 1, 1, S)
    out, weights = F.scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
    for b, n in enumerate(lengths):
        alone = F.scaled_dot_product_attention(q[b:b + 1], k[b:b + 1, :, :n], v[b:b + 1, :, :n])
        np.testing.assert_allclose(out.data[b:b + 1], alone.data, rtol=1e-12, atol=1e-12)
        assert np.all(weights.data[b, :, :, n:] == 0)   # exactly zero, not merely small


@pytest.mark.grades_6_1
def test_a_lower_triangular_mask_hides_the_future(rng):
    q, k, v = _qkv(rng, queries=4, keys=4)
    lower = np.tril(np.ones((4, 4), dtype=bool))[None, None]
    out = F.scaled_dot_product_attention(q, k, v, mask=lower)
    for t in range(4):
        prefix = F.scaled_dot_product_attention(q[:, :, t:t + 1], k[:, :, :t + 1], v[:, :, :t + 1])
        np.testing.assert_allclose(out.data[:, :, t:t + 1], prefix.data, rtol=1e-12, atol=1e-12)


@pytest.mark.grades_6_1
def test_a_query_with_every_key_masked_gets_zeros(rng):
    q, k, v = _qkv(rng, batch=1, heads=1, queries=2, keys=3)
    mask = np.array([[True, False, True], [False, False, False]])[None, None]
    out, weights = F.scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
    assert np.all(np.isfinite(out.data))
    np.testing.assert_array_equal(out.data[0, 0, 1], 0.0)
    np.testing.assert_array_equal(weights.data[0, 0, 0, 1], 0.0)


# -- Exercise 6.2: attention backward to the queries and keys ---------------------------------------------------
@pytest.mark.grades_6_2
def test_attention_backward_gradcheck(rng):
    q, k, v = (tensor(rng, 2, 2, 3, 4), tensor(rng, 2, 2, 5, 4), tensor(rng, 2, 2, 5, 3))
    assert mt.gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c), [q, k, v])


@pytest.mark.grades_6_2
def test_attention_backward_gradcheck_with_a_mask_and_broadcast_keys(rng):
    q, k, v = tensor(rng, 2, 2, 3, 4), tensor(rng, 1, 1, 4, 4), tensor(rng, 1, 1, 4, 2)
    mask = np.array([[True, True, False, False], [True, True, True, True]])[:, None, None, :]
    assert mt.gradcheck(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, mask=mask), [q, k, v])


# -- Exercise 6.3: the causal mask --------------------------------------------------------------------------------
@pytest.mark.grades_6_3
@pytest.mark.parametrize("size", [1, 2, 5])
def test_causal_mask_lets_position_i_see_positions_up_to_i(size):
    mask = np.asarray(F.causal_mask(size, device="cpu"))
    assert mask.shape == (1, 1, size, size) and mask.dtype == bool
    for i, j in itertools.product(range(size), repeat=2):
        assert mask[0, 0, i, j] == (j <= i), f"query {i}, key {j}"


@pytest.mark.grades_6_3
def test_with_the_causal_mask_the_past_does_not_see_the_future(rng):
    q, k, v = _qkv(rng, queries=5, keys=5)
    out = F.scaled_dot_product_attention(q, k, v, mask=F.causal_mask(5, device="cpu"))
    k.data[:, :, 3:], v.data[:, :, 3:] = 100.0, -100.0   # change the future of position 2
    changed = F.scaled_dot_product_attention(q, k, v, mask=F.causal_mask(5, device="cpu"))
    np.testing.assert_array_equal(out.data[:, :, :3], changed.data[:, :, :3])


# -- Exercise 6.4: additive attention's scores backward ------------------------------------------------------
@pytest.mark.grades_6_4
def test_additive_score_backward_gradcheck(rng):
    queries, keys, v = tensor(rng, 2, 3, 4), tensor(rng, 2, 5, 4), tensor(rng, 4)    # T = 3 queries, S = 5 keys
    assert mt.gradcheck(F.additive_score, [queries, keys, v])


@pytest.mark.grades_6_4
def test_additive_score_backward_gradcheck_for_one_decoder_step_with_saturated_units(rng):
    queries, keys, v = tensor(rng, 3, 1, 5), tensor(rng, 3, 4, 5), tensor(rng, 5)    # T = 1: one step, S = 4
    keys.data *= 3.0                                        # many tanh units near ±1, where 1 − a² matters most
    assert mt.gradcheck(F.additive_score, [queries, keys, v])


# -- Exercise 7.1: splitting and merging heads --------------------------------------------------------------------
@pytest.mark.grades_7_1
def test_head_i_holds_features_i_dk_to_i_plus_1_dk(rng):
    batch, length, heads, d_k = 2, 3, 4, 2
    x = rng.standard_normal((batch, length, heads * d_k))
    split = split_heads(mt.Tensor(x), heads)
    assert split.shape == (batch, heads, length, d_k)
    for i in range(heads):
        np.testing.assert_array_equal(split.data[:, i], x[:, :, i * d_k:(i + 1) * d_k])


@pytest.mark.grades_7_1
def test_merge_undoes_split(rng):
    x = rng.standard_normal((2, 3, 8))
    np.testing.assert_array_equal(merge_heads(split_heads(mt.Tensor(x), 4)).data, x)
    heads = rng.standard_normal((2, 4, 3, 2))
    np.testing.assert_array_equal(split_heads(merge_heads(mt.Tensor(heads)), 4).data, heads)


@pytest.mark.grades_7_1
def test_split_and_merge_gradcheck(rng):
    x, scale = tensor(rng, 2, 3, 6), mt.Tensor(rng.standard_normal((1, 3, 1, 2)))
    assert mt.gradcheck(lambda t: merge_heads(split_heads(t, 3) * scale), [x])


# -- Exercise 8.1: the sinusoidal encoding ----------------------------------------------------------------------
@pytest.mark.grades_8_1
@pytest.mark.parametrize("length, d_model", [(6, 8), (3, 5)])
def test_sinusoidal_table_follows_section_3_5(length, d_model):
    table = sinusoidal_table(length, d_model)
    assert table.shape == (length, d_model)
    for pos in range(length):
        for column in range(d_model):
            angle = pos / 10000 ** ((column - column % 2) / d_model)
            expected = math.sin(angle) if column % 2 == 0 else math.cos(angle)
            assert table[pos, column] == pytest.approx(expected, abs=1e-12), (pos, column)


@pytest.mark.grades_8_1
def test_a_shift_by_k_positions_is_one_fixed_rotation(rng):
    d_model, k = 6, 3
    table = sinusoidal_table(20, d_model)
    # fit R on some positions, then predict the others: PE(pos + k) = PE(pos) R for every pos
    rotation, *_ = np.linalg.lstsq(table[:8], table[k:8 + k], rcond=None)
    np.testing.assert_allclose(table[8:20 - k] @ rotation, table[8 + k:], atol=1e-8)


# -- Exercise 10.1: the warm-up schedule ----------------------------------------------------------------------------
class _Holder:
    lr = 0.0


@pytest.mark.grades_10_1
@pytest.mark.parametrize("d_model, warmup, factor", [(512, 4000, 1.0), (64, 10, 2.0)])
def test_noam_rate_rises_linearly_then_decays_as_inverse_square_root(d_model, warmup, factor):
    schedule = mt.optim.NoamSchedule(_Holder(), d_model, warmup=warmup, factor=factor)
    peak = factor * (d_model * warmup) ** -0.5
    assert schedule.rate(warmup) == pytest.approx(peak, rel=1e-12)
    for step in (1, warmup // 2, warmup):          # rate ∝ step during warm-up
        assert schedule.rate(step) == pytest.approx(peak * step / warmup, rel=1e-12)
    for step in (warmup, 2 * warmup, 9 * warmup):  # rate ∝ step^-0.5 after it
        assert schedule.rate(step) == pytest.approx(peak * math.sqrt(warmup / step), rel=1e-12)


@pytest.mark.grades_10_1
def test_noam_step_sets_the_optimizers_rate():
    holder = _Holder()
    schedule = mt.optim.NoamSchedule(holder, 16, warmup=3)
    rates = [schedule.step() for _ in range(6)]
    assert holder.lr == rates[-1]
    assert rates.index(max(rates)) == 2            # the peak is at step = warmup


# -- Exercise 11.1: one beam-search step ---------------------------------------------------------------------------
PAD, BOS, EOS = 0, 1, 2


class _Markov:
    """A "model" whose next-token distribution depends on the last token only: log_table[last]."""

    def __init__(self, log_table: np.ndarray, max_len: int = 8) -> None:
        self.log_table = log_table
        self.config = SimpleNamespace(pad_id=PAD, max_len=max_len)

    def parameters(self):
        return []

    def encode(self, src):
        return mt.Tensor(np.zeros((src.shape[0], src.shape[1], 1))), (src != PAD)[:, None, None, :]

    def init_cache(self):
        return SimpleNamespace(reorder=lambda rows: None)

    def decode_step(self, last_ids, memory, src_mask, cache):
        return mt.Tensor(self.log_table[np.asarray(last_ids)])


def _table(rows: dict[int, dict[int, float]], vocab: int = 6) -> np.ndarray:
    table = np.full((vocab, vocab), -1e9)
    for last, row in rows.items():
        for token, p in row.items():
            table[last, token] = math.log(p)
    return table


def _best_by_enumeration(table: np.ndarray, alpha: float, longest: int) -> list[int]:
    """The eos-terminated output with the best length-penalised score, by trying every one."""
    words = [t for t in range(table.shape[0]) if t not in (PAD, BOS, EOS)]
    best, best_score = None, -math.inf
    for length in range(longest + 1):
        for tokens in itertools.product(words, repeat=length):
            path = [BOS, *tokens, EOS]
            log_p = sum(table[a, b] for a, b in zip(path, path[1:]))
            score = log_p / length_penalty(length + 1, alpha)
            if score > best_score:
                best, best_score = list(tokens), score
    return best


@pytest.mark.grades_11_1
@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_search_escapes_the_greedy_trap(alpha):
    # after bos "3" is likelier than "4", but "3" leads nowhere certain while "4" ends at once
    table = _table({BOS: {3: 0.6, 4: 0.4}, 3: {5: 0.4, 3: 0.3, 4: 0.3}, 4: {EOS: 0.9, 5: 0.1},
                    5: {EOS: 0.9, 5: 0.1}})
    model, src = _Markov(table), np.array([[7, 7]])
    best = _best_by_enumeration(table, alpha, longest=4)
    assert greedy_decode(model, src, BOS, EOS)[0] != best          # the trap is real
    assert beam_search(model, src, BOS, EOS, beam_size=2, alpha=alpha)[0][0].tokens == best


@pytest.mark.grades_11_1
def test_beam_of_one_is_greedy(rng):
    probabilities = rng.dirichlet(np.ones(4), size=6) * 0.999      # tokens 2..5, rows for every last token
    table = np.full((6, 6), -1e9)
    table[:, 2:] = np.log(probabilities)
    model, src = _Markov(table, max_len=6), np.array([[7, 7, 7], [7, 0, 0]])
    beams = beam_search(model, src, BOS, EOS, beam_size=1, alpha=0.0)
    assert [b[0].tokens for b in beams] == greedy_decode(model, src, BOS, EOS)


@pytest.mark.grades_11_1
def test_n_best_hypotheses_come_sorted_with_their_log_probabilities():
    table = _table({BOS: {3: 0.5, 4: 0.3, EOS: 0.2}, 3: {EOS: 1.0}, 4: {EOS: 1.0}})
    results = beam_search(_Markov(table), np.array([[7]]), BOS, EOS, beam_size=3, alpha=0.0, n_best=3)[0]
    assert [h.tokens for h in results] == [[3], [4], []]
    np.testing.assert_allclose([h.log_prob for h in results], np.log([0.5, 0.3, 0.2]), rtol=1e-9)


@pytest.mark.grades_11_1
def test_an_early_eos_does_not_cost_a_live_beam():
    # after bos the two best extensions are eos and "3": keeping only the top k = 2 would leave one live beam
    # and lose "4"; keeping the top 2k keeps both "3" and "4" alive, and [4] is the second-best output
    table = _table({BOS: {EOS: 0.4, 3: 0.35, 4: 0.25}, 3: {EOS: 0.5, 5: 0.5}, 4: {EOS: 1.0}, 5: {EOS: 1.0}})
    results = beam_search(_Markov(table), np.array([[7]]), BOS, EOS, beam_size=2, alpha=0.0, n_best=2)[0]
    assert [h.tokens for h in results] == [[], [4]]


# -- Exercise 11.2: BLEU's clipped n-gram precision ------------------------------------------------------------
# worked by hand: "the cat sat on the mat" has the bigrams the-cat, cat-sat, sat-on, on-the, the-mat, and the
# reference "the cat is on the mat" has three of them; a hypothesis shorter than n has no n-gram at all
CLIPPED = [("the cat sat on the mat", "the cat is on the mat", 1, (5, 6)),
           ("the cat sat on the mat", "the cat is on the mat", 2, (3, 5)),
           ("the cat sat on the mat", "the cat is on the mat", 3, (1, 4)),
           ("the cat sat on the mat", "the cat is on the mat", 4, (0, 3)),
           ("the the the the", "the cat", 1, (1, 4)), ("the the the the", "the the cat", 2, (1, 3)),
           ("the cat", "the cat sat", 3, (0, 0)), ("", "the cat", 1, (0, 0))]


@pytest.mark.grades_11_2
@pytest.mark.parametrize("hypothesis, reference, n, expected", CLIPPED)
def test_clipped_matches_of_worked_examples(hypothesis, reference, n, expected):
    assert clipped_ngram_matches(hypothesis.split(), reference.split(), n) == expected


@pytest.mark.grades_11_2
def test_a_repeated_word_counts_at_most_as_often_as_in_the_reference():
    hypothesis, reference = ["the"] * 7, "the cat is on the mat".split()
    matches, total = clipped_ngram_matches(hypothesis, reference, 1)
    assert (matches, total) == (reference.count("the"), len(hypothesis))


# -- Exercise 11.3: one merge step of the raw-text BPE ----------------------------------------------------------
@pytest.mark.grades_11_3
def test_a_merge_replaces_every_occurrence_left_to_right():
    space, a, b, c, ab = 262, 260, 261, 263, 300
    assert merge_pair([space, a, b, c, a, b], (a, b), ab) == [space, ab, c, ab]
    assert merge_pair([a, a, a], (a, a), ab) == [ab, a]                 # the overlap is left, as in training
    assert merge_pair([a, a, a, a], (a, a), ab) == [ab, ab]
    assert merge_pair([b, a], (a, b), ab) == [b, a] and merge_pair([], (a, b), ab) == []


@pytest.mark.grades_11_3
@pytest.mark.parametrize("seed", range(3))
def test_a_merge_keeps_the_text_and_leaves_no_mergeable_pair(seed):
    rng = np.random.default_rng(seed)
    for _ in range(50):
        ids = [int(i) for i in rng.integers(0, 3, size=rng.integers(0, 12))]
        merged = merge_pair(ids, (0, 1), 9)
        spelled = [x for i in merged for x in ([0, 1] if i == 9 else [i])]
        assert spelled == ids                                           # nothing lost, nothing added
        assert (0, 1) not in set(zip(merged, merged[1:]))               # every occurrence was merged
        assert merged.count(9) == "".join(map(str, ids)).count("01")


# -- Exercise 13.1: the online-softmax merge of a new block --------------------------------------------------------
def _online(scores, values, cuts):
    from minitransformer.functional.flash_attention import finish_rows, online_softmax_step

    rows = scores.shape[0]
    state = (np.full((rows, 1), -np.inf), np.zeros((rows, 1)), np.zeros((rows, values.shape[1])))
    for start, stop in zip(cuts[:-1], cuts[1:]):
        state = online_softmax_step(*state, scores[:, start:stop], values[start:stop])
    return finish_rows(*state)


@pytest.mark.grades_13_1
@pytest.mark.parametrize("cuts", [[0, 7], [0, 4, 7], [0, 1, 2, 5, 7]])
def test_block_by_block_softmax_equals_the_softmax_of_the_whole_row(rng, cuts):
    scores, values = 4 * rng.standard_normal((3, 7)), rng.standard_normal((7, 2))
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    out, log_sum_exp = _online(scores, values, cuts)
    np.testing.assert_allclose(out, weights @ values, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(log_sum_exp[:, 0], np.log(np.exp(scores).sum(axis=1)), rtol=1e-12)


@pytest.mark.grades_13_1
def test_the_merge_survives_huge_scores_and_fully_masked_blocks():
    scores = np.array([[-np.inf, -np.inf, 1e4, 1e4 - 1], [-np.inf, -np.inf, -np.inf, -np.inf]])
    values = np.arange(8.0).reshape(4, 2)
    out, log_sum_exp = _online(scores, values, [0, 2, 4])
    assert np.isfinite(out).all()
    expected = np.array([1.0, np.exp(-1.0)]) / (1 + np.exp(-1.0)) @ values[2:]
    np.testing.assert_allclose(out[0], expected, rtol=1e-12)
    np.testing.assert_array_equal(out[1], 0.0)                 # a row that saw no key: zeros
    assert log_sum_exp[1, 0] == np.inf


# -- Exercise 13.2: the D term of the flash backward ----------------------------------------------------------------
@pytest.mark.grades_13_2
def test_delta_makes_the_rows_of_the_softmax_gradient_sum_to_zero(rng):
    from minitransformer.functional.flash_attention import flash_delta

    weights = rng.random((2, 4, 6))
    weights /= weights.sum(axis=-1, keepdims=True)             # A, rows sum to 1
    values, g_out = rng.standard_normal((2, 6, 3)), rng.standard_normal((2, 4, 3))
    g_weights = g_out @ values.swapaxes(-1, -2)                # gA = gO Vᵀ
    delta = flash_delta(g_out, weights @ values)
    assert delta.shape == (2, 4, 1)
    g_scores = weights * (g_weights - delta)                   # gS = A ⊙ (gA − D): a softmax gradient sums to 0
    np.testing.assert_allclose(g_scores.sum(axis=-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(flash_delta(np.array([[1.0, 2.0], [0.0, -1.0]]), np.array([[3.0, 4.0], [5.0, 6.0]])),
                               [[11.0], [-6.0]])               # 1·3 + 2·4 and 0·5 − 1·6, by hand


@pytest.mark.grades_13_2
def test_flash_attention_backward_gradcheck(rng):
    q, k, v = tensor(rng, 1, 2, 7, 3), tensor(rng, 1, 2, 9, 3), tensor(rng, 1, 2, 9, 2)
    assert mt.gradcheck(lambda a, b, c: F.flash_attention(a, b, c, causal=True, block_size=4), [q, k, v])


# -- Exercise 13.3: causal linear attention by prefix sums ---------------------------------------------------------
@pytest.mark.grades_13_3
@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_prefix_sums_equal_the_lower_triangle_of_the_similarities(rng, chunk):
    from minitransformer.functional.linear_attention import causal_prefix_attention

    phi_q, phi_k, v = rng.random((2, 8, 3)), rng.random((2, 8, 3)), rng.standard_normal((2, 8, 4))
    similarity = np.tril(phi_q @ phi_k.swapaxes(-1, -2))       # φ(q_i)·φ(k_j) for j ≤ i
    num, den, _ = causal_prefix_attention(phi_q, phi_k, v, chunk)
    np.testing.assert_allclose(num, similarity @ v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(den, similarity.sum(axis=-1, keepdims=True), rtol=1e-12)


@pytest.mark.grades_13_3
def test_causal_linear_attention_does_not_see_the_future(rng):
    q, k, v = (mt.Tensor(rng.standard_normal((1, 2, 9, 3))) for _ in range(3))
    out = F.linear_attention(q, k, v, causal=True)
    k.data[:, :, 5:], v.data[:, :, 5:] = 3.0, -7.0
    np.testing.assert_array_equal(F.linear_attention(q, k, v, causal=True).data[:, :, :5], out.data[:, :, :5])


# -- Exercise 13.4: the recurrent step of linear attention ---------------------------------------------------------
@pytest.mark.grades_13_4
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


@pytest.mark.grades_13_4
@pytest.mark.parametrize("steps", [[1] * 7, [3, 4]])
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


# -- Exercise 13.5: Longformer's dilated window with global tokens --------------------------------------------
@pytest.mark.grades_13_5
@pytest.mark.parametrize("n, w, d, g, causal", [(9, 1, 1, (), False), (12, 2, 3, (0, 6), False),
                                                (10, 2, 2, (3,), True)])
def test_the_longformer_pattern_pair_by_pair(n, w, d, g, causal):
    def allowed(i, j):
        return (any(j == i + d * m for m in range(-w, w + 1)) or i in g or j in g) and (j <= i or not causal)
    expected = np.array([[allowed(i, j) for j in range(n)] for i in range(n)])
    got = F.longformer_pattern(n, w, d, g, causal, device="cpu")
    assert got.shape == (n, n) and got.dtype == bool
    np.testing.assert_array_equal(got, expected)


@pytest.mark.grades_13_5
def test_a_global_token_sees_everything_and_is_seen_by_everything():
    got = F.longformer_pattern(8, 1, 2, [5], device="cpu")
    assert got[5].all() and got[:, 5].all()
    assert got[0].sum() == 2 + 1                          # itself, key 2 (d = 2), and the global token 5


# -- Exercise 12.1: the alignment error rate of a head ---------------------------------------------------------
@pytest.mark.grades_12_1
def test_aer_is_zero_for_a_perfect_head_and_counts_phrase_links_as_possible():
    from minitransformer.alignment_scores import alignment_error_rate
    assert alignment_error_rate(np.eye(4), [(i, i) for i in range(4)]) == 0.0
    # row 0 has two partners (possible links), row 1 one (a sure link); both argmaxes are right
    weights = np.array([[0.1, 0.8, 0.1], [0.0, 0.0, 1.0]])
    assert alignment_error_rate(weights, [(0, 0), (1, 0), (2, 1)]) == 0.0


@pytest.mark.grades_12_1
def test_aer_of_a_worked_example():
    from minitransformer.alignment_scores import alignment_error_rate
    # argmax links A = {(0, 0), (2, 1), (0, 2)}; row 1 has two gold partners (possible links), rows 0 and 2 one
    # (sure links S = {(0, 0), (1, 2)}); A meets S once and the possible links P twice: AER = 1 - 3/5
    weights = np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6], [0.5, 0.4, 0.1], [0.2, 0.2, 0.6]])
    links = [(0, 0), (1, 1), (2, 1), (1, 2)]                       # row 3 has no gold link: it is not counted
    assert alignment_error_rate(weights, links) == pytest.approx(0.4)
    assert alignment_error_rate(weights, [(1, 0), (0, 1), (2, 2)]) == 1.0   # every argmax misses: the worst


# -- Exercise 12.2: the FLOPs of one encoder layer -----------------------------------------------------------
@pytest.mark.grades_12_2
@pytest.mark.parametrize("d_model, d_ff, length, flops", [
    (4, 8, 3, 304),                # 128 for the four projections + 48 for q·kᵀ and A·V + 128 for the two FFN matrices
    (512, 2048, 25, 6342656),      # 2097152 + 51200 + 4194304
    (128, 512, 11.5, 399104)])     # 131072 + 5888 + 262144
def test_encoder_layer_flops_count_every_product(d_model, d_ff, length, flops):
    from minitransformer.flops import encoder_layer_flops
    assert encoder_layer_flops(d_model, d_ff, length) == pytest.approx(flops)
