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
from .tensor import Tensor, _InPlace


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
    """Adam (Kingma & Ba 2015) with bias correction; the paper's β1 = 0.9, β2 = 0.98, ε = 1e-9 (§5.3).

        m ← β1·m + (1−β1)·g          v ← β2·v + (1−β2)·g²
        m̂ = m / (1−β1^t)             v̂ = v / (1−β2^t)
        p ← p − lr · m̂ / (√v̂ + ε)

    The update is the same for every number of every parameter, so Adam keeps all of them in
    flat buffers (``_FlatState``): the parameters' arrays become views of one buffer (``p.data``
    works as before), and m and v live in two more. A step updates runs of neighbouring numbers:
    the small parameters together (their gradients copied side by side into one more), a
    large one a cache-sized chunk at a time (its gradient read where it is), and on a GPU all of
    them in one run: a dozen operations per run instead of a dozen per parameter.
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
        self._flat = _FlatState(self)

    def step(self) -> None:
        """Apply one update to every parameter that has a gradient."""
        self.step_count += 1
        self._flat.update(self)

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self._flat = _FlatState(self)   # the loaded moments move into the flat buffers

    def _update_range(self, flat: _Flat, start: int, stop: int, g) -> None:
        """The update of the numbers start:stop of ``flat``, whose gradients are ``g``."""
        beta1, beta2 = self.betas
        t = self.step_count
        # fold both bias corrections into the step size and ε (same result, one pass fewer)
        step_size = self.lr * math.sqrt(1.0 - beta2 ** t) / (1.0 - beta1 ** t)
        eps_hat = self.eps * math.sqrt(1.0 - beta2 ** t)
        xp = flat.xp
        p, m, v = flat.data[start:stop], flat.exp_avg[start:stop], flat.exp_avg_sq[start:stop]
        scratch = flat.scratch[:stop - start]
        # every line updates an array in place (out=): no temporaries
        xp.multiply(g, g, out=scratch)                       # g²
        scratch *= 1.0 - beta2
        v *= beta2
        v += scratch                                         # v ← β2·v + (1−β2)·g²
        xp.multiply(g, 1.0 - beta1, out=scratch)
        m *= beta1
        m += scratch                                         # m ← β1·m + (1−β1)·g
        xp.sqrt(v, out=scratch)
        scratch += eps_hat                                   # √v̂ + ε, up to the folded factor
        xp.divide(m, scratch, out=scratch)
        scratch *= step_size
        p -= scratch                                         # p ← p − lr · m̂ / (√v̂ + ε)


class _Flat:
    """The parameters of one dtype on one device: their data, m and v in three flat buffers.

    Parameter i of the group is ``data[offsets[i]:offsets[i] + size]``, and ``p.data`` is that slice
    reshaped; m and v of the parameter are the same slices of ``exp_avg`` and ``exp_avg_sq``.
    """

    # numbers per run on the CPU: the dozen passes of an update over 5 arrays of 256k numbers (5 MiB in
    # float32) find them in the cache, where whole 30 MB buffers would come from memory each pass
    CPU_CHUNK = 1 << 18

    def __init__(self, optimizer: Adam, indices: list[int]) -> None:
        params = [optimizer.params[i] for i in indices]
        first = params[0].data
        self.xp = xp = xp_of(first)
        self.indices = indices
        sizes = [p.data.size for p in params]
        self.offsets = [0]
        for size in sizes:
            self.offsets.append(self.offsets[-1] + size)
        total = self.offsets[-1]
        self.data = xp.concatenate([xp.ravel(p.data) for p in params]) if total else xp.zeros(0, first.dtype)
        on_cpu = get_device(first) == "cpu"   # on a GPU, one launch per operation over the whole buffer
        self.chunk = self.CPU_CHUNK if on_cpu else max(total, 1)
        self.scratch = xp.empty_like(self.data[:self.chunk])
        self.grad = xp.empty_like(self.scratch)   # the gradients of a run of several parameters, side by side
        self.exp_avg, self.exp_avg_sq = xp.zeros_like(self.data), xp.zeros_like(self.data)
        for i, p, begin, end in zip(indices, params, self.offsets, self.offsets[1:]):
            p._data = self.data[begin:end].reshape(p.data.shape)   # same values: no new version
            for slot in Adam._slots:
                flat_slot, moments = getattr(self, slot), getattr(optimizer, slot)
                if moments[i] is not None:   # loaded, or kept from before a parameter was moved or cast
                    flat_slot[begin:end] = xp.ravel(to_device(moments[i], get_device(first)))
                    moments[i] = flat_slot[begin:end].reshape(p.data.shape)
        self.views = [(p._data, optimizer.exp_avg[i], optimizer.exp_avg_sq[i]) for i, p in zip(indices, params)]

    def update_run(self, optimizer: Adam, run: list) -> None:
        """Update the numbers of ``run``, pieces side by side in the buffers, and empty it. The gradient of
        one piece is read where it is; those of several (small parameters) are copied side by side first."""
        if not run:
            return
        start, stop = run[0][0], run[-1][1]
        if len(run) == 1:
            gradient = run[0][2]
        else:
            for first, last, piece in run:
                self.grad[first - start:last - start] = piece
            gradient = self.grad[:stop - start]
        optimizer._update_range(self, start, stop, gradient)
        run.clear()

    def is_current(self, optimizer: Adam) -> bool:
        """Whether every parameter and moment is still this group's view (``p.data = new`` replaces it)."""
        for i, (data, m, v) in zip(self.indices, self.views):
            if optimizer.params[i]._data is not data or optimizer.exp_avg[i] is not m or \
                    optimizer.exp_avg_sq[i] is not v:
                return False
        return True


