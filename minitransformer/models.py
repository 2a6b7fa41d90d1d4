"""The two models the package builds, and how a saved configuration says which one it describes.

* "transformer": the Transformer of the paper (chapter 9), ``nn.Transformer`` / ``nn.TransformerConfig``;
* "lstm": the attention LSTM of 2015 that it replaced (chapter 6), ``nn.Seq2Seq`` / ``nn.Seq2SeqConfig``.

Both configurations are dataclasses with a field ``model`` that holds the kind, so the dict a checkpoint
saves (``dataclasses.asdict(config)``) names its model. ``config_from_dict`` reads either kind back (a
dict without the field was saved when there was only the Transformer), and ``build_model`` makes the model
a configuration describes. Both models offer the interface the trainer, the searches (decode.py) and the
Translator use: ``loss``, ``encode``, ``decode``, ``init_cache``, ``decode_step``, ``parameter_counts``.
"""
from __future__ import annotations

from dataclasses import fields

from .nn.module import Module
from .nn.seq2seq import Seq2Seq, Seq2SeqConfig
from .nn.transformer import Transformer, TransformerConfig

MODEL_KINDS: dict[str, tuple[type, type]] = {
    "transformer": (TransformerConfig, Transformer),
    "lstm": (Seq2SeqConfig, Seq2Seq),
}


def config_class(kind: str) -> type:
    """The configuration dataclass of a model kind ("transformer" or "lstm")."""
    if kind not in MODEL_KINDS:
        raise ValueError(f"unknown model {kind!r}; choose one of {', '.join(MODEL_KINDS)}")
    return MODEL_KINDS[kind][0]


def config_from_dict(data: dict):
    """The configuration a dict describes (``dataclasses.asdict`` of one), of the kind its "model" names.

    Raises ValueError naming an unknown kind, unknown or missing fields, or an invalid value."""
    if not isinstance(data, dict):
        raise ValueError(f"a model configuration must be a dict of fields, got {type(data).__name__}")
    kind = data.get("model", "transformer")
    config_type = config_class(kind)
    known = {f.name for f in fields(config_type)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown {config_type.__name__} field(s) {unknown}")
    try:
        return config_type(**data)
    except TypeError as error:          # a required field missing
        raise ValueError(f"{config_type.__name__}: {error}") from None


def build_model(config) -> Module:
    """The model a configuration describes: ``Transformer(config)`` or ``Seq2Seq(config)``."""
    for config_type, model_type in MODEL_KINDS.values():
        if type(config) is config_type:
            return model_type(config)
    raise TypeError(f"build_model: expected a TransformerConfig or a Seq2SeqConfig, got {type(config).__name__}")


__all__ = ["MODEL_KINDS", "config_class", "config_from_dict", "build_model"]
