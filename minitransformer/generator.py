"""Seeded random streams on the data's own device, with a state a checkpoint can keep (chapters 5 and 10).

Dropout (chapter 5) asks a ``Generator`` for uniforms; this module is the bookkeeping around that
one call, not the lesson: one stream per device, so a mask for CuPy data is drawn on the GPU (no
host → device copy of a mask as large as the activations), all started from one seed, so two runs
with the same seed drop the same entries, and a ``state_dict`` that says where the streams are, so
a resumed training run draws the masks that one which never stopped would have drawn.
"""
from __future__ import annotations

from .backend import get_device, xp_for, xp_of


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

    def stream(self, like):
        """The stream for the device of the array ``like``, started on first use: a NumPy Generator on
        the CPU, a CuPy RandomState on a GPU (its API takes a dtype and is stable across CuPy versions)."""
        device = get_device(like)
        stream = self._streams.get(device)
        if stream is None:
            xp = xp_of(like)
            stream = xp.random.default_rng(self.initial_seed) if device == "cpu" else \
                xp.random.RandomState(self._device_seed())
            self._streams[device] = stream
        return stream

    def uniform(self, shape: tuple[int, ...], like):
        """float32 uniforms of ``shape`` on the device (and array module) of the array ``like``.

        float32: half the memory traffic of float64, and a resolution of 2⁻²⁴ is plenty to compare against p.
        """
        xp = xp_of(like)
        stream = self.stream(like)
        if get_device(like) == "cpu":
            return stream.random(shape, dtype=xp.float32)
        self.device_draws += 1
        return stream.random_sample(shape, dtype=xp.float32)

    def keep(self, shape: tuple[int, ...], p: float, like):
        """The mask of inverted dropout: True where the uniform is ≥ p, that is with probability 1 − p."""
        return self.uniform(shape, like) >= p

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
        return f"{type(self).__name__}(seed={self.initial_seed})"
