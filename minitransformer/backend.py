"""The array backend: NumPy on the CPU, CuPy on a GPU, one code path for both.

Every op and layer asks this module for its array module (``xp``) instead of
importing NumPy, so the same line ``xp.exp(x)`` runs on either device:

    xp = xp_of(x)          # numpy for a NumPy array, cupy for a CuPy array

CuPy is imported only when a GPU is asked for, so ``import minitransformer``
stays fast and works on machines without CUDA.

Choosing the device
-------------------
* ``Tensor.to("cuda")`` / ``Module.to("cuda")`` move data explicitly.
* ``set_default_device("cuda")`` or the environment variable
  ``MINITRANSFORMER_DEVICE=cuda`` make new tensors built from Python data
  and new parameters start on the GPU.

Tests
-----
``_cupy`` and ``_cupyx`` are the only places the module looks for CuPy. The
tests put a strict stand-in there (tests/device_double.py) so that every run
checks the GPU path's discipline, with no GPU: nothing else here changes.
"""
from __future__ import annotations

import os
from types import ModuleType

import numpy

_cupy: ModuleType | None = None  # imported on first use
_cupyx: ModuleType | None = None  # CuPy's extras (scatter_add), imported with it
_default_device = os.environ.get("MINITRANSFORMER_DEVICE", "cpu").lower()

CUPY_HINT = (
    "install the CuPy wheel that matches your CUDA toolkit: "
    "`pip install cupy-cuda12x` for CUDA 12.x or `pip install cupy-cuda13x` for CUDA 13.x "
    "(or `pip install minitransformer[gpu]`)"
)


def _import_cupy() -> ModuleType:
    """Import CuPy and check that it sees a GPU; raise a helpful error otherwise."""
    global _cupy, _cupyx
    if _cupy is not None:
        return _cupy
    try:
        import cupy  # noqa: PLC0415 - optional dependency, imported on demand
    except ImportError as error:
        raise RuntimeError(f"device 'cuda' needs CuPy, which is not installed: {CUPY_HINT}") from error
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # CUDA driver missing or broken
        raise RuntimeError(f"CuPy is installed but cannot reach a GPU ({error}); "
                           "check the NVIDIA driver, or stay on device 'cpu'") from error
    if count == 0:
        raise RuntimeError("CuPy is installed but sees no GPU; stay on device 'cpu'")
    import cupyx  # noqa: PLC0415

    _cupy, _cupyx = cupy, cupyx
    return cupy


def cuda_available() -> bool:
    """True when CuPy is installed and sees at least one GPU."""
    try:
        _import_cupy()
    except RuntimeError:
        return False
    return True


def _check_device_name(device: str) -> str:
    """'cpu' or 'cuda' for the accepted spellings; ValueError for anything else."""
    device = str(device).lower()
    if device in ("gpu", "cuda:0"):
        device = "cuda"
    if device not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {device!r}: use 'cpu' or 'cuda'")
    return device


def set_default_device(device: str) -> None:
    """Make new tensors built from Python data, and new parameters, live on ``device``."""
    global _default_device
    device = _check_device_name(device)
    if device == "cuda":
        _import_cupy()
    _default_device = device


def default_device() -> str:
    return _check_device_name(_default_device)


def gpu_in_use() -> bool:
    """True once CuPy has been imported: only then can arrays live on two devices."""
    return _cupy is not None


def xp_of(*arrays) -> ModuleType:
    """The array module (numpy or cupy) that owns ``arrays``."""
    for array in arrays:
        if _cupy is not None and isinstance(array, _cupy.ndarray):
            return _cupy
    return numpy


def xp_for(device: str) -> ModuleType:
    """The array module for a device name."""
    return _import_cupy() if _check_device_name(device) == "cuda" else numpy


def get_device(array) -> str:
    """'cuda' for a CuPy array, 'cpu' for anything else."""
    if _cupy is not None and isinstance(array, _cupy.ndarray):
        return "cuda"
    return "cpu"


def to_device(array, device: str):
    """Copy ``array`` to ``device`` (no copy when it is already there)."""
    device = _check_device_name(device)
    if device == get_device(array):
        return array
    if device == "cuda":
        return _import_cupy().asarray(array)
    return asnumpy(array)


def asnumpy(array) -> numpy.ndarray:
    """A NumPy array on the host, whatever device ``array`` lives on."""
    if _cupy is not None and isinstance(array, _cupy.ndarray):
        return _cupy.asnumpy(array)
    return numpy.asarray(array)


def is_array(value) -> bool:
    """True for a NumPy or CuPy ndarray."""
    return isinstance(value, numpy.ndarray) or (_cupy is not None and isinstance(value, _cupy.ndarray))


def scatter_add(target, indices, values) -> None:
    """``target[indices] += values`` where repeated indices accumulate, in place.

    NumPy spells this ``numpy.add.at``; CuPy spells it ``cupyx.scatter_add``.
    """
    if _cupy is not None and isinstance(target, _cupy.ndarray):
        _cupyx.scatter_add(target, indices, values)
    else:
        numpy.add.at(target, indices, values)


def scatter_add_rows(target, rows, values) -> None:
    """``target[rows[i]] += values[i]`` for a 2-D ``target``, repeated rows accumulating, in place.

    The same as ``scatter_add(target, rows, values)``. On NumPy, ``add.at`` over whole rows is slow
    (it walks the rows one index at a time); over the flat element positions ``row · width + column``
    it runs as one loop, about six times faster for an embedding's gradient.
    """
    if not (isinstance(target, numpy.ndarray) and target.flags.c_contiguous):
        scatter_add(target, rows, values)
        return
    width = target.shape[1]
    positions = rows.reshape(-1, 1) * width + numpy.arange(width)          # (n, width) flat indices
    numpy.add.at(target.reshape(-1), positions.reshape(-1), values.reshape(-1))

