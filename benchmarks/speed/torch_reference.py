"""A PyTorch model of exactly minitransformer's architecture, for side-by-side benchmarks.

Built from ``nn.Linear``, ``nn.LayerNorm``, ``nn.Embedding`` and ``nn.Dropout``
(not ``nn.Transformer``), with the same choices as ``minitransformer.nn.Transformer``:

* post-LN layers: x ← LayerNorm(x + Dropout(Sublayer(x)))  (§3.1, §5.4);
* embeddings × √d_model plus the sinusoidal table, then dropout (§3.4, §3.5);
* one embedding matrix E for source, target and the pre-softmax projection h Eᵀ (§3.4);
* no dropout on attention weights or inside the FFN (the package's defaults);
* the same label-smoothed loss: with ``ignore_index = pad`` the ε mass is spread over
  the V − 1 classes other than pad, q_pad = 0 (minitransformer/functional/loss.py),
  which differs from ``torch.nn.functional.cross_entropy(label_smoothing=...)``.

The modules carry the same dotted names as ours ('encoder.layers.0.self_attn.w_q.weight'),
so ``load_minitransformer_state`` copies a state dict one name at a time; our Linear
weights are stored (in, out) (y = x W + b), PyTorch's (out, in), so those are transposed.

Incremental decoding (``init_cache`` / ``decode_step``) mirrors ours: self-attention
keys/values grow by one position per step, cross-attention keys/values are
projected from the memory once; ``reorder`` keeps batch rows for beam search.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


def sinusoidal_table(length: int, d_model: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos/10000^(2i/d)), PE(pos, 2i+1) = cos(...) (§3.5), float64."""
    positions = torch.arange(length, dtype=torch.float64)[:, None]
    pair = (torch.arange(d_model) // 2 * 2).to(torch.float64)                  # 2i for columns 2i and 2i+1
    angles = positions * torch.exp(-math.log(10000.0) * pair / d_model)[None, :]
    table = torch.empty(length, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles[:, 0::2])
    table[:, 1::2] = torch.cos(angles[:, 1::2])
    return table


def attention(q, k, v, mask, explicit: bool):
    """softmax(q kᵀ/√d_k) v with a bool mask (True = may attend); q (B, h, T, d_k)."""
    if not explicit:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])    # (B, h, T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v                     # (B, h, T, d_v)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, explicit: bool) -> None:
        super().__init__()
        self.n_heads, self.explicit = n_heads, explicit
        self.w_q, self.w_k = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.w_v, self.w_o = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)

    def _split(self, x):
        batch, length, width = x.shape
        return x.view(batch, length, self.n_heads, width // self.n_heads).transpose(1, 2)  # (B, h, T, d_k)

    def forward(self, query, key_value=None, mask=None, cache: dict | None = None, static: bool = False):
        source = query if key_value is None else key_value
        q = self._split(self.w_q(query))
        if cache is not None and static and "k" in cache:
            k, v = cache["k"], cache["v"]                          # memory projected on the first step
        else:
            k, v = self._split(self.w_k(source)), self._split(self.w_v(source))
            if cache is not None:
                if not static and "k" in cache:
                    k, v = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)
                cache["k"], cache["v"] = k, v
        out = attention(q, k, v, mask, self.explicit)             # (B, h, T, d_k)
        batch, _, length, _ = out.shape
        return self.w_o(out.transpose(1, 2).reshape(batch, length, -1))


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.linear2(torch.relu(self.linear1(x)))          # eq. 2


class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout, explicit) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, explicit)
        self.norm1 = nn.LayerNorm(d_model)
        self.feed_forward = FeedForward(d_model, d_ff)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask):
        x = self.norm1(x + self.dropout(self.self_attn(x, None, mask)))
        return self.norm2(x + self.dropout(self.feed_forward(x)))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_ff, dropout, explicit) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, explicit)
        self.norm1 = nn.LayerNorm(d_model)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, explicit)
        self.norm2 = nn.LayerNorm(d_model)
        self.feed_forward = FeedForward(d_model, d_ff)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, self_mask, memory_mask, cache: dict | None = None):
        self_cache = None if cache is None else cache.setdefault("self", {})
        cross_cache = None if cache is None else cache.setdefault("cross", {})
        x = self.norm1(x + self.dropout(self.self_attn(x, None, self_mask, self_cache)))
        x = self.norm2(x + self.dropout(self.cross_attn(x, memory, memory_mask, cross_cache, static=True)))
        return self.norm3(x + self.dropout(self.feed_forward(x)))


