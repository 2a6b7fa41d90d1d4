"""Training a translator end to end (chapters 10–11).

    text pairs ─ BPE (one shared vocabulary, §5.1) ─ batches by tokens (§5.1)
      ─ Transformer with tied embeddings (§3.4) ─ label-smoothed loss, ε = 0.1 (§5.4)
      ─ backward ─ clip ─ Adam (β 0.9/0.98, ε 1e-9) with the warm-up schedule, eq. 3 (§5.3)
      ─ checkpoints ─ average of the last k (§6.1) ─ beam search, BLEU (§6.1)

``TrainOptions(model="lstm")`` (``--model lstm``) trains the attention LSTM of chapter 6 (nn.Seq2Seq)
the same way, by the same recipe, at about the same size (presets.LSTM_MODELS, presets.recipe).

``train(TrainOptions(...))`` runs it in three steps, each a function below:

    run = prepare_run(...)      the data, BPE, the model, Adam and eq. 3 (or a checkpoint of them)
    record = train_loop(run)    optimizer steps until a stopping rule holds; checkpoints; dev scores per epoch
    finish(run, record, ...)    the average of the last checkpoints (§6.1), the final model, test BLEU

The command line ``python -m minitransformer train`` is a thin wrapper. A run
lives in one folder (``--out``, see checkpoint.py for the layout) and can be
resumed exactly: the checkpoint keeps the weights, Adam's moments, the
schedule's step, the ``TrainState`` (the position in the epoch: batches are a
pure function of seed and epoch) and the state of every dropout generator, so
an interrupted and resumed run computes the same losses as one that never stopped.

With ``--distributed`` (chapter 14) the same three steps run on every rank that
``mpirun -n P`` started (distributed.py): each step deals P batches out, one per
rank, and one all-reduce gives every rank the gradient of all P together; rank 0
alone prints, writes the run folder and evaluates.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import shlex
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from tqdm.auto import tqdm

from .. import backend
from .. import checkpoint as ckpt
from .. import models
from ..bleu import tokenization_for
from ..chrf import corpus_chrf_score
from ..data import fingerprint, run_data
from ..data.batching import epoch_batches, iterate_batches
from ..data.corpus import Corpus
from ..data.raw_bpe import choose_tokenizer
from ..data.tokenizer import TOKENIZERS, Tokenizer
from ..data.unigram import MAX_TEXT_LENGTH
from ..data.loaders import CorpusError
from ..decode import check_beam_width
from ..functional.dropout import Generator
from ..nn.seq2seq import Seq2Seq, Seq2SeqConfig
from ..nn.transformer import Transformer, TransformerConfig
from ..fast.adam import FastAdam
from ..optim import Adam, NoamSchedule, clip_grad_norm, cooldown_factor
from ..presets import PRESETS, recipe
from ..tensor import no_grad
from ..translator import Translator, config_from_dict, tokenizer_from_dict, tokenizer_to_dict
from . import distributed, run_folder
from .distributed import World
from .options import DEFINING, TrainingError, TrainOptions, result_settings, run_settings
from .progress import ProgressBar

LABEL_SMOOTHING = 0.1   # ε_ls (§5.4)
CLIP_NORM = 1.0
MAX_LEN = 256           # rows of the positional table; longer inputs are truncated when translating


@dataclass
class TrainState:
    """Where a run stands. Saved in every checkpoint; with the weights, Adam and the dropout
    generators it is all a resumed run needs to continue exactly."""

    step: int = 0                 # optimizer updates so far
    epoch: int = 0                # the epoch being trained, from 0
    position: int = 0             # batches of that epoch already trained
    history: list[dict] = field(default_factory=list)   # dev scores at the end of each epoch


@dataclass
class Run:
    """What ``prepare_run`` builds and the later steps use."""

    options: TrainOptions         # resolved: every None the preset fills is filled
    corpus: Corpus
    tokenizer: Tokenizer
    model: Transformer | Seq2Seq
    optimizer: Adam
    schedule: NoamSchedule
    train_examples: list          # (source ids, target ids) pairs
    dev_examples: list
    state: TrainState
    say: Callable[[str], None]
    bleu_tokenize: str = "13a"    # how BLEU cuts the target language into tokens (bleu.tokenization_for)
    world: World = distributed.SINGLE   # this process's place among the ranks of an MPI run (chapter 14)
    step_totals: distributed.StepTotals | None = None   # under MPI: the last step's all-reduced loss, tokens, clock
    loop_started: float = 0.0     # time.monotonic() when this invocation's training steps began
    corpus_record: dict | None = None   # the corpus folder resolved, each file's size and SHA-256 (data/fingerprint.py)

    @property
    def out(self) -> Path:
        return Path(self.options.out)

    @property
    def recipe(self) -> dict:
        return recipe(self.options.preset, self.options.model)

    @property
    def dev_pairs(self) -> list[tuple[str, str]]:
        return self.corpus.pairs("dev", self.options.direction)


def train(options: TrainOptions, log: Callable[[str], None] | None = None) -> dict:
    """Train (or resume) a translator; returns a summary dict (also written to OUT/results.json).

    A folder that already holds the same run, finished, is left as it is: its results are returned.
    With ``options.distributed`` this process is one rank of an MPI run; an error on any rank stops
    every rank (a rank left alone would wait for the others' next all-reduce forever).
    """
    if not options.distributed:
        return _train(options, log, distributed.SINGLE)
    world = distributed.init_world()
    try:
        return _train(options, log, world)
    except BaseException as error:      # noqa: BLE001 - a failure on one rank must stop the others too
        what = str(error) if isinstance(error, TrainingError) else f"{type(error).__name__}: {error}"
        print(f"python -m minitransformer train --distributed: error on rank {world.rank} of {world.size}: "
              f"{what}; stopping all {world.size} ranks", file=sys.stderr, flush=True)
        world.abort(2 if isinstance(error, TrainingError) else 1)
        raise


def _train(options: TrainOptions, log: Callable[[str], None] | None, world: World) -> dict:
    say = (log or _printer(options.quiet)) if world.is_root else _silent
    started = time.monotonic()
    opts, saved = run_folder.open_run_folder(options)        # every option and --out checked; nothing written
    out = Path(opts.out)
    if saved is None and not opts.overwrite and run_folder.run_state(out) in ("finished", "interrupted"):
        return run_folder.same_finished_run(opts, say, ranks=world.size)
    corpus = load_data(opts)                                  # the corpus and its splits, checked, still nothing
    if saved is not None:
        check_resumed_corpus(out, opts, corpus, say)
    _use_device(opts)
    _check_model_config(opts)
    if options.distributed and world.size == 1:
        say("--distributed: this process is the only rank (mpirun -n P starts P of them), so it trains alone")
    world.barrier()                     # every rank has checked --out before rank 0 locks it (else it sees the lock)
    with run_folder.lock(out) if world.is_root else contextlib.nullcontext():   # one writer: rank 0
        if world.is_root:               # again, now that no other process can write in --out
            opts, saved = run_folder.open_run_folder(options)
            if saved is None and not opts.overwrite and run_folder.run_state(out) in ("finished", "interrupted"):
                raise TrainingError(f"{out} changed while this run was starting (another process wrote a run "
                                    f"there); run the command again")
            if saved is not None:       # what a killed invocation of this run left half-written
                run_folder.remove_temporaries(out)
            if saved is None and run_folder.run_state(out) == "started":
                say(f"{out} holds a run that saved no checkpoint, so nothing of it is lost: starting "
                    f"{'it ' if opts.resume else ''}again from step 0")
        world.barrier()                 # every rank has looked at --out before rank 0 writes there
        run = prepare_run(opts, saved, say, world, corpus)
        record = train_loop(run)
        if not world.is_root:           # rank 0 alone chooses, saves and evaluates the final model
            world.wait_for_root()
            return {"out": str(run.out), "steps": run.state.step, "rank": world.rank, "ranks": world.size}
        with interruption_notice(run):  # the steps are saved: a --resume chooses and scores the final model again
            summary = finish(run, record, started)
    world.release_others()
    return summary


# -- step 1: prepare --------------------------------------------------------------------------------
def prepare_run(opts: TrainOptions, saved: dict | None, say: Callable[[str], None],
                world: World = distributed.SINGLE, corpus: Corpus | None = None) -> Run:
    """Data, tokenizer, model, optimizer and schedule: new, or read back from the run being resumed.

    Under MPI every rank reads the corpus (and, resuming, the checkpoint: --out must be a folder they all
    see); rank 0 alone learns BPE and writes the new run folder, and sends the vocabulary to the others.
    ``corpus``: the run's corpus if already loaded (``load_data``).
    """
    _use_device(opts)
    corpus = corpus if corpus is not None else load_data(opts)
    record = fingerprint.fingerprint(opts.data, corpus)
    try:
        train_pairs = corpus.pairs("train", opts.direction)
    except ValueError as error:
        raise TrainingError(str(error)) from None
    if saved is not None:                       # resume: the vocabulary and model the run was started with
        checkpoint = _load_resume_checkpoint(Path(opts.out))
        tokenizer, config = resumed_vocabulary(checkpoint, opts, world)
    else:
        checkpoint = None
        tokenizer, config = new_vocabulary(opts, train_pairs, say, world, record)
    run = build_run(opts, corpus, tokenizer, config, say, world)
    run.corpus_record = record
    if checkpoint is not None:
        restore(run, checkpoint)
        check_steps_reached(opts, run.state, checkpoint.path)
        say(f"resuming {run.out} at step {run.state.step} (epoch {run.state.epoch + 1}, batch {run.state.position})")
    else:
        distributed.seed_dropout(run.model, world)   # each rank its own dropout masks; rank 0 those of one process
    distributed.broadcast_parameters(world, run.model.parameters())   # one model: rank 0's weights everywhere
    if world.size > 1:
        say(f"data parallel on {world.size} ranks: each step takes {world.size} batches, one per rank, "
            f"and averages their gradients with one all-reduce")
    say(f"{corpus.name} corpus {opts.direction}: {len(run.train_examples):,} training pairs, "
        f"{len(run.dev_examples)} dev; {_describe_model(config)}, "
        f"{run.model.num_parameters():,} parameters; batches of ≤ {opts.max_tokens} tokens")
    return run


def resumed_vocabulary(checkpoint: ckpt.Checkpoint, opts: TrainOptions,
                       world: World) -> tuple[Tokenizer, TransformerConfig | Seq2SeqConfig]:
    """The tokenizer and model configuration of the run being resumed, refused if the options now ask for
    another model or another number of ranks."""
    _check_same_ranks(checkpoint, world)
    tokenizer = tokenizer_from_dict(checkpoint.tokenizer or {}, str(checkpoint.path / ckpt.TOKENIZER_FILE))
    config = config_from_dict(checkpoint.state.get("config"), str(checkpoint.path))
    differences = ckpt.config_differences(dataclasses.asdict(config),
                                          dataclasses.asdict(_model_config(opts, tokenizer.vocab_size)))
    if differences:
        raise TrainingError(f"{checkpoint.path}: saved from another model configuration: " + "; ".join(differences))
    _check_beam_width(opts, config)
    return tokenizer, config


def new_vocabulary(opts: TrainOptions, train_pairs: list[tuple[str, str]], say: Callable[[str], None],
                   world: World, corpus_record: dict | None = None
                   ) -> tuple[Tokenizer, TransformerConfig | Seq2SeqConfig]:
    """A new run's tokenizer, learned from both sides of the training pairs (one shared vocabulary, §3.4),
    and its model configuration. Rank 0 learns it, starts the run folder and sends it to the other ranks."""
    if not world.is_root:                       # another rank of a new run: rank 0's vocabulary
        tokenizer = tokenizer_from_dict(world.broadcast_json(), "the vocabulary rank 0 sent")
        return tokenizer, _model_config(opts, tokenizer.vocab_size)
    t0 = time.monotonic()
    kind, why = choose_tokenizer(opts.tokenizer, [[s for s, _ in train_pairs], [t for _, t in train_pairs]])
    tokenizer = TOKENIZERS[kind].train([s for pair in train_pairs for s in pair], opts.vocab_size)
    say(f"{'unigram LM' if kind == 'unigram' else 'BPE'} "
        f"({'raw text, SentencePiece-style' if kind != 'words' else 'within words'}: {why}): "
        f"{tokenizer.vocab_size} tokens shared by both languages (learned in {time.monotonic() - t0:.1f} s)")
    skipped = getattr(tokenizer, "skipped_texts", 0)     # the unigram learner's time grows with the longest line
    if skipped:
        say(f"{skipped} sentence{'s' * (skipped != 1)} longer than {MAX_TEXT_LENGTH:,} characters "
            f"{'were' if skipped != 1 else 'was'} left out of learning the vocabulary")
    if tokenizer.vocab_size != opts.vocab_size:
        say(f"--vocab-size {opts.vocab_size}: the vocabulary has {tokenizer.vocab_size} tokens, because "
            + ("every character of the training text and each special token has a token of its own"
               if tokenizer.vocab_size > opts.vocab_size else "the training text offers no more to merge"))
    config = _model_config(opts, tokenizer.vocab_size)
    _check_beam_width(opts, config)                 # before the run folder is started
    start_run_folder(Path(opts.out), opts, config, tokenizer, corpus_record)
    world.broadcast_json(tokenizer_to_dict(tokenizer))
    return tokenizer, config


def build_run(opts: TrainOptions, corpus: Corpus, tokenizer: Tokenizer, config: TransformerConfig | Seq2SeqConfig,
              say: Callable[[str], None], world: World) -> Run:
    """The run at step 0: the pairs as token ids, the model, Adam (§5.3) and the rate of eq. 3."""
    train_pairs = corpus.pairs("train", opts.direction)
    train_examples = _encode_split(tokenizer, train_pairs, config.max_len, "train", say)
    if not train_examples:
        raise TrainingError(f"no training pair of corpus {corpus.name!r} fits the model's {config.max_len} tokens")
    dev_examples = _encode_split(tokenizer, corpus.pairs("dev", opts.direction), config.max_len, "dev", say)
    if not dev_examples:
        raise TrainingError(f"no dev pair of corpus {corpus.name!r} fits the model's {config.max_len} tokens")
    model = models.build_model(config)
    if opts.device != "cpu":
        model.to(opts.device)
    optimizer = FastAdam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9)   # §5.3; optim.Adam's numbers, faster
    chosen = recipe(opts.preset, opts.model)
    schedule = NoamSchedule(optimizer, config.d_model, warmup=chosen["warmup"], factor=chosen["factor"])
    return Run(opts, corpus, tokenizer, model, optimizer, schedule, train_examples, dev_examples, TrainState(), say,
               tokenization_for(opts.direction.split("-")[-1], [t for _, t in train_pairs]), world)


def load_data(options: TrainOptions) -> Corpus:
    """The corpus of a run (data/run_data.py), the built-in one sized by the preset."""
    try:
        corpus = run_data.load_data(options.data, options.direction, PRESETS[options.preset]["corpus"],
                                  limit=options.limit)
    except CorpusError as error:
        raise TrainingError(str(error)) from None
    if not corpus.train:
        raise TrainingError(f"the corpus {corpus.name!r} has no training pairs")
    if not corpus.dev:      # every epoch ends with dev scores, and the final model is chosen on dev
        raise TrainingError(f"the dev split of corpus {corpus.name!r} is empty; training scores each epoch and "
                            f"chooses the final model on dev pairs: put some in dev.tsv (or dev.en and dev.xx)")
    return corpus


def start_run_folder(out: Path, opts: TrainOptions, config: TransformerConfig | Seq2SeqConfig,
                     tokenizer: Tokenizer, corpus_record: dict | None = None) -> None:
    """Clear what an earlier run wrote (``--overwrite``, or one that saved no checkpoint, and the temporaries of
    a killed one: run_folder.clear_run), then write the new run's config.json (with its corpus's fingerprint,
    ``corpus_record``) and tokenizer.json."""
    run_folder.clear_run(out)
    out.mkdir(parents=True, exist_ok=True)
    ckpt.write_json_atomic(out / run_folder.CONFIG_FILE, {"model": dataclasses.asdict(config),
                                                          "training": run_settings(opts),
                                                          "corpus": corpus_record})
    ckpt.write_json_atomic(out / ckpt.TOKENIZER_FILE, tokenizer_to_dict(tokenizer))


def check_resumed_corpus(out: Path, opts: TrainOptions, corpus: Corpus, say: Callable[[str], None]) -> None:
    """Refuse to resume on a corpus whose files differ from those the run began with (config.json's
    fingerprint); a run saved before corpora were fingerprinted resumes on its corpus as it is, and is told."""
    if opts.data is None:
        return
    recorded = run_folder.saved_corpus(out)
    if recorded is run_folder.NOT_RECORDED:
        say(f"{out} was started before runs recorded their corpus's fingerprint: it resumes on {opts.data} as "
            f"that folder is now, unchecked")
        return
    changed = fingerprint.differences(recorded or {}, fingerprint.fingerprint(opts.data, corpus))
    if changed:
        raise TrainingError(f"--resume: the corpus {opts.data} is not the one this run began with: "
                            f"{'; '.join(changed)}; resume it on the same files, or start a new run "
                            f"(--overwrite, or another --out)")


def restore(run: Run, checkpoint: ckpt.Checkpoint) -> None:
    """Put the weights, Adam's moments, the schedule, the dropout streams and the TrainState back."""
    ckpt.check_weights_match(checkpoint.weights, run.model.state_dict(), where=str(checkpoint.path))
    run.model.load_state_dict(checkpoint.weights)
    if checkpoint.optimizer is None:
        raise TrainingError(f"{checkpoint.path}: has no optimizer.npz, so training cannot resume exactly")
    try:
        run.optimizer.load_state_dict(checkpoint.optimizer)
        run.schedule.load_state_dict(_saved_field(checkpoint, "schedule", dict, "a table"))
    except (KeyError, ValueError, TypeError) as error:
        raise TrainingError(f"{checkpoint.path}: optimiser state does not fit ({error})") from None
    if isinstance(checkpoint.state.get("rng"), list):
        raise TrainingError(f"--resume: {checkpoint.path / ckpt.STATE_FILE}: {OLD_RNG_FORMAT}")
    rng = _saved_field(checkpoint, "rng", dict, "a table of dropout streams")
    if run.world.comm is not None and "rng_ranks" in checkpoint.state:   # each rank its own dropout streams
        rng = checkpoint.state["rng_ranks"][run.world.rank]
    set_rng_state(run.model, rng, checkpoint.step)
    history = checkpoint.state.get("history", [])
    run.state = TrainState(checkpoint.step, _saved_field(checkpoint, "epoch", int, "an integer >= 0"),
                           _saved_field(checkpoint, "position", int, "an integer >= 0"),
                           history if isinstance(history, list) else [])


