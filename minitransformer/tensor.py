"""Tensor, Function and reverse-mode differentiation (chapter 1).

A ``Tensor`` holds an array (``.data``), its gradient (``.grad``) and the
``Function`` that made it (``.creator``). A ``Function`` works on raw arrays:
``forward`` computes the output, ``backward`` turns the gradient of the output
into gradients of the inputs (the chain rule, one local step). Calling a
Function on Tensors runs ``forward`` and, unless ``no_grad()`` is active,
records the edge from the output back to the inputs. ``Tensor.backward()``
walks those edges in reverse topological order.

The bookkeeping that is not the lesson (wrapping Python numbers, the device check,
the in-place-change check, the care that no two ``.grad`` share an array) lives in
the small named helpers below the line "bookkeeping" at the end of this file.
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
    for an input that needs none. What backward needs from forward (an input,
    the output, a mask) is kept with ``self.save_for_backward(...)`` and read
    back from ``self.saved_arrays``; settings that are not arrays (an axis,
    ids, a probability) are given to ``__init__``.
    """

    inputs: tuple[Tensor, ...] | None = None  # the graph's edges back to the inputs; None once freed
    saved_arrays: tuple | None = ()           # what forward kept for backward; None once freed
    recorded_at: int = 0                      # the count of in-place changes when recorded (see _InPlace)

    def __call__(self, *inputs: Any) -> Tensor:
        tensors = inputs if _all_tensors(inputs) else _as_tensors(self, inputs)  # Python numbers become Tensors
        output = Tensor(self.forward(*_arrays_on_one_device(self, tensors)))
        # record the graph: only when asked, and only for a floating-point result (ints have no gradient)
        if _GradMode.enabled and _any_requires_grad(tensors) and output._data.dtype.kind in "fc":
            output.requires_grad = True
            output.creator = self    # output -> this Function -> its inputs: that is the whole graph
            self.inputs = tensors
            self.recorded_at = _InPlace.changes   # backward checks that nothing it saved changed since
        return output

    def save_for_backward(self, *arrays) -> None:
        """Keep ``arrays`` for backward, as ``self.saved_arrays``; backward() frees them afterwards."""
        self.saved_arrays = arrays

    def forward(self, *arrays):
        raise NotImplementedError(f"{type(self).__name__}.forward is not implemented")

    def backward(self, gy):
        raise NotImplementedError(f"{type(self).__name__}.backward is not implemented")

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


class Tensor:
    """An n-dimensional array that remembers how it was computed."""

    __slots__ = ("_data", "_version", "grad", "requires_grad", "creator", "name", "_keeps_grad", "__weakref__")
    __array_priority__ = 1000  # numpy_array * tensor calls Tensor.__rmul__

    def __init__(self, data: Any, requires_grad: bool = False, name: str | None = None) -> None:
        if type(data) is not numpy.ndarray:  # the usual case, a NumPy array, needs no conversion
            data = data.data if isinstance(data, Tensor) else _array_from(data)
        if data.dtype.kind not in "biufc":
            raise TypeError(f"Tensor: expected numbers (bool, int, float or complex), got an array of dtype "
                            f"{data.dtype}")
        if requires_grad and data.dtype.kind not in "fc":
            raise TypeError(f"only floating-point tensors can require gradients, got dtype {data.dtype}")
        self._data = data
        self._version = 0            # when .data was last changed in place; 0: never (see _InPlace)
        self.grad = None
        self.requires_grad = requires_grad
        self.creator: Function | None = None
        self.name = name
        self._keeps_grad = False

    @property
    def data(self):
        """The array. ``t.data = a`` and ``t.data += a`` (Python assigns the result back) count as a new
        version of the tensor: a backward that needs an array saved before the change refuses to run."""
        return self._data

    @data.setter
    def data(self, array) -> None:
        self._data = array
        _InPlace.mark(self)

    # -- what the array looks like ------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self._data.shape

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def size(self) -> int:
        return self._data.size

    @property
    def dtype(self):
        return self._data.dtype

    @property
    def device(self) -> str:
        return backend.get_device(self._data)

    @property
    def is_leaf(self) -> bool:
        return self.creator is None

    def __len__(self) -> int:
        return len(self._data)

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
        """Add ∂L/∂leaf into the ``.grad`` of every leaf that requires a gradient.

        ``grad`` is ∂L/∂self for some scalar L; it defaults to 1 for a tensor of
        one element (then L is self). The graph is freed on the way unless
        ``retain_graph=True``; a second backward through a freed graph raises
        instead of silently counting twice.
        """
        grads = _Gradients(self, _initial_gradient(self, grad))  # ∂L/∂t for each tensor t reached so far
        order = _topological_order(self)
        while order:
            tensor = order.pop()                        # consumers first (rule 2)
            gy = grads.pop(tensor, None)
            if gy is None:                              # no path from self brought a gradient here
                continue
            function = tensor.creator
            if function is None or tensor._keeps_grad:  # a leaf, or retain_grad() was called
                grads.keep(tensor, gy)                  # into tensor.grad
            if function is None:
                continue
            if function.recorded_at != _InPlace.changes:  # some array changed in place since this forward
                _check_unchanged(function, tensor)
            gxs = _input_gradients(function, function.backward(gy))   # one per input, checked
            for x, gx in zip(function.inputs, gxs):
                if gx is not None and x.requires_grad:
                    grads.add(x, gx, function)          # rule 1: sum over paths
            if not retain_graph:
                function.inputs = function.saved_arrays = None  # free the graph as we go

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
    def sigmoid(self): return _ops.sigmoid(self)
    def relu(self): return _ops.relu(self)
    def masked_fill(self, mask, value): return _ops.masked_fill(self, mask, value)


