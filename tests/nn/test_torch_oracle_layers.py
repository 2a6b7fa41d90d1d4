"""PyTorch as an independent oracle for values and gradients (skipped when torch is absent)."""
from __future__ import annotations

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F
import minitransformer.nn as nn

torch = pytest.importorskip("torch")


def both(array):
    """The same float64 values as a minitransformer leaf and a torch leaf."""
    return mt.Tensor(array.copy(), requires_grad=True), torch.tensor(array, requires_grad=True)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_family_matches_torch(rng, name):
    x = rng.standard_normal((3, 4, 5))
    upstream = rng.standard_normal((3, 4, 5))
    ours, theirs = both(x)
    y = getattr(F, name)(ours, axis=1)
    y.backward(upstream)
    ty = getattr(torch, name)(theirs, dim=1)
    ty.backward(torch.tensor(upstream))
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(ours.grad, theirs.grad.numpy(), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_matches_torch_where_the_distributions_agree(rng, smoothing):
    # Without ignore_index both spread ε over all V classes; with ε = 0 padding handling agrees too.
    x = rng.standard_normal((6, 7))
    targets = np.array([0, 3, 6, 2, 2, 5])
    ignore = 2 if smoothing == 0 else None
    ours, theirs = both(x)
    loss = F.cross_entropy(ours, targets, smoothing, ignore)
    loss.backward()
    tloss = torch.nn.functional.cross_entropy(theirs, torch.tensor(targets), label_smoothing=smoothing,
                                              ignore_index=-100 if ignore is None else ignore)
    tloss.backward()
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-12)
    np.testing.assert_allclose(ours.grad, theirs.grad.numpy(), rtol=1e-10, atol=1e-14)


def test_smoothed_cross_entropy_with_padding_matches_torch_on_the_explicit_distribution(rng):
    # Our choice: ε spread over the V − 1 non-pad classes. Give torch that distribution as soft targets.
    vocab, pad, eps = 6, 0, 0.1
    x = rng.standard_normal((5, vocab))
    targets = np.array([1, 0, 5, 3, 0])
    valid = targets != pad
    q = np.full((5, vocab), eps / (vocab - 1))
    q[:, pad] = 0
    q[np.arange(5), targets] += 1 - eps
    ours, theirs = both(x)
    loss = F.cross_entropy(ours, targets, eps, ignore_index=pad)
    loss.backward()
    tloss = torch.nn.functional.cross_entropy(theirs[torch.tensor(valid)], torch.tensor(q[valid]))
    tloss.backward()
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-12)
    np.testing.assert_allclose(ours.grad, theirs.grad.numpy(), rtol=1e-10, atol=1e-14)


def test_layer_norm_matches_torch(rng):
    x, w, b = rng.standard_normal((2, 3, 8)), rng.standard_normal(8), rng.standard_normal(8)
    upstream = rng.standard_normal((2, 3, 8))
    (ox, tx), (ow, tw), (ob, tb) = both(x), both(w), both(b)
    y = F.layer_norm(ox, ow, ob, eps=1e-5)
    y.backward(upstream)
    ty = torch.nn.functional.layer_norm(tx, (8,), tw, tb, eps=1e-5)
    ty.backward(torch.tensor(upstream))
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    for ours, theirs in ((ox, tx), (ow, tw), (ob, tb)):
        np.testing.assert_allclose(ours.grad, theirs.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_linear_matches_torch(rng):
    layer = nn.Linear(5, 4).to(np.float64)
    layer.bias.data = rng.standard_normal(4)
    x = rng.standard_normal((2, 3, 5))
    upstream = rng.standard_normal((2, 3, 4))
    ox, tx = both(x)
    y = layer(ox)
    y.backward(upstream)
    tw = torch.tensor(layer.weight.data.T.copy(), requires_grad=True)   # torch stores (out, in)
    tb = torch.tensor(layer.bias.data.copy(), requires_grad=True)
    ty = torch.nn.functional.linear(tx, tw, tb)
    ty.backward(torch.tensor(upstream))
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(ox.grad, tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(layer.weight.grad, tw.grad.numpy().T, rtol=1e-12)
    np.testing.assert_allclose(layer.bias.grad, tb.grad.numpy(), rtol=1e-12)


def test_bidirectional_lstm_over_a_padded_batch_matches_torch_packed_sequences(rng):
    """Our gate order (i, f, g, o) and weight layout are PyTorch's, transposed; its two biases are our one."""
    nn.init.set_seed(0)
    ours = nn.LSTM(4, 3, num_layers=2, bidirectional=True).to(np.float64)
    theirs = torch.nn.LSTM(4, 3, num_layers=2, bidirectional=True, batch_first=True).double()
    with torch.no_grad():
        for index, cell in enumerate(ours.cells):
            suffix = f"_l{index // 2}" + ("_reverse" if index % 2 else "")
            getattr(theirs, "weight_ih" + suffix).copy_(torch.tensor(cell.weight_x.data.T))
            getattr(theirs, "weight_hh" + suffix).copy_(torch.tensor(cell.weight_h.data.T))
            getattr(theirs, "bias_ih" + suffix).copy_(torch.tensor(cell.bias.data))
            getattr(theirs, "bias_hh" + suffix).zero_()
    lengths = np.array([5, 3, 1])
    mask = np.arange(5)[None, :] < lengths[:, None]
    x = rng.standard_normal((3, 5, 4))
    upstream = rng.standard_normal((3, 5, 6))
    ox, tx = both(x)
    outputs, states = ours(ox, mask)
    (outputs * mt.Tensor(upstream)).sum().backward()
    packed = torch.nn.utils.rnn.pack_padded_sequence(tx, torch.tensor(lengths), batch_first=True,
                                                     enforce_sorted=False)
    t_packed, (t_h, t_c) = theirs(packed)
    t_outputs, _ = torch.nn.utils.rnn.pad_packed_sequence(t_packed, batch_first=True, total_length=5)
    (t_outputs * torch.tensor(upstream)).sum().backward()
    np.testing.assert_allclose(outputs.numpy(), t_outputs.detach().numpy(), rtol=1e-10, atol=1e-14)
    for k, state in enumerate(states):                      # (layer 0 →, layer 0 ←, layer 1 →, layer 1 ←)
        np.testing.assert_allclose(state.numpy(), torch.cat([t_h[k], t_c[k]], 1).detach().numpy(),
                                   rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(ox.grad, tx.grad.numpy(), rtol=1e-9, atol=1e-13)
    for index, cell in enumerate(ours.cells):
        suffix = f"_l{index // 2}" + ("_reverse" if index % 2 else "")
        np.testing.assert_allclose(cell.weight_h.grad, getattr(theirs, "weight_hh" + suffix).grad.numpy().T,
                                   rtol=1e-9, atol=1e-13)
        np.testing.assert_allclose(cell.bias.grad, getattr(theirs, "bias_ih" + suffix).grad.numpy(),
                                   rtol=1e-9, atol=1e-13)