def check_steps_reached(opts: TrainOptions, state: TrainState, where: Path) -> None:
    """Refuse a --steps below the step the resumed run has reached: its model cannot go back to it, and a run
    that recorded --steps 7 for a model of 10 steps would say what it is not."""
    if opts.steps is not None and opts.steps < state.step:
        raise TrainingError(f"--steps {opts.steps} is below the step this run has reached, {state.step} ({where}); "
                            f"a run cannot go back: pass --steps {state.step} or more, or train a new run "
                            f"(--overwrite, or another --out)")


def _saved_field(checkpoint: ckpt.Checkpoint, name: str, kind, what: str):
    """One entry of a checkpoint's state.json that resuming needs, refused by name when missing or malformed."""
    where = checkpoint.path / ckpt.STATE_FILE
    if name not in checkpoint.state:
        raise TrainingError(f"--resume: {where} has no {name!r}, which resuming exactly needs; the file was "
                            f"written by something else or edited")
    value = checkpoint.state[name]
    if not isinstance(value, kind) or isinstance(value, bool) or (kind is int and value < 0):
        raise TrainingError(f"--resume: {where}: {name} must be {what}, got {value!r}")
    return value


# -- step 2: the loop -----------------------------------------------------------------------------
def train_step(run: Run, batch, cooldown: float = 1.0) -> tuple[float, float]:
    """One update: loss, backward, clip, the rate of eq. 3 (times ``cooldown``, see --cooldown), Adam.
    Returns (loss, learning rate).

    Under MPI (chapter 14) one all-reduce between backward and clip makes this rank's gradient the
    gradient of every rank's batch, and the loss the mean over all their tokens; ``batch`` is None on
    a rank that the last, short step of an epoch leaves without one.
    """
    run.optimizer.zero_grad()
    value = 0.0
    if batch is not None:
        loss = batch_loss(run.model, batch)
        loss.backward()
        value = float(loss.item())
    if run.world.comm is not None:
        value = all_reduce_step(run, value, batch)
    clip_grad_norm(run.optimizer.params, CLIP_NORM)
    lr = run.schedule.step()                    # eq. 3 sets the rate of this update
    if cooldown != 1.0:                         # ... and the end of a run that cools down lowers it
        lr = run.optimizer.lr = lr * cooldown
    run.optimizer.step()
    if not math.isfinite(value):
        raise TrainingError(f"the loss became {value} at step {run.state.step + 1}; lower the learning rate "
                            f"(factor) or raise the warm-up")
    return value, lr


