"""The LSTM (Hochreiter & Schmidhuber, 1997; with the forget gate of Gers et al., 2000) over a whole
sequence, as ONE Function (chapter 6).

One step of the cell, for B rows with hidden size H. The input's share of the gates, x_t W_x + b, is
computed for every step at once by the caller (one GEMM); the step adds the recurrent share:

    z   = (x_t W_x + b) + h_{t−1} W_h                         (B, 4H), in the gate order i, f, g, o
    i, f, o = σ(z_i), σ(z_f), σ(z_o)                          input, forget and output gates
    g   = tanh(z_g)                                           the candidate cell content
    c_t = f ⊙ c_{t−1} + i ⊙ g                                 keep some of the old cell, write some new
    h_t = o ⊙ tanh(c_t)                                       what the cell shows

Backward through one step, from g_h = ∂L/∂h_t and g_c = ∂L/∂c_t (both come from the next step, and
g_h also from the layer above or the output):

    g_c ← g_c + g_h ⊙ o ⊙ (1 − tanh² c_t)                     c_t reaches L through h_t as well
    g_zi = g_c ⊙ g ⊙ i(1 − i)        g_zf = g_c ⊙ c_{t−1} ⊙ f(1 − f)
    g_zg = g_c ⊙ i ⊙ (1 − g²)        g_zo = g_h ⊙ tanh c_t ⊙ o(1 − o)
    g_{c_{t−1}} = g_c ⊙ f            g_{h_{t−1}} = g_z W_hᵀ
    g_(x_t W_x + b) = g_z            g_W_h = Σ_t h_{t−1}ᵀ g_z,t

(σ' = σ(1 − σ), tanh' = 1 − tanh².) Backpropagation through time is this step run from the last
position to the first, each step handing g_{h_{t−1}} and g_{c_{t−1}} to the one before. The whole
sequence is one Function, so the graph holds one node per layer and direction instead of a dozen per
step, and g_W_h is one GEMM over all steps at the end.

The Function has one output, so the state travels as one array: s_t = [h_t | c_t] (B, 2H). A decoder
that takes one step at a time calls it with T = 1.

Padding. ``mask`` (B, T) is True at real tokens. At a padded step a row keeps its state unchanged,
s_t = s_{t−1}, and its gradient passes straight through to s_{t−1}. So the state after the last step
is, for every row, the state after its own last token; and a ``reverse`` pass (right to left, for the
backward half of a bidirectional layer) starts each row at its own last token.
"""
from __future__ import annotations

from ..backend import xp_of
from ..ops.elementwise import sigmoid_array
from ..tensor import Function, Tensor
from .checks import require_boolean_mask, require_floating_point


def cell_forward(z, c_prev):
    """One step from the gates' pre-activations z (B, 4H) and c_{t−1} (B, H).

    Returns (gates (B, 4H) = [i | f | g | o] after their nonlinearities, tanh c_t, h_t, c_t)."""
    hidden = c_prev.shape[-1]
    gates = sigmoid_array(z)                                              # i, f and o: σ
    gates[:, 2 * hidden:3 * hidden] = xp_of(z).tanh(z[:, 2 * hidden:3 * hidden])   # g: tanh
    i, f, g, o = _split(gates, hidden)
    c = f * c_prev
    c += i * g                                                            # c_t = f ⊙ c_{t−1} + i ⊙ g
    tanh_c = xp_of(c).tanh(c)
    return gates, tanh_c, o * tanh_c, c                                   # h_t = o ⊙ tanh c_t


def cell_backward(gates, c_prev, tanh_c, g_h, g_c):
    """Gradients of one step: (g_z (B, 4H), g_{c_{t−1}} (B, H)) from g_h = ∂L/∂h_t and g_c = ∂L/∂c_t."""
    hidden = c_prev.shape[-1]
    i, f, g, o = _split(gates, hidden)
    g_z = xp_of(gates).empty_like(gates)
    g_c = g_c + g_h * o * (1 - tanh_c * tanh_c)                          # c_t also reaches L through h_t
    g_z[:, :hidden] = g_c * g * i * (1 - i)                               # input gate, through σ
    g_z[:, hidden:2 * hidden] = g_c * c_prev * f * (1 - f)                # forget gate, through σ
    g_z[:, 2 * hidden:3 * hidden] = g_c * i * (1 - g * g)                 # candidate, through tanh
    g_z[:, 3 * hidden:] = g_h * tanh_c * o * (1 - o)                      # output gate, through σ
    return g_z, g_c * f                                                   # g_{c_{t−1}} = g_c ⊙ f


def _split(gates, hidden: int):
    return (gates[:, :hidden], gates[:, hidden:2 * hidden], gates[:, 2 * hidden:3 * hidden],
            gates[:, 3 * hidden:])


