"""Moving a tensor between devices and dtypes, with the gradient moved back (chapter 3)."""
from __future__ import annotations

from .. import backend
from ..tensor import Function, Tensor


class ToDevice(Function):
    def __init__(self, device: str) -> None:
        self.device = device

    def forward(self, x):
        self.source = backend.get_device(x)
        return backend.to_device(x, self.device)

    def backward(self, gy):
        return backend.to_device(gy, self.source)  # the gradient goes home


class AsType(Function):
    def __init__(self, dtype) -> None:
        self.dtype = dtype

    def forward(self, x):
        self.source = x.dtype
        return x.astype(self.dtype)

    def backward(self, gy):
        return gy.astype(self.source)


def to_device(x, device: str) -> Tensor:
    return ToDevice(device)(x)


def astype(x, dtype) -> Tensor:
    return AsType(dtype)(x)
