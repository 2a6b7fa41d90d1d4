"""Functional forms of the layers: stateless functions on Tensors (chapters 4–6).

    import minitransformer.functional as F
    F.softmax(scores, axis=-1)
    F.cross_entropy(logits, targets, label_smoothing=0.1, ignore_index=pad_id)

Each of softmax, log_softmax, cross_entropy, layer_norm, dropout, linear and
embedding is ONE fused Function whose backward is written from its derivation.
The Functions live here; the Modules that hold their parameters live in nn/.
"""
from .activation import ReLU, relu
from .dropout import Dropout, DropoutAdd, Generator, default_generator, dropout, dropout_add, set_dropout_seed
from .embedding import EmbeddingFunction, embedding
from .linear import LinearFunction, linear, linear_relu
from .loss import CrossEntropy, cross_entropy
from .linear_loss import LinearCrossEntropy, linear_cross_entropy
from .normalization import LayerNormFunction, layer_norm
from .softmax import LogSoftmax, Softmax, log_softmax, softmax

__all__ = [
    "softmax", "log_softmax", "cross_entropy", "layer_norm", "dropout", "relu", "linear", "linear_relu", "embedding",
    "set_dropout_seed", "default_generator", "Generator", "Softmax", "LogSoftmax", "CrossEntropy",
    "LayerNormFunction", "Dropout", "ReLU", "LinearFunction", "EmbeddingFunction",
    "linear_cross_entropy", "LinearCrossEntropy", "dropout_add", "DropoutAdd",
]
from .attention import ScaledDotProductAttention, scaled_dot_product_attention  # noqa: E402  (chapter 6)
from .masks import causal_mask, padding_mask  # noqa: E402

__all__ += ["scaled_dot_product_attention", "ScaledDotProductAttention", "padding_mask", "causal_mask"]
from .multi_head import PackedAttention, merge_heads, split_heads  # noqa: E402  (chapter 7)

__all__ += ["split_heads", "merge_heads", "PackedAttention"]
from .flash_attention import FlashAttention, flash_attention  # noqa: E402  (chapter 13)
from .linear_attention import LinearAttention, elu_plus_one, linear_attention  # noqa: E402
from .local_attention import band_mask, local_attention  # noqa: E402

__all__ += ["flash_attention", "FlashAttention", "local_attention", "band_mask", "linear_attention",
            "LinearAttention", "elu_plus_one"]
from .linformer import linformer_attention  # noqa: E402
from .lsh_attention import bucket_recall, lsh_attention, lsh_buckets, lsh_pattern  # noqa: E402
from .sparse_patterns import (bigbird_layout, covering_layout, expand_layout, fixed_pattern,  # noqa: E402
                              longformer_pattern, sparse_attention, strided_pattern)

__all__ += ["lsh_attention", "lsh_buckets", "lsh_pattern", "bucket_recall"]
__all__ += ["linformer_attention", "strided_pattern", "fixed_pattern", "longformer_pattern", "bigbird_layout",
            "expand_layout", "covering_layout", "sparse_attention"]
from .attention_kinds import ATTENTION_KINDS, AttentionKind, attend, check_attention  # noqa: E402

__all__ += ["attend", "ATTENTION_KINDS", "AttentionKind", "check_attention"]
from .additive_attention import AdditiveScore, additive_score  # noqa: E402  (chapter 6: recurrent models)
from .lstm import LSTMFunction, lstm  # noqa: E402

__all__ += ["lstm", "LSTMFunction", "additive_score", "AdditiveScore"]
