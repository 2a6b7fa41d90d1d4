"""Linear attention with the feature map φ(x) = elu(x) + 1 (Katharopoulos et al., 2020; chapter 13).

Softmax attention weighs value j for query i by exp(q_i·k_j/√d_k). Replace that
similarity by a dot product of positive features, sim(q, k) = φ(q)·φ(k), and the
sum over keys can be regrouped (associativity of the matrix product):

    o_i = Σ_j (φ(q_i)·φ(k_j)) v_j / Σ_j φ(q_i)·φ(k_j)
        = φ(q_i)ᵀ [Σ_j φ(k_j) v_jᵀ] / φ(q_i)ᵀ [Σ_j φ(k_j)]  =  φ(q_i)ᵀ KV / φ(q_i)ᵀ z

KV (d_k × d_v) and z (d_k) are computed once, so the cost is O(n·d_k·d_v)
instead of O(n²·d). Causal: query i may only sum keys j ≤ i, so KV and z become
prefix sums KV_i = Σ_{j≤i} φ(k_j) v_jᵀ, z_i = Σ_{j≤i} φ(k_j). They are taken
chunk by chunk: the totals of the earlier chunks are carried forward, and the
part inside the chunk is a small lower-triangular product.

This is a different model from softmax attention, not an approximation of it:
φ(q)·φ(k) is not exp(q·k/√d_k), so the weights differ (chapter 13 shows how).

Backward, with num_i = φ(q_i)ᵀ KV_i, den_i = φ(q_i)ᵀ z_i, o_i = num_i / den_i:

    g_num_i = g_i / den_i,   g_den_i = −(g_i · o_i) / den_i
    gφ(q_i) = KV_i g_num_i + g_den_i z_i
    G_j = Σ_{i≥j} φ(q_i) g_num_iᵀ,   H_j = Σ_{i≥j} g_den_i φ(q_i)    (suffix sums; all i when not causal)
    gφ(k_j) = G_j v_j + H_j,   g v_j = G_jᵀ φ(k_j)
    and φ'(x) = 1 for x > 0, e^x = φ(x) otherwise. (The causal code takes these sums chunk by chunk.)
"""
from __future__ import annotations

from ..backend import xp_of
from ..ops.broadcasting import unbroadcast
from ..tensor import Function, Tensor
from .checks import broadcast_leading

CHUNK = 64  # positions per step of the causal prefix sums


def elu_plus_one(x):
    """φ(x) = elu(x) + 1: x + 1 for x > 0, e^x otherwise; always positive."""
    xp = xp_of(x)
    return xp.where(x > 0, x + 1, xp.exp(xp.minimum(x, 0)))


def elu_plus_one_slope(x, phi):
    """φ'(x): 1 for x > 0, e^x = φ(x) otherwise (so the forward's φ is reused)."""
    return xp_of(x).where(x > 0, 1, phi)


