"""Floating-point operations of a Transformer, counted by formula (chapter 12).

A product of an (m × k) and a (k × n) matrix costs 2·m·k·n FLOPs (a multiply and
an add per term). Per token, a layer's cost is then read off its matrices, with
d = d_model, S source and T target tokens in the sentence, N layers:

    encoder layer, per source token:   8d² (W^Q W^K W^V W^O) + 4·S·d (QKᵀ and AV) + 4·d·d_ff (FFN)
    decoder layer, per target token:   8d² + 4·T·d (masked self-attention, the full T × T is computed)
                                      + 4d² (cross W^Q, W^O) + 4·S·d (cross QKᵀ, AV) + 4·d·d_ff
                   per source token:   4d² (cross W^K, W^V of the memory)
    output projection, per target token: 2·d·V (logits = h Eᵀ)

Softmax, layer norm, dropout and the residual sums are a few FLOPs per number
and are left out; embedding lookups cost none. Training costs about three
forward passes: the backward pass of each product is two products of the same
size (chapter 2), so train ≈ 3 × forward.

The paper's Table 2 counts differently: training time × number of GPUs × an
estimate of each GPU's sustained single-precision rate (its footnote), so its
3.3·10¹⁸ (base) and 2.3·10¹⁹ (big) are budgets of machine time, not counts.
"""
from __future__ import annotations


def encoder_layer_flops(d_model: int, d_ff: int, source_len: float) -> float:
    """Forward FLOPs of one encoder layer per source token (attention over ``source_len`` keys)."""
    # Exercise 12.2 — the FLOPs of one encoder layer (chapters/12-looking-inside.md; graded by pytest -m ex_12_2)
    ### BEGIN SOLUTION
    projections = 4 * 2 * d_model * d_model          # W^Q, W^K, W^V, W^O: one (1 × d)(d × d) product each
    scores_and_mix = 2 * 2 * source_len * d_model    # q·kᵀ over S keys, then A·V, summed over the h heads
    feed_forward = 2 * 2 * d_model * d_ff            # W_1 (d × d_ff) and W_2 (d_ff × d)
    return projections + scores_and_mix + feed_forward
    ### END SOLUTION


def decoder_layer_flops(d_model: int, d_ff: int, source_len: float, target_len: float) -> float:
    """Forward FLOPs of one decoder layer per target token, without the memory's K and V projections
    (those are per source token: ``4·d_model²``, see ``forward_flops``)."""
    return (8 * d_model ** 2 + 4 * target_len * d_model          # masked self-attention
            + 4 * d_model ** 2 + 4 * source_len * d_model          # cross-attention: W^Q, W^O, QKᵀ, AV
            + 4 * d_model * d_ff)                                  # position-wise FFN


def forward_flops(config, source_tokens: float, target_tokens: float, source_len: float,
                  target_len: float) -> float:
    """Forward FLOPs of a whole model (a ``TransformerConfig``) over batches holding ``source_tokens``
    and ``target_tokens`` real tokens, in sentences of mean lengths ``source_len`` and ``target_len``."""
    d, n = config.d_model, config.n_layers
    per_source = n * (encoder_layer_flops(d, config.d_ff, source_len) + 4 * d ** 2)
    per_target = n * decoder_layer_flops(d, config.d_ff, source_len, target_len) + 2 * d * config.tgt_vocab_size
    return source_tokens * per_source + target_tokens * per_target


def training_flops(config, source_tokens: float, target_tokens: float, source_len: float,
                   target_len: float) -> float:
    """Training FLOPs ≈ 3 × forward: the backward pass of a product is two products of its size."""
    return 3.0 * forward_flops(config, source_tokens, target_tokens, source_len, target_len)
