"""The same engine on CuPy arrays (chapter 3). Marked ``gpu``: on CuPy where it
sees a GPU, on the device double elsewhere (tests/conftest.py)."""
from __future__ import annotations

import numpy as np
import pytest

import minitransformer as mt
from minitransformer import backend

pytestmark = pytest.mark.gpu


def cuda_leaf(rng, shape, positive=False):
    values = rng.uniform(0.5, 2.0, shape) if positive else rng.standard_normal(shape)
    return mt.Tensor(backend.to_device(values, "cuda"), requires_grad=True)


def test_cupy_arrays_belong_to_cupy(rng):
    cupy = backend.xp_for("cuda")   # CuPy, or the device double that stands in for it

    x = cuda_leaf(rng, (2, 3))
    assert isinstance(x.data, cupy.ndarray)
    assert backend.xp_of(x.data) is cupy and x.device == "cuda"
    assert "device='cuda'" in repr(x)


@pytest.mark.parametrize("op,shapes,positive", [
    (lambda a, b: (a + b) * a - b / 3.0, [(2, 3), (3,)], False),
    (lambda a, b: a / b, [(2, 1, 3), (4, 1)], True),
    (lambda a, b: mt.maximum(a, b).tanh(), [(3, 4), (3, 4)], False),
    (lambda a, b: (a @ b).relu(), [(2, 2, 3), (3, 4)], False),
    (lambda a, b: a @ b, [(3,), (2, 3, 4)], False),
    (lambda a: a.exp().log().sqrt(), [(2, 3)], True),
    (lambda a: a.max(axis=-1) + a.mean(axis=(0, 1), keepdims=True).sum() + a.sum(axis=0).T.sum(), [(2, 3, 4)],
     False),
    (lambda a: a[[0, 0, 1], 1:] * 2.0, [(3, 4)], False),   # repeated index: cupyx.scatter_add
    (lambda a: mt.concatenate(mt.split(a, 2, axis=-1)[::-1], axis=0), [(2, 4)], False),
    (lambda a: mt.stack([a, a * 2.0], axis=1).reshape(-1), [(2, 3)], False),
    (lambda a, b: mt.where(a > 0, a, b), [(2, 3), (3,)], False),
    (lambda a: mt.masked_fill(a, a.data < 0, 0.0), [(3, 3)], False),
    (lambda a: mt.broadcast_to(a, (2, 3, 4)).astype("float64"), [(3, 1)], False),
])
def test_ops_gradcheck_on_cupy_arrays(op, shapes, positive, rng):
    inputs = [cuda_leaf(rng, s, positive) for s in shapes]
    assert mt.gradcheck(op, inputs)
    assert all(t.grad is not None and backend.get_device(t.grad) == "cuda" for t in inputs)


def test_gpu_values_match_the_cpu(rng):
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((5, 3))
    cpu = (mt.Tensor(a) @ mt.Tensor(b)).tanh()
    gpu = (mt.Tensor(a).to("cuda") @ mt.Tensor(b).to("cuda")).tanh()
    np.testing.assert_allclose(gpu.numpy(), cpu.data, rtol=1e-12)


def test_to_cuda_and_back_carries_the_gradient_home(rng):
    x = mt.Tensor(rng.standard_normal((2, 3)), requires_grad=True)
    on_gpu = x.to("cuda")
    assert on_gpu.device == "cuda"
    back = (on_gpu * on_gpu).to("cpu")
    assert back.device == "cpu"
    back.sum().backward()
    assert isinstance(x.grad, np.ndarray)
    np.testing.assert_allclose(x.grad, 2 * x.data)
    assert mt.gradcheck(lambda x: (x.to("cuda").exp()).to("cpu"), [x])


def test_mixing_devices_raises_an_error_naming_both(rng):
    cpu = mt.Tensor(rng.standard_normal(3), requires_grad=True)
    gpu = cuda_leaf(rng, (3,))
    with pytest.raises(RuntimeError, match=r"Add: inputs live on different devices \(cpu, cuda\)"):
        cpu + gpu
    with pytest.raises(RuntimeError, match=r"MatMul.*\(cuda, cpu\)"):
        gpu @ cpu


def test_python_scalars_follow_the_tensor_onto_the_gpu(rng):
    x = cuda_leaf(rng, (3,)).to(np.float32)
    y = 2.0 * x + 1
    assert y.device == "cuda" and y.dtype == np.float32


def test_default_device_cuda_puts_new_tensors_on_the_gpu(monkeypatch):
    monkeypatch.setattr(backend, "_default_device", "cpu")
    mt.set_default_device("cuda")
    try:
        assert mt.Tensor([1.0, 2.0]).device == "cuda"
    finally:
        mt.set_default_device("cpu")


def test_scatter_add_on_cupy_accumulates_repeated_indices():
    cupy = backend.xp_for("cuda")   # CuPy, or the device double that stands in for it

    indices, values = np.array([0, 2, 0]), np.array([1.0, 2.0, 3.0])
    target = cupy.zeros(3)
    backend.scatter_add(target, cupy.asarray(indices), cupy.asarray(values))
    expected = np.zeros(3)
    np.add.at(expected, indices, values)
    np.testing.assert_array_equal(cupy.asnumpy(target), expected)
