"""Chapter 13: flash (tiled) attention, sliding-window attention and linear attention.

Each is checked three ways: against a definition computed the O(n²) way (value and
gradient), by a float64 gradient check on shapes that are not multiples of the block,
and by mutants, deliberately broken copies that these same checks must reject.
"""
from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F
from minitransformer.gradcheck import GradcheckError

flash_module = importlib.import_module("minitransformer.functional.flash_attention")
local_module = importlib.import_module("minitransformer.functional.local_attention")
linear_module = importlib.import_module("minitransformer.functional.linear_attention")


def tensor(rng, *shape):
    return mt.Tensor(rng.standard_normal(shape), requires_grad=True)


def qkv(rng, t, s, d_k=5, d_v=4, batch=2, heads=2):
    return tensor(rng, batch, heads, t, d_k), tensor(rng, batch, heads, s, d_k), tensor(rng, batch, heads, s, d_v)


def padding(lengths, s):
    """(B, 1, 1, S) key-padding mask: the first lengths[b] keys are real."""
    return (np.arange(s)[None, :] < np.array(lengths)[:, None])[:, None, None, :]


def causal(t, s):
    """(1, 1, T, S): query i sees keys j ≤ i + (S − T), the bottom-right-aligned triangle."""
    return (np.arange(s)[None, :] <= np.arange(t)[:, None] + (s - t))[None, None]


def values_and_gradients(fn, inputs, upstream):
    for x in inputs:
        x.grad = None
    out = fn(*inputs)
    out.backward(upstream)
    return out.data.copy(), [x.grad.copy() for x in inputs]


def assert_same_values_and_gradients(fn, reference, inputs, rng, atol=1e-10):
    upstream = rng.standard_normal(reference(*inputs).shape)
    out, grads = values_and_gradients(fn, inputs, upstream)
    expected, expected_grads = values_and_gradients(reference, inputs, upstream)
    np.testing.assert_allclose(out, expected, rtol=0, atol=atol)
    for name, got, want in zip("qkv", grads, expected_grads):
        np.testing.assert_allclose(got, want, rtol=0, atol=atol, err_msg=f"gradient of {name}")


# -- flash attention ---------------------------------------------------------------------------------------
FLASH_CASES = {   # name: (T, S, block_size, causal, mask builder)
    "plain, one block": (5, 6, 64, False, lambda t, s: None),
    "plain, ragged tiles": (13, 11, 4, False, lambda t, s: None),
    "block of one": (4, 5, 1, False, lambda t, s: None),
    "padding": (9, 10, 4, False, lambda t, s: padding([6, 10], s)),
    "causal": (13, 13, 4, True, lambda t, s: None),
    "causal, fewer queries than keys": (5, 13, 4, True, lambda t, s: None),
    "causal and padding": (10, 10, 3, True, lambda t, s: padding([7, 10], s)),
    "full (T, S) mask": (7, 9, 4, False, lambda t, s: np.random.default_rng(1).random((2, 1, t, s)) < 0.6),
}


def flash_reference_mask(t, s, is_causal, mask):
    full = np.ones((1, 1, t, s), bool) if mask is None else mask
    return full & causal(t, s) if is_causal else full


@pytest.mark.parametrize("name", sorted(FLASH_CASES))
def test_flash_equals_scaled_dot_product_attention_in_value_and_gradient(rng, name):
    t, s, block, is_causal, build = FLASH_CASES[name]
    mask = build(t, s)
    inputs = qkv(rng, t, s)
    reference_mask = flash_reference_mask(t, s, is_causal, mask)
    assert_same_values_and_gradients(
        lambda q, k, v: F.flash_attention(q, k, v, mask=mask, causal=is_causal, block_size=block),
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask=reference_mask), inputs, rng)


@pytest.mark.parametrize("name", ["plain, ragged tiles", "padding", "causal", "causal and padding",
                                  "causal, fewer queries than keys"])
def test_flash_gradcheck(rng, name):
    t, s, block, is_causal, build = FLASH_CASES[name]
    mask = build(t, s)
    q, k, v = qkv(rng, t, s, heads=1)
    assert mt.gradcheck(lambda q, k, v: F.flash_attention(q, k, v, mask=mask, causal=is_causal, block_size=block),
                        [q, k, v])


def expand_layout(layout, block, t, s):
    """A (⌈T/bs⌉, ⌈S/bs⌉) block layout as the (1, 1, T, S) entry mask it stands for."""
    return np.kron(layout, np.ones((block, block), bool))[:t, :s][None, None]


def test_flash_block_mask_computes_exactly_the_listed_tiles(rng):
    t, s, block = 11, 10, 3
    layout = np.array([[1, 0, 0, 1], [1, 1, 0, 0], [0, 0, 0, 0], [0, 1, 1, 1]], bool)   # row 2: no tile at all
    inputs = qkv(rng, t, s)
    assert_same_values_and_gradients(
        lambda q, k, v: F.flash_attention(q, k, v, block_size=block, block_mask=layout),
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask=expand_layout(layout, block, t, s)),
        inputs, rng)
    out = F.flash_attention(*inputs, block_size=block, block_mask=layout)
    np.testing.assert_array_equal(out.data[:, :, 6:9], 0.0)       # the queries of the empty block row


def test_flash_gradcheck_with_a_block_mask_causal_and_padding(rng):
    t, block = 10, 3
    layout = np.tril(np.ones((4, 4), bool)) & ~np.eye(4, k=-2, dtype=bool)        # local band of tiles
    layout[:, 0] = True                                                             # plus a global first block
    mask = padding([8, 10], t)
    q, k, v = qkv(rng, t, t, heads=1)
    assert mt.gradcheck(lambda q, k, v: F.flash_attention(q, k, v, mask=mask, causal=True, block_size=block,
                                                          block_mask=layout), [q, k, v])


def test_flash_fully_masked_rows_give_zeros_no_nan_and_no_gradient(rng):
    t, s = 6, 7
    mask = np.ones((2, 1, t, s), bool)
    mask[0, 0, 1] = False
    mask[1, 0, 4:] = False
    q, k, v = qkv(rng, t, s)
    out = F.flash_attention(q, k, v, mask=mask, block_size=4)
    assert np.isfinite(out.data).all()
    np.testing.assert_array_equal(out.data[0, :, 1], 0.0)
    np.testing.assert_array_equal(out.data[1, :, 4:], 0.0)
    upstream = np.zeros(out.shape)
    upstream[0, :, 1], upstream[1, :, 4:] = 1.0, 1.0          # gradient only through the empty rows
    out.backward(upstream)
    for x in (q, k, v):
        np.testing.assert_array_equal(x.grad, 0.0)
    q2, k2, v2 = qkv(rng, t, s, batch=2)
    assert mt.gradcheck(lambda q, k, v: F.flash_attention(q, k, v, mask=mask, block_size=4), [q2, k2, v2])


def test_flash_with_every_key_padded_gives_zeros(rng):
    q, k, v = qkv(rng, 4, 5)
    out = F.flash_attention(q, k, v, mask=np.zeros((2, 1, 1, 5), bool), block_size=2)
    np.testing.assert_array_equal(out.data, 0.0)


