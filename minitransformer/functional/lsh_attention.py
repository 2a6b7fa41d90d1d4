"""Reformer's LSH attention at a small scale (Kitaev et al., 2020, §2; chapter 13).

Softmax weights are dominated by the few keys closest to the query, so a query could skip the keys far
from it, if it knew which keys are near without computing every score. Locality-sensitive hashing
sorts vectors into buckets so that near ones tend to share a bucket:

    h(x) = argmax([xR ; −xR]),   R a random d × b/2 rotation                      (angular LSH, §2)

Two vectors at a small angle fall on the same side of most random hyperplanes, so they often get the
same argmax; one round of hashing misses some neighbours, and several rounds with independent R
("n_hashes") miss fewer (``bucket_recall`` measures how many).

The attention (shared-QK, as in Reformer: the keys are the queries made unit length, k_j = q_j/‖q_j‖):
hash every position, sort the positions by (bucket, position), cut the sorted sequence into chunks of
``chunk`` positions, and let each chunk attend to itself and the chunk before it, to the keys of its own
bucket only. A position does not attend to itself (its own key would always win) unless it has no other
key to see. The cost is O(n·chunk) scores instead of n². One round of hashing here; Reformer combines
several rounds, each with its own normalisation, which this small version leaves out.

The sort and the gather are integer indexing and the attention is eq. 1, so the gradient flows through
chapter 2's getitem and chapter 6's attention; the tests check it against the same pattern written out
position by position, and gradient-check it.
"""
from __future__ import annotations

from .. import backend
from ..backend import xp_of
from ..ops.shape import concatenate
from ..tensor import Tensor
from .attention import scaled_dot_product_attention


