"""Layers with parameters (chapter 5): Module, Parameter, Linear, Embedding, LayerNorm, ...

    import minitransformer.nn as nn
    layer = nn.Linear(512, 2048)
    layer.state_dict()          # {'weight': ..., 'bias': ...}
"""
from . import init
from .dropout import Dropout
from .embedding import Embedding, EmbeddingFunction
from .feedforward import FeedForward
from .linear import Linear, LinearFunction, linear
from .module import Module, ModuleList, Parameter, Sequential
from .normalization import LayerNorm

__all__ = [
    "init", "Module", "Parameter", "Sequential", "ModuleList", "Linear", "LinearFunction", "linear",
    "Embedding", "EmbeddingFunction", "LayerNorm", "Dropout", "FeedForward",
]
