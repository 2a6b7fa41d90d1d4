"""The LSTM (chapter 6): the fused sequence Function against the cell written with engine ops, float64
gradchecks of the Function and the layers, padding, and clear errors."""
from __future__ import annotations

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F
import minitransformer.nn as nn

LENGTHS = np.array([4, 2, 1])
MASK = np.arange(4)[None, :] < LENGTHS[:, None]            # (B, T) = (3, 4): True at real tokens


def leaf(rng, *shape):
    return mt.Tensor(rng.standard_normal(shape), requires_grad=True)


def composed_lstm(x_gates, state, weight_h, mask=None, reverse=False):
    """The same recurrence as F.lstm, one step at a time with engine ops: the readable reference."""
    hidden = weight_h.shape[0]
    steps = range(x_gates.shape[1] - 1, -1, -1) if reverse else range(x_gates.shape[1])
    states, previous = {}, state
    for t in steps:
        z = x_gates[:, t] + previous[:, :hidden] @ weight_h
        i, f = z[:, :hidden].sigmoid(), z[:, hidden:2 * hidden].sigmoid()
        g, o = z[:, 2 * hidden:3 * hidden].tanh(), z[:, 3 * hidden:].sigmoid()
        c = f * previous[:, hidden:] + i * g
        new = mt.concatenate([o * c.tanh(), c], axis=1)
        if mask is not None:
            new = mt.where(mask[:, t, None], new, previous)      # a padded step keeps the state
        states[t] = previous = new
    return mt.stack([states[t] for t in range(x_gates.shape[1])], axis=1)


# -- the Function ----------------------------------------------------------------------------------
@pytest.mark.parametrize("reverse", [False, True], ids=["left-to-right", "right-to-left"])
@pytest.mark.parametrize("mask", [None, MASK], ids=["full", "padded"])
def test_fused_lstm_equals_the_composed_cell_in_values_and_gradients(rng, mask, reverse):
    inputs = [leaf(rng, 3, 4, 8), leaf(rng, 3, 4), leaf(rng, 2, 8)]          # H = 2
    upstream = rng.standard_normal((3, 4, 4))
    fused = F.lstm(*inputs, mask=mask, reverse=reverse)
    fused.backward(upstream)
    fused_grads = [t.grad for t in inputs]
    for t in inputs:
        t.grad = None
    composed = composed_lstm(*inputs, mask=mask, reverse=reverse)
    composed.backward(upstream)
    np.testing.assert_allclose(fused.data, composed.data, rtol=1e-12, atol=1e-14)
    for name, a, t in zip(("x_gates", "state", "weight_h"), fused_grads, inputs):
        np.testing.assert_allclose(a, t.grad, rtol=1e-10, atol=1e-13, err_msg=name)


@pytest.mark.parametrize("reverse", [False, True], ids=["left-to-right", "right-to-left"])
@pytest.mark.parametrize("mask", [None, MASK], ids=["full", "padded"])
def test_lstm_function_gradcheck(rng, mask, reverse):
    inputs = [leaf(rng, 3, 4, 12), leaf(rng, 3, 6), leaf(rng, 3, 12)]        # H = 3
    assert mt.gradcheck(lambda x, s, w: F.lstm(x, s, w, mask, reverse), inputs)


def test_a_padded_step_keeps_the_state_and_the_last_state_is_each_rows_own(rng):
    x_gates, state, weight_h = leaf(rng, 3, 4, 8), leaf(rng, 3, 4), leaf(rng, 2, 8)
    states = F.lstm(x_gates, state, weight_h, MASK).data
    for row, n in enumerate(LENGTHS):
        alone = F.lstm(x_gates[row:row + 1, :n], state[row:row + 1], weight_h).data[0]
        np.testing.assert_allclose(states[row, :n], alone, rtol=1e-13)
        np.testing.assert_array_equal(states[row, n:], np.broadcast_to(states[row, n - 1], (4 - n, 4)))   # kept
    backwards = F.lstm(x_gates, state, weight_h, MASK, reverse=True).data
    for row, n in enumerate(LENGTHS):                       # right to left: starts at the row's last token
        alone = F.lstm(x_gates[row:row + 1, :n], state[row:row + 1], weight_h, reverse=True).data[0]
        np.testing.assert_allclose(backwards[row, :n], alone, rtol=1e-13)


def test_the_state_holds_h_then_c_and_h_is_o_times_tanh_c(rng):
    x_gates, state, weight_h = leaf(rng, 1, 1, 8), leaf(rng, 1, 4), leaf(rng, 2, 8)
    out = F.lstm(x_gates, state, weight_h).data[0, 0]
    z = x_gates.data[0, 0] + state.data[0, :2] @ weight_h.data
    sigmoid = lambda a: 1 / (1 + np.exp(-a))                # noqa: E731
    i, f, g, o = sigmoid(z[:2]), sigmoid(z[2:4]), np.tanh(z[4:6]), sigmoid(z[6:])
    c = f * state.data[0, 2:] + i * g
    np.testing.assert_allclose(out, np.concatenate([o * np.tanh(c), c]), rtol=1e-13)