class LinearAttention(Function):
    """φ(q)ᵀ KV / φ(q)ᵀ z; q, k (..., n, d_k), v (..., n, d_v) -> (..., n, d_v)."""

    def __init__(self, causal: bool = False, chunk: int = CHUNK, mask=None) -> None:
        self.causal = bool(causal)
        self.chunk = int(chunk)
        self.mask = mask.data if isinstance(mask, Tensor) else mask

    def forward(self, q, k, v):
        if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2] or min(q.ndim, k.ndim, v.ndim) < 2:
            raise ValueError(f"linear_attention: need q (..., T, d_k), k (..., S, d_k), v (..., S, d_v); got "
                             f"q {q.shape}, k {k.shape}, v {v.shape}")
        if self.causal and q.shape[-2] != k.shape[-2]:
            raise ValueError(f"linear_attention: causal needs as many queries as keys; got q {q.shape}, k {k.shape}")
        xp = xp_of(q, k, v)
        lead = broadcast_leading(q, k, v)
        self.shapes = q.shape, k.shape, v.shape
        q, k, v = (xp.broadcast_to(a, lead + a.shape[-2:]) for a in (q, k, v))
        phi_q, phi_k = elu_plus_one(q), elu_plus_one(k)                     # (..., n, d_k), positive
        keep = None
        if self.mask is not None:                                           # a padded key adds nothing to the sums
            keep = _key_keep(self.mask, k.shape[-2], q.dtype)               # (..., S, 1) of 0 and 1
            phi_k = phi_k * keep
        starts = None
        if self.causal:
            num, den, starts = causal_prefix_attention(phi_q, phi_k, v, self.chunk)
        else:
            kv = phi_k.swapaxes(-1, -2) @ v                                 # KV = Σ_j φ(k_j) v_jᵀ  (..., d_k, d_v)
            z = phi_k.sum(axis=-2, keepdims=True)                           # z = Σ_j φ(k_j)        (..., 1, d_k)
            num, den = phi_q @ kv, (phi_q * z).sum(axis=-1, keepdims=True)  # (..., T, d_v), (..., T, 1)
        den = xp.where(den == 0, 1, den)                                    # no key at all: output 0
        out = num / den
        # the causal prefix sums also keep the running totals (KV, z) at the start of each chunk
        self.save_for_backward(q, k, v, phi_q, phi_k, den, out, keep, starts)
        return out

    def backward(self, g_out):
        q, k, v, phi_q, phi_k, den, out, keep, starts = self.saved_arrays
        g_num = g_out / den                                                 # (..., T, d_v)
        g_den = -(g_out * out).sum(axis=-1, keepdims=True) / den            # (..., T, 1)
        if self.causal:
            g_phi_q, g_phi_k, g_v = _causal_backward(phi_q, phi_k, v, g_num, g_den, starts, self.chunk)
        else:
            kv = phi_k.swapaxes(-1, -2) @ v
            z = phi_k.sum(axis=-2, keepdims=True)
            g_phi_q = g_num @ kv.swapaxes(-1, -2) + g_den * z               # KV g_num + g_den z
            g_kv = phi_q.swapaxes(-1, -2) @ g_num                           # G = Σ_i φ(q_i) g_num_iᵀ
            g_z = (g_den * phi_q).sum(axis=-2, keepdims=True)               # H = Σ_i g_den_i φ(q_i)
            g_phi_k = v @ g_kv.swapaxes(-1, -2) + g_z
            g_v = phi_k @ g_kv
        if keep is not None:
            g_phi_k = g_phi_k * keep
        g_q = g_phi_q * elu_plus_one_slope(q, phi_q)
        g_k = g_phi_k * elu_plus_one_slope(k, phi_k)
        q_shape, k_shape, v_shape = self.shapes
        return unbroadcast(g_q, q_shape), unbroadcast(g_k, k_shape), unbroadcast(g_v, v_shape)


def _key_keep(mask, n_keys: int, dtype):
    """A key-padding mask broadcastable to (B, 1, 1, S) as 0/1 factors (..., S, 1) for φ(k)."""
    if not hasattr(mask, "dtype") or mask.dtype != bool or mask.ndim < 2 or mask.shape[-2] != 1 \
            or mask.shape[-1] not in (1, n_keys):
        raise ValueError(f"linear_attention: mask must be a boolean key-padding mask of shape (B, 1, 1, {n_keys}) "
                         f"(True = real key); got {getattr(mask, 'dtype', type(mask).__name__)} "
                         f"{getattr(mask, 'shape', '')}")
    return mask[..., 0, :, None].astype(dtype)                              # (B, 1, S, 1): broadcasts over heads


