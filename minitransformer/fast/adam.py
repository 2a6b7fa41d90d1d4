"""Adam in flat buffers: ``optim.Adam``'s numbers, bit for bit, in a dozen array operations per step.

The plain ``Adam`` (chapter 10) runs its five equations once per parameter: a Transformer has a
few hundred parameters, most of them small (biases, layer norms), so a step is a few thousand
small NumPy calls, each allocating its result. The update is the same for every number of every
parameter, so ``FastAdam`` keeps all of them in flat buffers: the parameters' arrays become
views of one buffer per (device, dtype) (``p.data`` works as before), and m and v live in two
more. A step updates runs of neighbouring numbers: the small parameters together (their
gradients copied side by side), a large one a cache-sized chunk at a time (its gradient read
where it is), and on a GPU all of them in one run, every operation writing into a scratch buffer
(``out=``) instead of a new array. Each operation is the plain form's, in the plain form's order,
so the parameters and the moments are the same to the last bit (tests/fast/test_fast_adam.py),
and the state dict is the same: a checkpoint of one loads into the other.
"""
from __future__ import annotations

from typing import Iterable

from ..backend import get_device, to_device, xp_of
from ..optim import Adam
from ..tensor import Tensor, _InPlace


class FastAdam(Adam):
    """``Adam`` with the same interface, state and numbers, updating flat buffers in runs."""

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.98),
                 eps: float = 1e-9) -> None:
        super().__init__(params, lr, betas, eps)
        self._flat = _FlatState(self)

    def step(self) -> None:
        """Apply one update to every parameter that has a gradient."""
        self.step_count += 1
        self._flat.update(self)

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self._flat = _FlatState(self)   # the loaded moments move into the flat buffers

    def _update_range(self, flat: _Flat, start: int, stop: int, g) -> None:
        """The update of the numbers start:stop of ``flat``, whose gradients are ``g``: ``Adam._update``'s
        operations in its order, each into a scratch buffer (out=) instead of a new array."""
        beta1, beta2 = self.betas
        t = self.step_count
        xp = flat.xp
        p, m, v = flat.data[start:stop], flat.exp_avg[start:stop], flat.exp_avg_sq[start:stop]
        scratch, step = flat.scratch[:stop - start], flat.step[:stop - start]
        xp.multiply(g, g, out=scratch)                       # g²
        scratch *= 1 - beta2
        v *= beta2
        v += scratch                                         # v ← β2·v + (1−β2)·g²
        xp.multiply(g, 1 - beta1, out=scratch)
        m *= beta1
        m += scratch                                         # m ← β1·m + (1−β1)·g
        xp.divide(m, 1 - beta1 ** t, out=step)               # m̂
        step *= self.lr                                      # lr·m̂
        xp.divide(v, 1 - beta2 ** t, out=scratch)            # v̂
        xp.sqrt(scratch, out=scratch)
        scratch += self.eps                                  # √v̂ + ε
        xp.divide(step, scratch, out=step)
        p -= step                                            # p ← p − lr·m̂ / (√v̂ + ε)


class _Flat:
    """The parameters of one dtype on one device: their data, m and v in three flat buffers.

    Parameter i of the group is ``data[offsets[i]:offsets[i] + size]``, and ``p.data`` is that slice
    reshaped; m and v of the parameter are the same slices of ``exp_avg`` and ``exp_avg_sq``.
    """

    # numbers per run on the CPU: the passes of an update over 6 arrays of 256k numbers (6 MiB in
    # float32) find them in the cache, where whole 30 MB buffers would come from memory each pass
    CPU_CHUNK = 1 << 18

    def __init__(self, optimizer: FastAdam, indices: list[int]) -> None:
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
        self.step = xp.empty_like(self.scratch)
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

    def update_run(self, optimizer: FastAdam, run: list) -> None:
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

    def is_current(self, optimizer: FastAdam) -> bool:
        """Whether every parameter and moment is still this group's view (``p.data = new`` replaces it)."""
        for i, (data, m, v) in zip(self.indices, self.views):
            if optimizer.params[i]._data is not data or optimizer.exp_avg[i] is not m or \
                    optimizer.exp_avg_sq[i] is not v:
                return False
        return True


class _FlatState:
    """FastAdam's flat buffers: one ``_Flat`` per (device, dtype) of the parameters."""

    def __init__(self, optimizer: FastAdam) -> None:
        groups: dict[tuple, list[int]] = {}
        for i, p in enumerate(optimizer.params):
            groups.setdefault((get_device(p.data), p.data.dtype), []).append(i)
        self.groups = [_Flat(optimizer, indices) for indices in groups.values()]

    def update(self, optimizer: FastAdam) -> None:
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
