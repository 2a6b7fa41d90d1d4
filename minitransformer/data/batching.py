"""Length-bucketed batches of token ids.

§5.1: "Sentence pairs were batched together by approximate sequence length. Each
training batch contained a set of sentence pairs containing approximately 25000
source tokens and 25000 target tokens." Here ``max_tokens`` bounds the padded
size of each side of a batch, B * max(S, T) <= max_tokens, on a smaller scale.

Everything here is host-side NumPy and imports nothing of the engine: the attention masks
of a batch are built where they are used, by ``functional.masks`` (``padding_mask(batch.src,
pad_id)``, ``causal_mask(T)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

Example = tuple[Sequence[int], Sequence[int]]  # (source ids, target ids without bos/eos)


@dataclass
class Batch:
    """One batch of padded examples.

    src     (B, S) int64: source ids, right-padded with pad_id
    tgt_in  (B, T) int64: decoder input, bos followed by the target ids
    tgt_out (B, T) int64: decoder output (what to predict), the target ids followed by eos
    indices (B,)   int64: position of each row's example in the list given to make_batches
    """

    src: np.ndarray
    tgt_in: np.ndarray
    tgt_out: np.ndarray
    indices: np.ndarray
    n_src_tokens: int  # non-pad tokens in src
    n_tgt_tokens: int  # non-pad tokens in tgt_out (targets that carry a loss)

    def __len__(self) -> int:
        return self.src.shape[0]


def pad_sequences(sequences: Sequence[Sequence[int]], pad_id: int,
                  length: int | None = None) -> np.ndarray:
    """Right-pad lists of ids into a (B, length) int64 array."""
    longest = max((len(s) for s in sequences), default=0)
    if length is None:
        length = longest
    elif length < longest:
        raise ValueError(f"pad_sequences: a sequence has {longest} ids, more than length={length}")
    out = np.full((len(sequences), length), pad_id, dtype=np.int64)
    for row, seq in enumerate(sequences):
        out[row, :len(seq)] = seq
    return out


def _check_examples(examples: Sequence[Example], max_tokens: int) -> None:
    if not isinstance(max_tokens, (int, np.integer)) or max_tokens <= 0:
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    for i, example in enumerate(examples):
        if len(example) != 2:
            raise ValueError(f"example {i} must be a (src_ids, tgt_ids) pair, got {len(example)} items")
        if len(example[0]) == 0:
            raise ValueError(f"example {i} has an empty source; every source needs at least one token")


def _bucket(examples: Sequence[Example], max_tokens: int, rng: np.random.Generator | None) -> list[list[int]]:
    """Sort example indices by length and cut them into batches within the token budget."""
    src_len = np.array([len(s) for s, _ in examples], dtype=np.int64)
    tgt_len = np.array([len(t) + 1 for _, t in examples], dtype=np.int64)  # +1 for bos / eos
    tie_break = rng.random(len(examples)) if rng is not None else np.arange(len(examples))
    order = np.lexsort((tie_break, tgt_len, src_len))  # by source length, then target length
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for index in order:
        length = max(src_len[index], tgt_len[index])
        grown = max(longest, length)
        if current and grown * (len(current) + 1) > max_tokens:
            batches.append(current)
            current, grown = [], length
        current.append(int(index))
        longest = grown
    if current:
        batches.append(current)  # an example longer than max_tokens gets a batch of its own
    return batches


def collate(examples: Sequence[Example], indices: Sequence[int], pad_id: int,
            bos_id: int, eos_id: int) -> Batch:
    """Build one Batch from the examples at ``indices``."""
    src = [list(examples[i][0]) for i in indices]
    tgt = [list(examples[i][1]) for i in indices]
    src_ids = pad_sequences(src, pad_id)                            # (B, S)
    tgt_in = pad_sequences([[bos_id] + t for t in tgt], pad_id)     # (B, T)
    tgt_out = pad_sequences([t + [eos_id] for t in tgt], pad_id)    # (B, T)
    return Batch(src=src_ids, tgt_in=tgt_in, tgt_out=tgt_out,
                 indices=np.asarray(indices, dtype=np.int64),
                 n_src_tokens=sum(len(s) for s in src),
                 n_tgt_tokens=sum(len(t) + 1 for t in tgt))


def make_batches(examples: Sequence[Example], max_tokens: int, pad_id: int, shuffle: bool = True,
                 seed: int = 0, bos_id: int = 1, eos_id: int = 2) -> list[Batch]:
    """Bucket examples by length into batches of at most ``max_tokens`` padded tokens per side.

    With ``shuffle`` the order of equally long examples and the order of the
    batches are shuffled by ``seed``; without it batches go from short to long.
    """
    _check_examples(examples, max_tokens)
    rng = np.random.default_rng(seed) if shuffle else None
    groups = _bucket(examples, max_tokens, rng)
    if rng is not None:
        groups = [groups[i] for i in rng.permutation(len(groups))]
    return [collate(examples, group, pad_id, bos_id, eos_id) for group in groups]


def epoch_batches(examples: Sequence[Example], max_tokens: int, pad_id: int, seed: int, epoch: int,
                  bos_id: int = 1, eos_id: int = 2) -> list[Batch]:
    """The batches of one epoch, a pure function of (seed, epoch).

    Training that resumes at (epoch, step) rebuilds exactly the same batches.
    """
    if epoch < 0:
        raise ValueError(f"epoch must be >= 0, got {epoch}")
    epoch_seed = int(np.random.SeedSequence([seed, epoch]).generate_state(1)[0])
    return make_batches(examples, max_tokens, pad_id, shuffle=True, seed=epoch_seed,
                        bos_id=bos_id, eos_id=eos_id)


def iterate_batches(examples: Sequence[Example], max_tokens: int, pad_id: int, seed: int,
                    start_epoch: int = 0, start_step: int = 0,
                    bos_id: int = 1, eos_id: int = 2) -> Iterator[tuple[int, int, Batch]]:
    """Endless stream of (epoch, step_in_epoch, batch), resumable from (start_epoch, start_step)."""
    if len(examples) == 0:     # every epoch would be empty, and the stream would search for a batch forever
        raise ValueError("iterate_batches needs at least one example")
    if start_step < 0:
        raise ValueError(f"start_step must be >= 0, got {start_step}")
    epoch, step = start_epoch, start_step
    while True:
        batches = epoch_batches(examples, max_tokens, pad_id, seed, epoch, bos_id, eos_id)
        for i in range(step, len(batches)):
            yield epoch, i, batches[i]
        epoch, step = epoch + 1, 0
