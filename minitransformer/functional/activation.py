"""Activations. ReLU is the one the Transformer uses: FFN(x) = max(0, xW₁ + b₁)W₂ + b₂ (§3.3, eq. 2).

The Function itself (``ReLU``, backward = gy where x > 0) lives with the engine's
elementwise ops; it is re-exported here so models can write ``F.relu``.
"""
from __future__ import annotations

from ..ops.elementwise import ReLU, relu

__all__ = ["ReLU", "relu"]
