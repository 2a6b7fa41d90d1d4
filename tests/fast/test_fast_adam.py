"""FastAdam (minitransformer/fast/adam.py) is the plain Adam (optim.py, chapter 10) to the last bit.

Same parameters, same moments, same state dict after every step, whether the flat buffers' chunks cut
through parameters or not, with parameters that miss steps, of odd shapes (empty, one number, 3-d), of
two dtypes at once; and a state dict of either loads into the other and continues identically.
"""
from __future__ import annotations

import numpy as np
import pytest

import minitransformer as mt
from minitransformer.fast import adam as fast_adam
from minitransformer.fast.adam import FastAdam
from minitransformer.optim import Adam

SHAPES = [(3, 4), (5,), (2, 3, 2), (1,), (0, 3), (40,), (7, 9)]


def _problem(rng, dtype, steps=6):
    """Start values and gradients per step; parameter 1 has no gradient in the first steps and
    parameter 3 none in the last ones."""
    start = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    grads = [[None if (i == 1 and t < 2) or (i == 3 and t > 3) else rng.standard_normal(s).astype(dtype)
              for i, s in enumerate(SHAPES)] for t in range(steps)]
    return start, grads


def _optimizer(kind, start, lr=0.01):
    params = [mt.Tensor(a.copy(), requires_grad=True) for a in start]
    return kind(params, lr=lr, betas=(0.9, 0.98), eps=1e-9)


def _steps(opt, grads):
    for step_grads in grads:
        for p, g in zip(opt.params, step_grads):
            p.grad = None if g is None else g.copy()
        opt.step()


def _assert_same(fast, plain):
    for i, (a, b) in enumerate(zip(fast.params, plain.params)):
        assert a.data.dtype == b.data.dtype
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=f"parameter {i}")
    fast_state, plain_state = fast.state_dict(), plain.state_dict()
    assert sorted(fast_state) == sorted(plain_state)
    for key in plain_state:
        assert fast_state[key].dtype == plain_state[key].dtype, key
        np.testing.assert_array_equal(fast_state[key], plain_state[key], err_msg=key)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("chunk", [7, 1 << 15])   # chunks that cut through parameters, and one that does not
def test_fast_adam_is_plain_adam_bit_for_bit(rng, monkeypatch, dtype, chunk):
    monkeypatch.setattr(fast_adam._Flat, "CPU_CHUNK", chunk)
    start, grads = _problem(rng, dtype)
    fast, plain = _optimizer(FastAdam, start), _optimizer(Adam, start)
    for step_grads in grads:               # compared after every step, not only at the end
        _steps(fast, [step_grads])
        _steps(plain, [step_grads])
        _assert_same(fast, plain)
    assert fast.params[0].data.base is not None   # the fast one did work in its flat buffer


def test_fast_adam_with_two_dtypes_is_plain_adam(rng, monkeypatch):
    monkeypatch.setattr(fast_adam._Flat, "CPU_CHUNK", 5)
    start32, grads32 = _problem(rng, np.float32, steps=4)
    start64, grads64 = _problem(rng, np.float64, steps=4)
    start = start32 + start64
    grads = [a + b for a, b in zip(grads32, grads64)]
    fast, plain = _optimizer(FastAdam, start), _optimizer(Adam, start)
    _steps(fast, grads)
    _steps(plain, grads)
    _assert_same(fast, plain)
    assert len(fast._flat.groups) == 2     # one flat buffer per dtype


@pytest.mark.parametrize("first, second", [(Adam, FastAdam), (FastAdam, Adam)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_each_loads_the_others_state_and_continues_bit_for_bit(rng, monkeypatch, first, second, dtype):
    """A checkpoint written with one form resumes with the other: the same keys, the same numbers."""
    monkeypatch.setattr(fast_adam._Flat, "CPU_CHUNK", 11)
    start, grads = _problem(rng, dtype, steps=6)
    straight = _optimizer(first, start)
    _steps(straight, grads)

    before = _optimizer(first, start)
    _steps(before, grads[:3])
    state = before.state_dict()
    after = _optimizer(second, [p.data.copy() for p in before.params], lr=999.0)
    after.load_state_dict(state)
    assert after.step_count == 3 and after.lr == 0.01
    _steps(after, grads[3:])
    _assert_same(after, straight)


def test_fast_adam_follows_a_parameter_whose_array_was_replaced_or_cast(rng):
    """``p.data = new`` and Module.to(dtype) after the optimiser was made: the next step updates the new
    array in a new flat buffer, with the moments kept, as the plain Adam does."""
    layers = [mt.nn.Linear(3, 2) for _ in range(2)]
    layers[1].load_state_dict(layers[0].state_dict())
    fast, plain = FastAdam(layers[0].parameters(), lr=0.1), Adam(layers[1].parameters(), lr=0.1)
    steps = [[rng.standard_normal(p.shape) for p in layers[0].parameters()] for _ in range(3)]
    for layer, opt in zip(layers, (fast, plain)):
        for p, g in zip(layer.parameters(), steps[0]):
            p.grad = g.astype(np.float32)
        opt.step()
        layer.to(np.float64)
        weight = layer.parameters()[0]
        weight.data = weight.data.copy()
        for grads in steps[1:]:
            for p, g in zip(layer.parameters(), grads):
                p.grad = g
            opt.step()
    for a, b in zip(*(layer.parameters() for layer in layers)):
        assert a.data.dtype == np.float64
        # the fast one casts the float32 moments to float64 with the parameters, the plain one lets
        # NumPy promote them at the next step: the same update, rounded differently once
        np.testing.assert_allclose(a.data, b.data, rtol=1e-6)
        assert a.data.base is not None                          # a view of the flat buffer again


def test_fast_adam_step_counts_as_a_change_of_every_updated_parameter():
    layer = mt.nn.Linear(3, 2)
    opt = FastAdam(layer.parameters(), lr=0.1)
    loss = layer(mt.Tensor(np.ones((4, 3), dtype=np.float32))).sum()
    for p in layer.parameters():
        p.grad = np.ones_like(p.data)
    opt.step()
    with pytest.raises(RuntimeError, match="changed in place"):
        loss.backward()


def test_fast_adam_refuses_a_gradient_of_the_wrong_shape():
    p = mt.Tensor(np.zeros(3), requires_grad=True)
    opt = FastAdam([p])
    p.grad = np.ones(4)
    with pytest.raises(ValueError, match=r"gradient shape \(4,\) != parameter shape \(3,\)"):
        opt.step()


@pytest.mark.gpu
def test_fast_adam_is_plain_adam_on_the_device(rng):
    from minitransformer import backend

    start, grads = _problem(rng, np.float32, steps=3)
    fast = FastAdam([mt.Tensor(backend.to_device(a, "cuda"), requires_grad=True) for a in start], lr=0.01)
    plain = Adam([mt.Tensor(backend.to_device(a, "cuda"), requires_grad=True) for a in start], lr=0.01)
    for opt in (fast, plain):
        for step_grads in grads:
            for p, g in zip(opt.params, step_grads):
                p.grad = None if g is None else backend.to_device(g, "cuda")
            opt.step()
    _assert_same(fast, plain)
