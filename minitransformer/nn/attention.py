"""Multi-head attention (§3.2.2, chapter 7).

    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,   head_i = Attention(Q W^Q_i, K W^K_i, V W^V_i)

The h per-head projections W^Q_i (d_model × d_k) sit side by side in one
matrix W^Q (d_model × h·d_k), so "project, then cut into heads" is ONE 2-D GEMM
followed by a reshape — the same numbers as h small products, far faster.
With d_k = d_v = d_model / h the total cost is about that of one attention of
full width (§3.2.2); chapter 7 measures it.

The same layer serves three uses in the model (§3.2.3):
* encoder self-attention: queries, keys and values all come from x;
* decoder masked self-attention: the same, with a causal mask;
* encoder–decoder (cross) attention: queries from the decoder, keys and
  values from the encoder's output ("memory").

Incremental decoding passes an ``AttentionCache`` (see cache.py): self-attention
appends this step's keys and values to those of earlier steps; cross-attention
projects the memory once, on the first step, and reuses it.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..backend import xp_of
from ..functional.attention import ScaledDotProductAttention
from ..functional.attention_kinds import attend, attention_weights, check_attention
from ..functional.dropout import Generator
from ..functional.linear import linear
from ..ops import concatenate
from ..tensor import Tensor
from . import init
from .cache import AttentionCache
from .linear import Linear
from .module import Module


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


class MultiHeadAttention(Module):
    """h heads of scaled dot-product attention with d_k = d_v = d_model / h.

    ``dropout_p`` drops attention weights (off by default, as in the paper, whose
    dropout sits on sub-layer outputs, §5.4), drawing from the layer's own
    ``generator``. With ``keep_weights`` set (or inside ``record_attention``),
    each forward leaves its weights (B, h, T, S) in ``attention_weights``, for
    pictures; off by default, so training holds no weights beyond the graph.
    """

    def __init__(self, d_model: int, n_heads: int, dropout_p: float = 0.0, attention: str = "softmax",
                 window: int | None = None) -> None:
        super().__init__()
        check_attention(attention, window)          # "softmax" (eq. 1), "flash", "local", "linear": chapter 13
        if attention != "softmax" and dropout_p:
            raise ValueError(f"MultiHeadAttention: attention {attention!r} has no weights to drop; use dropout_p=0")
        self.attention, self.window = attention, window
        if d_model < 1 or n_heads < 1:
            raise ValueError(f"MultiHeadAttention: d_model and n_heads must be positive, got d_model={d_model}, "
                             f"n_heads={n_heads}")
        if d_model % n_heads:
            raise ValueError(f"MultiHeadAttention: d_model={d_model} is not divisible by n_heads={n_heads} "
                             "(each head gets d_k = d_model / h features)")
        if not 0.0 <= dropout_p < 1.0:
            raise ValueError(f"MultiHeadAttention: dropout_p must be in [0, 1), got {dropout_p}")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.dropout_p = dropout_p
        # A seed from the init stream only when dropout is on: a layer without it leaves the weights
        # of every later layer as they would be without this generator.
        self.generator = Generator(init.next_seed() if dropout_p > 0 else 0)
        self.w_q = Linear(d_model, d_model)   # the h matrices W^Q_i side by side
        self.w_k = Linear(d_model, d_model)
        self.w_v = Linear(d_model, d_model)
        self.w_o = Linear(d_model, d_model)   # W^O mixes the concatenated heads
        self.keep_weights = False
        self.attention_weights: Tensor | None = None

    def forward(self, query: Tensor, key_value: Tensor | None = None, mask=None,
                cache: AttentionCache | None = None) -> Tensor:
        """query (B, T, d_model); key_value (B, S, d_model), or None for self-attention -> (B, T, d_model).

        ``mask`` is boolean, broadcastable to (B, h, T, S), True = may attend.
        ``cache`` (incremental decoding): for self-attention the keys and values
        of this call are appended to the cached ones, and the queries attend to
        all of them; for cross-attention (``cache.static``) the keys and values
        are computed from ``key_value`` on the first call and reused after.
        """
        if query.ndim != 3 or query.shape[-1] != self.d_model:
            raise ValueError(f"MultiHeadAttention: query must be (B, T, d_model={self.d_model}), "
                             f"got shape {tuple(query.shape)}")
        source = query if key_value is None else key_value
        if source.ndim != 3 or source.shape[-1] != self.d_model or source.shape[0] != query.shape[0]:
            raise ValueError(f"MultiHeadAttention: key_value must be (B={query.shape[0]}, S, "
                             f"d_model={self.d_model}), got shape {tuple(source.shape)}")
        if cache is None and self.attention == "softmax" and self._projections_alike():
            return self._packed_forward(query, key_value, mask)
        q = split_heads(self.w_q(query), self.n_heads)                   # (B, h, T, d_k)
        if cache is not None and cache.static and cache.keys is not None:
            k, v = cache.keys, cache.values                             # memory projected on step 1
        else:
            k = split_heads(self.w_k(source), self.n_heads)              # (B, h, S, d_k)
            v = split_heads(self.w_v(source), self.n_heads)              # (B, h, S, d_v)
            if cache is not None:
                if not cache.static and cache.keys is not None:          # earlier steps first
                    k = concatenate([cache.keys, k], axis=2)             # (B, h, t, d_k)
                    v = concatenate([cache.values, v], axis=2)           # (B, h, t, d_v)
                cache.keys, cache.values = k, v
        if self.attention != "softmax":                                  # chapter 13: no (T, S) weights
            attended = attend(self.attention, q, k, v, mask=mask, window=self.window)   # (B, h, T, d_v)
            self.attention_weights = Tensor(attention_weights(self.attention, q.data, k.data, mask, self.window)) \
                if self.keep_weights else None                           # for pictures: made only when asked
        else:
            attention = ScaledDotProductAttention(mask, self.dropout_p, self.training, self.generator)
            attended = attention(q, k, v)                                # (B, h, T, d_v)
            self.attention_weights = Tensor(attention.weights) if self.keep_weights else None   # (B, h, T, S)
        return self.w_o(merge_heads(attended))                           # (B, T, d_model)

    def _projections_alike(self) -> bool:
        """W^Q, W^K, W^V of one shape, with biases: what packing them side by side needs (chapter 12's
        row (B) narrows W^Q and W^K, and then the three projections run one by one)."""
        layers = (self.w_q, self.w_k, self.w_v)
        return all(layer.bias is not None and layer.weight.shape == self.w_q.weight.shape for layer in layers)

    def _packed_forward(self, query: Tensor, key_value: Tensor | None, mask) -> Tensor:
        """The same attention with ONE projection GEMM per source (training, whole sentences).

        Self-attention: [Q | K | V] = x [W^Q | W^K | W^V] + [b^Q | b^K | b^V], (B, T, 3·d_model).
        Cross-attention: Q from the decoder as above, [K | V] from the memory in one GEMM.
        ``PackedAttention`` cuts the heads out as views and merges them again on the way out; the
        parameters stay four separate ``Linear`` layers, as the state dict names them.
        """
        if key_value is None:
            packed = (linear(query, *_side_by_side(self.w_q, self.w_k, self.w_v)),)        # (B, T, 3·d)
        else:
            packed = (self.w_q(query), linear(key_value, *_side_by_side(self.w_k, self.w_v)))   # (B, S, 2·d)
        attention = PackedAttention(self.n_heads, mask, self.dropout_p, self.training, self.generator)
        merged = attention(*packed)                                      # (B, T, d_model), heads merged
        self.attention_weights = Tensor(attention.weights) if self.keep_weights else None   # (B, h, T, S)
        return self.w_o(merged)

    def extra_repr(self) -> str:
        kind = "" if self.attention == "softmax" else f", attention={self.attention}" + (
            f", window={self.window}" if self.window is not None else "")
        return f"d_model={self.d_model}, n_heads={self.n_heads}, d_k={self.d_k}, dropout_p={self.dropout_p}{kind}"


def _side_by_side(*layers: Linear) -> tuple[Tensor, Tensor]:
    """The weights (in, n·out) and biases (n·out,) of ``layers`` concatenated: one Linear for all n."""
    return concatenate([layer.weight for layer in layers], axis=1), concatenate([layer.bias for layer in layers])


@contextmanager
def record_attention(model: Module) -> Iterator[list[MultiHeadAttention]]:
    """``with record_attention(model):`` every attention layer of ``model`` keeps the weights of its
    last forward in ``.attention_weights`` (B, h, T, S); they stay readable after the block.

        with record_attention(model):
            model.decode(tgt_in, memory, src_mask)
        weights = model.decoder.layers[-1].cross_attn.attention_weights
    """
    layers = [module for module in model.modules() if isinstance(module, MultiHeadAttention)]
    before = [layer.keep_weights for layer in layers]
    for layer in layers:
        layer.keep_weights = True
    try:
        yield layers
    finally:
        for layer, keep in zip(layers, before):
            layer.keep_weights = keep