def test_flash_shares_keys_across_heads_by_broadcasting(rng):
    q, k, v = tensor(rng, 2, 3, 7, 4), tensor(rng, 1, 1, 6, 4), tensor(rng, 1, 1, 6, 2)
    assert_same_values_and_gradients(lambda q, k, v: F.flash_attention(q, k, v, block_size=4),
                                     lambda q, k, v: F.scaled_dot_product_attention(q, k, v), [q, k, v], rng)


def test_flash_keeps_float32_and_agrees_with_sdpa_there(rng):
    q, k, v = (mt.Tensor(x.data.astype(np.float32)) for x in qkv(rng, 33, 40))
    out = F.flash_attention(q, k, v, causal=True, block_size=8)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out.data, F.scaled_dot_product_attention(q, k, v, mask=causal(33, 40)).data,
                               atol=1e-6)


def test_flash_keeps_nothing_of_size_t_times_s_for_backward(rng):
    t = s = 96
    q, k, v = qkv(rng, t, s, batch=1, heads=1)
    out = F.flash_attention(q, k, v, block_size=16)
    saved = [value for value in out.creator.saved_arrays if hasattr(value, "nbytes")]
    assert saved, "the Function should keep its inputs, O and L"
    assert max(a.size for a in saved) < t * s                   # no (T, S) scores or weights
    sdpa = F.scaled_dot_product_attention(q, k, v)
    assert sdpa.creator.weights.size == t * s                   # while eq. 1 keeps A


def test_flash_refuses_bad_arguments(rng):
    q, k, v = qkv(rng, 5, 6)
    with pytest.raises(ValueError, match="block_size must be a positive integer"):
        F.flash_attention(q, k, v, block_size=0)
    with pytest.raises(ValueError, match=r"block_mask must be a boolean array of shape .* \(3, 3\)"):
        F.flash_attention(q, k, v, block_size=2, block_mask=np.ones((2, 3), bool))
    with pytest.raises(ValueError, match="does not broadcast to the scores' shape"):
        F.flash_attention(q, k, v, mask=np.ones((2, 1, 1, 5), bool))
    with pytest.raises(ValueError, match="same last size d_k"):
        F.flash_attention(q, tensor(rng, 2, 2, 6, 3), v)


# -- mutants of flash attention: the checks above must reject each of them ------------------------------------
def test_a_running_sum_that_is_not_rescaled_is_caught(rng, monkeypatch):
    real = flash_module.online_softmax_step

    def step_without_rescaling_the_sum(row_max, row_sum, weighted, scores, values):
        """The classic slip: the old running sum is not moved to the new maximum, it is only added to."""
        new_max, new_terms, weighted = real(row_max, np.zeros_like(row_sum), weighted, scores, values)
        return new_max, row_sum + new_terms, weighted

    monkeypatch.setattr(flash_module, "online_softmax_step", step_without_rescaling_the_sum)
    q, k, v = qkv(rng, 9, 10, batch=1)
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        np.testing.assert_allclose(F.flash_attention(q, k, v, block_size=4).data,
                                   F.scaled_dot_product_attention(q, k, v).data, atol=1e-10)
    with pytest.raises(GradcheckError, match="is wrong at"):
        mt.gradcheck(lambda q, k, v: F.flash_attention(q, k, v, block_size=4), [q, k, v])


WRONG_DELTAS = {
    "forgets O: rowsum(gO)": lambda g_out, out: g_out.sum(axis=-1, keepdims=True),
    "forgets D: gS = P ⊙ gP": lambda g_out, out: np.zeros(out.shape[:-1] + (1,)),
}


@pytest.mark.parametrize("name", sorted(WRONG_DELTAS))
def test_a_wrong_delta_is_caught_by_the_gradient_check(rng, monkeypatch, name):
    monkeypatch.setattr(flash_module, "flash_delta", WRONG_DELTAS[name])
    q, k, v = qkv(rng, 7, 9, batch=1)
    with pytest.raises(GradcheckError, match="gradient of input 0"):     # the queries' gradient is wrong
        mt.gradcheck(lambda q, k, v: F.flash_attention(q, k, v, block_size=4), [q, k, v])


def test_a_log_sum_exp_without_the_max_is_caught_by_the_gradient_check(rng, monkeypatch):
    real = flash_module.finish_rows

    def finish_without_max(row_max, row_sum, weighted):
        out, _ = real(row_max, row_sum, weighted)
        return out, np.log(row_sum)                               # forgets m in L = m + log ℓ

    monkeypatch.setattr(flash_module, "finish_rows", finish_without_max)
    q, k, v = qkv(rng, 6, 8, batch=1)
    with pytest.raises(GradcheckError, match="is wrong at"):
        mt.gradcheck(lambda q, k, v: F.flash_attention(q, k, v, block_size=4), [q, k, v])


# -- local (sliding-window) attention ---------------------------------------------------------------------------
LOCAL_CASES = [(13, 3, False), (13, 3, True), (10, 5, False), (7, 1, True), (6, 20, False), (12, 4, True)]


@pytest.mark.parametrize("length, window, is_causal", LOCAL_CASES)
def test_local_equals_sdpa_with_the_band_mask(rng, length, window, is_causal):
    mask = padding([length - 2, length], length)
    inputs = qkv(rng, length, length)
    band = F.band_mask(length, window, is_causal, device="cpu") & mask
    assert_same_values_and_gradients(
        lambda q, k, v: F.local_attention(q, k, v, window, causal=is_causal, mask=mask),
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask=band), inputs, rng)


def test_band_mask_is_the_window(rng):
    band = F.band_mask(6, 2, device="cpu")[0, 0]
    for i in range(6):
        for j in range(6):
            assert band[i, j] == (abs(i - j) <= 2)
    assert not F.band_mask(6, 2, causal=True, device="cpu")[0, 0, 1, 2]


@pytest.mark.parametrize("window, is_causal", [(3, False), (2, True)])
def test_local_gradcheck(rng, window, is_causal):
    q, k, v = qkv(rng, 8, 8, heads=1)
    mask = padding([7, 8], 8)
    assert mt.gradcheck(lambda q, k, v: F.local_attention(q, k, v, window, causal=is_causal, mask=mask), [q, k, v])