def train_loop(run: Run) -> dict:
    """Optimizer steps until a stopping rule holds; returns this invocation's losses, seconds and epochs.
    Chapter 10 quotes it whole: what is not the loop (several processes, the clock, the progress bar,
    checkpoints) joins it through a named call."""
    opts, state, tokenizer, world = run.options, run.state, run.tokenizer, run.world
    pad = run.model.config.pad_id
    per_epoch = math.ceil(len(epoch_batches(run.train_examples, opts.max_tokens, pad, opts.seed, 0,
                                            tokenizer.bos_id, tokenizer.eos_id)) / world.size)
    stream = iterate_batches(run.train_examples, opts.max_tokens, pad, opts.seed, state.epoch, state.position,
                             tokenizer.bos_id, tokenizer.eos_id)
    if world.comm is not None:
        stream = distributed.shard(stream, world)   # chapter 14: one batch per rank and step
    losses: list[float] = []
    reason, tokens = None, 0
    last_saved = state.step if state.step > 0 else -1    # a resumed run starts at a saved step
    run.loop_started = started = time.monotonic()
    bar = ProgressBar(planned_steps(opts, state.step, per_epoch, 0.0, 0), initial=state.step,
                      enabled=not opts.quiet and world.is_root)
    run.model.train()
    with interruption_notice(run), bar:        # Ctrl-C: the bar closes first, then the notice says how to resume
        for epoch, position, batch in stream:
            if epoch != state.epoch:           # the previous epoch is complete: score it on dev
                if world.is_root:
                    end_of_epoch(run, losses, time.monotonic() - started)
                state.epoch, state.position = epoch, 0
            # --minutes is read after a step, never before the first: the setup of the first batch takes
            # time too, and under MPI the clock only travels with a step's all-reduce
            elapsed = elapsed_seconds(run) if losses else 0.0
            reason = stop_reason(opts, state, elapsed)
            if reason is not None:
                break
            loss, lr = train_step(run, batch, cooldown_factor(run_progress(opts, state, per_epoch, elapsed),
                                                              opts.cooldown))
            state.step, state.position = state.step + 1, position + 1
            losses.append(loss)
            tokens += run.step_totals.tokens if run.step_totals else batch.n_tgt_tokens
            if state.step % opts.save_every == 0:
                save_checkpoint(run)
                last_saved = state.step
            elapsed = time.monotonic() - started
            bar.update(state.step, planned_steps(opts, state.step, per_epoch, elapsed, len(losses)),
                       state.epoch + 1, _mean_tail(losses), tokens / max(elapsed, 1e-9), lr)
    seconds = time.monotonic() - started
    if state.step != last_saved:                # the steps after the last checkpoint are kept too
        save_checkpoint(run)
    run.say(f"stopped after {reason}: step {state.step}, {seconds:.0f} s of training, "
            f"{tokens / max(seconds, 1e-9):,.0f} target tokens/s")
    return {"losses": losses, "seconds": seconds, "epochs": state.epoch + state.position / max(per_epoch, 1)}