@pytest.mark.parametrize("call,message", [
    (lambda r: F.lstm(leaf(r, 2, 3, 7), leaf(r, 2, 4), leaf(r, 2, 8)), r"x_gates must be \(B, T, 4H\) = \(B, T, 8\)"),
    (lambda r: F.lstm(leaf(r, 2, 3, 8), leaf(r, 2, 3), leaf(r, 2, 8)), r"state must be \(B, 2H\) = \(2, 4\)"),
    (lambda r: F.lstm(leaf(r, 2, 3, 8), leaf(r, 2, 4), leaf(r, 8, 2)), r"weight_h must be \(H, 4H\)"),
    (lambda r: F.lstm(leaf(r, 2, 0, 8), leaf(r, 2, 4), leaf(r, 2, 8)), r"the sequence is empty"),
    (lambda r: F.lstm(leaf(r, 2, 3, 8), leaf(r, 2, 4), leaf(r, 2, 8), mask=np.ones((2, 4), bool)),
     r"mask must be \(B, T\) = \(2, 3\)"),
    (lambda r: F.lstm(leaf(r, 2, 3, 8), leaf(r, 2, 4), leaf(r, 2, 8), mask=np.ones((2, 3))),
     r"mask must be a boolean array"),
], ids=["gates", "state", "weight", "empty", "mask-shape", "mask-dtype"])
def test_wrong_shapes_are_named(rng, call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call(rng)


# -- the layers --------------------------------------------------------------------------------------
def test_lstm_cell_one_step_equals_the_formulas_and_a_run_equals_its_steps(rng):
    nn.init.set_seed(0)
    cell = nn.LSTMCell(3, 2).to(np.float64)
    x = rng.standard_normal((4, 5, 3))
    h, c = mt.Tensor(np.zeros((4, 2))), mt.Tensor(np.zeros((4, 2)))
    stepped = []
    for t in range(5):
        h, c = cell(mt.Tensor(x[:, t]), (h, c))
        stepped.append(np.concatenate([h.data, c.data], axis=1))
    np.testing.assert_allclose(cell.run(mt.Tensor(x)).data, np.stack(stepped, axis=1), rtol=1e-12)
    assert cell.bias.data[2:4].tolist() == [1.0, 1.0]         # the forget gate starts open (bias 1)


def test_lstm_cell_gradcheck_on_input_state_and_weights(rng):
    nn.init.set_seed(0)
    cell = nn.LSTMCell(3, 2).to(np.float64)
    x, h, c = leaf(rng, 2, 3), leaf(rng, 2, 2), leaf(rng, 2, 2)
    assert mt.gradcheck(lambda x, h, c, *params: mt.concatenate(list(cell(x, (h, c))), axis=1),
                        [x, h, c, *cell.parameters()])


@pytest.mark.parametrize("bidirectional", [False, True], ids=["one-way", "bidirectional"])
def test_stacked_lstm_with_padding_gradcheck(rng, bidirectional):
    nn.init.set_seed(0)
    layer = nn.LSTM(3, 2, num_layers=2, bidirectional=bidirectional).to(np.float64)
    x = leaf(rng, 3, 4, 3)

    def run(x, *params):
        outputs, states = layer(x, MASK)
        return mt.concatenate([outputs.reshape(3, -1)] + states, axis=1)

    top = layer.cells[-1]
    assert mt.gradcheck(run, [x, layer.cells[0].weight_x, top.weight_h, top.bias])


def test_bidirectional_outputs_put_both_directions_side_by_side_and_zero_the_padding(rng):
    nn.init.set_seed(0)
    layer = nn.LSTM(3, 2, bidirectional=True).to(np.float64)
    x = mt.Tensor(rng.standard_normal((3, 4, 3)))
    outputs, states = layer(x, MASK)
    forward = layer.cells[0].run(x, mask=MASK).data[..., :2]
    backward = layer.cells[1].run(x, mask=MASK, reverse=True).data[..., :2]
    np.testing.assert_allclose(outputs.data, np.concatenate([forward, backward], -1) * MASK[..., None], rtol=1e-13)
    assert np.all(outputs.data[~MASK] == 0)
    np.testing.assert_allclose(states[1].data[:, :2], backward[:, 0], rtol=1e-13)     # ← ends at position 0


def test_a_sentence_gives_the_same_outputs_alone_and_padded_in_a_batch(rng):
    nn.init.set_seed(0)
    layer = nn.LSTM(3, 2, num_layers=2, bidirectional=True).to(np.float64)
    x = rng.standard_normal((3, 4, 3))
    outputs, states = layer(mt.Tensor(x), MASK)
    x[~MASK] = 100.0                                         # padding can hold anything
    changed, _ = layer(mt.Tensor(x), MASK)
    np.testing.assert_array_equal(changed.data, outputs.data)
    for row, n in enumerate(LENGTHS):
        alone, alone_states = layer(mt.Tensor(x[row:row + 1, :n]))
        np.testing.assert_allclose(outputs.data[row, :n], alone.data[0], rtol=1e-12)
        for batched, single in zip(states, alone_states):
            np.testing.assert_allclose(batched.data[row], single.data[0], rtol=1e-12)


def test_lstm_layers_name_bad_input(rng):
    layer = nn.LSTM(3, 2)
    with pytest.raises(ValueError, match=r"LSTM: expected x of shape \(B, T, input_size\) with input_size 3"):
        layer(mt.Tensor(np.zeros((2, 4, 5), np.float32)))
    with pytest.raises(ValueError, match=r"LSTM: mask must be a boolean \(B, T\) array"):
        layer(mt.Tensor(np.zeros((2, 4, 3), np.float32)), mask=np.ones((2, 3), bool))
    with pytest.raises(ValueError, match=r"LSTM: states must hold one \[h \| c\] per layer and direction \(1\)"):
        layer(mt.Tensor(np.zeros((2, 4, 3), np.float32)), states=[])
    with pytest.raises(ValueError, match=r"LSTMCell: hidden_size must be a positive integer, got 0"):
        nn.LSTMCell(3, 0)
    with pytest.raises(ValueError, match=r"LSTM: num_layers must be a positive integer, got 0"):
        nn.LSTM(3, 2, num_layers=0)
