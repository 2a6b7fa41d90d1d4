"""Layers with parameters (chapter 5): Module, Parameter, Linear, Embedding, LayerNorm, ...

    import minitransformer.nn as nn
    layer = nn.Linear(512, 2048)
    layer.state_dict()          # {'weight': ..., 'bias': ...}
"""
from . import init
from .dropout import Dropout
from .embedding import Embedding
from .feedforward import FeedForward
from .linear import Linear
from .module import Module, ModuleList, Parameter, Sequential
from .normalization import LayerNorm

__all__ = [
    "init", "Module", "Parameter", "Sequential", "ModuleList", "Linear", "Embedding", "LayerNorm", "Dropout", "FeedForward",
]
from .attention import MultiHeadAttention, merge_heads, record_attention, split_heads  # noqa: E402  (chapters 6-9)
from .cache import AttentionCache, DecoderCache, LayerCache  # noqa: E402
from .layers import Decoder, DecoderLayer, Encoder, EncoderLayer  # noqa: E402
from .positional import LearnedPositionalEncoding, PositionalEncoding, sinusoidal_table  # noqa: E402
from .transformer import Transformer, TransformerConfig  # noqa: E402

__all__ += [
    "MultiHeadAttention", "record_attention", "split_heads", "merge_heads", "AttentionCache", "LayerCache", "DecoderCache",
    "EncoderLayer", "DecoderLayer", "Encoder", "Decoder", "PositionalEncoding", "LearnedPositionalEncoding",
    "sinusoidal_table", "Transformer", "TransformerConfig",
]
from .lstm import LSTM, LSTMCell  # noqa: E402  (chapter 6: the recurrent encoder-decoder)
from .seq2seq_attention import AdditiveAttention, DotAttention, GeneralAttention, Seq2SeqAttention  # noqa: E402

__all__ += ["LSTM", "LSTMCell", "Seq2SeqAttention", "AdditiveAttention", "DotAttention", "GeneralAttention"]
from .seq2seq import Seq2Seq, Seq2SeqCache, Seq2SeqConfig  # noqa: E402

__all__ += ["Seq2Seq", "Seq2SeqConfig", "Seq2SeqCache"]
from .language_model import LanguageModel, LanguageModelCache, LanguageModelConfig  # noqa: E402  (chapter 15)

__all__ += ["LanguageModel", "LanguageModelConfig", "LanguageModelCache"]
