"""Inverted dropout (chapter 5, §5.4 "Residual Dropout").

During training each entry is kept with probability 1 − p and scaled by
1/(1 − p), so the expected value of every entry is unchanged:
E[y] = (1 − p)·x/(1 − p) = x. At evaluation time dropout is the identity and
nothing needs rescaling (that is what "inverted" buys).

The mask comes from a ``Generator`` (minitransformer/generator.py: seeded, on
the data's own device, with a state that checkpoints keep). What backward needs
is only which entries were kept, so the mask is kept as bool: a quarter of the
memory of a float32 mask. The models of the command line draw their masks with
fast/dropout.py's ``FastGenerator``: the same masks, faster.
"""
from __future__ import annotations

from ..generator import Generator
from ..tensor import Function, Tensor
from .checks import require_floating_point

_default_generator = Generator(0)   # what ``dropout`` draws from when it is given no generator


def set_dropout_seed(seed: int) -> None:
    """Restart the generator that ``dropout`` uses when it is given none."""
    _default_generator.seed(seed)


def default_generator() -> Generator:
    return _default_generator


class Dropout(Function):
    """y = x ⊙ keep / (1 − p), keep = [u ≥ p] with u ~ U[0, 1): 1 w.p. 1 − p, else 0."""

    def __init__(self, p: float, generator: Generator) -> None:
        self.p = p
        self.generator = generator

    def forward(self, x):
        keep = self.generator.keep(x.shape, self.p, like=x)   # bool, True w.p. 1 − p (uniform ≥ p)
        self.save_for_backward(keep)
        self.scale = x.dtype.type(1 / (1 - self.p))
        y = x * keep            # dropped entries become 0
        y *= self.scale         # kept ones are scaled by 1/(1 − p)
        return y

    def backward(self, gy):
        (keep,) = self.saved_arrays
        gx = gy * keep          # the same entries are dropped and scaled on the way back
        gx *= self.scale
        return gx


class DropoutAdd(Dropout):
    """x + dropout(y) as one Function: the residual connection of §5.4, "dropout to the output of each
    sub-layer, before it is added to the sub-layer input".

    Written as ``x + dropout(y)`` the dropped y is a node of its own, kept by the graph until backward
    reaches it; here it is written over by the sum at once, so each sub-layer keeps one (..., d_model)
    array less. The same mask and the same numbers: float addition commutes, so out + x is x + out.
    """

    def forward(self, x, y):
        out = super().forward(y)       # y ⊙ keep / (1 − p), a fresh array
        out += x                       # + the sub-layer's input, in place
        return out

    def backward(self, gy):
        return gy, super().backward(gy)    # ∂/∂x = 1; ∂/∂y is dropout's backward


def check_generator(function: str, generator) -> None:
    """A NumPy Generator or a seed in place of ours failed deep inside with 'unexpected keyword like'."""
    if generator is not None and not isinstance(generator, Generator):
        raise TypeError(f"{function}: generator must be a minitransformer Generator (F.Generator(seed)), "
                        f"got {type(generator).__name__}")


def dropout(x, p: float, training: bool = True, generator: Generator | None = None) -> Tensor:
    """Zero each entry of x with probability p and scale the rest by 1/(1 − p); identity if not training."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be a probability in [0, 1], got {p}")
    check_generator("dropout", generator)
    if not isinstance(x, Tensor):
        x = Tensor(x)
    if not training or p == 0.0:
        return x
    require_floating_point("dropout", x)   # an integer x would be scaled by int(1/(1 − p)) = 1
    if p == 1.0:
        return x * 0.0   # everything dropped (1/(1 − p) would be infinite)
    return Dropout(p, generator if generator is not None else _default_generator)(x)


def dropout_add(x, y, p: float, training: bool = True, generator: Generator | None = None) -> Tensor:
    """x + dropout(y, p), the residual connection of §5.4, in one Function when it can be (same shape and
    dtype, training, 0 < p < 1); otherwise exactly ``x + dropout(y, ...)``. The same mask either way."""
    x, y = (t if isinstance(t, Tensor) else Tensor(t) for t in (x, y))
    if not training or p in (0.0, 1.0) or x.shape != y.shape or x.dtype != y.dtype:
        return x + dropout(y, p, training, generator)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout_add: p must be a probability in [0, 1], got {p}")
    check_generator("dropout_add", generator)
    require_floating_point("dropout_add", y)
    return DropoutAdd(p, generator if generator is not None else _default_generator)(x, y)
