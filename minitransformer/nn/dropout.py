"""Dropout module (§5.4 "Residual Dropout"): active in train(), the identity in eval()."""
from __future__ import annotations

from ..fast.dropout import FastGenerator
from ..functional.dropout import dropout, dropout_add
from ..tensor import Tensor
from . import init
from .module import Module


class Dropout(Module):
    """Inverted dropout with its own generator, seeded from the init generator (reproducible models).

    The generator is fast/dropout.py's ``FastGenerator``: the masks of the plain ``Generator``, drawn faster.
    """

    def __init__(self, p: float = 0.1, seed: int | None = None) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be a probability in [0, 1], got {p}")
        self.p = p
        self.generator = FastGenerator(init.next_seed() if seed is None else seed)

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training, self.generator)

    def residual(self, x: Tensor, y: Tensor) -> Tensor:
        """x + Dropout(y), the residual connection of §5.4, as one Function (``F.dropout_add``)."""
        return dropout_add(x, y, self.p, self.training, self.generator)

    def extra_repr(self) -> str:
        return f"p={self.p}"