class LSTMFunction(Function):
    """x_gates (B, T, 4H) = x W_x + b, state (B, 2H) = [h_0 | c_0], weight_h (H, 4H) -> states (B, T, 2H).

    ``states[:, t]`` is [h_t | c_t] after step t, in the input's order also when ``reverse`` (then
    step T−1 runs first and ``states[:, 0]`` is the last). ``mask`` (B, T) bool: True at real tokens.
    """

    def __init__(self, mask=None, reverse: bool = False) -> None:
        self.mask = mask.data if isinstance(mask, Tensor) else mask
        self.reverse = bool(reverse)

    def _order(self, length: int) -> range:
        return range(length - 1, -1, -1) if self.reverse else range(length)

    def forward(self, x_gates, state, weight_h):
        _check_shapes(x_gates, state, weight_h, self.mask)
        xp = xp_of(x_gates)
        batch, length, _ = x_gates.shape
        hidden = weight_h.shape[0]
        # time-major buffers: one step's rows are contiguous
        gates = xp.empty((length, batch, 4 * hidden), dtype=x_gates.dtype)
        tanh_c = xp.empty((length, batch, hidden), dtype=x_gates.dtype)
        states = xp.empty((length, batch, 2 * hidden), dtype=x_gates.dtype)
        previous = state
        for t in self._order(length):
            z = x_gates[:, t] + previous[:, :hidden] @ weight_h                # (B, 4H)
            gates[t], tanh_c[t], h, c = cell_forward(z, previous[:, hidden:])
            states[t, :, :hidden], states[t, :, hidden:] = h, c
            if self.mask is not None:                                          # padding: keep the state
                xp.copyto(states[t], previous, where=~self.mask[:, t, None])
            previous = states[t]
        self.save_for_backward(gates, tanh_c, states, state, weight_h)
        return xp.ascontiguousarray(states.transpose(1, 0, 2))                # (B, T, 2H)

    def backward(self, g_states):
        gates, tanh_c, states, state, weight_h = self.saved_arrays
        xp = xp_of(g_states)
        length, batch, hidden = tanh_c.shape
        g_x = xp.empty((length, batch, 4 * hidden), dtype=g_states.dtype)     # = g_z of every step
        g_carry = xp.zeros_like(state)                                         # ∂L/∂s_t from later steps
        order = list(self._order(length))
        for n in range(length - 1, -1, -1):                                    # backpropagation through time
            t = order[n]
            previous = states[order[n - 1]] if n > 0 else state               # s_{t−1}, the state step t read
            g_state = g_states[:, t] + g_carry                                 # (B, 2H) = [g_h | g_c]
            g_z, g_c_previous = cell_backward(gates[t], previous[:, hidden:], tanh_c[t],
                                              g_state[:, :hidden], g_state[:, hidden:])
            g_h_previous = g_z @ weight_h.T                                    # through z = … + h_{t−1} W_h
            g_carry = xp.concatenate([g_h_previous, g_c_previous], axis=1)
            if self.mask is not None:                                          # a padded step passed s on
                g_z *= self.mask[:, t, None]                                   # no gradient into its gates
                xp.copyto(g_carry, g_state, where=~self.mask[:, t, None])
            g_x[t] = g_z
        g_weight_h = None
        if self.inputs[2].requires_grad:                                       # Σ_t h_{t−1}ᵀ g_z,t: one GEMM
            h_previous = _previous_hidden(states, state, hidden, self.reverse)  # (T, B, H)
            g_weight_h = h_previous.reshape(-1, hidden).T @ g_x.reshape(-1, 4 * hidden)
        return g_x.transpose(1, 0, 2), g_carry, g_weight_h


def _previous_hidden(states, state, hidden: int, reverse: bool):
    """h_{t−1} of every step t, time-major (T, B, H): the state each step read."""
    xp = xp_of(states)
    first = state[None, :, :hidden]
    if reverse:                                   # step t read the state of step t + 1
        return xp.concatenate([states[1:, :, :hidden], first], axis=0)
    return xp.concatenate([first, states[:-1, :, :hidden]], axis=0)


def lstm(x_gates, state, weight_h, mask=None, reverse: bool = False) -> Tensor:
    """Run the LSTM over a sequence; returns the state [h_t | c_t] after every step (B, T, 2H).

    x_gates (B, T, 4H): the input's share of the gates, x W_x + b, gates in the order i, f, g, o;
    state (B, 2H) = [h_0 | c_0]; weight_h (H, 4H); ``mask`` (B, T) bool, True at real tokens (a
    padded step keeps the state); ``reverse`` runs from the last position to the first.
    """
    return LSTMFunction(mask, reverse)(x_gates, state, weight_h)


def _check_shapes(x_gates, state, weight_h, mask) -> None:
    """Clear errors for the shapes that are easy to get wrong with three arrays and a mask."""
    if weight_h.ndim != 2 or weight_h.shape[1] != 4 * weight_h.shape[0]:
        raise ValueError(f"lstm: weight_h must be (H, 4H), one column block per gate (i, f, g, o); got shape "
                         f"{weight_h.shape}")
    hidden = weight_h.shape[0]
    if x_gates.ndim != 3 or x_gates.shape[2] != 4 * hidden:
        raise ValueError(f"lstm: x_gates must be (B, T, 4H) = (B, T, {4 * hidden}) for hidden size {hidden}; "
                         f"got shape {x_gates.shape}")
    if x_gates.shape[1] == 0:
        raise ValueError(f"lstm: the sequence is empty (x_gates of shape {x_gates.shape}); it needs at least "
                         "one step")
    if state.shape != (x_gates.shape[0], 2 * hidden):
        raise ValueError(f"lstm: state must be (B, 2H) = ({x_gates.shape[0]}, {2 * hidden}), [h | c] side by "
                         f"side; got shape {state.shape}")
    require_floating_point("lstm", x_gates)
    if mask is not None:
        require_boolean_mask("lstm", mask, x_gates, "True at real tokens")
        if mask.shape != x_gates.shape[:2]:
            raise ValueError(f"lstm: mask must be (B, T) = {x_gates.shape[:2]}, like the ids; got shape {mask.shape}")
