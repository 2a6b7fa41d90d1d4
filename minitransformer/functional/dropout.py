"""Inverted dropout with a seeded generator (chapter 5, §5.4 "Residual Dropout").

During training each entry is kept with probability 1 − p and scaled by
1/(1 − p), so the expected value of every entry is unchanged:
E[y] = (1 − p)·x/(1 − p) = x. At evaluation time dropout is the identity and
nothing needs rescaling (that is what "inverted" buys).

Random numbers come from a ``Generator``: seeded, so two runs with the same
seed drop the same entries, and device-aware, so the mask is drawn on the GPU
for CuPy data (no host → device copy of a mask as large as the activations).
The uniforms are float32: half the memory traffic of float64, and a
resolution of 2⁻²⁴ is plenty to compare against p. What backward needs is
only which entries were kept, so the mask is kept as bool: a quarter of the
memory of a float32 mask.
"""
from __future__ import annotations

import math
import sys

from ..backend import get_device, xp_for, xp_of
from ..tensor import Function, Tensor
from .checks import require_floating_point


class Generator:
    """Seeded uniform random numbers in [0, 1) on the device of the data they are for.

    One stream per device, both started from the same seed; ``seed(s)`` restarts them.
    ``state_dict()`` says where the streams are, as JSON-ready data, and
    ``load_state_dict`` puts them back there, so a resumed training run draws
    the same dropout masks as one that never stopped.
    """

    def __init__(self, seed: int = 0) -> None:
        self.seed(seed)

    def seed(self, seed: int) -> None:
        self.initial_seed = int(seed)
        self._streams: dict[str, object] = {}
        self.device_draws = 0   # calls on a GPU stream (whose position CuPy cannot report)

    def _stream(self, device: str, xp):
        stream = self._streams.get(device)
        if stream is None:
            if device == "cpu":
                stream = xp.random.default_rng(self.initial_seed)
            else:  # CuPy: the RandomState API takes a dtype and is stable across CuPy versions
                stream = xp.random.RandomState(self._device_seed())
            self._streams[device] = stream
        return stream

    def uniform(self, shape: tuple[int, ...], like):
        """float32 uniforms of ``shape`` on the device (and array module) of the array ``like``."""
        xp = xp_of(like)
        device = get_device(like)
        stream = self._stream(device, xp)
        if device == "cpu":
            return stream.random(shape, dtype=xp.float32)
        self.device_draws += 1
        return stream.random_sample(shape, dtype=xp.float32)

    def keep(self, shape: tuple[int, ...], p: float, like):
        """``uniform(shape, like) >= p``, the mask of inverted dropout: the same booleans, the stream left
        at the same place, drawn without making the uniforms on the CPU.

        NumPy's float32 uniform is (w >> 8)·2⁻²⁴ for the next 32-bit word w of the stream, and PCG64 gives
        its 64-bit outputs to those words low half first. So u ≥ p is w ≥ 256·k_p, k_p the smallest
        24-bit integer with k_p·2⁻²⁴ ≥ p, and the words come straight from ``random_raw``: one integer
        comparison per entry instead of a shift, a multiply and a float comparison.
        """
        xp = xp_of(like)
        device = get_device(like)
        stream = self._stream(device, xp)
        size = math.prod(shape)
        bits = getattr(stream, "bit_generator", None)
        if (device != "cpu" or type(bits).__name__ != "PCG64" or size % 2 or sys.byteorder != "little"
                or bits.state["has_uint32"]):   # a half-used 64-bit output waits: the plain way keeps the order
            return self.uniform(shape, like) >= p
        threshold = _word_threshold(p)
        if threshold is None:
            return self.uniform(shape, like) >= p
        words = bits.random_raw(size // 2).view(xp.uint32)      # low half, then high half, as NumPy reads them
        return (words >= threshold).reshape(shape)

    def _device_seed(self) -> int:
        """The GPU stream's seed: the initial seed at first, mixed with the draws so far after a restore."""
        if self.device_draws == 0:
            return self.initial_seed
        return int(xp_for("cpu").random.SeedSequence([self.initial_seed, self.device_draws]).generate_state(1)[0])

    def state_dict(self) -> dict:
        """{"seed", "cpu", "device_draws"}: JSON-ready. "cpu" is the host stream's exact position
        (None before its first draw). A GPU stream's position cannot be read back from CuPy, so
        only its number of draws is kept: restored, it restarts from a seed mixed with that number,
        reproducible but not the numbers an uninterrupted run would have drawn."""
        stream = self._streams.get("cpu")
        return {"seed": self.initial_seed, "cpu": None if stream is None else stream.bit_generator.state,
                "device_draws": self.device_draws}

    def load_state_dict(self, state: dict) -> Generator:
        """Put the streams back where ``state_dict()`` found them; returns self."""
        if not isinstance(state, dict) or "seed" not in state:
            raise ValueError(f"Generator.load_state_dict: expected a dict with a 'seed', got {state!r:.80}")
        self.seed(state["seed"])
        self.device_draws = int(state.get("device_draws", 0))
        if state.get("cpu") is not None:
            stream = xp_for("cpu").random.default_rng()
            stream.bit_generator.state = state["cpu"]   # raises ValueError for a state of another kind
            self._streams["cpu"] = stream
        return self

    def __repr__(self) -> str:
        return f"Generator(seed={self.initial_seed})"


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


_default_generator = Generator(0)


def set_dropout_seed(seed: int) -> None:
    """Restart the generator that ``dropout`` uses when it is given none."""
    _default_generator.seed(seed)


def default_generator() -> Generator:
    return _default_generator


class Dropout(Function):
    """y = x ⊙ keep / (1 − p), keep = [u ≥ p] with u ~ U[0, 1): 1 w.p. 1 − p, else 0."""

    def __init__(self, p: float, generator: Generator) -> None:
        self.p = p
        self.generator = generator

    def forward(self, x):
        keep = self.generator.keep(x.shape, self.p, like=x)   # bool, True w.p. 1 − p (uniform ≥ p)
        self.save_for_backward(keep)
        self.scale = x.dtype.type(1 / (1 - self.p))
        y = x * keep            # dropped entries become 0
        y *= self.scale         # kept ones are scaled by 1/(1 − p)
        return y

    def backward(self, gy):
        (keep,) = self.saved_arrays
        gx = gy * keep          # the same entries are dropped and scaled on the way back
        gx *= self.scale
        return gx


class DropoutAdd(Dropout):
    """x + dropout(y) as one Function: the residual connection of §5.4, "dropout to the output of each
    sub-layer, before it is added to the sub-layer input".

    Written as ``x + dropout(y)`` the dropped y is a node of its own, kept by the graph until backward
    reaches it; here it is written over by the sum at once, so each sub-layer keeps one (..., d_model)
    array less. The same mask and the same numbers: float addition commutes, so out + x is x + out.
    """

    def forward(self, x, y):
        out = super().forward(y)       # y ⊙ keep / (1 − p), a fresh array
        out += x                       # + the sub-layer's input, in place
        return out

    def backward(self, gy):
        return gy, super().backward(gy)    # ∂/∂x = 1; ∂/∂y is dropout's backward


def check_generator(function: str, generator) -> None:
    """A NumPy Generator or a seed in place of ours failed deep inside with 'unexpected keyword like'."""
    if generator is not None and not isinstance(generator, Generator):
        raise TypeError(f"{function}: generator must be a minitransformer Generator (F.Generator(seed)), "
                        f"got {type(generator).__name__}")


def dropout(x, p: float, training: bool = True, generator: Generator | None = None) -> Tensor:
    """Zero each entry of x with probability p and scale the rest by 1/(1 − p); identity if not training."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be a probability in [0, 1], got {p}")
    check_generator("dropout", generator)
    if not isinstance(x, Tensor):
        x = Tensor(x)
    if not training or p == 0.0:
        return x
    require_floating_point("dropout", x)   # an integer x would be scaled by int(1/(1 − p)) = 1
    if p == 1.0:
        return x * 0.0   # everything dropped (1/(1 − p) would be infinite)
    return Dropout(p, generator if generator is not None else _default_generator)(x)


def dropout_add(x, y, p: float, training: bool = True, generator: Generator | None = None) -> Tensor:
    """x + dropout(y, p), the residual connection of §5.4, in one Function when it can be (same shape and
    dtype, training, 0 < p < 1); otherwise exactly ``x + dropout(y, ...)``. The same mask either way."""
    x, y = (t if isinstance(t, Tensor) else Tensor(t) for t in (x, y))
    if not training or p in (0.0, 1.0) or x.shape != y.shape or x.dtype != y.dtype:
        return x + dropout(y, p, training, generator)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout_add: p must be a probability in [0, 1], got {p}")
    check_generator("dropout_add", generator)
    require_floating_point("dropout_add", y)
    return DropoutAdd(p, generator if generator is not None else _default_generator)(x, y)