def causal_prefix_attention(phi_q, phi_k, v, chunk: int = CHUNK):
    """num_i = φ(q_i)ᵀ Σ_{j≤i} φ(k_j) v_jᵀ and den_i = φ(q_i)ᵀ Σ_{j≤i} φ(k_j), by prefix sums.

    phi_q, phi_k (..., n, d_k), v (..., n, d_v) -> num (..., n, d_v), den (..., n, 1), and the
    running totals (kv, z) at the start of each chunk (kept for backward). Within a chunk of c
    positions, KV_i = KV_start + Σ_{start≤j≤i} φ(k_j) v_jᵀ: the carried prefix sum plus a small
    lower-triangular (c × c) product, so no (n, d_k, d_v) array is ever formed.
    """
    xp = xp_of(phi_q)
    lead, (n, d_k), d_v = phi_q.shape[:-2], phi_q.shape[-2:], v.shape[-1]
    num, den = xp.empty(lead + (n, d_v), phi_q.dtype), xp.empty(lead + (n, 1), phi_q.dtype)
    kv, z = xp.zeros(lead + (d_k, d_v), phi_q.dtype), xp.zeros(lead + (1, d_k), phi_q.dtype)
    starts = []
    for start in range(0, n, chunk):
        rows = slice(start, min(start + chunk, n))
        fq, fk, fv = phi_q[..., rows, :], phi_k[..., rows, :], v[..., rows, :]
        starts.append((kv, z))
        # Exercise 13.3 — causal linear attention by prefix sums (chapters/13-long-sequences.md; graded by pytest -m ex_13_3)
        ### BEGIN SOLUTION
        lower = xp.tri(fq.shape[-2], dtype=fq.dtype)                          # j ≤ i inside the chunk
        similarity = (fq @ fk.swapaxes(-1, -2)) * lower                       # φ(q_i)·φ(k_j)   (..., c, c)
        num[..., rows, :] = fq @ kv + similarity @ fv                         # φ(q_i)ᵀ KV_i
        den[..., rows, :] = (fq * z).sum(axis=-1, keepdims=True) + similarity.sum(axis=-1, keepdims=True)
        kv = kv + fk.swapaxes(-1, -2) @ fv                                    # carry the totals forward
        z = z + fk.sum(axis=-2, keepdims=True)
        ### END SOLUTION
    return num, den, starts


def _causal_backward(phi_q, phi_k, v, g_num, g_den, starts, chunk: int):
    """gφ(q), gφ(k), g v of the causal form, chunk by chunk.

    Inside a chunk, with A = lower(φ(q) φ(k)ᵀ): num = φ(q) KV_start + A v, den = φ(q)·z_start + A 1, so
    gA = lower(g_num vᵀ + g_den 1ᵀ), gφ(q) = gA φ(k) + g_num KV_startᵀ + g_den z_start,
    gφ(k) = gAᵀ φ(q), g v = Aᵀ g_num. The chunk's keys also entered every later chunk's KV_start
    and z_start: they get G v + H and φ(k) G, where G = Σ φ(q_i) g_num_iᵀ and H = Σ g_den_i φ(q_i)
    over the later chunks' queries (suffix sums, gathered from the end).
    """
    xp = xp_of(phi_q)
    lead, d_k, d_v = phi_q.shape[:-2], phi_q.shape[-1], v.shape[-1]
    g_phi_q, g_phi_k, g_v = xp.empty_like(phi_q), xp.empty_like(phi_k), xp.empty_like(v)
    g_kv, g_z = xp.zeros(lead + (d_k, d_v), phi_q.dtype), xp.zeros(lead + (1, d_k), phi_q.dtype)
    for index in reversed(range(len(starts))):
        rows = slice(index * chunk, min((index + 1) * chunk, phi_q.shape[-2]))
        fq, fk, fv, gn, gd = (a[..., rows, :] for a in (phi_q, phi_k, v, g_num, g_den))
        kv, z = starts[index]
        lower = xp.tri(fq.shape[-2], dtype=fq.dtype)
        similarity = (fq @ fk.swapaxes(-1, -2)) * lower                        # A
        g_similarity = (gn @ fv.swapaxes(-1, -2) + gd) * lower                 # gA
        g_phi_q[..., rows, :] = g_similarity @ fk + gn @ kv.swapaxes(-1, -2) + gd * z
        g_phi_k[..., rows, :] = g_similarity.swapaxes(-1, -2) @ fq + fv @ g_kv.swapaxes(-1, -2) + g_z
        g_v[..., rows, :] = similarity.swapaxes(-1, -2) @ gn + fk @ g_kv
        g_kv = g_kv + fq.swapaxes(-1, -2) @ gn                                 # this chunk's queries, for earlier keys
        g_z = g_z + (gd * fq).sum(axis=-2, keepdims=True)
    return g_phi_q, g_phi_k, g_v


