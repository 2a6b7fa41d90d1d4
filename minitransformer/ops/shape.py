"""Shape ops: reshape, transpose / permute / swapaxes, broadcast_to,
concatenate, stack and split (chapter 2). None of them changes a value, so
each backward only moves the gradient back to where the value came from.
"""
from __future__ import annotations

from ..backend import xp_of
from ..tensor import Function, Tensor
from .broadcasting import unbroadcast


class Reshape(Function):
    def __init__(self, shape) -> None:
        self.new_shape = tuple(shape) if not isinstance(shape, int) else (shape,)

    def forward(self, x):
        self.shape = x.shape
        try:
            return x.reshape(self.new_shape)
        except ValueError:
            raise ValueError(f"reshape: cannot reshape an array of shape {x.shape} ({x.size} values) "
                             f"into shape {self.new_shape}") from None

    def backward(self, gy):
        return gy.reshape(self.shape)


class Transpose(Function):
    """Permute the axes; ``axes=None`` reverses them (the matrix transpose for 2-D)."""

    def __init__(self, axes=None) -> None:
        self.axes = None if axes is None else tuple(axes)

    def forward(self, x):
        if self.axes is not None and sorted(a % x.ndim for a in self.axes) != list(range(x.ndim)):
            raise ValueError(f"transpose: axes {self.axes} are not a permutation of the {x.ndim} axes "
                             f"of shape {x.shape}")
        return x.transpose(self.axes)

    def backward(self, gy):
        if self.axes is None:
            return gy.transpose()
        inverse = [0] * len(self.axes)
        for position, axis in enumerate(self.axes):
            inverse[axis % len(self.axes)] = position  # where each original axis went
        return gy.transpose(inverse)


class BroadcastTo(Function):
    def __init__(self, shape) -> None:
        self.target = tuple(shape)

    def forward(self, x):
        self.shape = x.shape
        try:
            return xp_of(x).broadcast_to(x, self.target)
        except ValueError:
            raise ValueError(f"broadcast_to: shape {x.shape} cannot be broadcast to {self.target}") from None

    def backward(self, gy):
        return unbroadcast(gy, self.shape)


class Concatenate(Function):
    def __init__(self, axis: int = 0) -> None:
        self.axis = axis

    def forward(self, *xs):
        self.sizes = [x.shape[self.axis] for x in xs]
        try:
            return xp_of(*xs).concatenate(xs, axis=self.axis)
        except ValueError:
            shapes = ", ".join(str(x.shape) for x in xs)
            raise ValueError(f"concatenate: shapes {shapes} differ outside axis {self.axis}") from None

    def backward(self, gy):
        bounds, total = [], 0
        for size in self.sizes[:-1]:
            total += size
            bounds.append(total)
        return tuple(xp_of(gy).split(gy, bounds, axis=self.axis))  # each input gets its own slice


class Stack(Function):
    def __init__(self, axis: int = 0) -> None:
        self.axis = axis

    def forward(self, *xs):
        try:
            return xp_of(*xs).stack(xs, axis=self.axis)
        except ValueError:
            shapes = ", ".join(str(x.shape) for x in xs)
            raise ValueError(f"stack: all inputs need the same shape, got {shapes}") from None

    def backward(self, gy):
        xp = xp_of(gy)
        return tuple(xp.take(gy, i, axis=self.axis) for i in range(gy.shape[self.axis]))


def reshape(x, shape) -> Tensor: return Reshape(shape)(x)
def transpose(x, axes=None) -> Tensor: return Transpose(axes)(x)
def broadcast_to(x, shape) -> Tensor: return BroadcastTo(shape)(x)


def swapaxes(x, axis1: int, axis2: int) -> Tensor:
    _check_axis("swapaxes", axis1, x.shape)
    _check_axis("swapaxes", axis2, x.shape)
    axes = list(range(x.ndim))
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return Transpose(axes)(x)


permute = transpose


def concatenate(tensors, axis: int = 0) -> Tensor:
    tensors = _at_least_one("concatenate", tensors)
    _check_axis("concatenate", axis, _shape_of(tensors[0]))
    return Concatenate(axis)(*tensors)


def stack(tensors, axis: int = 0) -> Tensor:
    tensors = _at_least_one("stack", tensors)
    shape = _shape_of(tensors[0])
    if not -len(shape) - 1 <= axis <= len(shape):   # the new axis may also go last
        raise ValueError(f"stack: axis {axis} is out of range for inputs of {len(shape)} axes (shape "
                         f"{tuple(shape)}), which stack into {len(shape) + 1}")
    return Stack(axis)(*tensors)


def _at_least_one(name: str, tensors) -> list:
    tensors = list(tensors)
    if not tensors:
        raise ValueError(f"{name}: needs at least one tensor, got an empty list")
    return tensors


def _shape_of(x) -> tuple[int, ...]:
    return x.shape if isinstance(x, Tensor) else Tensor(x).shape


def _check_axis(name: str, axis: int, shape: tuple[int, ...]) -> None:
    if not -len(shape) <= axis < len(shape):
        raise ValueError(f"{name}: axis {axis} is out of range for {len(shape)} axes (shape {tuple(shape)})")


def split(x, indices_or_sections, axis: int = 0) -> list[Tensor]:
    """Split like ``numpy.split``: an int gives that many equal parts, a list gives cut points."""
    _check_axis("split", axis, x.shape)
    length = x.shape[axis]
    if isinstance(indices_or_sections, int):
        if indices_or_sections < 1:
            raise ValueError(f"split: the number of parts must be at least 1, got {indices_or_sections}")
        if length % indices_or_sections:
            raise ValueError(f"split: axis {axis} of shape {x.shape} does not divide into "
                             f"{indices_or_sections} equal parts")
        step = length // indices_or_sections
        cuts = list(range(step, length, step))
    else:
        cuts = list(indices_or_sections)
    bounds = [0, *cuts, length]
    axis = axis % x.ndim
    prefix = (slice(None),) * axis
    return [x[prefix + (slice(start, stop),)] for start, stop in zip(bounds[:-1], bounds[1:])]