@contextlib.contextmanager
def interruption_notice(run: Run):
    """On Ctrl-C (KeyboardInterrupt): say on stderr the step reached, the checkpoint a --resume continues
    from, and the command that does it; then let the interruption go on."""
    try:
        yield
    except KeyboardInterrupt:
        if run.world.is_root:
            print(interrupted_message(run), file=sys.stderr, flush=True)
        raise


def interrupted_message(run: Run) -> str:
    """Where an interrupted run stands and how to continue it."""
    saved = ckpt.list_checkpoints(run.out)
    if not saved:
        return (f"interrupted at step {run.state.step}, before the first checkpoint: nothing is saved to resume, "
                f"so the same command starts the run again")
    return (f"interrupted at step {run.state.step}; the last checkpoint is {saved[-1].name}, where this continues: "
            f"{resume_command(run.options, run.world.size)}")


def resume_command(opts: TrainOptions, ranks: int = 1) -> str:
    """The command line that resumes the run of ``opts``: --out, --resume and every option that is not saved
    with the run and not at its default (a run saves its model and data settings, not when to stop)."""
    words = (["mpirun", "-n", str(ranks)] if ranks > 1 else []) + \
        ["python", "-m", "minitransformer", "train", "--out", str(opts.out), "--resume"]
    for f in dataclasses.fields(opts):
        value = getattr(opts, f.name)
        if f.name in DEFINING or f.name in ("out", "resume", "overwrite") or value == f.default or value is None:
            continue
        flag = f.metadata.get("flag", "--" + f.name.replace("_", "-"))
        words += [flag] if isinstance(value, bool) else [flag, f"{value:g}" if isinstance(value, float) else
                                                         str(value)]
    return shlex.join(words)