def test_local_attention_works_on_n_times_3w_scores_not_n_squared(rng, monkeypatch):
    seen = []
    real = local_module.scaled_dot_product_attention

    def spy(q, k, v, mask=None):
        seen.append(q.shape[:-1] + (k.shape[-2],))
        return real(q, k, v, mask=mask)

    monkeypatch.setattr(local_module, "scaled_dot_product_attention", spy)
    length, window = 200, 8
    F.local_attention(*qkv(rng, length, length, batch=1, heads=1), window)
    [scores_shape] = seen
    assert scores_shape == (1, 1, length // window, window, 3 * window)     # 3·n·w entries, not n²
    assert np.prod(scores_shape) == 3 * length * window < length * length


def test_local_refuses_bad_arguments(rng):
    q, k, v = qkv(rng, 6, 6)
    with pytest.raises(ValueError, match="window must be a positive integer"):
        F.local_attention(q, k, v, 0)
    with pytest.raises(ValueError, match="need the same length"):
        F.local_attention(q, *qkv(rng, 6, 5)[1:], 2)
    with pytest.raises(ValueError, match="key-padding mask of shape"):
        F.local_attention(q, k, v, 2, mask=np.ones((2, 1, 6, 6), bool))


def test_a_band_one_position_too_narrow_is_caught(rng, monkeypatch):
    def narrow(a, b, window, causal):
        offset = b - a - window
        return (offset > -window) & (offset <= (0 if causal else window))     # loses key i − w

    monkeypatch.setattr(local_module, "chunk_band", narrow)
    inputs = qkv(rng, 9, 9, batch=1)
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        assert_same_values_and_gradients(
            lambda q, k, v: F.local_attention(q, k, v, 2),
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask=F.band_mask(9, 2, device="cpu")),
            inputs, rng)


def test_chunks_without_the_left_neighbour_are_caught(rng, monkeypatch):
    real = local_module._overlapping
    monkeypatch.setattr(local_module, "_overlapping", lambda blocks, n: real(blocks[..., 1:, :, :], n))
    inputs = qkv(rng, 9, 9, batch=1)
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        assert_same_values_and_gradients(
            lambda q, k, v: F.local_attention(q, k, v, 3, causal=True),
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask=F.band_mask(9, 3, True, device="cpu")),
            inputs, rng)


# -- linear attention --------------------------------------------------------------------------------------------
def linear_reference(q, k, v, is_causal):
    """o_i = Σ_j φ(q_i)·φ(k_j) v_j / Σ_j φ(q_i)·φ(k_j), with the (T, S) similarity matrix spelled out."""
    phi = lambda x: np.where(x > 0, x + 1, np.exp(np.minimum(x, 0)))   # noqa: E731
    similarity = phi(q.data) @ phi(k.data).swapaxes(-1, -2)           # (..., T, S)
    if is_causal:
        similarity = np.tril(similarity)
    return similarity @ v.data / similarity.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("length, chunk, is_causal", [(9, 4, True), (9, 64, True), (5, 1, True), (7, 4, False)])
def test_linear_attention_matches_its_definition(rng, length, chunk, is_causal):
    q, k, v = qkv(rng, length, length)
    out = linear_module.LinearAttention(is_causal, chunk)(q, k, v)
    np.testing.assert_allclose(out.data, linear_reference(q, k, v, is_causal), rtol=1e-12, atol=1e-12)


def test_linear_attention_non_causal_takes_other_key_lengths(rng):
    q, k, v = qkv(rng, 4, 9)
    np.testing.assert_allclose(F.linear_attention(q, k, v).data, linear_reference(q, k, v, False), atol=1e-12)


@pytest.mark.parametrize("is_causal, chunk", [(False, 64), (True, 3), (True, 64)])
def test_linear_attention_gradcheck(rng, is_causal, chunk):
    q, k, v = qkv(rng, 8, 8, batch=1)
    assert mt.gradcheck(lambda q, k, v: linear_module.LinearAttention(is_causal, chunk)(q, k, v), [q, k, v])


def test_linear_attention_gradcheck_with_broadcast_keys(rng):
    q, k, v = tensor(rng, 2, 2, 5, 3), tensor(rng, 1, 1, 5, 3), tensor(rng, 1, 1, 5, 2)
    assert mt.gradcheck(lambda q, k, v: F.linear_attention(q, k, v, causal=True), [q, k, v])


def test_linear_attention_is_a_different_model_from_softmax_attention(rng):
    q, k, v = qkv(rng, 6, 6)
    gap = np.abs(F.linear_attention(q, k, v).data - F.scaled_dot_product_attention(q, k, v).data).max()
    assert gap > 1e-2


def test_linear_attention_refuses_causal_with_other_lengths(rng):
    with pytest.raises(ValueError, match="causal needs as many queries as keys"):
        F.linear_attention(*qkv(rng, 4, 6), causal=True)


def test_prefix_sums_not_carried_across_chunks_are_caught(rng, monkeypatch):
    real = linear_module.causal_prefix_attention

    def forgetful(phi_q, phi_k, v, chunk):                             # each chunk starts from zero
        parts = [real(phi_q[..., i:i + chunk, :], phi_k[..., i:i + chunk, :], v[..., i:i + chunk, :], chunk)
                 for i in range(0, phi_q.shape[-2], chunk)]
        return (np.concatenate([p[0] for p in parts], -2), np.concatenate([p[1] for p in parts], -2),
                [start for p in parts for start in p[2]])

    monkeypatch.setattr(linear_module, "causal_prefix_attention", forgetful)
    q, k, v = qkv(rng, 8, 8, batch=1)
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        np.testing.assert_allclose(linear_module.LinearAttention(True, 3)(q, k, v).data,
                                   linear_reference(q, k, v, True), atol=1e-10)
    with pytest.raises(GradcheckError, match="is wrong at"):
        mt.gradcheck(lambda q, k, v: linear_module.LinearAttention(True, 3)(q, k, v), [q, k, v])


def test_a_feature_map_slope_of_one_everywhere_is_caught(rng, monkeypatch):
    monkeypatch.setattr(linear_module, "elu_plus_one_slope", lambda x, phi: np.ones_like(x))   # as if φ = x + 1
    q, k, v = qkv(rng, 6, 6, batch=1)
    with pytest.raises(GradcheckError, match="is wrong at"):
        mt.gradcheck(lambda q, k, v: F.linear_attention(q, k, v, causal=True), [q, k, v])


# -- the benchmark and the chapter that quotes it ------------------------------------------------------------------
ROOT = Path(__file__).resolve().parents[2]


LONG_SEQUENCES = ROOT / "benchmarks" / "sequence_length"      # chapter 13's benchmarks and their results/


def benchmark_module(name):
    sys.path.insert(0, str(LONG_SEQUENCES))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(LONG_SEQUENCES))


@pytest.mark.parametrize("name", ["long_sequences", "table1", "attention_kinds_bleu"])
def test_the_chapter_quotes_the_results_files_as_rendered(name):
    module = benchmark_module(name)
    results_file = f"benchmarks/sequence_length/results/{name}.json"
    if name == "attention_kinds_bleu" and not (ROOT / results_file).exists():
        pytest.skip("the translation runs with each attention have not been made yet")
    results = json.loads((ROOT / results_file).read_text(encoding="utf-8"))
    chapter = (ROOT / "chapters" / "13-long-sequences.md").read_text(encoding="utf-8")
    quoted = benchmark_module("long_sequences").region(chapter, results_file)
    assert quoted == module.render_markdown(results), f"run python benchmarks/sequence_length/{name}.py --render"