# -- bookkeeping: the helpers of Tensor(), Function.__call__ and Tensor.backward -----------
def _raw(value):
    return value.data if isinstance(value, Tensor) else value


def _array_from(data):
    """Python data as an array on the default device; a NumPy scalar stays on the host; an array stays."""
    if backend.is_array(data):  # a CuPy array, or a subclass of NumPy's
        return data
    array = numpy.asarray(data)
    if array.dtype.kind not in "biufc":  # "abc", None, {}: NumPy keeps them as str or object arrays
        raise TypeError(f"Tensor: expected numbers (bool, int, float or complex), got {type(data).__name__} "
                        f"data, which NumPy stores as dtype {array.dtype}")
    if isinstance(data, numpy.generic):  # what NumPy ops return for 0-d results
        return array
    return backend.to_device(array, backend.default_device())


def _as_tensors(function: Function, inputs) -> tuple[Tensor, ...]:
    """Wrap non-Tensor inputs; Python numbers take the dtype of the first Tensor (no silent upcast)."""
    like = None
    for x in inputs:
        if isinstance(x, Tensor):
            like = x.data
            break
    if like is not None:
        dtype = like.dtype if like.dtype.kind in "fc" else None  # int tensor * 2.5 must not truncate 2.5
        xp = numpy if type(like) is numpy.ndarray else backend.xp_of(like)
    wrapped = []
    for x in inputs:
        if isinstance(x, Tensor):
            wrapped.append(x)
        elif like is not None and (type(x) in _PYTHON_NUMBERS or not backend.is_array(x)):
            if type(x) not in _PYTHON_NUMBERS:
                _check_operand(function, inputs, x)
            wrapped.append(Tensor(xp.asarray(x, dtype=dtype)))
        else:
            wrapped.append(Tensor(x))
    return tuple(wrapped)


_PYTHON_NUMBERS = (float, int, bool)   # the usual non-Tensor input: a constant such as 0.5 or 2


def _check_operand(function: Function, inputs, value) -> None:
    """Refuse an operand that is no number nor array of numbers (``x * None`` would otherwise give NaNs:
    NumPy turns None into NaN when asked for floats), naming the operation and the operand types."""
    if numpy.asarray(value).dtype.kind not in "biufc":
        types = " and ".join(repr(type(x).__name__) for x in inputs)
        raise TypeError(f"unsupported operand type(s) for {type(function).__name__}: {types}; a Tensor "
                        f"combines with Tensors, numbers and arrays of numbers, not {type(value).__name__}")


def _all_tensors(inputs) -> bool:
    for x in inputs:
        if not isinstance(x, Tensor):
            return False
    return True


