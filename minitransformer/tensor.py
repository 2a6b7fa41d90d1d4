"""Tensor, Function and reverse-mode differentiation (chapter 1).

A ``Tensor`` holds an array (``.data``), its gradient (``.grad``) and the
``Function`` that made it (``.creator``). A ``Function`` works on raw arrays:
``forward`` computes the output, ``backward`` turns the gradient of the output
into gradients of the inputs (the chain rule, one local step). Calling a
Function on Tensors runs ``forward`` and, unless ``no_grad()`` is active,
records the edge from the output back to the inputs. ``Tensor.backward()``
walks those edges in reverse topological order.
"""
from __future__ import annotations

import contextlib
from typing import Any

import numpy

from . import backend


class _GradMode:
    enabled = True


def is_grad_enabled() -> bool:
    return _GradMode.enabled


@contextlib.contextmanager
def no_grad():
    """Inside this block, Functions compute values but record no graph (inference, updates)."""
    previous = _GradMode.enabled
    _GradMode.enabled = False
    try:
        yield
    finally:
        _GradMode.enabled = previous


@contextlib.contextmanager
def enable_grad():
    """Turn graph recording back on inside a ``no_grad`` block."""
    previous = _GradMode.enabled
    _GradMode.enabled = True
    try:
        yield
    finally:
        _GradMode.enabled = previous


class Function:
    """One differentiable operation.

    Subclasses implement ``forward(*arrays) -> array`` and
    ``backward(gy) -> gradients``: one gradient per input, in order, or None
    for an input that needs none. Anything backward needs (inputs, outputs,
    masks) is saved on ``self`` during forward; non-array arguments (axis,
    ids, probabilities) are given to ``__init__``.
    """

    inputs: tuple[Tensor, ...] | None = None  # set when the graph is recorded, cleared when freed

    def __call__(self, *inputs: Any) -> Tensor:
        tensors = _as_tensors(inputs)
        arrays = [t.data for t in tensors]
        if len(arrays) > 1:
            _check_same_device(self, arrays)
        output = Tensor(self.forward(*arrays))
        if _GradMode.enabled:
            for t in tensors:
                if t.requires_grad:
                    if output.data.dtype.kind not in "fc":  # integer/bool results carry no gradient
                        break
                    output.requires_grad = True
                    output.creator = self
                    self.inputs = tensors
                    break
        return output

    def forward(self, *arrays):
        raise NotImplementedError(f"{type(self).__name__}.forward is not implemented")

    def backward(self, gy):
        raise NotImplementedError(f"{type(self).__name__}.backward is not implemented")

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