def test_the_japanese_chapter_quotes_the_long_sequence_tables_as_rendered_in_japanese():
    module = benchmark_module("long_sequences")
    results_file = "benchmarks/sequence_length/results/long_sequences.json"
    results = json.loads((ROOT / results_file).read_text(encoding="utf-8"))
    chapter = (ROOT / "chapters" / "ja" / "13-long-sequences.md").read_text(encoding="utf-8")
    rendered = module.render_markdown(results, "ja")
    assert module.region(chapter, results_file) == rendered, "run python benchmarks/sequence_length/long_sequences.py --render"
    assert "Memory added" not in rendered and "Measured" not in rendered and "skipped" not in rendered
    numbers = re.compile(r"\d[\d,.]*")
    english = module.render_markdown(results)
    table_numbers = [[n for line in text.splitlines() if line.startswith("|") for n in numbers.findall(line)]
                     for text in (english, rendered)]
    assert table_numbers[0] == table_numbers[1]


def test_the_results_show_what_the_chapter_claims():
    results = json.loads((ROOT / "benchmarks/sequence_length/results/long_sequences.json").read_text(encoding="utf-8"))
    summary = benchmark_module("long_sequences").summarize(results)
    assert summary["flash_over_sdpa_memory_4096"] <= 1 / 8          # flash at 4,096: at most 1/8 of eq. 1's memory
    by = {(r["function"], r["n"]): r for r in results["records"]}
    assert "added_mib" in by[("flash", 16384)]                        # and it ran at 16,384
    assert "skipped" in by[("sdpa", 16384)]


@pytest.mark.skipif(mt.cuda_available(), reason="with a GPU this would run the whole GPU benchmark")
def test_the_gpu_benchmark_skips_cleanly_without_a_gpu():
    result = subprocess.run([sys.executable, str(LONG_SEQUENCES / "long_sequences.py"), "--gpu"],
                            capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    assert "skipping the GPU benchmark" in result.stdout


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["flash", "local", "linear"])
def test_the_same_code_runs_on_cupy_and_agrees_with_numpy(rng, name):
    calls = {"flash": lambda q, k, v: F.flash_attention(q, k, v, causal=True, block_size=4),
             "local": lambda q, k, v: F.local_attention(q, k, v, 3, causal=True),
             "linear": lambda q, k, v: F.linear_attention(q, k, v, causal=True)}
    inputs = qkv(rng, 11, 11)
    upstream = rng.standard_normal((2, 2, 11, 4))
    expected, expected_grads = values_and_gradients(calls[name], inputs, upstream)
    on_gpu = [mt.Tensor(mt.backend.to_device(x.data, "cuda"), requires_grad=True) for x in inputs]
    out = calls[name](*on_gpu)
    out.backward(mt.backend.to_device(upstream, "cuda"))
    np.testing.assert_allclose(out.numpy(), expected, atol=1e-10)
    for x, want in zip(on_gpu, expected_grads):
        np.testing.assert_allclose(mt.backend.asnumpy(x.grad), want, atol=1e-10)


def test_table1s_recurrent_row_is_chapter_6s_lstm():
    """The recurrent layer of Table 1 is nn.LSTM; unrolled one cell step at a time it computes the same outputs,
    and that chain of steps is the graph whose depth doubles with n (the fused layer is one node)."""
    import minitransformer.nn as nn

    table1 = benchmark_module("table1")
    layer = table1.make_layers(8, 2, 2)["recurrent"]
    assert isinstance(layer.lstm, nn.LSTM)
    x = mt.Tensor(np.random.default_rng(0).standard_normal((2, 6, 8)))
    layer.to(np.float64)
    np.testing.assert_allclose(layer.unrolled(x).numpy(), layer(x).numpy(), rtol=1e-12, atol=1e-14)
    short, long = (table1.graph_depth(layer.unrolled(mt.Tensor(np.ones((1, n, 8))))) for n in (16, 32))
    assert long > 1.9 * short and table1.graph_depth(layer(mt.Tensor(np.ones((1, 32, 8))))) < 5
    assert table1.path_length(layer, 16, 8, np.random.default_rng(1)) == 1


# -- linear attention as a recurrent network: decoding in constant memory -----------------------------------------
@pytest.mark.parametrize("steps", [[1] * 9, [4, 1, 3, 1], [9]])
def test_the_recurrent_steps_equal_the_causal_pass(rng, steps):
    q, k, v = qkv(rng, 9, 9)
    full = F.linear_attention(q, k, v, causal=True).data
    state, outs, start = None, [], 0
    for size in steps:                                      # the new positions, a few at a time
        rows = slice(start, start + size)
        out, state = linear_module.linear_attention_step(q.data[..., rows, :], k.data[..., rows, :],
                                                         v.data[..., rows, :], state)
        outs.append(out.data)
        start += size
    np.testing.assert_allclose(np.concatenate(outs, axis=-2), full, rtol=0, atol=1e-10)
    kv, z = state                                           # the state is the prefix sums of the whole sequence
    phi_k = linear_module.elu_plus_one(k.data)
    np.testing.assert_allclose(kv, phi_k.swapaxes(-1, -2) @ v.data, atol=1e-12)
    np.testing.assert_allclose(z, phi_k.sum(axis=-2), atol=1e-12)


def test_the_recurrent_step_refuses_a_state_that_does_not_fit(rng):
    q, k, v = (x.data for x in qkv(rng, 1, 1))
    with pytest.raises(ValueError, match="does not fit"):
        linear_module.linear_attention_step(q, k, v, (np.zeros((2, 2, 5, 3)), np.zeros((2, 2, 5))))
    with pytest.raises(ValueError, match="of the same positions"):
        linear_module.linear_attention_step(q, k[..., :0, :], v)


def linear_decoder(d_model=8, heads=2):
    config = mt.nn.TransformerConfig.tiny(11, d_model=d_model, n_heads=heads, d_ff=16, dropout=0.0, max_len=64,
                                          attention="linear")
    return mt.nn.Transformer(config).to(np.float64)


def test_cached_linear_decoding_equals_the_full_pass_and_keeps_no_keys():
    model = linear_decoder()
    rng = np.random.default_rng(3)
    src, tgt_in = rng.integers(3, 11, (2, 5)), rng.integers(3, 11, (2, 12))
    memory, src_mask = model.encode(src)
    full = model.decode(tgt_in, memory, src_mask).data
    cache = model.init_cache()
    with mt.no_grad():
        steps = [model.decode_step(tgt_in[:, t], memory, src_mask, cache).data for t in range(tgt_in.shape[1])]
    np.testing.assert_allclose(np.stack(steps, axis=1), full, rtol=0, atol=1e-10)
    for layer in cache.layers:
        assert layer.self_attn.keys is None and layer.self_attn.length == 12
        assert layer.cross_attn.keys is not None                 # cross-attention still projects the memory once


def test_the_linear_cache_does_not_grow_with_the_prefix():
    model = linear_decoder()
    memory, src_mask = model.encode(np.array([[4, 5, 6]]))
    cache, sizes = model.init_cache(), []
    with mt.no_grad():
        for t in range(40):
            model.decode_step(np.array([3 + t % 7]), memory, src_mask, cache)
            sizes.append(sum(layer.self_attn.nbytes for layer in cache.layers))
    assert len(set(sizes)) == 1 and sizes[0] > 0                # the same bytes after 1 step and after 40
    softmax = mt.nn.Transformer(mt.nn.TransformerConfig.tiny(11, d_model=8, n_heads=2, d_ff=16, dropout=0.0,
                                                              max_len=64)).to(np.float64)
    memory, src_mask = softmax.encode(np.array([[4, 5, 6]]))
    grown = softmax.init_cache()
    with mt.no_grad():
        for t in range(40):
            softmax.decode_step(np.array([3]), memory, src_mask, grown)
    assert sum(layer.self_attn.nbytes for layer in grown.layers) == len(grown.layers) * 40 * 2 * 8 * 8   # t keys, values


