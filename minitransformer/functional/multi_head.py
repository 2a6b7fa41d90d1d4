"""Multi-head attention's stateless parts (§3.2.2, chapter 7): heads cut out and merged, and eq. 1 on the
packed projections.

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,   head_i = Attention(Q W^Q_i, K W^K_i, V W^V_i)

The h per-head projections sit side by side in one matrix, so a projection (B, T, h·d_k) holds every
head; ``split_heads`` cuts its feature axis into heads and ``merge_heads`` is the Concat. In training,
``nn.MultiHeadAttention`` projects Q, K and V with ONE GEMM and hands the packed result to
``PackedAttention``, which cuts the parts and heads out as views, runs eq. 1 and returns its gradient in
the same packed layout. The layer, with its four projections, is nn/attention.py.
"""
from __future__ import annotations

from ..backend import xp_of
from ..tensor import Tensor
from .attention import ScaledDotProductAttention
from .dropout import Generator


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """(B, T, h·d_k) -> (B, h, T, d_k): cut the feature axis into h heads, heads before time.

    Works on a Tensor and, the same way, on a raw array (``PackedAttention`` below), giving a view.
    """
    batch, length, width = x.shape
    # Exercise 7.1 — splitting and merging heads (chapters/07-multi-head.md; graded by pytest -m ex_7_1)
    ### BEGIN SOLUTION
    x = x.reshape(batch, length, n_heads, width // n_heads)      # (B, T, h, d_k)
    return x.transpose(0, 2, 1, 3)                               # (B, h, T, d_k)
    ### END SOLUTION


def merge_heads(x: Tensor) -> Tensor:
    """(B, h, T, d_k) -> (B, T, h·d_k): the Concat(head_1, ..., head_h) of §3.2.2 (a Tensor or an array)."""
    batch, n_heads, length, d_k = x.shape
    # Exercise 7.1 — splitting and merging heads (chapters/07-multi-head.md; graded by pytest -m ex_7_1)
    ### BEGIN SOLUTION
    x = x.transpose(0, 2, 1, 3)                                  # (B, T, h, d_k)
    return x.reshape(batch, length, n_heads * d_k)               # (B, T, h·d_k)
    ### END SOLUTION


class PackedAttention(ScaledDotProductAttention):
    """Multi-head attention on projections whose heads are not cut apart yet: one Function.

    Self-attention takes ONE input, qkv (B, T, 3·h·d_k): the Q, K and V projections side by side, made
    by one GEMM with W^Q, W^K and W^V concatenated. Cross-attention takes q (B, T, h·d_k) and
    kv (B, S, 2·h·d_k). Forward cuts the parts and their heads out with ``split_heads`` (views, no
    copy), runs eq. 1 (the parent class) and merges the heads of the output with ``merge_heads``:
    (B, T, h·d_v), ready for W^O. Backward returns one gradient per packed input, in the packed
    layout, so each projection's backward is one GEMM as well.
    """

    def __init__(self, n_heads: int, mask=None, dropout_p: float = 0.0, training: bool = False,
                 generator: Generator | None = None) -> None:
        super().__init__(mask, dropout_p, training, generator)
        self.n_heads = n_heads

    def _cut(self, packed, parts: int) -> list:
        """(B, L, parts·h·d_k) -> ``parts`` arrays (B, h, L, d_k): views into ``packed``."""
        if packed.ndim != 3 or packed.shape[-1] % (parts * self.n_heads):
            raise ValueError(f"PackedAttention: a projection of shape {packed.shape} cannot hold {parts} "
                             f"part(s) of {self.n_heads} heads each")
        width = packed.shape[-1] // parts
        return [split_heads(packed[..., i * width:(i + 1) * width], self.n_heads) for i in range(parts)]

    def _parts(self) -> tuple[int, ...]:
        return (3,) if len(self.packed_shapes) == 1 else (1, 2)    # (qkv,) or (q, kv)

    def forward(self, *packed):
        self.packed_shapes = [x.shape for x in packed]
        q, k, v = (heads for x, parts in zip(packed, self._parts()) for heads in self._cut(x, parts))
        return merge_heads(super().forward(q, k, v))                  # (B, T, h·d_v)

    def backward(self, g_out):
        xp = xp_of(g_out)
        g_heads = xp.ascontiguousarray(split_heads(g_out, self.n_heads))   # (B, h, T, d_v): faster GEMMs
        gradients = iter(super().backward(g_heads))                  # g_q, g_k, g_v, each (B, h, ·, d_k)
        packed_gradients = []
        for shape, parts, tensor in zip(self.packed_shapes, self._parts(), self.inputs):
            of_this_input = [next(gradients) for _ in range(parts)]
            if not tensor.requires_grad:
                packed_gradients.append(None)
                continue
            packed = xp.empty(shape, dtype=g_out.dtype)
            for view, gradient in zip(self._cut(packed, parts), of_this_input):
                view[...] = gradient                                 # into the packed layout
            packed_gradients.append(packed)
        return tuple(packed_gradients)

    def _needs_gradient(self) -> tuple[bool, bool, bool]:
        if len(self.inputs) == 1:                                    # qkv: all three or none
            return (self.inputs[0].requires_grad,) * 3
        return self.inputs[0].requires_grad, self.inputs[1].requires_grad, self.inputs[1].requires_grad