def all_reduce_step(run: Run, loss: float, batch) -> float:
    """Every rank's gradient summed into every rank's: one all-reduce of one flat buffer (chapter 14).
    Returns the mean loss over all the ranks' target tokens."""
    run.step_totals = distributed.average_gradients(
        run.world, run.optimizer.params, loss, batch.n_tgt_tokens if batch is not None else 0,
        seconds=time.monotonic() - run.loop_started)
    return run.step_totals.loss


def elapsed_seconds(run: Run) -> float:
    """Seconds of training in this invocation. Under MPI: rank 0's, as the last all-reduce carried it,
    so that --minutes stops every rank at the same step (ranks that stopped apart would wait forever)."""
    if run.world.comm is None:
        return time.monotonic() - run.loop_started
    return run.step_totals.seconds if run.step_totals else 0.0


def stop_reason(opts: TrainOptions, state: TrainState, elapsed: float) -> str | None:
    """Which stopping rule holds, if any: --steps and --epochs in total, --minutes for this invocation."""
    if opts.steps is not None and state.step >= opts.steps:
        return f"{opts.steps} steps"
    if opts.epochs is not None and state.epoch >= opts.epochs:
        return f"{opts.epochs} epochs"
    if opts.minutes is not None and elapsed >= 60.0 * opts.minutes:
        return f"{opts.minutes:g} minutes"
    return None


def run_progress(opts: TrainOptions, state: TrainState, per_epoch: int, elapsed: float) -> float:
    """How far the run is towards the stopping rule that comes first, from 0 to 1 (--cooldown's clock):
    steps done of --steps or of --epochs' steps, seconds of this invocation's --minutes."""
    done = [0.0]
    if opts.steps is not None:
        done.append(state.step / opts.steps)
    if opts.epochs is not None:
        done.append(state.step / (opts.epochs * per_epoch))
    if opts.minutes is not None:
        done.append(elapsed / (60.0 * opts.minutes))
    return min(max(done), 1.0)


def planned_steps(opts: TrainOptions, step: int, per_epoch: int, elapsed: float, steps_done: int) -> int | None:
    """The step at which the run will stop, as far as can be told yet (for the progress bar's ETA)."""
    ends = []
    if opts.steps is not None:
        ends.append(opts.steps)
    if opts.epochs is not None:
        ends.append(opts.epochs * per_epoch)
    if opts.minutes is not None and steps_done and elapsed > 0:   # at the speed so far
        ends.append(step + int(max(60.0 * opts.minutes - elapsed, 0.0) * steps_done / elapsed))
    return min(ends) if ends else None


def end_of_epoch(run: Run, losses: list[float], elapsed: float) -> None:
    """Dev cross-entropy and greedy dev BLEU of the epoch just finished, kept in the history."""
    state, n = run.state, min(run.recipe["eval_sentences"], len(run.dev_pairs))
    dev_loss = evaluate_loss(run.model, run.dev_examples, run.options.max_tokens, run.tokenizer)
    dev_bleu, _ = bleu_of(run.model, run.tokenizer, run.dev_pairs[:n], beam=1, tokenize=run.bleu_tokenize)
    state.history.append({"epoch": state.epoch + 1, "step": state.step, "minutes": round(elapsed / 60, 2),
                          "train_loss": _mean_tail(losses), "dev_loss": dev_loss, "dev_bleu_greedy": dev_bleu.score})
    run.say(f"epoch {state.epoch + 1} done at step {state.step}: train loss {_mean_tail(losses):.3f}, "
            f"dev loss {dev_loss:.3f} (ppl {math.exp(min(dev_loss, 50)):.2f}), "
            f"dev BLEU {dev_bleu.score:.1f} ({run.bleu_tokenize} tokens, greedy, {n} sentences), {_format_time(elapsed)}")


def save_checkpoint(run: Run) -> Path:
    """OUT/checkpoints/step-N: weights, Adam, the schedule, the TrainState and the dropout streams."""
    every_rng = run.world.gather_json(rng_state(run.model))   # under MPI: each rank's dropout streams
    if not run.world.is_root:
        return run.out                          # rank 0 writes; the others only sent their streams
    state = {"config": dataclasses.asdict(run.model.config), "training": run_settings(run.options),
             "schedule": run.schedule.state_dict(), "epoch": run.state.epoch, "position": run.state.position,
             "rng": every_rng[0], "history": run.state.history, "kind": "step", "ranks": run.world.size,
             "corpus": run.corpus_record}
    if run.world.size > 1:
        state["rng_ranks"] = every_rng
    return ckpt.save_checkpoint(run.out, run.state.step, run.model.state_dict(), state,
                                optimizer=run.optimizer.state_dict(), tokenizer=tokenizer_to_dict(run.tokenizer),
                                keep_last=max(run.options.average, 2))