def test_beam_reordering_reorders_the_linear_state():
    model = linear_decoder()
    memory, src_mask = model.encode(np.array([[4, 5, 6], [7, 8, 9]]))
    cache = model.init_cache()
    with mt.no_grad():
        model.decode_step(np.array([3, 4]), memory, src_mask, cache)
        before = [layer.self_attn.state[0].copy() for layer in cache.layers]
        cache.reorder(np.array([1, 1, 0]))
    for layer, kv in zip(cache.layers, before):
        np.testing.assert_array_equal(layer.self_attn.state[0], kv[[1, 1, 0]])


def test_a_state_that_forgets_the_past_is_caught(rng, monkeypatch):
    real = linear_module.recurrent_step
    monkeypatch.setattr(linear_module, "recurrent_step",
                        lambda phi_q, phi_k, v, kv, z: real(phi_q, phi_k, v, 0 * kv, z))   # S not carried
    q, k, v = qkv(rng, 6, 6)
    out, _ = linear_module.linear_attention_step(q.data, k.data, v.data)
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        np.testing.assert_allclose(out.data, F.linear_attention(q, k, v, causal=True).data, atol=1e-10)


# -- sparse patterns: each against a dense mask built from its definition, pair by pair ------------------------------
sparse_module = importlib.import_module("minitransformer.functional.sparse_patterns")


def from_definition(n, allowed):
    return np.array([[bool(allowed(i, j)) for j in range(n)] for i in range(n)])


@pytest.mark.parametrize("n, l", [(10, 3), (16, 4), (7, 1), (5, 9)])
def test_the_strided_pattern_is_its_definition(n, l):
    local, strided = F.strided_pattern(n, l, device="cpu")
    np.testing.assert_array_equal(local, from_definition(n, lambda i, j: max(0, i - l) <= j <= i))
    np.testing.assert_array_equal(strided, from_definition(n, lambda i, j: j <= i and (i - j) % l == 0))


