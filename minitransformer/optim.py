"""Optimisers and the learning-rate schedule of the paper (chapter 10).

§5.3: "We used the Adam optimizer with β1 = 0.9, β2 = 0.98 and ε = 10^-9. We
varied the learning rate over the course of training, according to the formula

    lrate = d_model^-0.5 · min(step_num^-0.5, step_num · warmup_steps^-1.5)     (3)

... We used warmup_steps = 4000."

An optimiser owns a list of parameters (Tensors) and changes their ``.data``
in place from their ``.grad``. Every update is written with the array module
of the parameter (``xp``), so the same code updates NumPy and CuPy weights.
``state_dict()`` returns host NumPy arrays only, ready for ``np.savez``.
"""
from __future__ import annotations

import math
from typing import Iterable

import numpy

from .backend import asnumpy, get_device, to_device, xp_of
from .tensor import Tensor


class Optimizer:
    """Holds the parameters, the learning rate and the step count; subclasses implement ``_update``."""

    def __init__(self, params: Iterable[Tensor], lr: float) -> None:
        if isinstance(params, Tensor):   # list(p) would give copies of p's rows, and step() would update those
            raise TypeError("optimiser: params must be an iterable of Tensors, got one Tensor; pass [p]")
        if callable(getattr(params, "parameters", None)):
            raise TypeError(f"optimiser: got a {type(params).__name__} module; pass model.parameters()")
        self.params = list(params)
        if not self.params:
            raise ValueError("the optimiser got an empty list of parameters (did you pass model.parameters()?)")
        first_index: dict[int, int] = {}
        for i, p in enumerate(self.params):
            if not isinstance(p, Tensor):
                raise TypeError(f"parameter {i} is a {type(p).__name__}, not a Tensor")
            if not p.requires_grad:
                raise ValueError(f"parameter {i} (shape {p.shape}) does not require a gradient")
            if id(p) in first_index:   # it would take two steps per step()
                raise ValueError(f"parameter {i} is parameter {first_index[id(p)]} again; list each one once")
            first_index[id(p)] = i
        if not lr >= 0:   # also nan, which would turn every parameter into nan at the first step
            raise ValueError(f"learning rate must be >= 0, got {lr}")
        self.lr = float(lr)
        self.step_count = 0

    def zero_grad(self) -> None:
        """Forget the gradients of the last backward (they accumulate otherwise)."""
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        """Apply one update to every parameter that has a gradient."""
        self.step_count += 1
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            if p.grad.shape != p.data.shape:
                raise ValueError(f"parameter {i}: gradient shape {p.grad.shape} != parameter shape {p.data.shape}")
            self._update(i, p)

    def _update(self, index: int, p: Tensor) -> None:
        raise NotImplementedError

    # -- state: the slots (moments, velocities), the step, the learning rate ------------------
    _slots: tuple[str, ...] = ()

    def state_dict(self) -> dict[str, numpy.ndarray]:
        """Flat dict of host arrays: 'step', 'lr' and '<slot>.<parameter index>' for each slot."""
        state = {"step": numpy.asarray(self.step_count, dtype=numpy.int64),
                 "lr": numpy.asarray(self.lr, dtype=numpy.float64)}
        for slot in self._slots:
            for i, array in enumerate(getattr(self, slot)):
                if array is not None:
                    state[f"{slot}.{i}"] = asnumpy(array).copy()
        return state

    def load_state_dict(self, state: dict) -> None:
        """Restore what ``state_dict`` returned; shapes must match the parameters."""
        for key in ("step", "lr"):
            if key not in state:
                raise KeyError(f"optimiser state has no {key!r} entry (keys: {sorted(state)[:6]}...)")
        expected_slots = {f"{slot}.{i}" for slot in self._slots for i in range(len(self.params))}
        unknown = set(state) - expected_slots - {"step", "lr"}
        if unknown:
            raise KeyError(f"optimiser state has entries for parameters this optimiser does not have: "
                           f"{sorted(unknown)[:5]} ({len(self.params)} parameters here)")
        for slot in self._slots:
            arrays = getattr(self, slot)
            for i, p in enumerate(self.params):
                key = f"{slot}.{i}"
                if key not in state:
                    arrays[i] = None
                    continue
                value = numpy.asarray(state[key])
                if value.shape != p.data.shape:
                    raise ValueError(f"optimiser state {key!r} has shape {value.shape} but parameter {i} "
                                     f"has shape {p.data.shape}")
                arrays[i] = to_device(value.astype(p.data.dtype), get_device(p.data))
        self.step_count = int(state["step"])
        self.lr = float(state["lr"])


class SGD(Optimizer):
    """Plain gradient descent, optionally with (heavy-ball) momentum: v ← μv + g;  p ← p − lr·v."""

    _slots = ("velocity",)

    def __init__(self, params: Iterable[Tensor], lr: float = 0.1, momentum: float = 0.0) -> None:
        super().__init__(params, lr)
        if not 0.0 <= momentum < 1.0:
            raise ValueError(f"momentum must be in [0, 1), got {momentum}")
        self.momentum = momentum
        self.velocity: list = [None] * len(self.params)

    def _update(self, i: int, p: Tensor) -> None:
        g = p.grad
        if self.momentum:
            if self.velocity[i] is None:
                self.velocity[i] = xp_of(p.data).zeros_like(p.data)
            v = self.velocity[i]
            v *= self.momentum
            v += g
            g = v
        p.data -= p.data.dtype.type(self.lr) * g


