"""Length-bucketed batching, and the attention masks (functional.masks) built from a batch."""

import numpy as np
import pytest

from minitransformer.data.batching import (
    Batch, epoch_batches, iterate_batches, make_batches, pad_sequences,
)
from minitransformer.functional.masks import causal_mask, padding_mask

PAD, BOS, EOS = 0, 1, 2


def random_examples(n: int, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    rng = np.random.default_rng(seed)
    return [(rng.integers(4, 50, rng.integers(1, 20)).tolist(),
             rng.integers(4, 50, rng.integers(0, 25)).tolist()) for _ in range(n)]


def test_every_example_appears_exactly_once_with_bos_and_eos():
    examples = random_examples(300)
    batches = make_batches(examples, max_tokens=200, pad_id=PAD)
    seen = np.concatenate([b.indices for b in batches])
    assert sorted(seen.tolist()) == list(range(len(examples)))
    for batch in batches:
        for row, index in enumerate(batch.indices):
            src, tgt = examples[index]
            assert batch.src[row, :len(src)].tolist() == src
            assert (batch.src[row, len(src):] == PAD).all()
            assert batch.tgt_in[row, :len(tgt) + 1].tolist() == [BOS] + tgt
            assert batch.tgt_out[row, :len(tgt) + 1].tolist() == tgt + [EOS]
            assert (batch.tgt_in[row, len(tgt) + 1:] == PAD).all()
            assert (batch.tgt_out[row, len(tgt) + 1:] == PAD).all()


def test_shapes_dtypes_and_token_counts():
    examples = random_examples(100, seed=1)
    for batch in make_batches(examples, max_tokens=150, pad_id=PAD):
        assert isinstance(batch, Batch)
        assert batch.src.dtype == np.int64 and batch.tgt_in.dtype == np.int64
        assert batch.tgt_in.shape == batch.tgt_out.shape
        assert batch.src.shape[0] == batch.tgt_in.shape[0] == len(batch)
        assert batch.n_src_tokens == int((batch.src != PAD).sum())
        assert batch.n_tgt_tokens == int((batch.tgt_out != PAD).sum())
        assert batch.tgt_in[:, 0].tolist() == [BOS] * len(batch)


def test_padded_size_respects_the_token_budget():
    examples = random_examples(400, seed=2)
    for max_tokens in (30, 100, 500):
        for batch in make_batches(examples, max_tokens=max_tokens, pad_id=PAD):
            assert batch.src.size <= max_tokens
            assert batch.tgt_in.size <= max_tokens


def test_an_example_longer_than_the_budget_gets_its_own_batch():
    examples = [([5] * 10, [6] * 3), ([5] * 2, [6] * 2), ([5] * 2, [6] * 1)]
    batches = make_batches(examples, max_tokens=6, pad_id=PAD, shuffle=False)
    sizes = sorted(len(b) for b in batches)
    assert sizes == [1, 2]
    assert any(b.indices.tolist() == [0] for b in batches)


def test_bucketing_groups_similar_lengths():
    examples = random_examples(1000, seed=3)
    batches = make_batches(examples, max_tokens=400, pad_id=PAD)
    padding = sum(int((b.src == PAD).sum()) for b in batches)
    real = sum(b.n_src_tokens for b in batches)
    assert padding < 0.1 * real


def test_unshuffled_batches_go_from_short_to_long():
    batches = make_batches(random_examples(200, seed=4), max_tokens=100, pad_id=PAD, shuffle=False)
    widths = [b.src.shape[1] for b in batches]
    assert widths == sorted(widths)


def test_shuffling_is_seeded():
    examples = random_examples(300, seed=5)
    order = lambda seed: [b.indices.tolist() for b in make_batches(examples, 120, PAD, seed=seed)]
    assert order(7) == order(7)
    assert order(7) != order(8)


def test_epoch_batches_depend_only_on_seed_and_epoch():
    examples = random_examples(300, seed=6)
    a = epoch_batches(examples, 120, PAD, seed=3, epoch=2)
    b = epoch_batches(examples, 120, PAD, seed=3, epoch=2)
    c = epoch_batches(examples, 120, PAD, seed=3, epoch=3)
    assert [x.indices.tolist() for x in a] == [x.indices.tolist() for x in b]
    assert [x.indices.tolist() for x in a] != [x.indices.tolist() for x in c]
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x.src, y.src)
        np.testing.assert_array_equal(x.tgt_out, y.tgt_out)


def test_iterate_batches_resumes_exactly():
    examples = random_examples(100, seed=7)
    stream = iterate_batches(examples, 80, PAD, seed=0)
    full = [next(stream) for _ in range(60)]
    epoch, step, _ = full[25]
    resumed = iterate_batches(examples, 80, PAD, seed=0, start_epoch=epoch, start_step=step)
    for expected in full[25:]:
        got = next(resumed)
        assert got[:2] == expected[:2]
        np.testing.assert_array_equal(got[2].indices, expected[2].indices)
    assert full[-1][0] >= 1  # the stream crossed an epoch boundary


def test_bad_input_is_rejected_with_a_clear_message():
    with pytest.raises(ValueError, match="example 1 has an empty source"):
        make_batches([([4], [5]), ([], [5])], 10, PAD)
    with pytest.raises(ValueError, match="max_tokens"):
        make_batches([([4], [5])], 0, PAD)
    with pytest.raises(ValueError, match="example 0 must be a"):
        make_batches([([4], [5], [6])], 10, PAD)


def test_custom_special_ids():
    batch = make_batches([([7, 8], [9])], 10, pad_id=5, bos_id=3, eos_id=4)[0]
    assert batch.tgt_in.tolist() == [[3, 9]] and batch.tgt_out.tolist() == [[9, 4]]


def test_padding_mask_marks_real_keys():
    ids = pad_sequences([[5, 6, 7], [5]], PAD)
    mask = padding_mask(ids, PAD)
    assert mask.shape == (2, 1, 1, 3) and mask.dtype == bool
    assert mask[:, 0, 0].tolist() == [[True, True, True], [True, False, False]]
    with pytest.raises(ValueError, match="shape"):
        padding_mask(np.zeros(3, dtype=np.int64), PAD)


def test_causal_mask_is_lower_triangular():
    mask = causal_mask(4, device="cpu")
    assert mask.shape == (1, 1, 4, 4) and mask.dtype == bool
    for i in range(4):
        for j in range(4):
            assert mask[0, 0, i, j] == (j <= i)


def test_masks_combine_by_broadcasting():
    tgt_in = pad_sequences([[BOS, 5, 6], [BOS]], PAD)
    combined = padding_mask(tgt_in, PAD) & causal_mask(3, device="cpu")  # (B, 1, T, T)
    assert combined.shape == (2, 1, 3, 3)
    assert combined[1, 0].tolist() == [[True, False, False]] * 3