def _any_requires_grad(tensors) -> bool:
    for t in tensors:
        if t.requires_grad:
            return True
    return False


def _arrays_on_one_device(function: Function, tensors) -> list:
    """The tensors' arrays, checked to live on one device (only while a GPU array can exist at all)."""
    arrays = [t._data for t in tensors]
    if len(arrays) > 1 and backend.gpu_in_use():
        _check_same_device(function, arrays)
    return arrays


def _check_same_device(function: Function, arrays) -> None:
    first = type(arrays[0])
    for array in arrays[1:]:
        if type(array) is not first:
            devices = [backend.get_device(a) for a in arrays]
            if len(set(devices)) > 1:
                raise RuntimeError(f"{type(function).__name__}: inputs live on different devices "
                                   f"({', '.join(devices)}); move them with .to('cpu') or .to('cuda')")


def _initial_gradient(tensor: Tensor, grad):
    """The gradient backward() starts from: ``grad`` checked, or 1 for a tensor of one element."""
    if not tensor.requires_grad:
        raise RuntimeError("backward() on a tensor that does not require grad: "
                           "no input had requires_grad=True, or it was computed under no_grad()")
    xp = backend.xp_of(tensor.data)
    if grad is None:
        if tensor.size != 1:
            raise RuntimeError(f"backward() without a gradient needs a tensor of one element, "
                               f"got shape {tensor.shape}; pass grad= of that shape")
        return xp.ones_like(tensor.data)
    grad = grad.data if isinstance(grad, Tensor) else xp.asarray(grad, dtype=tensor.dtype)
    if grad.shape != tensor.shape:
        raise ValueError(f"backward(): grad has shape {grad.shape} but the tensor has shape {tensor.shape}")
    return grad


def _topological_order(root: Tensor) -> list[Tensor]:
    """Tensors that need a gradient, each after every tensor it was computed from.

    An iterative depth-first search: a recursive one hits Python's recursion
    limit on deep graphs (a chain of 100,000 ops).
    """
    order: list[Tensor] = []
    visited: set[Tensor] = set()   # a Tensor hashes by identity (__hash__ = object.__hash__)
    stack: list[tuple[Tensor, bool]] = [(root, False)]
    while stack:
        tensor, inputs_done = stack.pop()
        if inputs_done:
            order.append(tensor)
            continue
        if tensor in visited:
            continue
        visited.add(tensor)
        stack.append((tensor, True))
        function = tensor.creator
        if function is not None:
            if function.inputs is None:
                raise RuntimeError(
                    f"backward() through a graph that was already freed (at {function!r}): the first "
                    "backward() released it. Call backward(retain_graph=True) the first time to go twice.")
            for x in function.inputs:
                if x.requires_grad and x not in visited:
                    stack.append((x, False))
    return order


class _Gradients(dict):
    """∂L/∂t for each tensor t that one backward() has reached so far, keyed by t (by identity).

    A backward may return one array for several inputs (Add hands gy to both),
    so an array is added into only if this sweep allocated it, and every .grad
    gets an array of its own.
    """

    def __init__(self, root: Tensor, gy) -> None:
        super().__init__({root: gy})
        self.owned: set[Tensor] = set()  # tensors whose gradient is a sum this sweep allocated
        self.kept: set[int] = set()   # arrays that some tensor already keeps as its .grad

    def add(self, x: Tensor, gx, function: Function) -> None:
        """One more path into x: gradients add up (the multivariable chain rule). ``gx`` came from
        ``function``'s backward, which the error names when gx does not have x's shape."""
        if gx.shape != x._data.shape:
            raise _gradient_shape_error(function, gx, x)
        total = self.get(x)
        if total is None:
            self[x] = gx
        elif x in self.owned and total.dtype == gx.dtype:
            total += gx                  # our own array: add in place, no new allocation
        else:
            self[x] = total + gx         # a new array, which later paths add into
            self.owned.add(x)

    def keep(self, tensor: Tensor, gy) -> None:
        """Add gy into tensor.grad. A new .grad is never a view nor an array another tensor keeps
        (an optimizer may scale one .grad in place)."""
        if tensor.grad is not None:
            tensor.grad = _host_scalar_to_array(tensor.grad + gy)
            return
        if gy.base is not None or id(gy) in self.kept:
            gy = gy.copy()
        self.kept.add(id(gy))
        tensor.grad = _host_scalar_to_array(gy)


