"""The classroom's grading gradchecks (tests/exercises/test_exercises.py), run again on the device double.

Each grading test below is the very function tests/exercises/test_exercises.py collects from its exercise's
spec, collected a second time here, with its exercise marker and parameters; the fixture makes its inputs
device arrays (the spec's ``tensor``). A solution that calls NumPy on its arrays passes on the CPU and fails
here, with CuPy's error, as it would on a student's GPU. (Left out: the grading tests that build a host array
of their own next to the inputs -- a mask, a scale, a second operand -- or compare with NumPy directly;
tests/test_device_double.py runs their subjects on the device.)
"""
from __future__ import annotations

import pytest

import device_double
import minitransformer as mt
from minitransformer import backend

from test_exercises import (  # noqa: F401  (collected again here, on the device)
    test_attention_backward_gradcheck,
    test_broadcast_add_and_mul_gradchecks,
    test_cross_entropy_backward_gradcheck,
    test_div_backward_gradcheck,
    test_div_by_a_number_and_of_a_number,
    test_getitem_backward_gradcheck,
    test_layer_norm_backward_gradcheck,
    test_log_softmax_backward_gradcheck,
    test_matmul_backward_gradcheck,
    test_max_backward_gradcheck,
    test_softmax_backward_gradcheck,
    test_sum_backward_gradcheck,
)


def device_tensor(rng, *shape, low=None):
    """spec.tensor, on the device: a float64 leaf whose data is a device array."""
    data = rng.standard_normal(shape) if low is None else low + rng.random(shape)
    return mt.Tensor(backend.to_device(data, "cuda"), requires_grad=True)


@pytest.fixture(autouse=True)
def on_the_device(request, monkeypatch):
    device_double.on_device_double(monkeypatch)
    monkeypatch.setitem(request.function.__globals__, "tensor", device_tensor)   # the spec module's tensor
