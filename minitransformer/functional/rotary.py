"""Rotary position embedding, RoPE (Su et al. 2021, "RoFormer"; chapter 15).

§3.5 ADDS a position vector to each token and notes that PE(pos + k) is a rotation of PE(pos).
RoPE uses the rotation itself: it turns the query and the key of position m, pair of features by pair
of features, by the angles m·θ_i (θ_i = 10000^(−2i/d_k), the sinusoid's frequencies), and adds nothing.
A rotation keeps dot products of vectors turned by the same angle, so

    ⟨R(m) q, R(n) k⟩ = ⟨q, R(n − m) k⟩

— the score of query m and key n depends on the positions only through n − m. Relative position is
built into the attention; the values and the embeddings carry no position at all.

The pairs here are the two halves of each head's features, (x_i, x_{i + d_k/2}) (GPT-NeoX's layout; the
paper's adjacent pairs (x_{2i}, x_{2i+1}) are the same map with the features permuted):

    rotate(x, m) = [x₁ ⊙ cos mθ − x₂ ⊙ sin mθ,  x₁ ⊙ sin mθ + x₂ ⊙ cos mθ]

built from slicing, products and a concatenation, whose gradients the engine already has (gradchecked
in tests/functional/test_rotary.py all the same).
"""
from __future__ import annotations

import math

from .. import backend
from ..ops import concatenate
from ..tensor import Tensor


def rotary_angles(positions: int, d_k: int, offset: int = 0, base: float = 10000.0, device: str = "cpu",
                  dtype="float32"):
    """cos and sin of m·θ_i for m = offset .. offset + positions − 1 and i < d_k / 2: two (positions, d_k/2)
    arrays on ``device``."""
    xp = backend.xp_for(device)
    half = d_k // 2
    theta = xp.exp(-math.log(base) * xp.arange(half, dtype="float64") * 2 / d_k)       # θ_i = base^(−2i/d_k)
    angles = xp.arange(offset, offset + positions, dtype="float64")[:, None] * theta[None, :]   # (T, d_k/2)
    return xp.cos(angles).astype(dtype), xp.sin(angles).astype(dtype)


def rotary(x: Tensor, offset: int = 0, base: float = 10000.0) -> Tensor:
    """x (..., T, d_k), positions offset .. offset + T − 1 -> x turned by the rotary angles, same shape."""
    d_k = x.shape[-1]
    if d_k % 2:
        raise ValueError(f"rotary: the features come in pairs, so d_k must be even, got {d_k}")
    half = d_k // 2
    cos, sin = rotary_angles(x.shape[-2], d_k, offset, base, x.device, x.dtype)
    cos, sin = Tensor(cos), Tensor(sin)                                     # (T, d_k/2), no gradient
    first, second = x[..., :half], x[..., half:]
    return concatenate([first * cos - second * sin, first * sin + second * cos], axis=-1)


class Rotary:
    """The rotary encoding one attention layer applies to its queries and keys (``MultiHeadAttention.rotary``).

    Holds nothing learned and no table: the angles are computed for the positions each call needs."""

    def __init__(self, base: float = 10000.0) -> None:
        self.base = base

    def __call__(self, x: Tensor, offset: int = 0) -> Tensor:
        return rotary(x, offset, self.base)

    def __repr__(self) -> str:
        return f"Rotary(base={self.base})"