class _InPlace:
    """The in-place changes of every tensor's array, counted: one counter for the whole engine.

    A Function saves arrays, not copies (they can be most of a model's memory): after ``x.data *= 2``
    the saved x is the new one, and backward would mix the new values with the old output into a
    wrong gradient. So every assignment to a ``.data`` adds one to ``changes`` and stamps the tensor
    with the new count (its ``_version``); a Function notes the count when it is recorded
    (``recorded_at``). A tensor changed since then has a larger stamp. Backward compares one integer
    per Function (``recorded_at`` against ``changes``): nothing is copied per op, and only when some
    array has changed since the forward does it look at which (``_check_unchanged``). PyTorch keeps a
    counter per tensor and a copy of it per saved tensor; one counter for all is the same check.
    """

    changes = 0

    @classmethod
    def mark(cls, tensor: Tensor) -> None:
        """``tensor``'s array was changed in place (or replaced): stamp it with the next count."""
        cls.changes += 1
        tensor._version = cls.changes


def _check_unchanged(function: Function, output: Tensor) -> None:
    """Refuse to run ``function.backward`` when an array it saved (or a view of one) belongs to a tensor
    changed in place after ``function`` was recorded. The output was new when the Function made it."""
    saved = function.saved_arrays or ()
    for tensor, role in ((output, "the output"), *((x, "an input") for x in function.inputs)):
        if tensor._version <= function.recorded_at:
            continue
        xp = backend.xp_of(tensor._data)
        if any(backend.is_array(a) and xp.may_share_memory(a, tensor._data) for a in saved):
            name = f"{tensor.name!r} (shape {tensor.shape})" if tensor.name else f"a tensor of shape {tensor.shape}"
            raise RuntimeError(
                f"backward(): {name}, {role} of {type(function).__name__}, was changed in place (its .data, "
                f"in-place change number {tensor._version}) after {type(function).__name__} saved it for "
                f"backward (recorded after change number {function.recorded_at}); the gradient would mix old "
                f"and new values. Change arrays after backward(), or run the forward again after the change")


def _input_gradients(function: Function, gxs) -> tuple:
    """What ``function.backward`` returned, as one gradient (an array, or None) per input; a result that
    is not that (a list, a Tensor, too few or too many gradients) stops the sweep with a message that
    names the Function, instead of an input silently left without its gradient."""
    name = f"{type(function).__name__}.backward"
    if not isinstance(gxs, tuple):
        if isinstance(gxs, list):
            raise TypeError(f"{name} returned a list; return the gradients as a tuple, one per input "
                            f"(return gx, gy), or one array for a Function of one input")
        gxs = (gxs,)
    if len(gxs) != len(function.inputs):
        raise ValueError(f"{name} returned {len(gxs)} gradient{'s' * (len(gxs) != 1)} for "
                         f"{len(function.inputs)} input{'s' * (len(function.inputs) != 1)}; return one per input, "
                         f"in order, with None for an input that needs none")
    for i, gx in enumerate(gxs):
        if gx is not None and not (backend.is_array(gx) or isinstance(gx, numpy.generic)):
            hint = ("backward works on raw arrays: return the Tensor's .data" if isinstance(gx, Tensor) else
                    "return an array of the input's shape (or None)")
            raise TypeError(f"{name} returned a {type(gx).__name__} as the gradient of input {i}; {hint}")
    return gxs


def _gradient_shape_error(function: Function, gx, x: Tensor) -> ValueError:
    return ValueError(f"{type(function).__name__}.backward returned a gradient of shape {gx.shape} for an "
                      f"input of shape {x.shape} (a broadcast that was not summed back?)")


def _host_scalar_to_array(value):
    """NumPy turns 0-d results into scalars (numpy.float64); a .grad is always an array."""
    return numpy.asarray(value) if isinstance(value, numpy.generic) else value


from . import ops as _ops  # noqa: E402  (ops need Tensor and Function, defined above)
