"""Training a translator end to end (chapters 10–11).

    text pairs ─ BPE (one shared vocabulary, §5.1) ─ batches by tokens (§5.1)
      ─ Transformer with tied embeddings (§3.4) ─ label-smoothed loss, ε = 0.1 (§5.4)
      ─ backward ─ clip ─ Adam (β 0.9/0.98, ε 1e-9) with the warm-up schedule, eq. 3 (§5.3)
      ─ checkpoints ─ average of the last k (§6.1) ─ beam search, BLEU (§6.1)

``train(TrainOptions(...))`` runs it all and returns a summary; the command line
``python -m minitransformer train`` is a thin wrapper. A run lives in one folder
(``--out``, see checkpoint.py for the layout) and can be resumed exactly: the
checkpoint keeps the weights, Adam's moments, the schedule's step, the position
in the epoch (batches are a pure function of seed and epoch) and the state of
every dropout generator, so an interrupted and resumed run computes the same
losses as one that never stopped.
"""
from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence, TextIO

import numpy as np

from . import backend
from . import checkpoint as ckpt
from . import functional as F
from .bleu import corpus_bleu_score
from .data.batching import epoch_batches
from .data.bpe import BPETokenizer
from .data.corpus import Corpus, make_builtin_corpus
from .data.loaders import load_corpus
from .decode import decode_sentences
from .functional.dropout import Generator, default_generator
from .nn.transformer import Transformer, TransformerConfig
from .optim import Adam, NoamSchedule, clip_grad_norm
from .tensor import no_grad
from .translator import Translator, config_from_dict, tokenizer_from_dict, tokenizer_to_dict

# Each preset: model sizes, data, batch size, schedule and default length of a run.
# Peak learning rate of eq. 3 = factor / sqrt(d_model · warmup): 5.1e-3 for "small", 7.0e-4 for "base".
PRESETS: dict[str, dict[str, Any]] = {
    # for tests: seconds
    "tiny": dict(model=dict(d_model=32, n_heads=2, d_ff=64, n_layers=1, dropout=0.1), vocab_size=300,
                 corpus=dict(n_train=600, n_dev=40, n_test=40, n_heldout=40), max_tokens=400, warmup=40,
                 factor=0.5, minutes=None, epochs=1, steps=None, save_every=20, eval_sentences=20),
    # --quick: a 20-second smoke run of the whole pipeline
    "quick": dict(model=dict(d_model=64, n_heads=4, d_ff=256, n_layers=2, dropout=0.1), vocab_size=600,
                  corpus=dict(n_train=4000, n_dev=100, n_test=100, n_heldout=100), max_tokens=1000, warmup=100,
                  factor=0.5, minutes=0.25, epochs=None, steps=None, save_every=40, eval_sentences=50),
    # the default: a real translator of the built-in corpus in a few minutes on a laptop CPU.
    # A fixed number of steps (not minutes), so that every machine gets the same model and BLEU.
    "small": dict(model=dict(d_model=128, n_heads=4, d_ff=512, n_layers=2, dropout=0.1), vocab_size=1000,
                  corpus=dict(n_train=20000, n_dev=500, n_test=500, n_heldout=500), max_tokens=1000, warmup=300,
                  factor=1.0, minutes=None, epochs=None, steps=1400, save_every=100, eval_sentences=200),
    # real corpora (small_parallel_enja, Tatoeba): a bigger vocabulary and model
    "medium": dict(model=dict(d_model=256, n_heads=4, d_ff=1024, n_layers=3, dropout=0.1), vocab_size=8000,
                   corpus=dict(n_train=20000, n_dev=500, n_test=500, n_heldout=500), max_tokens=1500, warmup=800,
                   factor=1.0, minutes=30.0, epochs=None, steps=None, save_every=200, eval_sentences=200),
    # the paper's base model (§6.1, Table 3): for a GPU
    "base": dict(model=dict(d_model=512, n_heads=8, d_ff=2048, n_layers=6, dropout=0.1), vocab_size=16000,
                 corpus=dict(n_train=20000, n_dev=500, n_test=500, n_heldout=500), max_tokens=25000, warmup=4000,
                 factor=1.0, minutes=None, epochs=20, steps=None, save_every=1000, eval_sentences=500),
}
DEFAULT_PRESET = "small"
LABEL_SMOOTHING = 0.1   # ε_ls (§5.4)
CLIP_NORM = 1.0
MAX_LEN = 256           # rows of the positional table; longer inputs are truncated when translating


