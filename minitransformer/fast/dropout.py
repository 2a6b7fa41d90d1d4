"""Dropout's mask drawn from the stream's raw words: the plain ``Generator.keep``, faster (chapter 5).

``Generator.keep`` (minitransformer/generator.py) makes float32 uniforms u and compares them with p.
``FastGenerator.keep`` gives the same booleans and leaves the stream at the same place, without making
the uniforms on the CPU: NumPy's float32 uniform is (w >> 8)·2⁻²⁴ for the next 32-bit word w of the
stream, and PCG64 gives its 64-bit outputs to those words low half first. So u ≥ p is w ≥ 256·k_p,
k_p the smallest 24-bit integer with k_p·2⁻²⁴ ≥ p, and the words come straight from ``random_raw``:
one integer comparison per entry instead of a shift, a multiply and a float comparison.

Anything else (a GPU stream, an odd count of entries, a big-endian host, a half-used 64-bit output
waiting in the stream, a p no uniform reaches) takes the plain way. The command line's models draw
with it (nn.Dropout); tests/fast/test_fast_dropout.py proves it equal to the plain mask.
"""
from __future__ import annotations

import math
import sys

from ..backend import get_device, xp_for
from ..generator import Generator


class FastGenerator(Generator):
    """A ``Generator`` whose dropout masks come from the raw words of the CPU stream: the same masks,
    the same state (a checkpoint of one resumes the other)."""

    def keep(self, shape: tuple[int, ...], p: float, like):
        size = math.prod(shape)
        if get_device(like) != "cpu" or size % 2 or sys.byteorder != "little":
            return super().keep(shape, p, like)
        bits = self.stream(like).bit_generator
        threshold = _word_threshold(p)
        if type(bits).__name__ != "PCG64" or bits.state["has_uint32"] or threshold is None:
            return super().keep(shape, p, like)     # a half-used 64-bit output waits: the plain way keeps the order
        words = bits.random_raw(size // 2).view(xp_for("cpu").uint32)     # low half, then high half, as NumPy reads them
        return (words >= threshold).reshape(shape)


_thresholds: dict = {}


def _word_threshold(p: float):
    """256·k, k the smallest integer in [0, 2²⁴) whose uniform k·2⁻²⁴ (float32) is ≥ p as NumPy compares
    them (a Python float p in float32, a NumPy float64 in float64), or None when none is."""
    key = (type(p), p)
    if key not in _thresholds:
        host = xp_for("cpu")   # host-side scalars: the CPU stream's words follow NumPy's float32 rule
        guess = math.ceil(float(p) * 2**24)                      # k·2⁻²⁴ is exact: within a step of p
        candidates = host.arange(max(guess - 2, 0), min(guess + 3, 2**24), dtype=host.int64)
        at_least_p = (candidates.astype(host.float32) * host.float32(2.0**-24)) >= p
        _thresholds[key] = host.uint32(int(candidates[at_least_p.argmax()]) << 8) if at_least_p.any() else None
    return _thresholds[key]
