"""FLOPs by formula agree with a count made from the model's own weight matrices."""
import pytest

from minitransformer.flops import decoder_layer_flops, encoder_layer_flops, forward_flops, training_flops
from minitransformer.nn.transformer import Transformer, TransformerConfig


def _count_from_weights(model: Transformer, n_src: int, n_tgt: int, S: int, T: int) -> int:
    """2 FLOPs per weight per token that passes through it, plus QKᵀ and AV of every attention layer."""
    total = 0
    for name, parameter in model.named_parameters():
        if parameter.data.ndim != 2 or "embedding" in name or "positional" in name:
            continue
        if name.startswith("encoder") or ("cross_attn.w_k" in name or "cross_attn.w_v" in name):
            tokens = n_src                                          # the memory's keys and values are per source token
        else:
            tokens = n_tgt
        total += 2 * parameter.data.size * tokens
    d, n = model.config.d_model, model.config.n_layers
    total += n * (2 * 2 * S * d * n_src)                           # encoder QKᵀ and AV
    total += n * (2 * 2 * T * d * n_tgt + 2 * 2 * S * d * n_tgt)   # decoder self and cross
    total += 2 * d * model.config.tgt_vocab_size * n_tgt           # logits = h Eᵀ (the tied embedding)
    return total


@pytest.mark.parametrize("sizes", [dict(d_model=8, n_heads=2, d_ff=16, n_layers=1),
                                   dict(d_model=16, n_heads=4, d_ff=48, n_layers=3)])
def test_the_formula_counts_every_weight_matrix_and_attention_product(sizes):
    config = TransformerConfig(src_vocab_size=30, tgt_vocab_size=30, max_len=16, **sizes)
    model = Transformer(config)
    S, T, sentences = 7, 5, 3
    expected = _count_from_weights(model, sentences * S, sentences * T, S, T)
    assert forward_flops(config, sentences * S, sentences * T, S, T) == expected
    assert training_flops(config, sentences * S, sentences * T, S, T) == 3 * expected


def test_one_layer_by_hand():
    # d = 4, d_ff = 8, 3 keys: 8·16 + 4·3·4 + 4·4·8 = 128 + 48 + 128
    assert encoder_layer_flops(4, 8, 3) == 304
    # + cross W^Q, W^O (4·16) and cross QKᵀ, AV over 3 source keys (48) with T = 2 (self: 32)
    assert decoder_layer_flops(4, 8, source_len=3, target_len=2) == 128 + 32 + 64 + 48 + 128
