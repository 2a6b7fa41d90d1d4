"""The options of a training run, and how the unset ones are filled in.

Each field of ``TrainOptions`` carries its command-line help, so that
``python -m minitransformer train`` builds one flag per field (``--max-tokens``
for ``max_tokens``) and no option can be missing from the command line.
``None`` means: from the preset, or, when resuming, from the saved run.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
from dataclasses import dataclass, field
from typing import Any

from ..data import fingerprint
from ..data.tokenizer import TOKENIZERS
from ..decode import MAX_ABS_ALPHA
from ..functional.attention_kinds import ATTENTION_KINDS
from .. import presets
from ..presets import DEFAULT_PRESET, PRESETS

DECODER_KINDS = [name for name, kind in ATTENTION_KINDS.items() if not kind.projected]   # a decoder is causal

MODEL_CHOICES = ("transformer", "lstm")                 # models.MODEL_KINDS, named here to keep --help light
LSTM_SCORES = ("additive", "dot", "general")            # nn/seq2seq_attention.py's ATTENTION_SCORES


class TrainingError(Exception):
    """The run cannot start or continue; the message says why."""


def positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise ValueError(f"must be positive, got {value}")
    return value


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"must be >= 0, got {value}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not (value > 0 and math.isfinite(value)):     # inf minutes used to reach a time limit as an OverflowError
        raise ValueError(f"must be a positive finite number, got {value}")
    return value


def fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"must be a fraction from 0 to 1, got {value}")
    return value


def finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number, got {value}")
    return value


def alpha_value(text: str) -> float:
    """--alpha: a finite number within ±10 (decode.MAX_ABS_ALPHA), checked where it is parsed; a larger one
    used to be a traceback of the length penalty's arithmetic after the whole run had trained."""
    value = float(text)
    if not (math.isfinite(value) and abs(value) <= MAX_ABS_ALPHA):
        raise ValueError(f"must be a finite number from {-MAX_ABS_ALPHA:g} to {MAX_ABS_ALPHA:g}, got {value}")
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
    model: str | None = _option(None, "transformer (default) or lstm: the attention LSTM of 2015 (chapter 6), "
                                      "trained by the same recipe at about the same size", choices=list(MODEL_CHOICES))
    preset: str | None = _option(None, f"model and recipe: {', '.join(PRESETS)} (default: {DEFAULT_PRESET})")
    seed: int | None = _option(None, "seed of the model, the batches and dropout (default 0)", type=non_negative_int)
    max_tokens: int | None = _option(None, "padded tokens per batch side (§5.1 used ~25,000)", type=positive_int)
    vocab_size: int | None = _option(None, "BPE vocabulary size", type=positive_int)
    tokenizer: str | None = _option(None, "subword model: words (BPE within space-separated words), raw "
                                          "(SentencePiece-style BPE over raw text, for text without spaces), unigram "
                                          "(a unigram language model of subwords over raw text) or "
                                          "auto (default: raw when a side has almost no spaces)",
                                    choices=["auto", *TOKENIZERS])
    attention: str | None = _option(None, "self-attention: softmax (eq. 1, default), flash, local or linear "
                                          "(chapter 13)", choices=DECODER_KINDS)
    attention_window: int | None = _option(None, "± positions each query sees with --attention local",
                                           type=positive_int)
    attention_score: str | None = _option(None, "the score of --model lstm's attention: additive (Bahdanau et al., "
                                                "default), dot or general (Luong et al.)", choices=list(LSTM_SCORES))
    input_feeding: bool | None = _option(None, "--model lstm without input feeding (Luong et al. §3.3): the "
                                               "decoder is not told what it attended to at the step before",
                                         flag="--no-input-feeding", action="store_const", const=False)
    minutes: float | None = _option(None, "time budget for the training steps of this invocation",
                                    type=positive_float)
    epochs: int | None = _option(None, "stop after this many epochs in total", type=positive_int)
    steps: int | None = _option(None, "stop after this many optimizer steps in total", type=positive_int)
    save_every: int | None = _option(None, "save a checkpoint every this many steps", type=positive_int)
    cooldown: float = _option(0.0, "the last this fraction of the run (of --steps, --epochs or this invocation's "
                                   "--minutes), the rate of eq. 3 falls linearly to 0: a run that knows its end "
                                   "anneals (default 0, off)", type=fraction)
    device: str = _option("cpu", "cpu (default) or cuda (CuPy)", choices=["cpu", "cuda"])
    resume: bool = _option(False, "continue the run in --out exactly where it stopped")
    overwrite: bool = _option(False, "start a new run in a folder that holds one (the files that run wrote are "
                                     "deleted, nothing else)")
    average: int = _option(5, "average the last k checkpoints at the end (§6.1; default 5, 1 = off)",
                           type=positive_int)
    choose_average: bool = _option(False, "choose how many of the last --average checkpoints to average by dev BLEU: "
                                          "try the last 1, 2, 4, 8, … and --average itself, keep the best")
    beam: int = _option(4, "beam size for the test BLEU (default 4, §6.1)", type=positive_int)
    alpha: float = _option(0.6, "length penalty α for the test BLEU (default 0.6, §6.1)", type=alpha_value)
    choose_alpha: bool = _option(False, "choose α on the whole dev set as §6.1 did: beam search with each α of "
                                        "0, 0.3, 0.6, 1, 1.5, 2 and --alpha (past 2 in steps of 0.5, up to 5, while "
                                        "the largest wins), keep the best; the test BLEU uses it, "
                                        "and so do translate and evaluate with the final model")
    limit: int | None = _option(None, "read at most this many pairs per split", type=positive_int)
    evaluate: bool = _option(True, "skip the final test BLEU and attention picture", flag="--no-eval")
    plot: bool = _option(True, "skip the attention picture", flag="--no-plot")
    quiet: bool = _option(False, "print only errors")
    distributed: bool = _option(False, "data-parallel training over MPI, one batch per rank and step: start with "
                                       "mpirun -n P python -m minitransformer train --distributed (chapter 14; "
                                       "needs mpi4py and an MPI library: pip install mpi4py mpich)")


