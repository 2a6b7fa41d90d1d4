"""Weight initialisation with one seeded generator (chapter 5).

Initial values are drawn on the host with NumPy from a module-level generator
and then moved to the parameter's device. So a model built after
``set_seed(s)`` has the same weights on every run AND on CPU and GPU alike.

Xavier/Glorot uniform (Glorot & Bengio, 2010): for a weight with fan_in inputs
and fan_out outputs draw U(−a, a) with a = gain·√(6/(fan_in + fan_out)). The
variance a²/3 = 2/(fan_in + fan_out) keeps the activations' variance roughly
constant going forward (Var ≈ fan_in·Var(W)) and the gradients' going
backward (Var ≈ fan_out·Var(W)); the harmonic compromise serves both.
Our Linear weight is (in_features, out_features), so fan_in = shape[0].
"""
from __future__ import annotations

import math

import numpy

from .. import backend
from ..tensor import Tensor

_generator = numpy.random.default_rng(0)


def set_seed(seed: int) -> None:
    """Restart the initialisation generator: models built next are reproducible."""
    global _generator
    _generator = numpy.random.default_rng(seed)


def generator() -> numpy.random.Generator:
    """The module-level generator that every initialiser here draws from."""
    return _generator


def next_seed() -> int:
    """A fresh seed drawn from the init generator (dropout layers seed themselves with it)."""
    return int(_generator.integers(0, 2**31 - 1))


def _fill(tensor: Tensor, values: numpy.ndarray) -> Tensor:
    """Write host ``values`` into ``tensor`` in place, keeping its dtype and device."""
    if values.shape != tuple(tensor.shape):
        raise ValueError(f"init: values of shape {values.shape} for a tensor of shape {tuple(tensor.shape)}")
    tensor.data = backend.to_device(values.astype(tensor.dtype), tensor.device)
    return tensor


def fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight stored as (in_features, out_features)."""
    if len(shape) < 2:
        raise ValueError(f"init: fan-in/fan-out need a weight with at least 2 axes, got shape {shape}")
    receptive = math.prod(shape[2:])
    return shape[0] * receptive, shape[1] * receptive


def xavier_uniform(tensor: Tensor, gain: float = 1.0) -> Tensor:
    """Fill with U(−a, a), a = gain·√(6/(fan_in + fan_out)); in place, returns the tensor."""
    fan_in, fan_out = fans(tuple(tensor.shape))
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return _fill(tensor, _generator.uniform(-bound, bound, size=tuple(tensor.shape)))


def normal(tensor: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Fill with N(mean, std²); in place, returns the tensor."""
    return _fill(tensor, _generator.normal(mean, std, size=tuple(tensor.shape)))


def uniform(tensor: Tensor, low: float = 0.0, high: float = 1.0) -> Tensor:
    """Fill with U(low, high); in place, returns the tensor."""
    return _fill(tensor, _generator.uniform(low, high, size=tuple(tensor.shape)))


def zeros(tensor: Tensor) -> Tensor:
    return _fill(tensor, numpy.zeros(tuple(tensor.shape)))


def ones(tensor: Tensor) -> Tensor:
    return _fill(tensor, numpy.ones(tuple(tensor.shape)))