class Adam(Optimizer):
    """Adam (Kingma & Ba 2015, Algorithm 1) with the paper's β1 = 0.9, β2 = 0.98, ε = 1e-9 (§5.3).

    One parameter at a time, the five equations as written. The command line trains with
    ``minitransformer.fast.adam.FastAdam``: the same numbers, bit for bit, in flat buffers.
    """

    _slots = ("exp_avg", "exp_avg_sq")

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.98),
                 eps: float = 1e-9) -> None:
        super().__init__(params, lr)
        beta1, beta2 = betas
        if not (0.0 <= beta1 < 1.0 and 0.0 <= beta2 < 1.0):
            raise ValueError(f"betas must be in [0, 1), got {betas}")
        if not eps >= 0:   # a negative ε can make √v̂ + ε zero or negative: inf, or a step uphill
            raise ValueError(f"eps must be >= 0, got {eps}")
        self.betas = (float(beta1), float(beta2))
        self.eps = float(eps)
        self.exp_avg: list = [None] * len(self.params)     # m, first moment (None until a parameter's first step)
        self.exp_avg_sq: list = [None] * len(self.params)  # v, second moment

    def _update(self, i: int, p: Tensor) -> None:
        beta1, beta2 = self.betas
        t, g = self.step_count, p.grad
        xp = xp_of(p.data)
        if self.exp_avg[i] is None:   # the first step of this parameter: m and v start at 0
            self.exp_avg[i], self.exp_avg_sq[i] = xp.zeros_like(p.data), xp.zeros_like(p.data)
        m = self.exp_avg[i] = beta1 * self.exp_avg[i] + (1 - beta1) * g           # m ← β1·m + (1−β1)·g
        v = self.exp_avg_sq[i] = beta2 * self.exp_avg_sq[i] + (1 - beta2) * (g * g)  # v ← β2·v + (1−β2)·g²
        m_hat = m / (1 - beta1 ** t)                                               # m̂ = m / (1−β1^t)
        v_hat = v / (1 - beta2 ** t)                                               # v̂ = v / (1−β2^t)
        p.data -= self.lr * m_hat / (xp.sqrt(v_hat) + self.eps)                    # p ← p − lr·m̂ / (√v̂ + ε)


class NoamSchedule:
    """Warm-up then inverse-square-root decay, eq. (3) of §5.3, scaled by ``factor``.

    The rate rises linearly for ``warmup`` steps and peaks at step = warmup with
    factor · (d_model · warmup)^-0.5. Call ``step()`` once before each
    ``optimizer.step()``: it advances the step number and sets ``optimizer.lr``.
    """

    def __init__(self, optimizer: Optimizer, d_model: int, warmup: int = 4000, factor: float = 1.0) -> None:
        if d_model <= 0 or warmup <= 0:
            raise ValueError(f"d_model and warmup must be positive, got d_model={d_model}, warmup={warmup}")
        self.optimizer = optimizer
        self.d_model, self.warmup, self.factor = int(d_model), int(warmup), float(factor)
        self.step_num = 0

    def rate(self, step: int | None = None) -> float:
        """The learning rate at ``step`` (default: the current step; step 0 counts as step 1)."""
        step = max(self.step_num if step is None else int(step), 1)
        # Exercise 10.1 — the warm-up schedule, eq. 3 (chapters/10-training.md; graded by pytest -m ex_10_1)
        ### BEGIN SOLUTION
        return self.factor * self.d_model ** -0.5 * min(step ** -0.5, step * self.warmup ** -1.5)
        ### END SOLUTION

    def step(self) -> float:
        self.step_num += 1
        lr = self.rate()
        self.optimizer.lr = lr
        return lr

    def state_dict(self) -> dict:
        return {"step_num": self.step_num, "d_model": self.d_model, "warmup": self.warmup, "factor": self.factor}

    def load_state_dict(self, state: dict) -> None:
        for key in ("d_model", "warmup", "factor"):
            if key in state and float(state[key]) != float(getattr(self, key)):
                raise ValueError(f"schedule state has {key}={state[key]} but this schedule has "
                                 f"{key}={getattr(self, key)}")
        self.step_num = int(state["step_num"])
        self.optimizer.lr = self.rate()


def cooldown_factor(progress: float, fraction: float) -> float:
    """What multiplies the rate of eq. 3 at ``progress`` (0 at the start of a run, 1 at its end) when the
    last ``fraction`` of the run cools down: 1 until 1 − fraction, then a straight line down to 0 at the end.

    Eq. 3 never reaches zero: it suits a run that trains until it converges. A short run stops with the
    rate still high, and its last weights are noisy; letting the rate fall to zero over its last part
    (a "warm-up, stable, decay" schedule) settles them, which checkpoint averaging (§6.1) only imitates.
    """
    if fraction <= 0.0:
        return 1.0
    return min(1.0, max(0.0, (1.0 - progress) / fraction))


def clip_grad_norm(params: Iterable[Tensor], max_norm: float) -> float:
    """Scale all gradients together so that their global L2 norm is at most ``max_norm``.

    Returns the norm before clipping (useful to log; inf/nan mean the step diverged).
    """
    if not max_norm > 0:   # 0, a negative bound or nan: no norm can be at most that
        raise ValueError(f"clip_grad_norm: max_norm must be a positive number, got {max_norm}")
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return 0.0
    # Σ over all gradients of Σ g², added up where the gradients live and read once per device:
    # on a GPU each read of a number stalls until the device has caught up.
    by_device: dict[str, list] = {}
    for g in grads:
        by_device.setdefault(get_device(g), []).append(g)
    total = math.sqrt(sum(float(sum((g.astype("float64") ** 2).sum() for g in on_one))
                          for on_one in by_device.values()))
    if max_norm > 0 and math.isfinite(total) and total > max_norm:
        scale = max_norm / (total + 1e-6)
        for g in grads:
            g *= g.dtype.type(scale)
    return total
