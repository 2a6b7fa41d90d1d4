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

from .. import backend
from ..functional.attention_kinds import ATTENTION_KINDS, attend, attention_weights, check_attention
from ..functional.linear import linear
from ..functional.multi_head import merge_heads, split_heads
from ..generator import Generator
from ..ops import concatenate
from ..tensor import Tensor
from . import init
from .cache import AttentionCache
from .linear import Linear
from .module import Module, Parameter


class MultiHeadAttention(Module):
    """h heads of scaled dot-product attention with d_k = d_v = d_model / h.

    ``dropout_p`` drops attention weights (off by default, as in the paper, whose
    dropout sits on sub-layer outputs, §5.4), drawing from the layer's own
    ``generator``. With ``keep_weights`` set (or inside ``record_attention``),
    each forward leaves its weights (B, h, T, S) in ``attention_weights``, for
    pictures; off by default, so training holds no weights beyond the graph.
    """

    def __init__(self, d_model: int, n_heads: int, dropout_p: float = 0.0, attention: str = "softmax",
                 window: int | None = None, max_len: int | None = None) -> None:
        super().__init__()
        # "softmax" (eq. 1), "flash", "local", "linear", "linformer": chapter 13
        projected = check_attention(attention, window, dropout_p).projected
        if projected and (isinstance(max_len, bool) or not isinstance(max_len, int) or max_len < 1):
            raise ValueError(f"MultiHeadAttention: attention {attention!r} projects along the sequence and needs "
                             f"max_len, the longest sequence (one column of E and F per position); got {max_len!r}")
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
        self.rotary = None     # RoPE (chapter 15): turns q and k by their positions; set by nn.LanguageModel
        if projected:          # Linformer's E and F (k × n_max), shared by the heads; N(0, 1/k) as in its §4
            xp = backend.xp_for(self.w_q.weight.device)
            self.proj_e = init.normal(Parameter(xp.empty((int(window), max_len), dtype="float32")), std=window ** -0.5)
            self.proj_f = init.normal(Parameter(xp.empty((int(window), max_len), dtype="float32")), std=window ** -0.5)

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
        packed = ATTENTION_KINDS[self.attention].packed     # the kind's Function for packed projections, if any
        if cache is None and packed is not None and self._projections_alike() and self.rotary is None:
            return self._packed_forward(packed, query, key_value, mask)
        q = self._turned(split_heads(self.w_q(query), self.n_heads), cache)   # (B, h, T, d_k)
        recurrent = ATTENTION_KINDS[self.attention].recurrent
        if cache is not None and not cache.static and recurrent is not None:
            return self.w_o(merge_heads(self._recurrent_step(recurrent, q, source, mask, cache)))
        if cache is not None and cache.static and cache.keys is not None:
            k, v = cache.keys, cache.values                             # memory projected on step 1
        else:
            k = self._turned(split_heads(self.w_k(source), self.n_heads), cache)   # (B, h, S, d_k)
            v = split_heads(self.w_v(source), self.n_heads)              # (B, h, S, d_v)
            if cache is not None:
                if not cache.static and cache.keys is not None:          # earlier steps first
                    k = concatenate([cache.keys, k], axis=2)             # (B, h, t, d_k)
                    v = concatenate([cache.values, v], axis=2)           # (B, h, t, d_v)
                cache.keys, cache.values = k, v
        forms_weights = ATTENTION_KINDS[self.attention].weights
        attended = attend(self.attention, q, k, v, mask=mask, window=self.window, dropout_p=self.dropout_p,
                          training=self.training, generator=self.generator,
                          return_weights=self.keep_weights and forms_weights,   # (B, h, T, d_v)
                          projections=(self.proj_e, self.proj_f) if ATTENTION_KINDS[self.attention].projected else None)
        self.attention_weights = None
        if self.keep_weights and forms_weights:
            attended, self.attention_weights = attended                  # and the weights (B, h, T, S)
        elif self.keep_weights and not ATTENTION_KINDS[self.attention].projected:   # no (T, S) weights formed:
            self.attention_weights = Tensor(attention_weights(          # computed from q and k for pictures
                self.attention, q.data, k.data, mask, self.window))
        return self.w_o(merge_heads(attended))                           # (B, T, d_model)

    def _recurrent_step(self, step, q: Tensor, source: Tensor, mask, cache: AttentionCache) -> Tensor:
        """Cached self-attention of a kind with a recurrent form: the new positions update the running
        state of the earlier ones (chapter 13), and no key or value is kept."""
        if mask is not None:
            raise ValueError(f"MultiHeadAttention: attention {self.attention!r} decodes from its running state and "
                             "takes no mask with a cache (each new position sees itself and every earlier one)")
        k = self._turned(split_heads(self.w_k(source), self.n_heads), cache)   # (B, h, T, d_k), the new positions
        v = split_heads(self.w_v(source), self.n_heads)
        attended, cache.state = step(q, k, v, cache.state)
        cache.steps += q.shape[2]
        self.attention_weights = None                                    # no weights formed, no keys kept to draw them
        return attended

    def _turned(self, x: Tensor, cache: AttentionCache | None) -> Tensor:
        """Queries or keys of self-attention turned by RoPE at their positions (after the cached ones), or as
        they are without it."""
        return x if self.rotary is None else self.rotary(x, 0 if cache is None else cache.length)

    def _projections_alike(self) -> bool:
        """W^Q, W^K, W^V of one shape, with biases: what packing them side by side needs (chapter 12's
        row (B) narrows W^Q and W^K, and then the three projections run one by one)."""
        layers = (self.w_q, self.w_k, self.w_v)
        return all(layer.bias is not None and layer.weight.shape == self.w_q.weight.shape for layer in layers)

    def _packed_forward(self, packed_attention: type, query: Tensor, key_value: Tensor | None, mask) -> Tensor:
        """The same attention with ONE projection GEMM per source (training, whole sentences).

        Self-attention: [Q | K | V] = x [W^Q | W^K | W^V] + [b^Q | b^K | b^V], (B, T, 3·d_model).
        Cross-attention: Q from the decoder as above, [K | V] from the memory in one GEMM.
        ``packed_attention`` (for eq. 1, ``PackedAttention``) cuts the heads out as views and merges them
        again on the way out; the parameters stay four separate ``Linear`` layers, as the state dict names them.
        """
        if key_value is None:
            packed = (linear(query, *_side_by_side(self.w_q, self.w_k, self.w_v)),)        # (B, T, 3·d)
        else:
            packed = (self.w_q(query), linear(key_value, *_side_by_side(self.w_k, self.w_v)))   # (B, S, 2·d)
        attention = packed_attention(self.n_heads, mask, self.dropout_p, self.training, self.generator)
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