class _FlatState:
    """Adam's flat buffers: one ``_Flat`` per (device, dtype) of the parameters."""

    def __init__(self, optimizer: Adam) -> None:
        groups: dict[tuple, list[int]] = {}
        for i, p in enumerate(optimizer.params):
            groups.setdefault((get_device(p.data), p.data.dtype), []).append(i)
        self.groups = [_Flat(optimizer, indices) for indices in groups.values()]

    def update(self, optimizer: Adam) -> None:
        """Update every parameter that has a gradient, in runs of at most ``chunk`` numbers."""
        if not all(group.is_current(optimizer) for group in self.groups):
            optimizer._flat = self = _FlatState(optimizer)   # a parameter was replaced, moved or cast
        for group in self.groups:
            run: list = []   # (first, last, gradient) pieces side by side in the buffers, not yet updated
            for k, i in enumerate(group.indices):
                p, begin, end = optimizer.params[i], group.offsets[k], group.offsets[k + 1]
                if p.grad is None:
                    group.update_run(optimizer, run)   # a run never spans a parameter left alone
                    continue
                if p.grad.shape != p.data.shape:
                    raise ValueError(f"parameter {i}: gradient shape {p.grad.shape} != parameter shape "
                                     f"{p.data.shape}")
                if optimizer.exp_avg[i] is None:   # the first step of this parameter: its m and v start at 0
                    optimizer.exp_avg[i] = group.exp_avg[begin:end].reshape(p.data.shape)
                    optimizer.exp_avg_sq[i] = group.exp_avg_sq[begin:end].reshape(p.data.shape)
                    group.views[k] = (p._data, optimizer.exp_avg[i], optimizer.exp_avg_sq[i])
                _InPlace.mark(p)         # p.data changes in place: a graph that saved it must not backward
                gradient = group.xp.ravel(p.grad)
                for first in range(begin, end, group.chunk):   # a large parameter a chunk at a time
                    last = min(first + group.chunk, end)
                    if run and last - run[0][0] > group.chunk:
                        group.update_run(optimizer, run)
                    run.append((first, last, gradient[first - begin:last - begin]))
            group.update_run(optimizer, run)


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
