"""Positional encodings (§3.5, chapter 8).

Attention itself is blind to order: permute the tokens and the outputs are
permuted the same way, nothing more. So the model adds to each token's
embedding a vector that depends on its position. The paper's choice:

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

Each pair of columns (2i, 2i+1) is a point on a circle turning with angular
frequency ω_i = 10000^(−2i/d_model); the wavelengths 2π/ω_i run from 2π to
10000·2π. Moving k positions turns every circle by the angle k·ω_i, so
PE(pos + k) = R(k) PE(pos) with R(k) block-diagonal 2×2 rotations that do not
depend on pos — a fixed linear map, which the paper hoped would make relative
positions easy to attend to (§3.5).

The learned alternative — one trained vector per position — gave nearly the
same results (Table 3, row (E)); the sinusoid may extrapolate to lengths not
seen in training, which the paper suggests but does not test.

Both modules add the encoding to x (already scaled by √d_model, §3.4) and
apply dropout to the sum (§5.4). ``offset`` is the position of x's first
row: incremental decoding feeds one position at a time.
"""
from __future__ import annotations

import math

import numpy

from .. import backend
from ..tensor import Tensor
from . import init
from .dropout import Dropout
from .module import Module, Parameter


def sinusoidal_table(length: int, d_model: int):
    """The (length, d_model) table PE of §3.5 as a float64 NumPy array."""
    positions = numpy.arange(length, dtype=numpy.float64)[:, None]           # (L, 1)
    table = numpy.empty((length, d_model))
    # Exercise 8.1 — the sinusoidal encoding (chapters/08-positional-encoding.md; graded by pytest -m ex_8_1)
    ### BEGIN SOLUTION
    pair = numpy.arange(d_model) // 2 * 2                                    # 2i for columns 2i and 2i+1
    frequencies = numpy.exp(-math.log(10000.0) * pair / d_model)[None, :]    # (1, d) ω_i = 10000^(−2i/d)
    angles = positions * frequencies                                         # (L, d)
    table[:, 0::2] = numpy.sin(angles[:, 0::2])                              # even columns: sin
    table[:, 1::2] = numpy.cos(angles[:, 1::2])                              # odd columns: cos
    ### END SOLUTION
    return table


def _check_span(name: str, offset: int, length: int, max_len: int) -> None:
    if offset < 0 or offset + length > max_len:
        raise ValueError(f"{name}: positions {offset}..{offset + length - 1} are outside the table of "
                         f"max_len={max_len} positions; build the model with a larger max_len")


class PositionalEncoding(Module):
    """x (B, T, d_model) -> Dropout(x + PE[offset : offset + T]), the sinusoidal encoding of §3.5.

    Nothing is learned. The table is a buffer: computed once in float64 and
    moved by ``to()`` like the parameters; the rows a forward needs are cast to
    the input's dtype (so a float64 gradient check sees the exact sinusoid, not
    a float32 rounding of it).
    """

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        table = sinusoidal_table(max_len, d_model)                               # (max_len, d_model) float64
        self.register_buffer("table", backend.to_device(table, backend.default_device()))
        self.dropout = Dropout(dropout)

    def table_like(self, x: Tensor, offset: int = 0, length: int | None = None):
        """Rows offset .. offset + length of the table (all rows by default) in x's dtype, on x's device."""
        rows = self.table[offset:] if length is None else self.table[offset:offset + length]
        return backend.to_device(rows.astype(x.dtype, copy=False), x.device)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        length = x.shape[-2]
        _check_span("PositionalEncoding", offset, length, self.max_len)
        table = self.table_like(x, offset, length)                     # (T, d_model), no gradient
        return self.dropout(x + Tensor(table))                         # (B, T, d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}"


class LearnedPositionalEncoding(Module):
    """x (B, T, d_model) -> Dropout(x + P[offset : offset + T]) with P a learned (max_len, d_model) table.

    P starts at N(0, 1/2): the same mean square as the sinusoidal table (sin² and cos²
    average 1/2), so the two variants start on an equal footing (Table 3, row (E)).
    """

    def __init__(self, d_model: int, max_len: int = 512, dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model, self.max_len = d_model, max_len
        xp = backend.xp_for(backend.default_device())
        self.weight = Parameter(xp.empty((max_len, d_model), dtype=numpy.float32))
        init.normal(self.weight, std=math.sqrt(0.5))
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        length = x.shape[-2]
        _check_span("LearnedPositionalEncoding", offset, length, self.max_len)
        return self.dropout(x + self.weight[offset:offset + length])   # (B, T, d_model)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, max_len={self.max_len}"
