"""Adam, SGD, the Noam schedule (eq. 3) and global-norm clipping."""
from __future__ import annotations

import math

import numpy as np
import pytest

import minitransformer as mt
from minitransformer.optim import SGD, Adam, NoamSchedule, clip_grad_norm, cooldown_factor


def _param(values) -> mt.Tensor:
    return mt.Tensor(np.array(values, dtype=np.float64), requires_grad=True)


def test_adam_matches_a_hand_computation(rng):
    p = _param(rng.standard_normal(5))
    start = p.data.copy()
    grads = [rng.standard_normal(5) for _ in range(3)]
    lr, b1, b2, eps = 0.01, 0.9, 0.98, 1e-9
    opt = Adam([p], lr=lr, betas=(b1, b2), eps=eps)
    for g in grads:
        p.grad = g.copy()
        opt.step()

    expected, m, v = start.copy(), np.zeros(5), np.zeros(5)
    for t, g in enumerate(grads, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g ** 2
        m_hat, v_hat = m / (1 - b1 ** t), v / (1 - b2 ** t)
        expected = expected - lr * m_hat / (np.sqrt(v_hat) + eps)
    np.testing.assert_allclose(p.data, expected, rtol=1e-10, atol=1e-12)


def test_adam_first_step_moves_each_weight_by_about_lr(rng):
    """With bias correction the first step is lr·g/|g| = ±lr for every coordinate."""
    p = _param(np.zeros(4))
    opt = Adam([p], lr=0.5)
    p.grad = np.array([3.0, -0.001, 10.0, -7.0])
    opt.step()
    np.testing.assert_allclose(p.data, [-0.5, 0.5, -0.5, 0.5], rtol=1e-6)


def test_adam_matches_torch(rng):
    torch = pytest.importorskip("torch")
    start = rng.standard_normal((3, 4))
    grads = [rng.standard_normal((3, 4)) for _ in range(5)]
    ours = _param(start)
    theirs = torch.tensor(start, requires_grad=True)
    opt = Adam([ours], lr=0.003, betas=(0.9, 0.98), eps=1e-9)
    torch_opt = torch.optim.Adam([theirs], lr=0.003, betas=(0.9, 0.98), eps=1e-9)
    for g in grads:
        ours.grad = g.copy()
        theirs.grad = torch.tensor(g)
        opt.step()
        torch_opt.step()
    np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-9, atol=1e-12)


def test_adam_skips_parameters_without_gradient_and_zero_grad_clears():
    a, b = _param([1.0]), _param([2.0])
    opt = Adam([a, b], lr=0.1)
    a.grad = np.array([1.0])
    opt.step()
    assert b.data[0] == 2.0 and a.data[0] != 1.0
    opt.zero_grad()
    assert a.grad is None and b.grad is None


def test_adam_state_round_trip_continues_identically(rng):
    start = rng.standard_normal(6)
    grads = [rng.standard_normal(6) for _ in range(6)]
    straight = _param(start)
    opt = Adam([straight], lr=0.01)
    for g in grads:
        straight.grad = g.copy()
        opt.step()

    first = _param(start)
    opt1 = Adam([first], lr=0.01)
    for g in grads[:3]:
        first.grad = g.copy()
        opt1.step()
    state = opt1.state_dict()
    assert all(isinstance(v, np.ndarray) for v in state.values())
    second = _param(first.data.copy())
    opt2 = Adam([second], lr=999.0)
    opt2.load_state_dict(state)
    for g in grads[3:]:
        second.grad = g.copy()
        opt2.step()
    np.testing.assert_array_equal(second.data, straight.data)


def test_adam_state_with_wrong_shape_is_refused():
    opt = Adam([_param(np.zeros(3))])
    opt.params[0].grad = np.ones(3)
    opt.step()
    state = opt.state_dict()
    other = Adam([_param(np.zeros(4))])
    with pytest.raises(ValueError, match=r"exp_avg\.0.*\(3,\).*\(4,\)"):
        other.load_state_dict(state)


def test_optimiser_refuses_empty_or_frozen_parameters():
    with pytest.raises(ValueError, match="empty"):
        Adam([])
    with pytest.raises(ValueError, match="does not require"):
        Adam([mt.Tensor(np.zeros(2))])


def test_sgd_with_and_without_momentum():
    p = _param([1.0, -1.0])
    opt = SGD([p], lr=0.1)
    p.grad = np.array([2.0, 4.0])
    opt.step()
    np.testing.assert_allclose(p.data, [0.8, -1.4])

    q = _param([0.0])
    opt = SGD([q], lr=1.0, momentum=0.5)
    for _ in range(3):
        q.grad = np.array([1.0])
        opt.step()
    np.testing.assert_allclose(q.data, [-(1 + 1.5 + 1.75)])  # v = 1, 1.5, 1.75