class TrainingError(Exception):
    """The run cannot start or continue; the message says why."""


@dataclass
class TrainOptions:
    """Everything a run needs. ``None`` means: from the preset (or, when resuming, from the saved run)."""

    out: str = "runs/enja"
    data: str | None = None            # a corpus folder; None = the built-in corpus
    direction: str | None = None       # "en-ja" or "ja-en"
    preset: str | None = None
    seed: int | None = None
    max_tokens: int | None = None      # padded tokens per batch side (§5.1 used ~25,000)
    vocab_size: int | None = None
    minutes: float | None = None       # time budget of the training steps of this invocation
    epochs: int | None = None          # stop after this many epochs in total
    steps: int | None = None           # stop after this many steps in total
    device: str = "cpu"
    resume: bool = False
    overwrite: bool = False
    average: int = 5                   # average the last k checkpoints at the end (§6.1); 1 = off
    beam: int = 4                      # §6.1
    alpha: float = 0.6                 # §6.1
    limit: int | None = None           # read at most this many pairs per split of a corpus folder
    attention: str | None = None       # self-attention: softmax (default), flash, local, linear (chapter 13)
    attention_window: int | None = None  # for attention "local"
    evaluate: bool = True              # final test BLEU, examples and the attention picture
    plot: bool = True
    quiet: bool = False


# -- small helpers ------------------------------------------------------------------------------
def _resolved(options: TrainOptions, saved: dict | None) -> TrainOptions:
    """Fill the None fields from the saved run (resume) or the preset; refuse conflicts on resume."""
    chosen = dataclasses.replace(options)
    defining = ("data", "direction", "preset", "seed", "max_tokens", "vocab_size", "limit", "attention",
                "attention_window")
    if saved is not None:
        conflicts = [f"{name}: {saved[name]!r} in the saved run, {getattr(options, name)!r} requested"
                     for name in defining
                     if getattr(options, name) is not None and saved.get(name) != getattr(options, name)]
        if conflicts:
            raise TrainingError(f"{options.out} holds a run with other settings; cannot resume it with "
                                f"{'; '.join(conflicts)} (drop those options, or use another --out)")
        for name in defining:
            setattr(chosen, name, saved.get(name))
    chosen.preset = chosen.preset or DEFAULT_PRESET
    if chosen.preset not in PRESETS:
        raise TrainingError(f"unknown preset {chosen.preset!r}; choose one of {', '.join(PRESETS)}")
    preset = PRESETS[chosen.preset]
    chosen.direction = chosen.direction or "en-ja"
    chosen.attention = chosen.attention or "softmax"
    chosen.seed = 0 if chosen.seed is None else chosen.seed
    chosen.max_tokens = chosen.max_tokens or preset["max_tokens"]
    chosen.vocab_size = chosen.vocab_size or preset["vocab_size"]
    if chosen.minutes is None and chosen.epochs is None and chosen.steps is None:
        chosen.minutes, chosen.epochs, chosen.steps = preset["minutes"], preset["epochs"], preset["steps"]
    for name in ("minutes", "epochs", "steps", "max_tokens", "vocab_size"):
        value = getattr(chosen, name)
        if value is not None and value <= 0:
            raise TrainingError(f"--{name.replace('_', '-')} must be positive, got {value}")
    if chosen.average < 1:
        raise TrainingError(f"--average must be >= 1, got {chosen.average}")
    return chosen