def random_rotations(d: int, n_buckets: int, n_hashes: int = 1, seed: int = 0, device: str | None = None):
    """(n_hashes, d, n_buckets / 2) Gaussian matrices, one rotation per round, from a seeded generator."""
    if isinstance(n_buckets, bool) or int(n_buckets) != n_buckets or n_buckets < 2 or n_buckets % 2:
        raise ValueError(f"lsh: n_buckets must be an even integer >= 2 (argmax over [xR; −xR]), got {n_buckets!r}")
    if isinstance(n_hashes, bool) or int(n_hashes) != n_hashes or n_hashes < 1:
        raise ValueError(f"lsh: n_hashes must be a positive integer, got {n_hashes!r}")
    host = backend.xp_for("cpu").random.default_rng(seed).standard_normal((int(n_hashes), d, int(n_buckets) // 2))
    return backend.to_device(host, device or backend.default_device())


def lsh_buckets(x, rotations):
    """The bucket of each vector in each round: x (..., n, d), rotations (r, d, b/2) -> (r, ..., n) ints."""
    x = x.data if isinstance(x, Tensor) else x
    xp = xp_of(x)
    if rotations.ndim != 3 or rotations.shape[1] != x.shape[-1]:
        raise ValueError(f"lsh_buckets: rotations must be (rounds, d = {x.shape[-1]}, b/2); got {rotations.shape}")
    rotated = xp.einsum("...nd,rdb->r...nb", x, rotations)                 # xR for each round
    return xp.concatenate([rotated, -rotated], axis=-1).argmax(axis=-1)    # argmax [xR; −xR]


def lsh_pattern(buckets, chunk: int, causal: bool = False):
    """The (..., n, n) pairs LSH attention computes, from one round's buckets (..., n): same bucket, key in
    the query's chunk or the one before (after sorting by bucket, then position), not itself unless alone,
    and j ≤ i when causal. The O(n²) statement of what ``lsh_attention`` does in O(n·chunk)."""
    xp = xp_of(buckets)
    n = buckets.shape[-1]
    order = xp.argsort(buckets * n + xp.arange(n), axis=-1)                # sorted by (bucket, position)
    rank = xp.argsort(order, axis=-1)                                      # where each position went
    chunk_of = rank // chunk
    same = buckets[..., :, None] == buckets[..., None, :]
    near = (chunk_of[..., None, :] == chunk_of[..., :, None]) | (chunk_of[..., None, :] == chunk_of[..., :, None] - 1)
    allowed = same & near
    if causal:
        allowed = allowed & (xp.arange(n)[None, :] <= xp.arange(n)[:, None])
    itself = xp.eye(n, dtype=bool)
    others = allowed & ~itself
    return others | (itself & ~others.any(axis=-1, keepdims=True))


def lsh_attention(q, v, n_buckets: int = 8, chunk: int = 16, causal: bool = False, seed: int = 0) -> Tensor:
    """Shared-QK LSH attention, one round: q (B, h, n, d), v (B, h, n, d_v) Tensors -> (B, h, n, d_v).

    Keys are the queries made unit length. Positions are sorted by (bucket, position) and cut into chunks
    of ``chunk``; each chunk attends to itself and the chunk before, within its bucket (``lsh_pattern``).
    ``seed`` draws the rotation. O(n·chunk) scores; n must be a multiple of ``chunk``.
    """
    q, v = (t if isinstance(t, Tensor) else Tensor(t) for t in (q, v))
    if q.ndim != 4 or v.ndim != 4 or q.shape[:-1] != v.shape[:-1]:
        raise ValueError(f"lsh_attention: need q (B, h, n, d) and v (B, h, n, d_v); got q {q.shape}, v {v.shape}")
    n = q.shape[-2]
    if isinstance(chunk, bool) or int(chunk) != chunk or chunk < 1 or n % chunk:
        raise ValueError(f"lsh_attention: chunk must be a positive integer that divides n = {n}, got {chunk!r}")
    xp = xp_of(q.data)
    buckets = lsh_buckets(q, random_rotations(q.shape[-1], n_buckets, 1, seed, backend.get_device(q.data)))[0]
    order = xp.argsort(buckets * n + xp.arange(n), axis=-1)                 # (B, h, n): sorted positions
    b, h = xp.arange(q.shape[0])[:, None, None], xp.arange(q.shape[1])[None, :, None]
    keys = q / ((q * q).sum(axis=-1, keepdims=True) ** 0.5)                 # shared QK: unit-length keys
    n_chunks = n // chunk

    def chunked(x):                                                         # sorted, then (B, h, n_chunks, c, d)
        return x[b, h, order].reshape(x.shape[:2] + (n_chunks, chunk, x.shape[-1]))

    def with_previous(x):                                                   # each chunk and the one before it
        before = concatenate([x[:, :, -1:], x[:, :, :-1]], axis=2)          # (chunk 0's "before" is masked out)
        return concatenate([before, x], axis=3)                             # (B, h, n_chunks, 2c, d)

    sorted_q = chunked(q)
    sorted_k, sorted_v = with_previous(chunked(keys)), with_previous(chunked(v))
    position = order.reshape(order.shape[:2] + (n_chunks, chunk))           # original positions, chunked
    bucket = xp.take_along_axis(buckets, order, axis=-1).reshape(position.shape)
    key_position = xp.concatenate([xp.roll(position, 1, axis=2), position], axis=-1)
    key_bucket = xp.concatenate([xp.roll(bucket, 1, axis=2), bucket], axis=-1)
    first = (xp.arange(n_chunks) == 0)[:, None, None] & (xp.arange(2 * chunk) < chunk)[None, None, :]
    allowed = (bucket[..., :, None] == key_bucket[..., None, :]) & ~first  # same bucket; chunk 0 has no previous
    if causal:
        allowed = allowed & (key_position[..., None, :] <= position[..., :, None])
    itself = key_position[..., None, :] == position[..., :, None]
    others = allowed & ~itself
    allowed = others | (itself & ~others.any(axis=-1, keepdims=True))      # itself only when nothing else
    out = scaled_dot_product_attention(sorted_q, sorted_k, sorted_v, mask=allowed)   # (B, h, n_chunks, c, d_v)
    out = out.reshape(out.shape[:2] + (n, out.shape[-1]))
    return out[b, h, xp.argsort(order, axis=-1)]                            # back to the original order


def bucket_recall(queries, keys, n_buckets: int, n_hashes: int, top: int = 1, seed: int = 0) -> float:
    """How often a query's ``top`` best keys (largest q·k) share a bucket with it in at least one of
    ``n_hashes`` rounds: queries (n, d), keys (m, d) arrays, both hashed with the same rotations."""
    xp = xp_of(queries)
    rotations = random_rotations(queries.shape[-1], n_buckets, n_hashes, seed, backend.get_device(queries))
    q_buckets, k_buckets = lsh_buckets(queries, rotations), lsh_buckets(keys, rotations)   # (r, n), (r, m)
    best = xp.argsort(-(queries @ keys.T), axis=-1)[:, :top]                               # (n, top)
    shared = (q_buckets[:, :, None] == k_buckets[:, best]).any(axis=0)                     # (n, top): any round
    return float(shared.mean())