class Tensor:
    """An n-dimensional array that remembers how it was computed."""

    __slots__ = ("data", "grad", "requires_grad", "creator", "name", "_keeps_grad", "__weakref__")
    __array_priority__ = 1000  # numpy_array * tensor calls Tensor.__rmul__

    def __init__(self, data: Any, requires_grad: bool = False, name: str | None = None) -> None:
        if isinstance(data, Tensor):
            data = data.data
        if not backend.is_array(data):
            if isinstance(data, numpy.generic):  # a NumPy scalar (what NumPy ops return for 0-d results)
                data = numpy.asarray(data)       # stays on the host, whatever the default device
            else:
                data = backend.xp_for(backend.default_device()).asarray(data)
        if requires_grad and data.dtype.kind not in "fc":
            raise TypeError(f"only floating-point tensors can require gradients, got dtype {data.dtype}")
        self.data = data
        self.grad = None
        self.requires_grad = requires_grad
        self.creator: Function | None = None
        self.name = name
        self._keeps_grad = False

    # -- what the array looks like ------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.data.shape

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def size(self) -> int:
        return self.data.size

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def device(self) -> str:
        return backend.get_device(self.data)

    @property
    def is_leaf(self) -> bool:
        return self.creator is None

    def __len__(self) -> int:
        return len(self.data)

    def __repr__(self) -> str:
        body = numpy.array2string(backend.asnumpy(self.data), separator=", ", prefix="Tensor(", precision=4)
        extra = ""
        if self.creator is not None:
            extra = f", grad_fn={self.creator!r}"
        elif self.requires_grad:
            extra = ", requires_grad=True"
        if self.device != "cpu":
            extra += f", device='{self.device}'"
        return f"Tensor({body}{extra})"

    def item(self) -> float:
        return self.data.item()

    def numpy(self) -> numpy.ndarray:
        """The values as a NumPy array on the host (a copy when on the GPU)."""
        return backend.asnumpy(self.data)

    def tolist(self) -> list:
        return self.numpy().tolist()

    def detach(self) -> Tensor:
        """The same values, cut off from the graph."""
        return Tensor(self.data)

    def retain_grad(self) -> Tensor:
        """Keep this non-leaf tensor's gradient in ``.grad`` after backward()."""
        self._keeps_grad = True
        return self

    def zero_grad(self) -> None:
        self.grad = None

    def to(self, target) -> Tensor:
        """A copy on another device ('cpu'/'cuda') or with another dtype; gradients flow back."""
        if isinstance(target, str) and target.lower() in ("cpu", "cuda", "gpu", "cuda:0"):
            return _ops.to_device(self, target)
        if isinstance(target, str):
            try:
                numpy.dtype(target)
            except TypeError:  # neither a device nor a dtype: say which devices exist
                backend._check_device_name(target)
        return _ops.astype(self, target)

    def astype(self, dtype) -> Tensor:
        return _ops.astype(self, dtype)

    # -- reverse-mode differentiation ---------------------------------------------------
    def backward(self, grad=None, retain_graph: bool = False) -> None:
        """Accumulate d(self)/d(leaf) · grad into every leaf that requires a gradient.

        ``grad`` defaults to 1 for a tensor of one element. The graph is freed
        afterwards unless ``retain_graph=True``; a second backward through a
        freed graph raises instead of silently counting twice.
        """
        if not self.requires_grad:
            raise RuntimeError("backward() on a tensor that does not require grad: "
                               "no input had requires_grad=True, or it was computed under no_grad()")
        xp = backend.xp_of(self.data)
        if grad is None:
            if self.size != 1:
                raise RuntimeError(f"backward() without a gradient needs a tensor of one element, "
                                   f"got shape {self.shape}; pass grad= of that shape")
            grad = xp.ones_like(self.data)
        else:
            grad = grad.data if isinstance(grad, Tensor) else xp.asarray(grad, dtype=self.dtype)
            if grad.shape != self.shape:
                raise ValueError(f"backward(): grad has shape {grad.shape} but the tensor has shape {self.shape}")

        grads: dict[int, Any] = {id(self): grad}
        summed: set[int] = set()           # tensors whose entry in grads is a sum this loop allocated
        given_to_leaves: set[int] = set()  # arrays already stored as some leaf's .grad
        for tensor in _topological_order(self):
            summed.discard(id(tensor))
            gy = grads.pop(id(tensor), None)
            if gy is None:  # every path to it returned None
                continue
            function = tensor.creator
            if function is None or tensor._keeps_grad:
                _accumulate(tensor, gy, given_to_leaves)
            if function is None:
                continue
            gxs = function.backward(gy)
            if not isinstance(gxs, tuple):
                gxs = (gxs,)
            for x, gx in zip(function.inputs, gxs):
                if gx is None or not x.requires_grad:
                    continue
                if gx.shape != x.shape:
                    raise ValueError(f"{type(function).__name__}.backward returned a gradient of shape "
                                     f"{gx.shape} for an input of shape {x.shape} "
                                     "(a broadcast that was not summed back?)")
                key = id(x)
                if key not in grads:
                    grads[key] = gx
                elif key in summed and grads[key].dtype == gx.dtype:
                    grads[key] += gx          # our own buffer: add in place, no new array
                else:                         # a tensor used twice: gradients add; gx may be
                    grads[key] = grads[key] + gx   # another input's gradient too, so not in place
                    summed.add(key)
            if not retain_graph:
                function.__dict__.clear()  # free the saved arrays; inputs falls back to None

    # -- operators (the ops live in ops/; these are their spellings) -------------------
    def __add__(self, other): return _ops.add(self, other)
    def __radd__(self, other): return _ops.add(other, self)
    def __sub__(self, other): return _ops.sub(self, other)
    def __rsub__(self, other): return _ops.sub(other, self)
    def __mul__(self, other): return _ops.mul(self, other)
    def __rmul__(self, other): return _ops.mul(other, self)
    def __truediv__(self, other): return _ops.div(self, other)
    def __rtruediv__(self, other): return _ops.div(other, self)
    def __matmul__(self, other): return _ops.matmul(self, other)
    def __rmatmul__(self, other): return _ops.matmul(other, self)
    def __pow__(self, exponent): return _ops.pow(self, exponent)
    def __neg__(self): return _ops.neg(self)
    def __getitem__(self, index): return _ops.getitem(self, index)

    # comparisons give boolean tensors and carry no gradient
    def __lt__(self, other): return Tensor(self.data < _raw(other))
    def __le__(self, other): return Tensor(self.data <= _raw(other))
    def __gt__(self, other): return Tensor(self.data > _raw(other))
    def __ge__(self, other): return Tensor(self.data >= _raw(other))
    def __eq__(self, other): return Tensor(self.data == _raw(other))  # type: ignore[override]
    def __ne__(self, other): return Tensor(self.data != _raw(other))  # type: ignore[override]
    __hash__ = object.__hash__  # tensors are identities in the graph, not values

    def __bool__(self) -> bool:
        return bool(self.data)

    @property
    def T(self) -> Tensor:
        return _ops.transpose(self)

    def sum(self, axis=None, keepdims=False): return _ops.sum(self, axis, keepdims)
    def mean(self, axis=None, keepdims=False): return _ops.mean(self, axis, keepdims)
    def max(self, axis=None, keepdims=False): return _ops.max(self, axis, keepdims)
    def reshape(self, *shape): return _ops.reshape(self, shape[0] if len(shape) == 1 else shape)
    def transpose(self, *axes): return _ops.transpose(self, axes[0] if len(axes) == 1 else (axes or None))
    def permute(self, *axes): return _ops.transpose(self, axes[0] if len(axes) == 1 else axes)
    def swapaxes(self, axis1, axis2): return _ops.swapaxes(self, axis1, axis2)
    def exp(self): return _ops.exp(self)
    def log(self): return _ops.log(self)
    def sqrt(self): return _ops.sqrt(self)
    def tanh(self): return _ops.tanh(self)
    def relu(self): return _ops.relu(self)
    def masked_fill(self, mask, value): return _ops.masked_fill(self, mask, value)