# -- the recurrent view: decoding in constant memory ----------------------------------------------------------------
def recurrent_step(phi_q, phi_k, v, kv, z):
    """One position of causal linear attention as a recurrent network (Katharopoulos et al., 2020, §3.4).

    phi_q, phi_k (..., d_k) and v (..., d_v) of the new position; the state kv = Σ_{j<i} φ(k_j) v_jᵀ
    (..., d_k, d_v) and z = Σ_{j<i} φ(k_j) (..., d_k) of the positions before it. Returns num (..., d_v),
    den (..., 1) and the state after the position: o_i = num / den, and the next step reads the new state.
    """
    # Exercise 13.4 — the recurrent step of linear attention (chapters/13-long-sequences.md; graded by pytest -m ex_13_4)
    ### BEGIN SOLUTION
    kv = kv + phi_k[..., :, None] * v[..., None, :]                       # S_i = S_{i−1} + φ(k_i) v_iᵀ
    z = z + phi_k                                                         # z_i = z_{i−1} + φ(k_i)
    num = (phi_q[..., None, :] @ kv)[..., 0, :]                           # φ(q_i)ᵀ S_i
    den = (phi_q * z).sum(axis=-1, keepdims=True)                         # φ(q_i)ᵀ z_i
    ### END SOLUTION
    return num, den, kv, z


def linear_attention_step(q, k, v, state=None):
    """Cached decoding with linear attention: T new positions, read against the running state, not the keys.

    q, k (B, h, T, d_k), v (B, h, T, d_v), arrays or Tensors of the T newest positions; ``state`` the pair
    (kv (B, h, d_k, d_v), z (B, h, d_k)) left by the previous call, or None before the first. Returns the
    outputs (B, h, T, d_v), the same as the last T rows of the causal ``linear_attention`` over the whole
    prefix, and the new state. The state's size does not depend on how many positions came before it:
    O(d_k·d_v) per head, where a key/value cache holds O(t·d). Inference only (no graph is recorded).
    """
    q, k, v = (x.data if isinstance(x, Tensor) else x for x in (q, k, v))
    if q.ndim < 2 or q.shape != k.shape or k.shape[:-1] != v.shape[:-1]:
        raise ValueError(f"linear_attention_step: need q, k (..., T, d_k) and v (..., T, d_v) of the same "
                         f"positions; got q {q.shape}, k {k.shape}, v {v.shape}")
    xp = xp_of(q, k, v)
    lead, d_k, d_v = q.shape[:-2], q.shape[-1], v.shape[-1]
    if state is None:
        state = xp.zeros(lead + (d_k, d_v), q.dtype), xp.zeros(lead + (d_k,), q.dtype)
    kv, z = state
    if kv.shape != lead + (d_k, d_v) or z.shape != lead + (d_k,):
        raise ValueError(f"linear_attention_step: the state (kv {kv.shape}, z {z.shape}) does not fit q {q.shape} "
                         f"and v {v.shape}: it needs kv {lead + (d_k, d_v)} and z {lead + (d_k,)}")
    phi_q, phi_k = elu_plus_one(q), elu_plus_one(k)
    out = xp.empty(lead + (q.shape[-2], d_v), q.dtype)
    for t in range(q.shape[-2]):                                          # the recurrence, one position at a time
        num, den, kv, z = recurrent_step(phi_q[..., t, :], phi_k[..., t, :], v[..., t, :], kv, z)
        out[..., t, :] = num / den                                        # den > 0: φ > 0 and position i sees itself
    return Tensor(out), (kv, z)


def linear_attention(q, k, v, causal: bool = False, mask=None) -> Tensor:
    """Linear attention, φ(x) = elu(x) + 1: o_i = φ(q_i)ᵀ Σ_j φ(k_j) v_jᵀ / φ(q_i)ᵀ Σ_j φ(k_j).

    q (..., T, d_k), k (..., S, d_k), v (..., S, d_v) Tensors -> (..., T, d_v). ``causal``: sums
    over j ≤ i only (T = S), by prefix sums. ``mask``: a key-padding mask (B, 1, 1, S), True = real
    key; a query with no key gets zeros. O(n·d_k·d_v) time; O(n·d) memory. Not softmax
    attention: a different similarity, hence a different model.
    """
    return LinearAttention(causal, mask=mask)(q, k, v)