# The settings that define a run's model and data: a resumed run must keep them.
DEFINING = ("data", "direction", "preset", "seed", "max_tokens", "vocab_size", "limit", "tokenizer", "attention",
            "attention_window", "model", "attention_score", "input_feeding")
# What a run saved before a defining setting existed meant by its absence.
SAVED_BEFORE = {"model": "transformer"}
# Options that change nothing in the result of a run (where it lives, how it talks, how to start it).
NOT_RESULT = ("out", "device", "resume", "overwrite", "quiet", "distributed")   # the ranks are saved instead


def run_settings(options: TrainOptions) -> dict:
    """The defining settings, as saved in config.json and every checkpoint."""
    return {name: getattr(options, name) for name in DEFINING}


def result_settings(options: TrainOptions) -> dict:
    """Every option that shapes the finished run (model, data, length, averaging, evaluation)."""
    return {f.name: getattr(options, f.name) for f in dataclasses.fields(options) if f.name not in NOT_RESULT}


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# What each option may hold once given (None, where it may be None, is checked apart): (check, the allowed values)
VALUE_CHECKS: dict[str, tuple[Any, str]] = {
    **{name: (lambda v: _is_integer(v) and v >= 1, "a positive integer")
       for name in ("max_tokens", "vocab_size", "attention_window", "epochs", "steps", "save_every", "average",
                    "beam", "limit")},
    "seed": (lambda v: _is_integer(v) and v >= 0, "an integer >= 0"),
    "minutes": (lambda v: _is_number(v) and v > 0 and math.isfinite(v), "a positive finite number"),
    "alpha": (lambda v: _is_number(v) and math.isfinite(v) and abs(v) <= MAX_ABS_ALPHA,
              f"a finite number from {-MAX_ABS_ALPHA:g} to {MAX_ABS_ALPHA:g}"),
    "cooldown": (lambda v: _is_number(v) and 0 <= v <= 1, "a fraction from 0 to 1"),
    **{name: (lambda v: isinstance(v, str), "a string") for name in ("out", "data", "preset")},
    "direction": (lambda v: isinstance(v, str) and re.fullmatch(r"[a-z]+-[a-z]+", v) is not None,   # '' was en-ja
                  "two language codes joined by '-' (en-ja, ja-en, en-fr, ...)"),
    **{f.name: (lambda v, kinds=tuple(f.metadata["choices"]): v in kinds, "one of " + ", ".join(f.metadata["choices"]))
       for f in dataclasses.fields(TrainOptions) if "choices" in f.metadata},
    **{f.name: (lambda v: isinstance(v, bool), "True or False") for f in dataclasses.fields(TrainOptions)
       if isinstance(f.default, bool) or f.name == "input_feeding"},
}
NULLABLE = {f.name for f in dataclasses.fields(TrainOptions) if f.default is None}


def same_setting(name: str, saved: Any, requested: Any) -> bool:
    """Whether a saved setting and a requested one are the same; a corpus folder is the same folder however
    it is spelled (corpus/, ./corpus, its absolute path), and a run saved before paths were resolved
    recorded it as typed."""
    if name == "data" and isinstance(saved, str) and isinstance(requested, str):
        return fingerprint.resolved(saved) == fingerprint.resolved(requested)
    return saved == requested


def check_value(name: str, value: Any, label: str) -> None:
    """Refuse a value that option ``name`` cannot hold, naming it as ``label`` (--max-tokens, training.max_tokens)."""
    if value is None and name in NULLABLE:
        return
    ok, allowed = VALUE_CHECKS[name]
    if ok(value):
        return
    if allowed == "a positive integer" and _is_integer(value):
        allowed = "positive"                         # the usual mistake, in the words the command line uses
    raise TrainingError(f"{label} must be {allowed}, got {value!r}")