# -- step 3: finish -------------------------------------------------------------------------------
def finish(run: Run, record: dict, started: float) -> dict:
    """Choose and save the final model, evaluate it on the test sets, write OUT/results.json."""
    opts, config = run.options, run.model.config
    summary: dict[str, Any] = {"out": str(run.out), "steps": run.state.step, "epochs": record["epochs"],
                               "train_seconds": round(record["seconds"], 1), "losses": record["losses"],
                               "history": run.state.history, "dev_bleu_tokenize": run.bleu_tokenize,
                               "config": dataclasses.asdict(config),
                               "training": run_settings(opts), "corpus": run.corpus_record,
                               "options": {**result_settings(opts), "ranks": run.world.size}}
    weights, summary["final_model"], summary["final_choice"] = choose_final_weights(run)
    run.model.load_state_dict(weights)
    final_state = {"config": dataclasses.asdict(config), "training": run_settings(opts),
                   "corpus": run.corpus_record, "step": run.state.step, "model": summary["final_model"]}
    alpha = opts.alpha
    if opts.choose_alpha:
        alpha, summary["alpha_choice"] = choose_alpha(run)
        final_state["alpha"] = alpha                     # translate and evaluate use it (Translator.load)
    ckpt.save_final(run.out, weights, final_state, tokenizer=tokenizer_to_dict(run.tokenizer))
    if opts.evaluate:
        summary.update(final_evaluation(run, alpha))
        if opts.choose_alpha and alpha != opts.alpha and "test_bleu" in summary:
            summary["alpha_choice"].update(given_alpha_on_test(run))
    summary["wall_seconds"] = round(time.monotonic() - started, 1)
    ckpt.write_json_atomic(run.out / run_folder.RESULTS_FILE, {k: v for k, v in summary.items() if k != "losses"})
    run.say(f"total wall time {_format_time(summary['wall_seconds'])} ({summary['wall_seconds']:.0f} s); "
            f"try: python -m minitransformer translate --checkpoint {shlex.quote(str(run.out))} \"...\"")
    return summary


def choose_final_weights(run: Run) -> tuple[dict, str, dict]:
    """The weights to keep: the average of the last k checkpoints (§6.1) if it does at least as well
    on the dev set (greedy BLEU) as the last checkpoint, else the last checkpoint; with what it was told
    and the dev scores it compared (empty when there was nothing to average). With --choose-average it
    compares the averages of the last 2, 4, 8, … and k checkpoints and keeps the best (ties: the wider)."""
    model, last = run.model, run.model.state_dict()
    saved = checkpoints_up_to(run.out, run.state.step)
    checkpoints = saved[-run.options.average:]
    if run.options.average < 2 or len(checkpoints) < 2:
        return last, "last checkpoint", {}
    n = min(run.recipe["eval_sentences"], len(run.dev_pairs))

    def dev_bleu(weights: dict) -> float:
        model.load_state_dict(weights)
        return bleu_of(model, run.tokenizer, run.dev_pairs[:n], beam=1, tokenize=run.bleu_tokenize)[0].score

    last_bleu = dev_bleu(last)
    windows = [len(checkpoints)]
    if run.options.choose_average:
        windows = sorted({2 ** i for i in range(1, len(checkpoints).bit_length()) if 2 ** i < len(checkpoints)}
                         | {len(checkpoints)})
    averages = {k: ckpt.average_checkpoints(saved[-k:]) for k in windows}
    scores = {k: dev_bleu(averages[k]) for k in windows}
    best = max(windows, key=lambda k: (scores[k], k))
    names = ", ".join(p.name for p in saved[-best:])
    tried = "; ".join(f"average of {k} {scores[k]:.2f}" for k in windows)
    run.say(f"dev BLEU ({run.bleu_tokenize} tokens, greedy, {n} sentences): last checkpoint {last_bleu:.2f}, "
            f"{tried} (best: {names})")
    choice = {"averaged_checkpoints": best, "dev_sentences": n,
              "dev_bleu_last_checkpoint": round(last_bleu, 2), "dev_bleu_average": round(scores[best], 2)}
    if run.options.choose_average:
        choice["dev_bleu_by_window"] = {"1": round(last_bleu, 2), **{str(k): round(scores[k], 2) for k in windows}}
    if scores[best] >= last_bleu:
        return averages[best], f"average of the last {best} checkpoints", choice
    return last, "last checkpoint (the average scored lower on dev)", choice


def checkpoints_up_to(out: Path, step: int) -> list[Path]:
    """The run's complete checkpoints of steps up to ``step``, oldest first: a run resumed from an earlier
    checkpoint (``latest`` pointed back) may still hold later ones, which are not part of the model it ends with."""
    return [path for path in ckpt.list_checkpoints(out) if int(path.name.split("-")[1]) <= step]


# The length penalties --choose-alpha tries (with --alpha): §6.1 chose α = 0.6 "after experimentation on
# the development set"; a small model trained for an hour, with label smoothing, may want another. Where the
# grid's largest α wins, the search goes on past it in steps of ALPHA_STEP, up to ALPHA_LIMIT, until a larger
# α no longer wins: the grid's edge should not decide the answer
ALPHA_GRID = (0.0, 0.3, 0.6, 1.0, 1.5, 2.0)
ALPHA_STEP, ALPHA_LIMIT = 0.5, 5.0


def choose_alpha(run: Run) -> tuple[float, dict]:
    """The length penalty α for the final model, chosen as §6.1 chose its 0.6: beam search (--beam) over the
    whole dev set with each α of ALPHA_GRID and --alpha, then past the largest while it is the best; the best
    corpus BLEU is kept (a tie to two decimals: the α nearest --alpha). Returns α and what was compared."""
    opts = run.options
    if opts.beam == 1 or not run.dev_pairs:
        reason = "greedy search has no length penalty" if opts.beam == 1 else "the corpus has no dev pairs"
        run.say(f"--choose-alpha: {reason}; α stays {opts.alpha}")
        return opts.alpha, {"alpha": opts.alpha, "not_chosen": reason}

    def dev_bleu(alpha: float) -> float:
        return round(bleu_of(run.model, run.tokenizer, run.dev_pairs, beam=opts.beam, alpha=alpha,
                             tokenize=run.bleu_tokenize)[0].score, 2)

    def best_of(scores: dict) -> float:
        return max(scores, key=lambda alpha: (scores[alpha], -abs(alpha - opts.alpha)))

    scores = {alpha: dev_bleu(alpha) for alpha in sorted({*ALPHA_GRID, opts.alpha})}
    while best_of(scores) == max(scores) and max(scores) + ALPHA_STEP <= ALPHA_LIMIT:   # the edge won: look past it
        larger = max(scores) + ALPHA_STEP
        scores[larger] = dev_bleu(larger)
    best = best_of(scores)
    tried = ", ".join(f"α {alpha:g} {score:.2f}" for alpha, score in scores.items())
    run.say(f"dev BLEU ({run.bleu_tokenize} tokens, beam {opts.beam}, {len(run.dev_pairs)} sentences): {tried} "
            f"(kept α {best:g})")
    return best, {"alpha": best, "beam": opts.beam, "dev_sentences": len(run.dev_pairs),
                  "dev_bleu_by_alpha": {f"{alpha:g}": score for alpha, score in scores.items()}}


