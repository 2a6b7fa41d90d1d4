"""The array backend on the CPU, and its errors when a GPU is asked for but
missing (chapter 3). CuPy's absence is simulated, so these run everywhere."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import minitransformer as mt
from minitransformer import backend


@pytest.fixture
def no_cupy(monkeypatch):
    """Make ``import cupy`` fail, as on a machine without it."""
    monkeypatch.setattr(backend, "_cupy", None)
    monkeypatch.setitem(sys.modules, "cupy", None)  # None in sys.modules: import raises ImportError


@pytest.fixture
def cupy_without_gpu(monkeypatch):
    """A stand-in CuPy module whose runtime reports ``count`` GPUs or fails."""
    def install(count=0, error=None):
        def get_device_count():
            if error is not None:
                raise error
            return count
        fake = types.ModuleType("cupy")
        fake.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=get_device_count))
        monkeypatch.setattr(backend, "_cupy", None)
        monkeypatch.setitem(sys.modules, "cupy", fake)
    return install


# -- the CPU path ------------------------------------------------------------------------------
def test_numpy_arrays_belong_to_numpy():
    array = np.ones(3)
    assert backend.xp_of(array) is np
    assert backend.xp_of(array, np.zeros(2)) is np
    assert backend.xp_for("cpu") is np
    assert backend.get_device(array) == "cpu"
    assert backend.is_array(array) and not backend.is_array([1.0]) and not backend.is_array(np.float64(1))


def test_to_device_on_the_same_device_does_not_copy():
    array = np.arange(3.0)
    assert backend.to_device(array, "cpu") is array
    assert backend.to_device(array, "CPU") is array
    assert isinstance(backend.asnumpy([1, 2]), np.ndarray)


def test_scatter_add_accumulates_repeated_indices():
    target = np.zeros(4)
    indices = np.array([1, 3, 1, 1])
    values = np.array([1.0, 2.0, 3.0, 4.0])
    backend.scatter_add(target, indices, values)
    expected = np.zeros(4)
    for i, v in zip(indices, values):
        expected[i] += v
    np.testing.assert_array_equal(target, expected)


def test_the_default_device_is_cpu_and_can_be_set_back(monkeypatch):
    monkeypatch.setattr(backend, "_default_device", "cpu")
    assert mt.default_device() == "cpu"
    mt.set_default_device("CPU")
    assert mt.default_device() == "cpu"
    assert mt.Tensor([1.0]).device == "cpu"


# -- device names ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["tpu", "cuda:1", "metal", ""])
def test_unknown_device_names_raise_value_error(name):
    with pytest.raises(ValueError, match="unknown device.*'cpu' or 'cuda'"):
        mt.set_default_device(name)
    with pytest.raises(ValueError, match="unknown device"):
        backend.to_device(np.ones(2), name)
    with pytest.raises(ValueError, match="unknown device"):
        backend.xp_for(name)


def test_tensor_to_an_unknown_device_raises_value_error():
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        mt.Tensor([1.0]).to("tpu")


# -- a GPU asked for where there is none ---------------------------------------------------------------
def test_cuda_without_cupy_names_the_wheels_to_install(no_cupy):
    with pytest.raises(RuntimeError, match="needs CuPy.*cupy-cuda12x.*cupy-cuda13x"):
        backend.xp_for("cuda")
    assert mt.cuda_available() is False


def test_moving_a_tensor_to_cuda_without_cupy_raises(no_cupy):
    with pytest.raises(RuntimeError, match="cupy-cuda12x"):
        mt.Tensor([1.0, 2.0], requires_grad=True).to("cuda")
    with pytest.raises(RuntimeError, match="cupy-cuda13x"):
        backend.to_device(np.ones(2), "gpu")


def test_a_failed_set_default_device_leaves_the_default_alone(no_cupy, monkeypatch):
    monkeypatch.setattr(backend, "_default_device", "cpu")
    with pytest.raises(RuntimeError, match="CuPy"):
        mt.set_default_device("cuda")
    assert mt.default_device() == "cpu"


def test_cupy_that_sees_no_gpu_is_reported(cupy_without_gpu):
    cupy_without_gpu(count=0)
    with pytest.raises(RuntimeError, match="sees no GPU"):
        backend.xp_for("cuda")
    assert mt.cuda_available() is False


def test_cupy_that_cannot_reach_the_driver_is_reported(cupy_without_gpu):
    cupy_without_gpu(error=OSError("libcuda.so not found"))
    with pytest.raises(RuntimeError, match="cannot reach a GPU.*libcuda.so not found.*driver"):
        backend.xp_for("cuda")