def test_adam_minimises_a_quadratic():
    p = _param([5.0, -3.0])
    opt = Adam([p], lr=0.1)
    for _ in range(300):
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        opt.step()
    assert np.abs(p.data).max() < 0.05


@pytest.mark.parametrize("d_model,warmup,factor", [(512, 4000, 1.0), (128, 400, 2.0)])
def test_noam_schedule_follows_equation_3(d_model, warmup, factor):
    opt = SGD([_param([0.0])], lr=0.0)
    schedule = NoamSchedule(opt, d_model=d_model, warmup=warmup, factor=factor)
    lrs = [schedule.step() for _ in range(3 * warmup)]
    assert opt.lr == lrs[-1]
    for step in (1, warmup // 2, warmup, 2 * warmup, 3 * warmup):
        expected = factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)
        assert lrs[step - 1] == pytest.approx(expected, rel=1e-12)
    # linear warm-up, peak at step = warmup with value factor / sqrt(d_model * warmup), then decay
    assert int(np.argmax(lrs)) + 1 == warmup
    assert max(lrs) == pytest.approx(factor / math.sqrt(d_model * warmup), rel=1e-12)
    assert lrs[warmup // 2 - 1] == pytest.approx(lrs[warmup - 1] / 2, rel=1e-12)
    assert lrs[4 * warmup // 2 - 1] == pytest.approx(lrs[warmup - 1] / math.sqrt(2), rel=1e-12)


def test_noam_schedule_paper_value_at_warmup():
    schedule = NoamSchedule(SGD([_param([0.0])]), d_model=512, warmup=4000)
    assert schedule.rate(4000) == pytest.approx(512 ** -0.5 * 4000 ** -0.5)  # ≈ 7.0e-4
    assert schedule.rate(4000) == pytest.approx(6.9877e-4, rel=1e-4)


def test_noam_state_round_trip():
    opt = SGD([_param([0.0])])
    schedule = NoamSchedule(opt, d_model=64, warmup=10)
    for _ in range(7):
        schedule.step()
    other_opt = SGD([_param([0.0])])
    other = NoamSchedule(other_opt, d_model=64, warmup=10)
    other.load_state_dict(schedule.state_dict())
    assert other.step() == schedule.step()
    with pytest.raises(ValueError, match="warmup"):
        NoamSchedule(SGD([_param([0.0])]), d_model=64, warmup=11).load_state_dict(schedule.state_dict())


def test_cooldown_is_flat_then_falls_in_a_straight_line_to_zero_at_the_end():
    assert [cooldown_factor(p, 0.0) for p in (0.0, 0.5, 1.0)] == [1.0, 1.0, 1.0]        # off: eq. 3 alone
    assert [cooldown_factor(p, 0.2) for p in (0.0, 0.5, 0.75)] == [1.0, 1.0, 1.0]       # before the last fifth
    assert cooldown_factor(0.8, 0.2) == pytest.approx(1.0, rel=1e-12)                    # where it starts
    assert [cooldown_factor(p, 0.2) for p in (0.85, 0.9, 0.95)] == pytest.approx([0.75, 0.5, 0.25], rel=1e-12)
    assert cooldown_factor(1.0, 0.2) == 0.0 and cooldown_factor(1.3, 0.2) == 0.0       # never below zero
    assert [cooldown_factor(p, 1.0) for p in (0.0, 0.25, 1.0)] == [1.0, 0.75, 0.0]       # the whole run


def test_clip_grad_norm_scales_by_the_global_norm():
    a, b, c = _param([0.0, 0.0]), _param([0.0]), _param([0.0])
    a.grad, b.grad = np.array([3.0, 0.0]), np.array([4.0])  # global norm 5; c has no gradient
    total = clip_grad_norm([a, b, c], max_norm=1.0)
    assert total == pytest.approx(5.0)
    np.testing.assert_allclose(a.grad, [0.6, 0.0], rtol=1e-5)
    np.testing.assert_allclose(b.grad, [0.8], rtol=1e-5)
    assert math.sqrt((a.grad ** 2).sum() + (b.grad ** 2).sum()) == pytest.approx(1.0, rel=1e-5)


def test_clip_grad_norm_leaves_small_gradients_alone():
    a = _param([0.0, 0.0])
    a.grad = np.array([0.3, 0.4])
    assert clip_grad_norm([a], max_norm=1.0) == pytest.approx(0.5)
    np.testing.assert_array_equal(a.grad, [0.3, 0.4])


def test_updates_keep_float32_parameters_float32(rng):
    p = mt.Tensor(rng.standard_normal(4).astype(np.float32), requires_grad=True)
    opt = Adam([p], lr=0.1)
    p.grad = rng.standard_normal(4).astype(np.float32)
    clip_grad_norm([p], 0.5)
    opt.step()
    assert p.data.dtype == np.float32 and opt.exp_avg[0].dtype == np.float32


@pytest.mark.gpu
def test_adam_runs_on_cupy(rng):
    start, grad = rng.standard_normal(5), rng.standard_normal(5)
    cpu = _param(start)
    gpu = mt.Tensor(start, requires_grad=True).to("cuda")
    gpu = mt.Tensor(gpu.data, requires_grad=True)
    for p in (cpu, gpu):
        opt = Adam([p], lr=0.01)
        p.grad = mt.backend.to_device(grad.copy(), p.device)
        opt.step()
        state = opt.state_dict()
        assert isinstance(state["exp_avg.0"], np.ndarray)
    np.testing.assert_allclose(gpu.numpy(), cpu.data, rtol=1e-12)


# -- the five equations, one parameter at a time ------------------------------------------------------
def _adam_one_parameter_at_a_time(params, grads_per_step, lr, betas=(0.9, 0.98), eps=1e-9):
    """Adam's five equations in NumPy, one parameter at a time, in the order of operations of
    ``Adam._update``: what Adam must reproduce bit for bit."""
    beta1, beta2 = betas
    data = [p.copy() for p in params]
    m, v = [np.zeros_like(p) for p in params], [np.zeros_like(p) for p in params]
    for t, grads in enumerate(grads_per_step, start=1):
        for i, g in enumerate(grads):
            if g is None:
                continue
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * (g * g)
            m_hat, v_hat = m[i] / (1 - beta1 ** t), v[i] / (1 - beta2 ** t)
            data[i] = data[i] - lr * m_hat / (np.sqrt(v_hat) + eps)
    return data, m, v


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adam_is_its_five_equations_bit_for_bit(rng, dtype):
    shapes = [(3, 4), (5,), (2, 3, 2), (1,), (0, 3), (40,)]
    start = [rng.standard_normal(s).astype(dtype) for s in shapes]
    # parameter 1 has no gradient in the first steps and parameter 3 none in the last ones
    grads = [[None if (i == 1 and t < 2) or (i == 3 and t > 3) else rng.standard_normal(s).astype(dtype)
              for i, s in enumerate(shapes)] for t in range(6)]
    params = [mt.Tensor(a.copy(), requires_grad=True) for a in start]
    opt = Adam(params, lr=0.01)
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = None if g is None else g.copy()
        opt.step()
    expected, m, v = _adam_one_parameter_at_a_time(start, grads, lr=0.01)
    for i, p in enumerate(params):
        assert p.data.dtype == dtype
        np.testing.assert_array_equal(p.data, expected[i])
        np.testing.assert_array_equal(opt.exp_avg[i], m[i])
        np.testing.assert_array_equal(opt.exp_avg_sq[i], v[i])


def test_adam_moments_of_a_parameter_without_steps_are_not_saved():
    a, b = _param([1.0]), _param([2.0])
    opt = Adam([a, b], lr=0.1)
    a.grad = np.array([1.0])
    opt.step()
    assert set(opt.state_dict()) == {"step", "lr", "exp_avg.0", "exp_avg_sq.0"}


def test_adam_updates_a_parameter_whose_array_was_replaced_or_cast(rng):
    """``p.data = new`` and Module.to(dtype) after the optimiser was made: the next step updates the new
    array, with the moments kept."""
    layer = mt.nn.Linear(3, 2)
    opt = Adam(layer.parameters(), lr=0.1)
    reference = [p.data.astype(np.float64) for p in layer.parameters()]
    steps = [[rng.standard_normal(p.shape) for p in layer.parameters()] for _ in range(3)]
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
    expected, _, _ = _adam_one_parameter_at_a_time(reference, steps, lr=0.1)
    for p, e in zip(layer.parameters(), expected):
        assert p.data.dtype == np.float64
        np.testing.assert_allclose(p.data, e, rtol=1e-6)   # the first step was in float32


def test_adam_step_counts_as_a_change_of_every_updated_parameter():
    layer = mt.nn.Linear(3, 2)
    opt = Adam(layer.parameters(), lr=0.1)
    loss = layer(mt.Tensor(np.ones((4, 3), dtype=np.float32))).sum()
    for p in layer.parameters():
        p.grad = np.ones_like(p.data)
    opt.step()
    with pytest.raises(RuntimeError, match="changed in place"):
        loss.backward()


def test_adam_parameters_of_several_dtypes_each_get_their_own_update(rng):
    a = mt.Tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    b = _param(rng.standard_normal(2))
    start = [a.data.copy(), b.data.copy()]
    opt = Adam([a, b], lr=0.1)
    grads = [[rng.standard_normal(3).astype(np.float32), rng.standard_normal(2)] for _ in range(2)]
    for step_grads in grads:
        a.grad, b.grad = step_grads
        opt.step()
    expected, _, _ = _adam_one_parameter_at_a_time(start, grads, lr=0.1)
    assert a.data.dtype == np.float32 and b.data.dtype == np.float64
    np.testing.assert_array_equal(a.data, expected[0])
    np.testing.assert_array_equal(b.data, expected[1])
