"""Inverted dropout with a seeded generator (chapter 5, §5.4 "Residual Dropout").

During training each entry is kept with probability 1 − p and scaled by
1/(1 − p), so the expected value of every entry is unchanged:
E[y] = (1 − p)·x/(1 − p) = x. At evaluation time dropout is the identity and
nothing needs rescaling (that is what "inverted" buys).

Random numbers come from a ``Generator``: seeded, so two runs with the same
seed drop the same entries, and device-aware, so the mask is drawn on the GPU
for CuPy data (no host → device copy of a mask as large as the activations).
The uniforms are float32: half the memory traffic of float64, and a
resolution of 2⁻²⁴ is plenty to compare against p.
"""
from __future__ import annotations

from ..backend import get_device, xp_of
from ..tensor import Function, Tensor


class Generator:
    """Seeded uniform random numbers in [0, 1) on the device of the data they are for.

    One stream per device, both started from the same seed; ``seed(s)`` restarts them.
    """

    def __init__(self, seed: int = 0) -> None:
        self.seed(seed)

    def seed(self, seed: int) -> None:
        self.initial_seed = int(seed)
        self._streams: dict[str, object] = {}

    def uniform(self, shape: tuple[int, ...], like):
        """float32 uniforms of ``shape`` on the device (and array module) of the array ``like``."""
        xp = xp_of(like)
        device = get_device(like)
        stream = self._streams.get(device)
        if stream is None:
            if device == "cpu":
                stream = xp.random.default_rng(self.initial_seed)
            else:  # CuPy: the RandomState API takes a dtype and is stable across CuPy versions
                stream = xp.random.RandomState(self.initial_seed)
            self._streams[device] = stream
        if device == "cpu":
            return stream.random(shape, dtype=xp.float32)
        return stream.random_sample(shape, dtype=xp.float32)


_default_generator = Generator(0)


def set_dropout_seed(seed: int) -> None:
    """Restart the generator that ``dropout`` uses when it is given none."""
    _default_generator.seed(seed)


def default_generator() -> Generator:
    return _default_generator


class Dropout(Function):
    """y = x ⊙ mask, mask = [u ≥ p] / (1 − p) with u ~ U[0, 1)."""

    def __init__(self, p: float, generator: Generator) -> None:
        self.p = p
        self.generator = generator

    def forward(self, x):
        xp = xp_of(x)
        mask = self.generator.uniform(x.shape, like=x)     # (…) float32 u ~ U[0, 1)
        xp.greater_equal(mask, self.p, out=mask)           # in place: 1.0 (kept, w.p. 1 − p) or 0.0
        if mask.dtype != x.dtype:
            mask = mask.astype(x.dtype)
        mask *= x.dtype.type(1 / (1 - self.p))             # 0 or 1/(1−p), x's dtype
        self.mask = mask
        return x * mask

    def backward(self, gy):
        return gy * self.mask   # the same entries are dropped and scaled on the way back


def dropout(x, p: float, training: bool = True, generator: Generator | None = None) -> Tensor:
    """Zero each entry of x with probability p and scale the rest by 1/(1 − p); identity if not training."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be a probability in [0, 1], got {p}")
    if not isinstance(x, Tensor):
        x = Tensor(x)
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0   # everything dropped (1/(1 − p) would be infinite)
    return Dropout(p, generator if generator is not None else _default_generator)(x)