def load_data(options: TrainOptions) -> Corpus:
    """The built-in corpus (sized by the preset) or the corpus folder ``options.data``."""
    if options.data is None:
        if options.direction not in ("en-ja", "ja-en"):
            raise TrainingError(f"the built-in corpus is English–Japanese: --direction must be en-ja or ja-en, "
                                f"got {options.direction!r}")
        sizes = PRESETS[options.preset]["corpus"]
        if options.limit is not None:
            sizes = {k: min(v, options.limit) for k, v in sizes.items()}
        corpus = make_builtin_corpus(seed=0, **sizes)
    else:
        try:
            corpus = load_corpus(options.data, options.direction, limit=options.limit)
        except ValueError as error:  # CorpusError is a ValueError
            raise TrainingError(str(error)) from None
    if not corpus.train:
        raise TrainingError(f"the corpus {corpus.name!r} has no training pairs")
    return corpus


def encode_pairs(tokenizer: BPETokenizer, pairs: Sequence[tuple[str, str]], max_len: int,
                 drop_long: bool = True) -> list[tuple[list[int], list[int]]]:
    """(source ids, target ids) for each pair; pairs that do not fit ``max_len`` are dropped."""
    examples = []
    for source, target in pairs:
        src, tgt = tokenizer.encode(source), tokenizer.encode(target)
        if not src or (drop_long and (len(src) > max_len or len(tgt) + 1 > max_len)):
            continue
        examples.append((src, tgt))
    return examples


def dropout_generators(model: Transformer) -> list[Generator]:
    """Every random-number generator the model's dropout draws from, in a fixed order."""
    found: list[Generator] = []
    for module in model.modules():
        for value in vars(module).values():
            if isinstance(value, Generator) and all(value is not g for g in found):
                found.append(value)
    found.append(default_generator())  # attention dropout and functional dropout use this one
    return found


def rng_state(model: Transformer) -> list[dict]:
    """The dropout generators' states, as JSON-ready data (host streams only)."""
    states = []
    for generator in dropout_generators(model):
        stream = generator._streams.get("cpu")
        states.append({"seed": generator.initial_seed,
                       "cpu": None if stream is None else stream.bit_generator.state})
    return states


def set_rng_state(model: Transformer, states: list[dict], step: int) -> None:
    """Restore what ``rng_state`` saved. GPU streams cannot be saved: they restart from a seed
    derived from the step, so a resumed GPU run is reproducible but not bit-identical."""
    generators = dropout_generators(model)
    if len(states) != len(generators):
        raise TrainingError(f"the checkpoint has {len(states)} dropout generators, the model {len(generators)}")
    for generator, state in zip(generators, states):
        generator.seed(int(state["seed"]) if backend.default_device() == "cpu" else
                       int(np.random.SeedSequence([int(state["seed"]), step]).generate_state(1)[0]))
        if state["cpu"] is not None:
            stream = np.random.default_rng()
            stream.bit_generator.state = state["cpu"]
            generator._streams["cpu"] = stream


def batch_loss(model: Transformer, batch, label_smoothing: float = LABEL_SMOOTHING):
    """Mean label-smoothed cross-entropy over the batch's target tokens (§5.4)."""
    logits = model(batch.src, batch.tgt_in)                                     # (B, T, V)
    vocab = logits.shape[-1]
    targets = backend.to_device(batch.tgt_out.reshape(-1), logits.device)       # (B·T,) on the logits' device
    return F.cross_entropy(logits.reshape(-1, vocab), targets,
                           label_smoothing=label_smoothing, ignore_index=model.config.pad_id)


def evaluate_loss(model: Transformer, examples, max_tokens: int) -> float:
    """Per-token cross-entropy (no smoothing) over ``examples``, in eval mode."""
    was_training = model.training
    model.eval()
    total, tokens = 0.0, 0
    with no_grad():
        for batch in epoch_batches(examples, max_tokens, model.config.pad_id, seed=0, epoch=0):
            loss = batch_loss(model, batch, label_smoothing=0.0)
            total += float(loss.item()) * batch.n_tgt_tokens
            tokens += batch.n_tgt_tokens
    model.train(was_training)
    return total / max(tokens, 1)


def bleu_of(model: Transformer, tokenizer: BPETokenizer, pairs, beam: int, alpha: float = 0.6):
    """Corpus BLEU of the model on (source, reference) text pairs; returns (BLEUScore, hypotheses)."""
    was_training = model.training
    model.eval()
    sources = [tokenizer.encode(src)[:model.config.max_len] for src, _ in pairs]
    outputs = decode_sentences(model, sources, tokenizer.bos_id, tokenizer.eos_id, beam_size=beam, alpha=alpha)
    hypotheses = [tokenizer.decode(ids) for ids in outputs]
    model.train(was_training)
    return corpus_bleu_score(hypotheses, [ref for _, ref in pairs]), hypotheses