class Stack(nn.Module):
    def __init__(self, layers) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)


class TorchTransformer(nn.Module):
    """src (B, S), tgt (B, T) int64 -> logits (B, T, V); same names and maths as minitransformer's model.

    ``explicit_attention=False`` uses ``F.scaled_dot_product_attention`` (PyTorch's fused kernel);
    True writes softmax(QKᵀ/√d_k)V out in three ops, like a textbook.
    """

    def __init__(self, vocab: int, d_model: int, n_heads: int, d_ff: int, n_layers: int, dropout: float = 0.1,
                 pad_id: int = 0, max_len: int = 512, explicit_attention: bool = False) -> None:
        super().__init__()
        self.pad_id, self.scale = pad_id, math.sqrt(d_model)
        self.embedding = nn.Embedding(vocab, d_model)
        self.register_buffer("pe", sinusoidal_table(max_len, d_model), persistent=False)  # float64 until .to(dtype)
        self.embed_dropout = nn.Dropout(dropout)
        args = (d_model, n_heads, d_ff, dropout, explicit_attention)
        self.encoder = Stack(EncoderLayer(*args) for _ in range(n_layers))
        self.decoder = Stack(DecoderLayer(*args) for _ in range(n_layers))

    def _embed(self, ids, offset: int = 0):
        x = self.embedding(ids) * self.scale                              # ×√d_model (§3.4)
        return self.embed_dropout(x + self.pe[offset:offset + ids.shape[1]].to(x.dtype))

    def encode(self, src):
        mask = (src != self.pad_id)[:, None, None, :]                     # (B, 1, 1, S)
        x = self._embed(src)
        for layer in self.encoder.layers:
            x = layer(x, mask)
        return x, mask

    def decode(self, tgt, memory, src_mask):
        length = tgt.shape[1]
        causal = torch.ones(length, length, dtype=torch.bool, device=tgt.device).tril()[None, None]
        y = self._embed(tgt)
        for layer in self.decoder.layers:
            y = layer(y, memory, causal, src_mask)
        return y @ self.embedding.weight.T                               # tied projection h Eᵀ (§3.4)

    def forward(self, src, tgt):
        memory, src_mask = self.encode(src)
        return self.decode(tgt, memory, src_mask)

    # -- incremental decoding -------------------------------------------------------------------
    def init_cache(self) -> dict:
        return {"position": 0, "layers": [{} for _ in self.decoder.layers]}

    def decode_step(self, step_ids, memory, src_mask, cache: dict):
        """step_ids (B,) -> logits (B, V), attending to the cached keys/values of earlier steps."""
        y = self._embed(step_ids[:, None], offset=cache["position"])      # (B, 1, d)
        for layer, layer_cache in zip(self.decoder.layers, cache["layers"]):
            y = layer(y, memory, None, src_mask, layer_cache)
        cache["position"] += 1
        return (y @ self.embedding.weight.T)[:, 0]                       # (B, V)

    @staticmethod
    def reorder_cache(cache: dict, rows) -> None:
        for layer_cache in cache["layers"]:
            for part in layer_cache.values():
                if "k" in part:
                    part["k"], part["v"] = part["k"][rows], part["v"][rows]


def smoothed_cross_entropy(logits, targets, epsilon: float, pad_id: int):
    """minitransformer's label-smoothed loss, mean over non-pad targets.

    q = (1 − ε)·onehot(target) + ε/(V − 1) on every class but pad, q_pad = 0.
    """
    log_probs = torch.log_softmax(logits.reshape(-1, logits.shape[-1]), dim=-1)   # (N, V)
    targets = targets.reshape(-1)
    valid = targets != pad_id
    spread = log_probs.shape[-1] - 1
    nll = -log_probs.gather(1, targets[:, None])[:, 0]                            # (N,)
    smooth = -(log_probs.sum(dim=-1) - log_probs[:, pad_id]) / spread             # (N,)
    row_loss = (1 - epsilon) * nll + epsilon * smooth
    return (row_loss * valid).sum() / valid.sum()