@pytest.mark.parametrize("n, l, c", [(12, 4, 1), (13, 4, 2), (9, 3, 3)])
def test_the_fixed_pattern_is_its_definition(n, l, c):
    own_block, summaries = F.fixed_pattern(n, l, c, device="cpu")
    np.testing.assert_array_equal(own_block, from_definition(n, lambda i, j: j <= i and j // l == i // l))
    np.testing.assert_array_equal(summaries, from_definition(n, lambda i, j: j <= i and j % l in range(l - c, l)))


@pytest.mark.parametrize("n, w, d, g, is_causal", [(12, 2, 1, (), False), (15, 2, 3, (0, 7), False),
                                                   (11, 1, 2, (4,), True), (6, 9, 1, (5,), False)])
def test_the_longformer_pattern_is_its_definition(n, w, d, g, is_causal):
    def allowed(i, j):
        seen = any(j == i + d * m for m in range(-w, w + 1)) or i in g or j in g
        return seen and (j <= i or not is_causal)
    np.testing.assert_array_equal(F.longformer_pattern(n, w, d, g, is_causal, device="cpu"), from_definition(n, allowed))


@pytest.mark.parametrize("blocks, r, g, seed", [(8, 1, 1, 0), (10, 2, 2, 5), (4, 5, 0, 1), (6, 0, 6, 2)])
def test_the_bigbird_layout_is_window_global_and_random_blocks(blocks, r, g, seed):
    layout = F.bigbird_layout(blocks, r, g, seed)
    structured = from_definition(blocks, lambda a, b: abs(a - b) <= 1 or a < g or b < g)
    assert (layout >= structured).all()                                  # the window and the global blocks
    extra = layout & ~structured
    assert not extra[:g].any()
    for row in range(g, blocks):                                         # r random blocks more, or all that were left
        assert extra[row].sum() == min(r, (~structured[row]).sum())
    np.testing.assert_array_equal(F.bigbird_layout(blocks, r, g, seed), layout)   # seeded: the same draw again
    if r and blocks > 4:
        assert any((F.bigbird_layout(blocks, r, g, s) != layout).any() for s in range(seed + 1, seed + 6))


def test_the_covering_layout_holds_exactly_the_touched_tiles():
    mask = np.zeros((7, 9), bool)
    mask[0, 8], mask[5, 3] = True, True
    expected = np.zeros((3, 3), bool)
    expected[0, 2], expected[1, 1] = True, True
    np.testing.assert_array_equal(F.covering_layout(mask, 3), expected)
    np.testing.assert_array_equal(F.expand_layout(expected, 3, 7, 9, device="cpu")[5], [0, 0, 0, 1, 1, 1, 0, 0, 0])


PATTERNS = {
    "strided": lambda n: np.logical_or(*F.strided_pattern(n, 3, device="cpu")),
    "fixed": lambda n: np.logical_or(*F.fixed_pattern(n, 4, 1, device="cpu")),
    "longformer": lambda n: F.longformer_pattern(n, 2, 2, (0, 5), device="cpu"),
    "bigbird": lambda n: F.expand_layout(F.bigbird_layout(-(-n // 4), 1, 1, 3), 4, n, device="cpu"),
}


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_sparse_attention_is_eq1_on_the_pattern(rng, name):
    pattern = PATTERNS[name](14)
    assert_same_values_and_gradients(
        lambda q, k, v: F.sparse_attention(q, k, v, pattern, block_size=4),
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask=pattern[None, None]), qkv(rng, 14, 14), rng)


@pytest.mark.parametrize("name", ["fixed", "bigbird"])
def test_sparse_attention_gradcheck(rng, name):
    pattern = PATTERNS[name](10)
    assert mt.gradcheck(lambda q, k, v: F.sparse_attention(q, k, v, pattern, block_size=4),
                        list(qkv(rng, 10, 10, heads=1)))


def test_a_pattern_of_whole_tiles_runs_without_an_entry_mask(rng, monkeypatch):
    seen = []
    real = sparse_module.flash_attention
    monkeypatch.setattr(sparse_module, "flash_attention", lambda *a, **kw: seen.append(kw) or real(*a, **kw))
    q, k, v = qkv(rng, 32, 32, batch=1, heads=1)
    F.sparse_attention(q, k, v, PATTERNS["bigbird"](32), block_size=4)
    F.sparse_attention(q, k, v, PATTERNS["strided"](32), block_size=4)
    assert seen[0]["mask"] is None and seen[1]["mask"] is not None
    np.testing.assert_array_equal(seen[0]["block_mask"], F.bigbird_layout(8, 1, 1, 3))   # its own tiles only


def test_two_layers_of_either_pattern_connect_every_earlier_position():
    """Child et al. §4.2: each position reaches every earlier one in two steps of the factorised pattern."""
    n, l = 36, 6
    for first, second in (F.strided_pattern(n, l, device="cpu"), F.fixed_pattern(n, l, 1, device="cpu")):
        both = (first | second).astype(int)                              # the merged head, or two layers of heads
        np.testing.assert_array_equal((both @ both) > 0, np.tril(np.ones((n, n), bool)))
        assert both.sum() < n * (n + 1) // 2 and not both[n - 1, 1]      # one step does not: it is sparse
    local, strided = F.strided_pattern(n, l, device="cpu")              # strided: one head after the other suffices
    np.testing.assert_array_equal((strided.astype(int) @ local.astype(int)) > 0, np.tril(np.ones((n, n), bool)))


def test_a_covering_layout_that_drops_the_ragged_tiles_is_caught(rng, monkeypatch):
    real = sparse_module.covering_layout

    def whole_tiles_only(mask, block_size):
        layout = real(mask, block_size)
        layout[-1, :] = layout[:, -1] = False                           # the last, smaller tiles forgotten
        return layout

    monkeypatch.setattr(sparse_module, "covering_layout", whole_tiles_only)
    pattern = PATTERNS["longformer"](10)
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        assert_same_values_and_gradients(
            lambda q, k, v: F.sparse_attention(q, k, v, pattern, block_size=4),
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask=pattern[None, None]), qkv(rng, 10, 10), rng)


def test_sparse_patterns_refuse_bad_arguments(rng):
    with pytest.raises(ValueError, match="stride must be a positive integer"):
        F.strided_pattern(8, 0)
    with pytest.raises(ValueError, match="summary .* cannot exceed"):
        F.fixed_pattern(8, 2, 3)
    with pytest.raises(ValueError, match="global token 9 is not a position"):
        F.longformer_pattern(8, 1, global_tokens=[9])
    with pytest.raises(ValueError, match="n_random must be >= 0"):
        F.bigbird_layout(4, -1)
    with pytest.raises(ValueError, match=r"pattern must be a boolean \(T, S\) = \(5, 5\)"):
        F.sparse_attention(*qkv(rng, 5, 5), np.ones((5, 4), bool))


# -- Linformer: keys and values projected along the sequence -------------------------------------------------------
linformer_module = importlib.import_module("minitransformer.functional.linformer")


def linformer_reference(q, k, v, e, f, lengths=None):
    """softmax(Q (E K)ᵀ/√d) (F V) summed out position by position, padded keys left out of the sums."""
    n = k.shape[-2]
    keep = np.ones(k.shape[:-1] + (1,)) if lengths is None else \
        (np.arange(n)[None, :] < np.array(lengths)[:, None])[:, None, :, None]
    projected_k = np.einsum("rj,...jd->...rd", e.data[:, :n], k.data * keep)
    projected_v = np.einsum("rj,...jd->...rd", f.data[:, :n], v.data * keep)
    scores = q.data @ projected_k.swapaxes(-1, -2) / np.sqrt(q.shape[-1])
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (weights / weights.sum(axis=-1, keepdims=True)) @ projected_v


@pytest.mark.parametrize("n, n_max, k_proj, lengths", [(7, 7, 3, None), (5, 9, 2, None), (8, 8, 4, [5, 8])])
def test_linformer_is_its_definition(rng, n, n_max, k_proj, lengths):
    q, k, v = qkv(rng, n, n)
    e, f = tensor(rng, k_proj, n_max), tensor(rng, k_proj, n_max)
    mask = None if lengths is None else padding(lengths, n)
    out = F.linformer_attention(q, k, v, e, f, mask=mask)
    np.testing.assert_allclose(out.data, linformer_reference(q, k, v, e, f, lengths), rtol=0, atol=1e-12)


def test_linformer_gradcheck_of_all_five_inputs(rng):
    q, k, v = qkv(rng, 6, 6, heads=1)
    e, f = tensor(rng, 3, 8), tensor(rng, 3, 8)
    mask = padding([4, 6], 6)
    assert mt.gradcheck(lambda q, k, v, e, f: F.linformer_attention(q, k, v, e, f, mask=mask), [q, k, v, e, f])


def test_linformer_padding_is_the_same_as_a_shorter_sentence(rng):
    q, k, v = qkv(rng, 6, 6, batch=1)
    e, f = tensor(rng, 3, 6), tensor(rng, 3, 6)
    padded = F.linformer_attention(q, k, v, e, f, mask=padding([4], 6)).data
    short = F.linformer_attention(q, k[..., :4, :], v[..., :4, :], e, f).data   # the first 4 columns of E and F
    np.testing.assert_allclose(padded, short, atol=1e-12)


def test_linformer_refuses_causal_use_and_bad_shapes(rng):
    q, k, v = qkv(rng, 5, 5)
    e, f = tensor(rng, 2, 5), tensor(rng, 2, 5)
    with pytest.raises(ValueError, match="no causal form. Each projected key E K mixes all n positions"):
        F.linformer_attention(q, k, v, e, f, causal=True)
    with pytest.raises(ValueError, match="no causal form"):
        F.attend("linformer", q, k, v, mask=F.causal_mask(5, "cpu"), window=2, projections=(e, f))
    with pytest.raises(ValueError, match=r"e must be \(k, n_max\) with n_max >= n = 5"):
        F.linformer_attention(q, k, v, tensor(rng, 2, 4), f)
    with pytest.raises(ValueError, match="needs its learned projections"):
        F.attend("linformer", q, k, v, window=2)
    with pytest.raises(ValueError, match="key-padding mask of shape"):
        F.linformer_attention(q, k, v, e, f, mask=np.ones((2, 1, 5, 5), bool))
    with pytest.raises(ValueError, match="TransformerConfig: attention 'linformer' has no causal form"):
        mt.nn.TransformerConfig.tiny(11, attention="linformer", attention_window=4)
    with pytest.raises(ValueError, match="needs max_len"):
        mt.nn.MultiHeadAttention(8, 2, attention="linformer", window=3)
    with pytest.raises(ValueError, match="forms no"):
        mt.nn.attention.attention_weights("linformer", q.data, k.data, window=2)


def test_a_linformer_layer_learns_its_projections(rng):
    layer = mt.nn.MultiHeadAttention(8, 2, attention="linformer", window=3, max_len=10).to(np.float64)
    x = mt.Tensor(rng.standard_normal((2, 7, 8)))
    layer(x, mask=padding([5, 7], 7)).sum().backward()
    assert layer.proj_e.shape == layer.proj_f.shape == (3, 10)
    assert np.abs(layer.proj_e.grad[:, :5]).sum() > 0 and np.abs(layer.proj_f.grad[:, 7:]).sum() == 0
    assert mt.gradcheck(lambda x, e: F.attend("linformer", x, x, x, window=3, projections=(e, layer.proj_f)),
                        [tensor(rng, 1, 2, 7, 4), layer.proj_e])


def test_values_projected_with_the_keys_projection_are_caught(rng, monkeypatch):
    real = linformer_module.project_along_sequence
    first = []

    def keys_projection_for_both(projection, x):
        first.append(projection) if not first else None
        return real(first[0], x)                                # F forgotten: E projects the values as well

    monkeypatch.setattr(linformer_module, "project_along_sequence", keys_projection_for_both)
    q, k, v = qkv(rng, 6, 6, batch=1)
    e, f = tensor(rng, 3, 6), tensor(rng, 3, 6)
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        np.testing.assert_allclose(F.linformer_attention(q, k, v, e, f).data, linformer_reference(q, k, v, e, f),
                                   atol=1e-10)


def test_a_projection_that_forgets_the_far_positions_is_caught(rng, monkeypatch):
    monkeypatch.setattr(linformer_module, "project_along_sequence",
                        lambda projection, x: projection[:, :x.shape[-2] - 1] @ x[..., :-1, :])   # drops the last key
    q, k, v = qkv(rng, 6, 6, batch=1)
    e, f = tensor(rng, 3, 6), tensor(rng, 3, 6)
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        np.testing.assert_allclose(F.linformer_attention(q, k, v, e, f).data, linformer_reference(q, k, v, e, f),
                                   atol=1e-10)


# -- Linformer's premise measured: the energy rank of trained attention matrices ------------------------------------
def test_energy_rank_counts_singular_values():
    rank = benchmark_module("attention_rank").energy_rank
    assert rank(np.eye(10)) == 9                                 # equal singular values: 9 of 10 hold 90 %
    assert rank(np.outer(np.arange(1, 6), np.ones(5))) == 1      # rank one
    assert rank(np.diag([3.0, 0.5, 0.1])) == 1 and rank(np.diag([3.0, 0.5, 0.1]), 0.98) == 2   # 9/9.26, 9.25/9.26
    with pytest.raises(ValueError, match="fraction must be in"):
        rank(np.eye(2), 1.5)


def test_singular_rank_is_linformers_measure_and_never_below_the_energy_rank():
    script = benchmark_module("attention_rank")
    diagonal = np.diag([3.0, 0.5, 0.1])
    assert script.singular_rank(diagonal) == 2                   # Σσ: 3/3.6 < 0.9 ≤ 3.5/3.6, where Σσ² needs one
    assert script.energy_rank(diagonal) == 1
    assert script.singular_rank(np.eye(10)) == 9 and script.singular_rank(np.outer(np.arange(1, 6), np.ones(5))) == 1
    rng = np.random.default_rng(0)
    for _ in range(20):                                          # squares concentrate faster: never more σ for Σσ²
        matrix = rng.random((7, 7)) ** 4
        assert script.energy_rank(matrix) <= script.singular_rank(matrix)
        assert np.all(script.cumulative_share(matrix, 2) >= script.cumulative_share(matrix, 1) - 1e-12)
    with pytest.raises(ValueError, match="fraction must be in"):
        script.singular_rank(np.eye(2), 0)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A toy model trained for two steps: enough for the scripts that read a trained run's attention."""
    from minitransformer.training.trainer import train
    from minitransformer.training.options import TrainOptions

    run = tmp_path_factory.mktemp("tiny") / "run"
    train(TrainOptions(out=str(run), preset="toy", limit=30, steps=2, average=1, evaluate=False, quiet=True))
    return run


def test_the_rank_script_reads_a_trained_run(tmp_path, tiny_run):
    run = tiny_run
    results_file = tmp_path / "rank.json"
    script = benchmark_module("attention_rank")
    assert script.main(["--run", str(run), "--sentences", "3", "--results", str(results_file)]) == 0
    results = json.loads(results_file.read_text(encoding="utf-8"))
    assert results["sentences"] == 3 and results["run"]["weights"]
    config = mt.translator.Translator.load(run).model.config
    assert len(results["heads"]) == config.n_layers * config.n_heads
    for head in results["heads"]:
        assert all(1 <= r <= n for r, n in zip(head["ranks"], results["lengths"]))
    for head in results["heads"]:
        assert all(1 <= s <= n for s, n in zip(head["singular_ranks"], results["lengths"]))
        assert all(e <= s for e, s in zip(head["ranks"], head["singular_ranks"]))
    for curve in results["layer_curves"]:
        for measure in ("energy", "singular"):
            assert np.all(np.diff(curve[measure]) >= -1e-9) and abs(curve[measure][-1] - 1) < 1e-6
    script.main(["--run", str(run), "--results", str(results_file), "--render", "--figure", str(tmp_path / "r.png")])
    assert (tmp_path / "r.png").stat().st_size > 0


# -- Reformer's LSH attention ------------------------------------------------------------------------------------------
lsh_module = importlib.import_module("minitransformer.functional.lsh_attention")


def lsh_reference_pattern(buckets, chunk, is_causal):
    """The pairs, one query at a time: sort by (bucket, position), chunk, same bucket, own or previous chunk."""
    n = len(buckets)
    order = sorted(range(n), key=lambda p: (buckets[p], p))
    chunk_of = {p: order.index(p) // chunk for p in range(n)}
    rows = []
    for i in range(n):
        seen = [j != i and buckets[j] == buckets[i] and chunk_of[j] in (chunk_of[i], chunk_of[i] - 1)
                and (j <= i or not is_causal) for j in range(n)]
        rows.append(seen if any(seen) else [j == i for j in range(n)])
    return np.array(rows)


@pytest.mark.parametrize("n, chunk, buckets, is_causal", [(12, 4, 4, False), (12, 3, 2, True), (16, 16, 8, False),
                                                          (10, 1, 4, True)])
def test_lsh_attention_is_eq1_on_its_pattern(rng, n, chunk, buckets, is_causal):
    q, _, v = qkv(rng, n, n)
    rotations = lsh_module.random_rotations(5, buckets, 1, seed=4, device="cpu")
    hashed = lsh_module.lsh_buckets(q, rotations)[0]                                 # (B, h, n)
    pattern = np.stack([[lsh_reference_pattern(list(hashed[b, h]), chunk, is_causal) for h in range(2)]
                        for b in range(2)])
    np.testing.assert_array_equal(F.lsh_pattern(hashed, chunk, is_causal), pattern)
    assert_same_values_and_gradients(
        lambda q, v: F.lsh_attention(q, v, buckets, chunk, is_causal, seed=4),
        lambda q, v: F.scaled_dot_product_attention(q, q / (q * q).sum(axis=-1, keepdims=True) ** 0.5, v,
                                                    mask=pattern), [q, v], rng)


def test_lsh_attention_gradcheck(rng):
    q, _, v = qkv(rng, 8, 8, heads=1)
    assert mt.gradcheck(lambda q, v: F.lsh_attention(q, v, n_buckets=2, chunk=4, causal=True, seed=1), [q, v])


def test_near_vectors_share_buckets_and_more_hashes_find_more_neighbours():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 64))
    rotations = lsh_module.random_rotations(64, 8, 50, seed=0, device="cpu")
    near, far = x + 0.05 * rng.standard_normal((1, 64)), rng.standard_normal((1, 64))
    same = lambda y: (lsh_module.lsh_buckets(x, rotations) == lsh_module.lsh_buckets(y, rotations)).mean()   # noqa
    assert same(near) > 0.8 > 0.4 > same(far)
    queries, keys = rng.standard_normal((200, 16)), rng.standard_normal((300, 16))
    recalls = [F.bucket_recall(queries, keys, 8, hashes, seed=3) for hashes in (1, 2, 4, 8)]
    assert all(a <= b for a, b in zip(recalls, recalls[1:])) and recalls[0] < recalls[-1]
    assert F.bucket_recall(queries, keys, 2, 1, top=300) == pytest.approx(0.5, abs=0.05)   # any key: half, 2 buckets


def test_a_chunk_that_cannot_see_the_one_before_is_caught(rng, monkeypatch):
    real = lsh_module.concatenate
    monkeypatch.setattr(lsh_module, "concatenate",
                        lambda parts, axis: real([parts[1] * 0.0 + parts[1], parts[1]], axis) if axis == 3
                        else real(parts, axis))                       # the previous chunk replaced by its own
    q, _, v = qkv(rng, 12, 12)
    out = F.lsh_attention(q, v, 2, 3, seed=4)
    monkeypatch.undo()
    hashed = lsh_module.lsh_buckets(q, lsh_module.random_rotations(5, 2, 1, seed=4, device="cpu"))[0]
    keys = q.data / np.linalg.norm(q.data, axis=-1, keepdims=True)
    expected = F.scaled_dot_product_attention(q, mt.Tensor(keys), v, mask=F.lsh_pattern(hashed, 3)).data
    assert np.abs(out.data - expected).max() > 1e-3


def test_lsh_refuses_bad_arguments(rng):
    q, _, v = qkv(rng, 10, 10)
    with pytest.raises(ValueError, match="divides n = 10"):
        F.lsh_attention(q, v, chunk=4)
    with pytest.raises(ValueError, match="n_buckets must be an even integer"):
        F.lsh_attention(q, v, n_buckets=3, chunk=5)
    with pytest.raises(ValueError, match="n_hashes must be a positive integer"):
        F.bucket_recall(q.data[0, 0], q.data[0, 0], 4, 0)


# -- the benchmark's other kinds, at toy sizes (what is timed here is not looked at) ----------------------------
def _why_it_stopped(result) -> str:
    """A benchmark run in a process of its own: the line that names an exercise it needs, else stderr's last."""
    lines = (result.stdout + "\n" + result.stderr).splitlines()
    named = [line for line in lines if "Exercise" in line]
    return (named[-1] if named else (result.stderr.strip().splitlines() or [""])[-1]) + "\n" + result.stderr


def test_the_benchmark_runs_the_other_kinds_at_a_toy_size():
    result = subprocess.run([sys.executable, str(LONG_SEQUENCES / "long_sequences.py"), "--quick", "--lengths",
                             "64", "--functions", "sparse,linformer,lsh"], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT / "benchmarks")
    assert result.returncode == 0, _why_it_stopped(result)
    records = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert [r["function"] for r in records] == ["sparse", "linformer", "lsh"] and all("seconds" in r for r in records)
    assert "| n | BigBird blocks | Linformer, k = 256 | LSH, 1 round |" in result.stdout
    refused = subprocess.run([sys.executable, str(LONG_SEQUENCES / "long_sequences.py"), "--functions", "nope"],
                             capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert refused.returncode == 2 and "unknown function(s) nope" in refused.stderr


def test_the_cache_benchmark_at_a_toy_size_shows_the_state_does_not_grow():
    result = subprocess.run([sys.executable, str(LONG_SEQUENCES / "long_sequences.py"), "--cache", "--quick",
                             "--lengths", "16,32"], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, _why_it_stopped(result)
    records = [json.loads(line) for line in result.stdout.splitlines()]
    failed = [r["failed"] for r in records if "failed" in r]          # a worker's last line says why it stopped
    assert not failed, "\n".join(failed)
    by = {(r["kind"], r["n"]): r["cache_bytes"] for r in records}
    assert by[("linear", 16)] == by[("linear", 32)] and by[("softmax", 32)] == 2 * by[("softmax", 16)]


def test_the_approximation_errors_on_a_trained_runs_own_queries(tiny_run):
    bench = benchmark_module("long_sequences")
    triples = bench.own_qkv(tiny_run, 3)
    config = mt.translator.Translator.load(tiny_run).model.config
    assert len(triples) == 3 * config.n_layers and all(q.shape[:2] == (1, config.n_heads) for q, _, _ in triples)
    found = bench.approximation_errors(triples)
    assert set(found["relative_error"]) == set(bench.APPROXIMATIONS)
    assert all(np.isfinite(e) and e >= 0 for e in found["relative_error"].values())
    rng = np.random.default_rng(0)
    short = [tuple(rng.standard_normal((1, 2, 3, 4)) for _ in range(3))]        # n = 3: every window sees all
    exact = bench.approximation_errors(short)["relative_error"]
    assert exact["local, w = 2"] < 1e-12 and exact["BigBird, b = 4"] < 1e-12 and exact["linear"] > 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["sparse", "linformer", "lsh"])
def test_the_other_kinds_run_on_cupy_and_agree_with_numpy(rng, name):
    def call(device):
        to = lambda a: mt.backend.to_device(a, device)                 # noqa: E731
        pattern = F.longformer_pattern(11, 2, 2, [0], device=device)
        e, f = (mt.Tensor(to(np.random.default_rng(s).standard_normal((4, 11))), requires_grad=True) for s in (1, 2))
        return {"sparse": lambda q, k, v: F.sparse_attention(q, k, v, pattern, block_size=4),
                "linformer": lambda q, k, v: F.linformer_attention(q, k, v, e, f),
                "lsh": lambda q, v: F.lsh_attention(q, v, n_buckets=4, chunk=11, seed=2)}[name]   # keys are queries
    inputs = qkv(rng, 11, 11, d_v=5)
    inputs = [inputs[0], inputs[2]] if name == "lsh" else inputs
    upstream = rng.standard_normal((2, 2, 11, 5))
    expected, expected_grads = values_and_gradients(call("cpu"), inputs, upstream)
    on_gpu = [mt.Tensor(mt.backend.to_device(x.data, "cuda"), requires_grad=True) for x in inputs]
    out = call("cuda")(*on_gpu)
    out.backward(mt.backend.to_device(upstream, "cuda"))
    np.testing.assert_allclose(out.numpy(), expected, atol=1e-10)
    for x, want in zip(on_gpu, expected_grads):
        np.testing.assert_allclose(mt.backend.asnumpy(x.grad), want, atol=1e-10)


@pytest.mark.gpu
def test_the_recurrent_step_runs_on_cupy(rng):
    q, k, v = (x.data for x in qkv(rng, 6, 6))
    out, (kv, z) = linear_module.linear_attention_step(*(mt.backend.to_device(a, "cuda") for a in (q, k, v)))
    expected, (kv_cpu, _) = linear_module.linear_attention_step(q, k, v)
    np.testing.assert_allclose(out.numpy(), expected.data, atol=1e-10)
    np.testing.assert_allclose(mt.backend.asnumpy(kv), kv_cpu, atol=1e-10)