def _format_time(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


class ProgressBar:
    """One status line on stderr: redrawn in place on a terminal, printed every few seconds otherwise."""

    def __init__(self, stream: TextIO = sys.stderr, enabled: bool = True, interval: float | None = None) -> None:
        self.stream, self.enabled = stream, enabled
        self.tty = enabled and hasattr(stream, "isatty") and stream.isatty()
        self.interval = interval if interval is not None else (0.2 if self.tty else 10.0)
        self.last = -math.inf
        self.width = 0

    def update(self, fraction: float | None, text: str, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self.last < self.interval:
            return
        self.last = now
        if fraction is not None:
            filled = int(20 * min(max(fraction, 0.0), 1.0))
            text = f"[{'#' * filled}{'.' * (20 - filled)}] {100 * min(fraction, 1.0):3.0f}% {text}"
        if self.tty:
            self.stream.write("\r" + text.ljust(self.width))
            self.width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def message(self, text: str) -> None:
        """A line of its own (clears the status line first)."""
        if not self.enabled:
            return
        if self.tty and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.width = 0
        self.stream.write(text + "\n")
        self.stream.flush()
        self.last = -math.inf


# -- the run ------------------------------------------------------------------------------------------
def _prepare_out_dir(options: TrainOptions) -> dict | None:
    """Check the output folder; return the saved run settings when resuming."""
    out = Path(options.out)
    run_file = out / "config.json"
    has_run = run_file.is_file() or (out / ckpt.LATEST_FILE).is_file()
    if options.resume:
        if not has_run:
            raise TrainingError(f"--resume: {out} holds no run to resume (no config.json / latest checkpoint)")
        try:
            saved = json.loads(run_file.read_text(encoding="utf-8"))
            return saved["training"]
        except (OSError, ValueError, KeyError) as error:
            raise TrainingError(f"--resume: cannot read {run_file} ({type(error).__name__}: {error})") from None
    if has_run and not options.overwrite:
        raise TrainingError(f"{out} already holds a training run; pass --resume to continue it, "
                            f"--overwrite to start again there, or choose another --out")
    if out.exists() and not out.is_dir():
        raise TrainingError(f"--out {out} exists and is not a folder")
    return None


def train(options: TrainOptions, log: Callable[[str], None] | None = None) -> dict:
    """Train (or resume) a translator; returns a summary dict (also written to OUT/results.json)."""
    say = log or (lambda text: None if options.quiet else print(text, flush=True))
    saved = _prepare_out_dir(options)
    opts = _resolved(options, saved)
    preset = PRESETS[opts.preset]
    out = Path(opts.out)
    try:
        backend.set_default_device(opts.device)
    except (RuntimeError, ValueError) as error:
        raise TrainingError(f"--device {opts.device}: {error}") from None
    wall_start = time.monotonic()

    corpus = load_data(opts)
    direction = opts.direction
    try:
        train_pairs = corpus.pairs("train", direction)
    except ValueError as error:
        raise TrainingError(str(error)) from None
    dev_pairs = corpus.pairs("dev", direction)

    # tokenizer and configuration: trained/built fresh, or read back from the run folder
    if saved is not None:
        checkpoint = _load_resume_checkpoint(out)
        tokenizer = tokenizer_from_dict(checkpoint.tokenizer or {}, str(checkpoint.path / ckpt.TOKENIZER_FILE))
        config = config_from_dict(checkpoint.state.get("config"), str(checkpoint.path))
        expected = _model_config(opts, tokenizer.vocab_size)
        differences = ckpt.config_differences(dataclasses.asdict(config), dataclasses.asdict(expected))
        if differences:
            raise TrainingError(f"{checkpoint.path}: saved from another model configuration: "
                                + "; ".join(differences))
    else:
        checkpoint = None
        t0 = time.monotonic()
        tokenizer = BPETokenizer.train([s for pair in train_pairs for s in pair], opts.vocab_size)
        say(f"BPE: {tokenizer.vocab_size} tokens shared by both languages (learned in {time.monotonic() - t0:.1f} s)")
        config = _model_config(opts, tokenizer.vocab_size)
        out.mkdir(parents=True, exist_ok=True)
        ckpt.write_json_atomic(out / "config.json", {"model": dataclasses.asdict(config),
                                                     "training": _run_settings(opts)})
        ckpt.write_json_atomic(out / ckpt.TOKENIZER_FILE, tokenizer_to_dict(tokenizer))

    train_examples = encode_pairs(tokenizer, train_pairs, config.max_len)
    dev_examples = encode_pairs(tokenizer, dev_pairs, config.max_len)
    model = Transformer(config)
    if opts.device != "cpu":
        model.to(opts.device)
    optimizer = Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9)   # §5.3
    schedule = NoamSchedule(optimizer, config.d_model, warmup=preset["warmup"], factor=preset["factor"])
    step, epoch, position, history = 0, 0, 0, []
    if checkpoint is not None:
        ckpt.check_weights_match(checkpoint.weights, model.state_dict(), where=str(checkpoint.path))
        model.load_state_dict(checkpoint.weights)
        if checkpoint.optimizer is None:
            raise TrainingError(f"{checkpoint.path}: has no optimizer.npz, so training cannot resume exactly")
        try:
            optimizer.load_state_dict(checkpoint.optimizer)
            schedule.load_state_dict(checkpoint.state["schedule"])
        except (KeyError, ValueError) as error:
            raise TrainingError(f"{checkpoint.path}: optimiser state does not fit ({error})") from None
        set_rng_state(model, checkpoint.state["rng"], checkpoint.step)
        step, epoch, position = checkpoint.step, checkpoint.state["epoch"], checkpoint.state["position"]
        history = checkpoint.state.get("history", [])
        say(f"resuming {out} at step {step} (epoch {epoch + 1}, batch {position})")
    say(f"{corpus.name} corpus {direction}: {len(train_examples):,} training pairs, {len(dev_examples)} dev; "
        f"model {config.n_layers}+{config.n_layers} layers, d_model {config.d_model}, "
        f"{model.num_parameters():,} parameters; batches of ≤ {opts.max_tokens} tokens")

    def save(kind: str = "step") -> Path:
        state = {"config": dataclasses.asdict(config), "training": _run_settings(opts),
                 "schedule": schedule.state_dict(), "epoch": epoch, "position": position,
                 "rng": rng_state(model), "history": history, "kind": kind}
        return ckpt.save_checkpoint(out, step, model.state_dict(), state, optimizer=optimizer.state_dict(),
                                    tokenizer=tokenizer_to_dict(tokenizer), keep_last=max(opts.average, 2))

    # the loop: epochs of length-bucketed batches, each epoch a pure function of (seed, epoch)
    bar = ProgressBar(enabled=not opts.quiet)
    budget = None if opts.minutes is None else 60.0 * opts.minutes
    losses: list[float] = []
    tokens_seen, started = 0, time.monotonic()
    last_saved = step if checkpoint is not None else -1
    batches = epoch_batches(train_examples, opts.max_tokens, config.pad_id, opts.seed, epoch,
                            tokenizer.bos_id, tokenizer.eos_id)
    model.train()

    def stop_reason() -> str | None:
        if opts.steps is not None and step >= opts.steps:
            return f"{opts.steps} steps"
        if opts.epochs is not None and epoch >= opts.epochs:
            return f"{opts.epochs} epochs"
        if budget is not None and time.monotonic() - started >= budget:
            return f"{opts.minutes:g} minutes"
        return None

    def fraction_done() -> float | None:
        parts = []
        if opts.steps is not None:
            parts.append(step / opts.steps)
        if opts.epochs is not None:
            parts.append((epoch + position / max(len(batches), 1)) / opts.epochs)
        if budget is not None:
            parts.append((time.monotonic() - started) / budget)
        return max(parts) if parts else None

    def end_of_epoch() -> None:
        dev_loss = evaluate_loss(model, dev_examples, opts.max_tokens)
        n = min(preset["eval_sentences"], len(dev_pairs))
        dev_bleu, _ = bleu_of(model, tokenizer, dev_pairs[:n], beam=1)
        history.append({"epoch": epoch + 1, "step": step, "train_loss": _mean_tail(losses),
                        "dev_loss": dev_loss, "dev_bleu_greedy": dev_bleu.score})
        bar.message(f"epoch {epoch + 1} done at step {step}: train loss {_mean_tail(losses):.3f}, "
                    f"dev loss {dev_loss:.3f} (ppl {math.exp(min(dev_loss, 50)):.2f}), "
                    f"dev BLEU {dev_bleu.score:.1f} (greedy, {n} sentences), "
                    f"{_format_time(time.monotonic() - started)}")

    reason = stop_reason()
    while reason is None:
        if position >= len(batches):            # the epoch is complete: evaluate it, start the next
            end_of_epoch()
            epoch, position = epoch + 1, 0
            batches = epoch_batches(train_examples, opts.max_tokens, config.pad_id, opts.seed, epoch,
                                    tokenizer.bos_id, tokenizer.eos_id)
            reason = stop_reason()
            continue
        batch = batches[position]
        loss = batch_loss(model, batch)
        optimizer.zero_grad()
        loss.backward()
        clip_grad_norm(optimizer.params, CLIP_NORM)
        lr = schedule.step()                    # eq. 3 sets the rate of this update
        optimizer.step()
        step, position = step + 1, position + 1
        value = float(loss.item())
        if not math.isfinite(value):
            raise TrainingError(f"the loss became {value} at step {step}; lower the learning rate (factor) "
                                f"or raise the warm-up")
        losses.append(value)
        tokens_seen += batch.n_tgt_tokens
        if step % preset["save_every"] == 0:
            save()
            last_saved = step
        elapsed = time.monotonic() - started
        bar.update(fraction_done(), f"epoch {epoch + 1} step {step} | loss {_mean_tail(losses):.3f} | "
                                    f"{tokens_seen / max(elapsed, 1e-9):,.0f} tok/s | lr {lr:.2e} | "
                                    f"{_format_time(elapsed)}")
        reason = stop_reason()
    train_seconds = time.monotonic() - started
    if step != last_saved:
        save()
    bar.message(f"stopped after {reason}: step {step}, {train_seconds:.0f} s of training, "
                f"{tokens_seen / max(train_seconds, 1e-9):,.0f} target tokens/s")

    summary: dict[str, Any] = {"out": str(out), "steps": step, "epochs": epoch + position / max(len(batches), 1),
                               "train_seconds": round(train_seconds, 1), "losses": losses, "history": history,
                               "config": dataclasses.asdict(config), "training": _run_settings(opts)}
    final_weights, chosen = _final_model(model, tokenizer, out, dev_pairs, opts, preset, say)
    model.load_state_dict(final_weights)
    ckpt.save_final(out, final_weights, {"config": dataclasses.asdict(config), "training": _run_settings(opts),
                                         "step": step, "model": chosen},
                    tokenizer=tokenizer_to_dict(tokenizer))
    summary["final_model"] = chosen
    if opts.evaluate:
        summary.update(_final_evaluation(model, tokenizer, corpus, direction, opts, say))
    summary["wall_seconds"] = round(time.monotonic() - wall_start, 1)
    ckpt.write_json_atomic(out / "results.json", {k: v for k, v in summary.items() if k != "losses"})
    say(f"total wall time {_format_time(summary['wall_seconds'])} ({summary['wall_seconds']:.0f} s); "
        f"try: python -m minitransformer translate --checkpoint {out} \"...\"")
    return summary


def _mean_tail(values: list[float], n: int = 50) -> float:
    tail = values[-n:]
    return sum(tail) / len(tail) if tail else float("nan")


def _model_config(opts: TrainOptions, vocab_size: int) -> TransformerConfig:
    return TransformerConfig(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, tie_embeddings=True,
                             pad_id=BPETokenizer.pad_id, max_len=MAX_LEN, seed=opts.seed,
                             attention=opts.attention or "softmax", attention_window=opts.attention_window,
                             **PRESETS[opts.preset]["model"])


def _run_settings(opts: TrainOptions) -> dict:
    return {name: getattr(opts, name) for name in
            ("data", "direction", "preset", "seed", "max_tokens", "vocab_size", "limit", "attention",
             "attention_window")}


def _load_resume_checkpoint(out: Path) -> ckpt.Checkpoint:
    try:
        return ckpt.load_checkpoint(out, with_optimizer=True, prefer_final=False)
    except ckpt.CheckpointError as error:
        raise TrainingError(f"--resume: {error}") from None


def _final_model(model, tokenizer, out: Path, dev_pairs, opts: TrainOptions, preset, say):
    """The weights to keep: the average of the last k checkpoints (§6.1) if it does at least as well
    on the dev set (greedy BLEU) as the last checkpoint, else the last checkpoint."""
    last = model.state_dict()
    checkpoints = ckpt.list_checkpoints(out)[-opts.average:]
    if opts.average < 2 or len(checkpoints) < 2:
        return last, "last checkpoint"
    averaged = ckpt.average_checkpoints(checkpoints)
    n = min(preset["eval_sentences"], len(dev_pairs))
    last_bleu, _ = bleu_of(model, tokenizer, dev_pairs[:n], beam=1)
    model.load_state_dict(averaged)
    averaged_bleu, _ = bleu_of(model, tokenizer, dev_pairs[:n], beam=1)
    names = ", ".join(p.name for p in checkpoints)
    say(f"dev BLEU (greedy, {n} sentences): last checkpoint {last_bleu.score:.2f}, "
        f"average of {len(checkpoints)} ({names}) {averaged_bleu.score:.2f}")
    if averaged_bleu.score >= last_bleu.score:
        return averaged, f"average of the last {len(checkpoints)} checkpoints"
    return last, "last checkpoint (the average scored lower on dev)"


def _final_evaluation(model, tokenizer, corpus: Corpus, direction: str, opts: TrainOptions, say) -> dict:
    """Test BLEU with beam search on test (and the held-out-combination test), examples, attention picture."""
    results: dict[str, Any] = {}
    model.eval()
    for split, label in (("test", "test (unseen sentences)"),
                         ("test_heldout", "test_heldout (word combinations never seen in training)")):
        pairs = corpus.pairs(split, direction)
        if not pairs:
            continue
        t0 = time.monotonic()
        score, hypotheses = bleu_of(model, tokenizer, pairs, beam=opts.beam, alpha=opts.alpha)
        exact = sum(h.split() == ref.split() for h, (_, ref) in zip(hypotheses, pairs)) / len(pairs)
        results[f"{split}_bleu"] = round(score.score, 2)
        results[f"{split}_exact_match"] = round(exact, 4)
        say(f"{label}: BLEU {score.score:.2f} (beam {opts.beam}, α {opts.alpha}), "
            f"{100 * exact:.1f}% exact, {len(pairs)} sentences, {time.monotonic() - t0:.1f} s")
        if split == "test":
            examples = []
            for (source, reference), output in list(zip(pairs, hypotheses))[:5]:
                examples.append({"source": source, "reference": reference, "output": output})
                say(f"  {source}\n    → {output}\n    reference: {reference}")
            results["examples"] = examples
    if opts.plot:
        pairs = corpus.pairs("test", direction) or corpus.pairs("dev", direction)
        if pairs:
            try:
                from .plot import attention_heatmap  # noqa: PLC0415 - matplotlib only when drawing
                translator = Translator(model, tokenizer)
                source = min(pairs[:50], key=lambda p: abs(len(p[0].split()) - 9))[0]
                weights, src_labels, tgt_labels, src_ids, tgt_ids = translator.cross_attention(source)
                path = Path(opts.out) / "attention.png"
                attention_heatmap(weights, src_labels, tgt_labels, path,
                                  title=f"last decoder layer, mean over heads: {source}",
                                  src_ids=src_ids, tgt_ids=tgt_ids)
                results["attention_png"] = str(path)
                say(f"attention heat map of “{source}”: {path}")
            except ImportError as error:
                say(f"no attention picture ({error}); install matplotlib to draw it")
    return results
