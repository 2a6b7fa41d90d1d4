"""The options of a training run, and how the unset ones are filled in.

Each field of ``TrainOptions`` carries its command-line help, so that
``python -m minitransformer train`` builds one flag per field (``--max-tokens``
for ``max_tokens``) and no option can be missing from the command line.
``None`` means: from the preset, or, when resuming, from the saved run.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from ..data.tokenizer import TOKENIZERS
from ..functional.attention_kinds import ATTENTION_KINDS
from ..presets import DEFAULT_PRESET, PRESETS, RENAMED_PRESETS, unknown_preset_message


class TrainingError(Exception):
    """The run cannot start or continue; the message says why."""


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError(f"must be positive, got {value}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise ValueError(f"must be positive, got {value}")
    return value


def finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number, got {value}")
    return value


def _option(default: Any, help: str, **cli: Any) -> Any:
    """A field with its command-line help; ``cli`` holds extra argparse settings (type, choices, flag)."""
    return field(default=default, metadata={"help": help, **cli})


@dataclass
class TrainOptions:
    """Everything a run needs. ``None`` means: from the preset (or, when resuming, from the saved run)."""

    out: str = _option("runs/enja", "run folder (default: runs/enja)")
    data: str | None = _option(None, "a corpus folder ({train,dev,test}.{en,xx}[.gz] or {train,dev,test}.tsv); "
                                     "default: the built-in corpus")
    direction: str | None = _option(None, "en-ja (default) or ja-en; en-xx / xx-en for --data")
    preset: str | None = _option(None, f"model and recipe: {', '.join(PRESETS)} (default: {DEFAULT_PRESET})")
    seed: int | None = _option(None, "seed of the model, the batches and dropout (default 0)", type=int)
    max_tokens: int | None = _option(None, "padded tokens per batch side (§5.1 used ~25,000)", type=positive_int)
    vocab_size: int | None = _option(None, "BPE vocabulary size", type=positive_int)
    tokenizer: str | None = _option(None, "subword model: words (BPE within space-separated words), raw "
                                          "(SentencePiece-style BPE over raw text, for text without spaces), unigram "
                                          "(a unigram language model of subwords over raw text) or "
                                          "auto (default: raw when a side has almost no spaces)",
                                    choices=["auto", *TOKENIZERS])
    attention: str | None = _option(None, "self-attention: softmax (eq. 1, default), flash, local or linear "
                                          "(chapter 13)", choices=list(ATTENTION_KINDS))
    attention_window: int | None = _option(None, "± positions each query sees with --attention local",
                                           type=positive_int)
    minutes: float | None = _option(None, "time budget for the training steps of this invocation",
                                    type=positive_float)
    epochs: int | None = _option(None, "stop after this many epochs in total", type=positive_int)
    steps: int | None = _option(None, "stop after this many optimizer steps in total", type=positive_int)
    save_every: int | None = _option(None, "save a checkpoint every this many steps", type=positive_int)
    device: str = _option("cpu", "cpu (default) or cuda (CuPy)", choices=["cpu", "cuda"])
    resume: bool = _option(False, "continue the run in --out exactly where it stopped")
    overwrite: bool = _option(False, "start a new run in a folder that holds one (its files are replaced)")
    average: int = _option(5, "average the last k checkpoints at the end (§6.1; default 5, 1 = off)",
                           type=positive_int)
    beam: int = _option(4, "beam size for the test BLEU (default 4, §6.1)", type=positive_int)
    alpha: float = _option(0.6, "length penalty α for the test BLEU (default 0.6, §6.1)", type=finite_float)
    limit: int | None = _option(None, "read at most this many pairs per split", type=positive_int)
    evaluate: bool = _option(True, "skip the final test BLEU and attention picture", flag="--no-eval")
    plot: bool = _option(True, "skip the attention picture", flag="--no-plot")
    quiet: bool = _option(False, "print only errors")
    distributed: bool = _option(False, "data-parallel training over MPI, one batch per rank and step: start with "
                                       "mpirun -n P python -m minitransformer train --distributed (chapter 14; "
                                       "needs mpi4py and an MPI library: pip install mpi4py mpich)")


# The settings that define a run's model and data: a resumed run must keep them.
DEFINING = ("data", "direction", "preset", "seed", "max_tokens", "vocab_size", "limit", "tokenizer", "attention",
            "attention_window")
# Options that change nothing in the result of a run (where it lives, how it talks, how to start it).
NOT_RESULT = ("out", "device", "resume", "overwrite", "quiet", "distributed")   # the ranks are saved instead


def run_settings(options: TrainOptions) -> dict:
    """The defining settings, as saved in config.json and every checkpoint."""
    return {name: getattr(options, name) for name in DEFINING}


def result_settings(options: TrainOptions) -> dict:
    """Every option that shapes the finished run (model, data, length, averaging, evaluation)."""
    return {f.name: getattr(options, f.name) for f in dataclasses.fields(options) if f.name not in NOT_RESULT}


def resolve_options(options: TrainOptions, saved: dict | None) -> TrainOptions:
    """Fill the None fields from the saved run (resume) or the preset; refuse conflicts on resume."""
    chosen = dataclasses.replace(options)
    if saved is not None:
        conflicts = [f"{name}: {saved[name]!r} in the saved run, {getattr(options, name)!r} requested"
                     for name in DEFINING
                     if getattr(options, name) is not None and saved.get(name) != getattr(options, name)]
        if conflicts:
            raise TrainingError(f"{options.out} holds a run with other settings; cannot resume it with "
                                f"{'; '.join(conflicts)} (drop those options, or use another --out)")
        for name in DEFINING:
            setattr(chosen, name, saved.get(name))
        chosen.preset = RENAMED_PRESETS.get(chosen.preset, chosen.preset)   # a run saved under an old name
    chosen.preset = chosen.preset or DEFAULT_PRESET
    if chosen.preset not in PRESETS:
        raise TrainingError(unknown_preset_message(chosen.preset))
    preset = PRESETS[chosen.preset]
    chosen.direction = chosen.direction or "en-ja"
    chosen.seed = 0 if chosen.seed is None else chosen.seed
    for name in ("max_tokens", "vocab_size", "save_every"):     # None, not 0: a 0 is refused below
        if getattr(chosen, name) is None:
            setattr(chosen, name, preset[name])
    if chosen.minutes is None and chosen.epochs is None and chosen.steps is None:
        chosen.minutes, chosen.epochs, chosen.steps = preset["minutes"], preset["epochs"], preset["steps"]
    for name in ("minutes", "epochs", "steps", "max_tokens", "vocab_size", "save_every", "beam", "limit",
                 "attention_window"):
        value = getattr(chosen, name)
        if value is not None and value <= 0:
            raise TrainingError(f"--{name.replace('_', '-')} must be positive, got {value}")
    if chosen.average < 1:
        raise TrainingError(f"--average must be >= 1, got {chosen.average}")
    if not math.isfinite(chosen.alpha):
        raise TrainingError(f"--alpha must be a finite number, got {chosen.alpha}")
    return chosen