def load_minitransformer_state(model: TorchTransformer, state: dict[str, np.ndarray]) -> None:
    """Copy a minitransformer ``state_dict()`` into ``model``; (in, out) Linear weights are transposed."""
    ours = dict(state)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name not in ours:
                raise KeyError(f"the minitransformer state has no {name!r}")
            value = torch.from_numpy(np.ascontiguousarray(ours.pop(name)))
            if name.endswith(".weight") and value.ndim == 2 and name != "embedding.weight":
                value = value.T                                          # (in, out) -> (out, in)
            if tuple(value.shape) != tuple(parameter.shape):
                raise ValueError(f"{name}: minitransformer shape {tuple(value.shape)} vs torch "
                                 f"{tuple(parameter.shape)}")
            parameter.copy_(value.to(parameter.dtype))
    if ours:
        raise KeyError(f"minitransformer parameters without a torch counterpart: {sorted(ours)[:5]}")


def gradients_in_minitransformer_layout(model: TorchTransformer) -> dict[str, np.ndarray]:
    """Each parameter's .grad as a NumPy array, Linear weights transposed back to (in, out)."""
    grads = {}
    for name, parameter in model.named_parameters():
        grad = parameter.grad.detach().cpu().numpy()
        if name.endswith(".weight") and grad.ndim == 2 and name != "embedding.weight":
            grad = grad.T
        grads[name] = grad
    return grads


# -- searches (fixed length: the benchmark decodes exactly ``steps`` tokens, no eos) ----------------
@torch.no_grad()
def greedy(model: TorchTransformer, src, bos: int, steps: int, use_cache: bool = True):
    """The argmax token at every step; src (B, S) -> (B, steps). Without the cache the whole prefix
    goes through the decoder again at every step."""
    memory, src_mask = model.encode(src)
    prefix = torch.full((src.shape[0], 1), bos, dtype=torch.long, device=src.device)
    cache = model.init_cache() if use_cache else None
    for _ in range(steps):
        if cache is not None:
            logits = model.decode_step(prefix[:, -1], memory, src_mask, cache)     # (B, V)
        else:
            logits = model.decode(prefix, memory, src_mask)[:, -1]                 # (B, V)
        prefix = torch.cat([prefix, logits.argmax(dim=-1, keepdim=True)], dim=1)
    return prefix[:, 1:]


@torch.no_grad()
def beam(model: TorchTransformer, src, bos: int, steps: int, beam_size: int = 4, use_cache: bool = True):
    """Beam search without eos (every hypothesis has the same length, so no length penalty);
    src (B, S) -> the best (B, steps)."""
    batch, k = src.shape[0], beam_size
    memory, src_mask = model.encode(src)
    rows = torch.arange(batch, device=src.device).repeat_interleave(k)             # k rows per sentence
    memory, src_mask = memory[rows], src_mask[rows]
    scores = torch.full((batch, k), float("-inf"), device=src.device)
    scores[:, 0] = 0.0                                                              # one live beam at first
    prefix = torch.full((batch * k, 1), bos, dtype=torch.long, device=src.device)
    cache = model.init_cache() if use_cache else None
    for _ in range(steps):
        if cache is not None:
            logits = model.decode_step(prefix[:, -1], memory, src_mask, cache)     # (B·k, V)
        else:
            logits = model.decode(prefix, memory, src_mask)[:, -1]
        vocab = logits.shape[-1]
        totals = scores[:, :, None] + torch.log_softmax(logits.float(), dim=-1).view(batch, k, vocab)
        scores, flat = totals.view(batch, k * vocab).topk(k, dim=1)                 # (B, k)
        parents = (torch.arange(batch, device=src.device)[:, None] * k + flat // vocab).view(-1)
        prefix = torch.cat([prefix[parents], (flat % vocab).view(-1, 1)], dim=1)
        if cache is not None:
            model.reorder_cache(cache, parents)
    return prefix[:, 1:].view(batch, k, steps)[:, 0]
