"""LSTM layers (chapter 6): the recurrent networks that attention was first added to.

``LSTMCell`` holds one cell's weights and runs it over a sequence (or one step); ``LSTM`` stacks
cells into layers, optionally bidirectional: a second cell reads each sentence from right to left,
and the two halves of every position are put side by side, as Bahdanau et al. (2015, §3.2) do
so that the annotation of word j "contains the summaries of both the preceding words and the
following words". The arithmetic of a step and its backward are ``functional/lstm.py``.

Weights follow our Linear's layout, (in, out): ``weight_x`` (input_size, 4H), ``weight_h`` (H, 4H)
and one ``bias`` (4H,), the four gates side by side in the order i, f, g, o (PyTorch's order; its two
biases b_ih + b_hh are our one bias).
"""
from __future__ import annotations

import math

from .. import backend
from ..functional.linear import linear
from ..functional.lstm import lstm
from ..ops.indexing import masked_fill
from ..ops.shape import concatenate
from ..tensor import Tensor
from . import init
from .dropout import Dropout
from .module import Module, ModuleList, Parameter


class LSTMCell(Module):
    """One LSTM cell of hidden size H. ``cell(x, (h, c))`` takes one step; ``cell.run`` a whole sequence.

    Initialised as PyTorch does, U(−1/√H, 1/√H), except the forget gate's bias, which starts at 1 so
    that a new cell keeps its memory until it learns otherwise (Gers et al., 2000; Jozefowicz et al., 2015).
    """

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        for name, value in (("input_size", input_size), ("hidden_size", hidden_size)):
            if int(value) != value or value < 1:
                raise ValueError(f"LSTMCell: {name} must be a positive integer, got {value!r}")
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        xp = backend.xp_for(backend.default_device())
        bound = 1 / math.sqrt(hidden_size)
        self.weight_x = Parameter(xp.empty((input_size, 4 * hidden_size), dtype="float32"))
        self.weight_h = Parameter(xp.empty((hidden_size, 4 * hidden_size), dtype="float32"))
        self.bias = Parameter(xp.empty(4 * hidden_size, dtype="float32"))
        for p in (self.weight_x, self.weight_h, self.bias):
            init.uniform(p, -bound, bound)
        self.bias.data[hidden_size:2 * hidden_size] = 1.0           # the forget gate f = σ(… + 1) ≈ 0.73

    def run(self, x: Tensor, state: Tensor | None = None, mask=None, reverse: bool = False) -> Tensor:
        """x (B, T, input_size) -> the state [h_t | c_t] after every step (B, T, 2H).

        ``state`` (B, 2H) = [h_0 | c_0], zeros by default; ``mask`` (B, T) bool, True at real tokens
        (a padded step keeps the state); ``reverse``: from the last position to the first.
        """
        _check_input("LSTMCell", x, 3, self.input_size)
        x_gates = linear(x, self.weight_x, self.bias)               # (B, T, 4H): every step's x W_x + b, one GEMM
        if state is None:
            state = self.zero_state(x.shape[0], x.dtype)
        return lstm(x_gates, state, self.weight_h, mask, reverse)

    def forward(self, x: Tensor, state: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        """One step: x (B, input_size), state (h, c) each (B, H) or None for zeros -> (h, c)."""
        _check_input("LSTMCell", x, 2, self.input_size)
        batch, hidden = x.shape[0], self.hidden_size
        joined = None if state is None else concatenate(list(state), axis=-1)      # [h | c] (B, 2H)
        states = self.run(x.reshape(batch, 1, self.input_size), joined)             # (B, 1, 2H)
        return states[:, 0, :hidden], states[:, 0, hidden:]

    def zero_state(self, batch: int, dtype=None) -> Tensor:
        """[h_0 | c_0] = 0 (B, 2H), on the cell's device."""
        xp = backend.xp_of(self.weight_h.data)
        return Tensor(xp.zeros((batch, 2 * self.hidden_size), dtype=dtype or self.weight_h.dtype))

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}"