def given_alpha_on_test(run: Run) -> dict:
    """Test BLEU with the same weights at --alpha instead of the chosen α: a report of what the choice changed,
    never a choice (the test set has no say in α)."""
    opts = run.options
    score, _ = bleu_of(run.model, run.tokenizer, run.corpus.pairs("test", opts.direction), beam=opts.beam,
                       alpha=opts.alpha, tokenize=run.bleu_tokenize)
    run.say(f"for comparison, the same weights at --alpha {opts.alpha:g}: test BLEU {score.score:.2f}")
    return {"given_alpha": opts.alpha, "test_bleu_at_given_alpha": round(score.score, 2)}


def final_evaluation(run: Run, alpha: float) -> dict:
    """Test BLEU with beam search (length penalty ``alpha``) on test (and the held-out-combination test),
    examples, attention picture."""
    opts, model, tokenizer, say = run.options, run.model, run.tokenizer, run.say
    results: dict[str, Any] = {}
    model.eval()
    for split, label in (("test", "test (unseen sentences)"),
                         ("test_heldout", "test_heldout (word combinations never seen in training)")):
        pairs = run.corpus.pairs(split, opts.direction)
        if not pairs:
            if split == "test":         # test_heldout exists only in the built-in corpus
                say(f"no test pairs in corpus {run.corpus.name!r}: no test BLEU")
            continue
        t0 = time.monotonic()
        score, hypotheses = bleu_of(model, tokenizer, pairs, beam=opts.beam, alpha=alpha,
                                    tokenize=run.bleu_tokenize)
        chrf = corpus_chrf_score(hypotheses, [ref for _, ref in pairs])
        exact = sum(h.split() == ref.split() for h, (_, ref) in zip(hypotheses, pairs)) / len(pairs)
        results[f"{split}_bleu"] = round(score.score, 2)
        results[f"{split}_bleu_tokenize"] = score.tokenize
        results[f"{split}_chrf"] = round(chrf.score, 2)
        results[f"{split}_exact_match"] = round(exact, 4)
        say(f"{label}: BLEU {score.score:.2f} ({score.tokenize} tokens), {chrf}, (beam {opts.beam}, α {alpha:g}), "
            f"{100 * exact:.1f}% exact, {len(pairs)} sentences, {time.monotonic() - t0:.1f} s")
        if split == "test":
            examples = []
            for (source_text, reference), output in list(zip(pairs, hypotheses))[:5]:
                examples.append({"source": source_text, "reference": reference, "output": output})
                say(f"  {source_text}\n    → {output}\n    reference: {reference}")
            results["examples"] = examples
    if opts.plot:
        try:
            results.update(_attention_picture(run))
        except Exception as error:      # noqa: BLE001 - a run that trained and scored is finished without its picture
            run.say(f"no attention picture ({type(error).__name__}: {error}); the run is complete without it")
    return results


def _attention_picture(run: Run) -> dict:
    """OUT/attention.png: the last decoder layer's cross-attention for a test sentence of about 9 words."""
    pairs = run.corpus.pairs("test", run.options.direction) or run.dev_pairs
    if not pairs:
        return {}
    try:
        from .. import plot  # noqa: PLC0415 - matplotlib only when drawing
    except ImportError as error:
        run.say(f"no attention picture ({error}); install matplotlib to draw it")
        return {}
    translator = Translator(run.model, run.tokenizer)
    sentence = min(pairs[:50], key=lambda p: abs(len(p[0].split()) - 9))[0]
    weights, src_labels, tgt_labels, src_ids, tgt_ids = translator.cross_attention(sentence)
    path = run.out / run_folder.ATTENTION_FILE
    which = f"{run.model.config.score} attention" if isinstance(run.model, Seq2Seq) else \
        "last decoder layer, mean over heads"
    plot.attention_heatmap(weights, src_labels, tgt_labels, path, title=f"{which}: {sentence}",
                           src_ids=src_ids, tgt_ids=tgt_ids)
    run.say(f"attention heat map of “{sentence}”: {path}")
    return {"attention_png": str(path)}


# -- the loss and the data ------------------------------------------------------------------------
def encode_pairs(tokenizer: Tokenizer, pairs: Sequence[tuple[str, str]], max_len: int,
                 drop_long: bool = True, dropped: Counter | None = None) -> list[tuple[list[int], list[int]]]:
    """(source ids, target ids) for each pair; pairs that do not fit ``max_len`` are dropped.
    ``dropped`` (a Counter) counts the pairs left out by reason."""
    examples = []
    for source_text, target_text in pairs:
        src, tgt = tokenizer.encode(source_text), tokenizer.encode(target_text)
        if not src:
            reason = "with a source of no tokens"
        elif drop_long and (len(src) > max_len or len(tgt) + 1 > max_len):
            reason = f"longer than the model's {max_len} tokens"
        else:
            examples.append((src, tgt))
            continue
        if dropped is not None:
            dropped[reason] += 1
    return examples


def _encode_split(tokenizer: Tokenizer, pairs: Sequence[tuple[str, str]], max_len: int, split: str,
                  say: Callable[[str], None]) -> list[tuple[list[int], list[int]]]:
    """``encode_pairs`` of one split, saying how many pairs each filter left out and why."""
    dropped: Counter = Counter()
    examples = encode_pairs(tokenizer, pairs, max_len, dropped=dropped)
    if dropped:
        use = " of the dev loss" if split == "dev" else ""
        say(f"{split}: {sum(dropped.values())} of {len(pairs):,} pairs left out{use}: "
            + ", ".join(f"{count} {reason}" for reason, count in dropped.most_common()))
    return examples


def batch_loss(model: Transformer, batch, label_smoothing: float = LABEL_SMOOTHING):
    """Mean label-smoothed cross-entropy over the batch's target tokens (§5.4), padding ignored."""
    return model.loss(batch.src, batch.tgt_in, batch.tgt_out, label_smoothing=label_smoothing)