def _raw(value):
    return value.data if isinstance(value, Tensor) else value


def _as_tensors(inputs) -> tuple[Tensor, ...]:
    """Wrap non-Tensor inputs; Python numbers take the dtype of the first Tensor (no silent upcast)."""
    if all(type(x) is Tensor or isinstance(x, Tensor) for x in inputs):
        return inputs
    like = next((x.data for x in inputs if isinstance(x, Tensor)), None)
    wrapped = []
    for x in inputs:
        if isinstance(x, Tensor):
            wrapped.append(x)
        elif like is not None and not backend.is_array(x):
            dtype = like.dtype if like.dtype.kind in "fc" else None  # int tensor * 2.5 must not truncate 2.5
            wrapped.append(Tensor(backend.xp_of(like).asarray(x, dtype=dtype)))
        else:
            wrapped.append(Tensor(x))
    return tuple(wrapped)


def _check_same_device(function: Function, arrays) -> None:
    first = type(arrays[0])
    for array in arrays[1:]:
        if type(array) is not first:
            devices = [backend.get_device(a) for a in arrays]
            if len(set(devices)) > 1:
                raise RuntimeError(f"{type(function).__name__}: inputs live on different devices "
                                   f"({', '.join(devices)}); move them with .to('cpu') or .to('cuda')")


def _accumulate(tensor: Tensor, gy, given_to_leaves: set[int]) -> None:
    """Add ``gy`` into ``tensor.grad``; never store a view or an array another leaf holds."""
    if tensor.grad is None:
        if gy.base is not None or id(gy) in given_to_leaves:
            gy = gy.copy()
        given_to_leaves.add(id(gy))
        tensor.grad = _host_scalar_to_array(gy)
    else:
        tensor.grad = _host_scalar_to_array(tensor.grad + gy)


def _host_scalar_to_array(value):
    """NumPy turns 0-d results into scalars (numpy.float64); a .grad is always an array."""
    return numpy.asarray(value) if isinstance(value, numpy.generic) else value


def _topological_order(root: Tensor) -> list[Tensor]:
    """Tensors that need a gradient, each after every tensor computed from it.

    An iterative depth-first search: a recursive one hits Python's recursion
    limit on deep graphs (a chain of 100,000 ops).
    """
    order: list[Tensor] = []
    visited: set[int] = set()
    stack: list[tuple[Tensor, bool]] = [(root, False)]
    while stack:
        tensor, children_done = stack.pop()
        if children_done:
            order.append(tensor)
            continue
        if id(tensor) in visited:
            continue
        visited.add(id(tensor))
        stack.append((tensor, True))
        function = tensor.creator
        if function is not None:
            if function.inputs is None:
                raise RuntimeError(
                    f"backward() through a graph that was already freed (at {function!r}): the first "
                    "backward() released it. Call backward(retain_graph=True) the first time to go twice.")
            for x in function.inputs:
                if x.requires_grad and id(x) not in visited:
                    stack.append((x, False))
    order.reverse()
    return order


from . import ops as _ops  # noqa: E402  (ops need Tensor and Function, defined above)