def check_options(options: TrainOptions) -> None:
    """Refuse a value no option may hold, and options that contradict each other, naming them."""
    if options.resume and options.overwrite:
        raise TrainingError("--resume and --overwrite contradict each other (continue the run in --out, or "
                            "delete it and start a new one); give one of them")
    for f in dataclasses.fields(options):
        check_value(f.name, getattr(options, f.name), "--" + f.name.replace("_", "-"))
    if options.data is not None and not options.data.strip():     # Path("") is the current folder
        raise TrainingError("--data is empty; name a corpus folder, or leave --data out for the built-in corpus")
    for name in ("out", "data"):
        check_utf8("--" + name, getattr(options, name))


def check_utf8(label: str, path: str | None) -> None:
    """Refuse a path whose name is not UTF-8 (bytes the file system gave Python as surrogates): the run
    records it in config.json and results.json, which are UTF-8, and used to fail only when writing them,
    after the whole run had trained."""
    if path is None:
        return
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        shown = path.encode("utf-8", "backslashreplace").decode("utf-8")
        raise TrainingError(f"{label} {shown}: the name is not valid UTF-8, and a run records its folders "
                            f"in UTF-8 files (config.json, results.json); rename it or choose another") from None


def resolve_options(options: TrainOptions, saved: dict | None) -> TrainOptions:
    """Fill the None fields from the saved run (resume) or the preset; refuse bad values, contradictions and,
    on resume, conflicts with the saved run. Touches nothing: every refusal comes before any file is written."""
    check_options(options)
    chosen = dataclasses.replace(options, out=os.path.expanduser(options.out),   # '~/runs' in quotes: the home folder
                                 data=None if options.data is None else fingerprint.resolved(options.data))
    if saved is not None:
        saved = {**saved, **{name: value for name, value in SAVED_BEFORE.items() if saved.get(name) is None}}
        conflicts = [f"{name}: {saved.get(name)!r} in the saved run, {getattr(chosen, name)!r} requested"
                     for name in DEFINING
                     if getattr(chosen, name) is not None and not same_setting(name, saved.get(name),
                                                                                getattr(chosen, name))]
        if conflicts:
            raise TrainingError(f"{options.out} holds a run with other settings; cannot resume it with "
                                f"{'; '.join(conflicts)} (drop those options, or use another --out)")
        for name in DEFINING:
            setattr(chosen, name, saved.get(name))
    try:
        chosen.preset = presets.resolve(chosen.preset, saved=saved is not None)
    except ValueError as error:
        raise TrainingError(str(error)) from None
    preset = PRESETS[chosen.preset]
    chosen.direction = chosen.direction or "en-ja"
    chosen.seed = 0 if chosen.seed is None else chosen.seed
    for name in ("max_tokens", "vocab_size", "save_every"):     # None, not 0: a 0 is refused below
        if getattr(chosen, name) is None:
            setattr(chosen, name, preset[name])
    if chosen.minutes is None and chosen.epochs is None and chosen.steps is None:
        chosen.minutes, chosen.epochs, chosen.steps = preset["minutes"], preset["epochs"], preset["steps"]
    for f in dataclasses.fields(chosen):             # the values the preset or the saved run filled in
        check_value(f.name, getattr(chosen, f.name), "--" + f.name.replace("_", "-"))
    chosen.model = chosen.model or "transformer"
    _check_model_options(options, chosen)
    window_asked = options.attention_window is not None
    if window_asked and (chosen.attention or "softmax") != "local":     # it used to be recorded, and ignored
        raise TrainingError(f"--attention-window {options.attention_window} applies to --attention local only "
                            f"(attention here: {chosen.attention or 'softmax'}); drop it or add --attention local")
    if chosen.attention == "local" and chosen.attention_window is None:
        raise TrainingError("--attention local needs --attention-window W: each query sees the keys W positions "
                            "before and after it")
    return chosen


def _check_model_options(options: TrainOptions, chosen: TrainOptions) -> None:
    """Refuse the options of the other model kind by name, and fill in the LSTM's defaults.

    ``--attention`` and ``--attention-window`` choose the Transformer's self-attention, which an LSTM does not
    have; ``--attention-score`` and ``--no-input-feeding`` shape the LSTM's one attention and its decoder."""
    if chosen.model == "lstm":
        given = [f"--attention {chosen.attention}" if chosen.attention is not None else None,
                 f"--attention-window {chosen.attention_window}" if chosen.attention_window is not None else None]
        given = [flag for flag in given if flag]
        if given:
            raise TrainingError(f"{' and '.join(given)} choose{'s' if len(given) == 1 else ''} the Transformer's "
                                f"self-attention (chapter 13), and --model lstm has none: its one attention looks "
                                f"from the decoder at the encoder (choose its score with --attention-score); drop "
                                f"{'it' if len(given) == 1 else 'them'} or train --model transformer")
        chosen.attention_score = chosen.attention_score or "additive"
        chosen.input_feeding = True if chosen.input_feeding is None else chosen.input_feeding
        return
    given = [flag for flag, value in (("--attention-score", chosen.attention_score),
                                      ("--no-input-feeding", chosen.input_feeding)) if value is not None]
    if given:
        raise TrainingError(f"{' and '.join(given)} shape{'s' if len(given) == 1 else ''} the attention LSTM "
                            f"(--model lstm); the Transformer has no such setting: drop "
                            f"{'it' if len(given) == 1 else 'them'} or add --model lstm")