def evaluate_loss(model: Transformer, examples, max_tokens: int, tokenizer: Tokenizer) -> float:
    """Per-token cross-entropy (no smoothing) over ``examples``, in eval mode; the decoder's input
    starts with the tokenizer's bos and its output ends with the tokenizer's eos, as in training."""
    was_training = model.training
    model.eval()
    total, tokens = 0.0, 0
    with no_grad():
        for batch in epoch_batches(examples, max_tokens, model.config.pad_id, seed=0, epoch=0,
                                   bos_id=tokenizer.bos_id, eos_id=tokenizer.eos_id):
            loss = batch_loss(model, batch, label_smoothing=0.0)
            total += float(loss.item()) * batch.n_tgt_tokens
            tokens += batch.n_tgt_tokens
    model.train(was_training)
    return total / max(tokens, 1)


# -- small helpers --------------------------------------------------------------------------------
def _printer(quiet: bool) -> Callable[[str], None]:
    """Print a line on stdout without breaking the progress bar (tqdm redraws it below)."""
    def say(text: str) -> None:
        if not quiet:
            tqdm.write(text, file=sys.stdout)
            sys.stdout.flush()
    return say


def _silent(text: str) -> None:
    """The printer of the ranks other than 0: one rank speaks for the run."""


def _format_time(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}:{seconds % 60:02d}"


def _mean_tail(values: list[float], n: int = 50) -> float:
    tail = values[-n:]
    return sum(tail) / len(tail) if tail else float("nan")


def _model_config(opts: TrainOptions, vocab_size: int) -> TransformerConfig | Seq2SeqConfig:
    """The model of a run: the recipe's size, one vocabulary shared and tied (§3.4), the run's seed."""
    shared = dict(src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, tie_embeddings=True,
                  pad_id=Tokenizer.pad_id, max_len=MAX_LEN, seed=opts.seed,
                  **recipe(opts.preset, opts.model)["model"])
    if opts.model == "lstm":
        return Seq2SeqConfig(score=opts.attention_score, input_feeding=opts.input_feeding, **shared)
    return TransformerConfig(attention=opts.attention or "softmax", attention_window=opts.attention_window,
                             **shared)


def _describe_model(config: TransformerConfig | Seq2SeqConfig) -> str:
    if isinstance(config, Seq2SeqConfig):
        return (f"attention LSTM {config.n_layers}+{config.n_layers} layers, d_model {config.d_model}, "
                f"{config.score} score{'' if config.input_feeding else ', no input feeding'}")
    return f"model {config.n_layers}+{config.n_layers} layers, d_model {config.d_model}"


def _use_device(opts: TrainOptions) -> None:
    try:
        backend.set_default_device(opts.device)
    except (RuntimeError, ValueError) as error:
        raise TrainingError(f"--device {opts.device}: {error}") from None


def _check_model_config(opts: TrainOptions) -> None:
    """The model the options ask for can be built (its size does not wait for the vocabulary to be learned)."""
    try:
        _model_config(opts, opts.vocab_size)
    except ValueError as error:
        raise TrainingError(f"the model of these options: {error}") from None


def _check_beam_width(opts: TrainOptions, config: TransformerConfig | Seq2SeqConfig) -> None:
    """--beam no wider than the learned vocabulary (decode.check_beam_width says why), refused before training."""
    try:
        check_beam_width(opts.beam, config.tgt_vocab_size, "--beam")
    except ValueError as error:
        raise TrainingError(str(error)) from None


def _check_same_ranks(checkpoint: ckpt.Checkpoint, world: World) -> None:
    """A run resumes on as many ranks as it ran on: the batches of a step, and so the run, depend on it."""
    saved = int(checkpoint.state.get("ranks", 1))
    if saved != world.size:
        how = f"mpirun -n {saved} python -m minitransformer train --distributed" if saved > 1 else \
            "python -m minitransformer train"
        raise TrainingError(f"--resume: {checkpoint.path} was trained on {saved} rank{'s' if saved > 1 else ''}, "
                            f"and this run has {world.size}; a step takes one batch per rank, so resume it "
                            f"with the same number: {how} --resume ...")


def _load_resume_checkpoint(out: Path) -> ckpt.Checkpoint:
    try:
        return ckpt.load_checkpoint(out, with_optimizer=True, prefer_final=False)
    except ckpt.CheckpointError as error:
        raise TrainingError(f"--resume: {error}") from None


# -- dropout generators and BLEU ------------------------------------------------------------------
def dropout_generators(model: Transformer) -> list[Generator]:
    """Every random-number generator the model's dropout draws from, in a fixed order."""
    return [generator for _, generator in model.named_generators()]


def rng_state(model: Transformer) -> dict[str, dict]:
    """The dropout generators' states, as JSON-ready data ({name: state}, see Module.rng_state_dict)."""
    return model.rng_state_dict()


def set_rng_state(model: Transformer, states: dict, step: int | None = None) -> None:
    """Restore what ``rng_state`` saved: exactly on the CPU, reproducibly on a GPU (Generator.state_dict)."""
    if isinstance(states, list):
        raise TrainingError(OLD_RNG_FORMAT)
    try:
        model.load_rng_state_dict(states)
    except (KeyError, ValueError, TypeError) as error:
        raise TrainingError(f"the checkpoint's dropout state does not fit the model: {error}") from None


# Checkpoints of early versions listed the dropout generators' states in module order, which could not say
# which state belonged to which layer; they are refused rather than guessed at.
OLD_RNG_FORMAT = ("the checkpoint's dropout state is a list of generator states, the format of early versions "
                  "of minitransformer, which this version cannot match to the model's dropout layers; finish "
                  "that run with the version that started it, or start it again with --overwrite (its final "
                  "or last checkpoint still translates and evaluates: only resuming needs the dropout state)")


def bleu_of(model: Transformer, tokenizer: Tokenizer, pairs, beam: int, alpha: float = 0.6,
            tokenize: str | None = None):
    """Corpus BLEU of the model on (source, reference) text pairs; returns (BLEUScore, hypotheses).
    ``tokenize``: BLEU's tokenization (bleu.TOKENIZATIONS); None: chosen from the references."""
    return Translator(model, tokenizer).bleu(pairs, beam_size=beam, alpha=alpha, tokenize=tokenize)