class LSTM(Module):
    """``num_layers`` LSTM layers; with ``bidirectional`` each layer reads left to right and right to left.

    ``lstm(x, mask)`` with x (B, T, input_size) returns (outputs, states):

    * outputs (B, T, D·H), D = 2 when bidirectional: the top layer's h_t, the two directions side by
      side (left-to-right first); zero at padded positions;
    * states: the final state [h | c] (B, 2H) of every layer and direction, in the order
      (layer 0 →, layer 0 ←, layer 1 →, ...). "Final" is each row's own: after its last real token
      going right, after position 0 going left.

    ``dropout`` acts between layers (on every layer's output but the top's), as Zaremba et al. (2014) do.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bidirectional: bool = False,
                 dropout: float = 0.0) -> None:
        super().__init__()
        if int(num_layers) != num_layers or num_layers < 1:
            raise ValueError(f"LSTM: num_layers must be a positive integer, got {num_layers!r}")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, int(num_layers)
        self.directions = 2 if bidirectional else 1
        self.cells = ModuleList(LSTMCell(input_size if layer == 0 else self.directions * hidden_size, hidden_size)
                                for layer in range(self.num_layers) for _ in range(self.directions))
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, mask=None, states: list[Tensor] | None = None) -> tuple[Tensor, list[Tensor]]:
        _check_input("LSTM", x, 3, self.input_size)
        if states is not None and len(states) != len(self.cells):
            raise ValueError(f"LSTM: states must hold one [h | c] per layer and direction ({len(self.cells)}), "
                             f"got {len(states)}")
        mask = _device_mask(mask, x)
        hidden, finals = self.hidden_size, []
        for layer in range(self.num_layers):
            if layer > 0:
                x = self.dropout(x)                                  # between layers only
            outputs = []
            for direction in range(self.directions):
                index = layer * self.directions + direction
                reverse = direction == 1
                run = self.cells[index].run(x, None if states is None else states[index], mask, reverse)   # (B, T, 2H)
                outputs.append(run[:, :, :hidden])                   # h_t
                finals.append(run[:, 0] if reverse else run[:, -1])  # the state after the last step taken
            x = outputs[0] if self.directions == 1 else concatenate(outputs, axis=-1)     # (B, T, D·H)
        if mask is not None:
            x = masked_fill(x, ~mask[:, :, None], 0.0)               # padded positions carry no output
        return x, finals

    def extra_repr(self) -> str:
        extra = ", bidirectional=True" if self.directions == 2 else ""
        return f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}{extra}, dropout={self.dropout.p}"


def _check_input(name: str, x, ndim: int, size: int) -> None:
    shape = "(B, T, input_size)" if ndim == 3 else "(B, input_size)"
    if not isinstance(x, Tensor) or x.ndim != ndim or x.shape[-1] != size:
        got = f"shape {tuple(x.shape)}" if hasattr(x, "shape") else type(x).__name__
        raise ValueError(f"{name}: expected x of shape {shape} with input_size {size}, got {got}")
    if x.ndim == 3 and x.shape[1] == 0:
        raise ValueError(f"{name}: the sequence is empty (shape {tuple(x.shape)}); it needs at least one step")


def _device_mask(mask, x: Tensor):
    """A (B, T) boolean mask on x's device, or None."""
    if mask is None:
        return None
    mask = mask.data if isinstance(mask, Tensor) else mask
    if not backend.is_array(mask):
        mask = backend.xp_for("cpu").asarray(mask)
    if mask.dtype != bool or mask.shape != tuple(x.shape[:2]):
        raise ValueError(f"LSTM: mask must be a boolean (B, T) array, True at real tokens, for x of shape "
                         f"{tuple(x.shape)}; got shape {tuple(mask.shape)} and dtype {mask.dtype}")
    return backend.to_device(mask, x.device)
