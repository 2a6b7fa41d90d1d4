"""``python -m minitransformer lm train | sample``: a language model on any text (chapter 15).

    python -m minitransformer lm train --out runs/lm                  # the built-in corpus's English sentences
    python -m minitransformer lm train --data input.txt --out runs/shakespeare
    python -m minitransformer lm train --data wagahai.txt --tokens bpe --out runs/ja
    python -m minitransformer lm sample --checkpoint runs/lm --prompt "the cat"

The text is cut into its first 90 % (training) and its last 10 % (the held-out tail, nanoGPT's split).
Each step trains on ``--batch`` windows of ``--context`` + 1 tokens drawn at random from the training
part: the first ``context`` tokens in, the same tokens shifted by one as the targets (teacher forcing on
a shifted text). The loss is reported in nats per token and, on the held-out tail, in bits per character:
nats/token × tokens/character ÷ ln 2, a figure that does not depend on the tokenizer.

The run folder follows ``train``'s rules (training/run_folder.py, checkpoint.py): one writer at a time
(its lock), atomic checkpoints, ``--resume`` continues the latest checkpoint of the same run (same text,
same settings, the batch sampler's random state restored), ``--overwrite`` deletes only what a run wrote.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import math
import time
from pathlib import Path

import numpy as np

from .. import checkpoint as ckpt
from ..nn.language_model import LanguageModel, LanguageModelConfig
from .options import TrainingError
from .run_folder import (CONFIG_FILE, RESULTS_FILE, check_clearable, check_out, clear_run, foreign_run_names, lock,
                         run_state)

VALIDATION_FRACTION = 0.1          # the held-out tail (nanoGPT: the last 10 %)
DEFAULT_SENTENCES = 5000           # the built-in corpus's English training sentences, one per line
BUILTIN = "builtin"
# the settings that make a run what it is: a --resume with others is refused
DEFINING = ("data", "data_sha256", "tokens", "bpe_vocab", "layers", "heads", "width", "context", "positional",
            "attention", "window", "dropout", "batch", "lr", "min_lr", "warmup", "steps", "seed")


# -- the text --------------------------------------------------------------------------------------------
def builtin_text(sentences: int = DEFAULT_SENTENCES) -> str:
    """The built-in corpus's first English training sentences, one per line: a text that needs no download."""
    from ..data.grammar import make_builtin_corpus  # noqa: PLC0415 - generated on demand

    corpus = make_builtin_corpus(n_train=sentences, n_dev=0, n_test=0, n_heldout=0)
    return "\n".join(english for english, _ in corpus.train) + "\n"


def read_text(path: str) -> str:
    """A UTF-8 text file, refused with the reason when it is missing, empty, binary or not UTF-8."""
    file = Path(path)
    if not file.is_file():
        raise TrainingError(f"--data {path}: no such file")
    raw = file.read_bytes()
    if not raw.strip():
        raise TrainingError(f"--data {path}: the file is empty; a language model needs text to learn from")
    if b"\0" in raw:
        raise TrainingError(f"--data {path}: holds NUL bytes (the first at byte {raw.index(0)}), so it is binary "
                            "data, not text; give a UTF-8 text file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise TrainingError(f"--data {path}: is not UTF-8 text (byte {error.start} cannot be decoded); convert "
                            "it to UTF-8 first") from None


class CharTokenizer:
    """One token per character of the text (nanoGPT's Shakespeare): ids in the order of sorted characters."""

    kind = "chars"

    def __init__(self, chars: str) -> None:
        self.chars = "".join(sorted(set(chars)))
        self.ids = {c: i for i, c in enumerate(self.chars)}

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> list[int]:
        unknown = sorted(set(text) - set(self.ids))
        if unknown:
            raise TrainingError(f"the characters {''.join(unknown)!r} are not in the model's vocabulary of "
                                f"{len(self)} characters (those of its training text)")
        return [self.ids[c] for c in text]

    def decode(self, ids) -> str:
        return "".join(self.chars[i] for i in ids)

    def to_dict(self) -> dict:
        return {"kind": self.kind, "chars": self.chars}


def make_tokenizer(kind: str, text: str, bpe_vocab: int):
    if kind == "chars":
        return CharTokenizer(text)
    from ..data.raw_bpe import RawBPETokenizer  # noqa: PLC0415

    return RawBPETokenizer.train(text.splitlines(), bpe_vocab)


def tokenizer_from_dict(data: dict):
    if isinstance(data, dict) and data.get("kind") == "chars" and isinstance(data.get("chars"), str):
        return CharTokenizer(data["chars"])
    from ..data.tokenizer import Tokenizer  # noqa: PLC0415

    try:
        return Tokenizer.from_dict(data)
    except (ValueError, TypeError) as error:
        raise ckpt.CheckpointError(f"the checkpoint's tokenizer cannot be read ({error})") from None


def encode_text(tokenizer, text: str) -> np.ndarray:
    """The whole text as one array of ids.

    The raw-text BPE, trained on the lines, writes a line break as its UTF-8 byte, and no merge takes in a
    byte: so each line is encoded on its own, which gives the ids of the whole text at once. Encoded at
    once, a text written without spaces (Japanese) would be a single piece of the whole text, and each
    merge would scan all of it (hours for a novel, with a few thousand merges)."""
    from ..data.raw_bpe import RawBPETokenizer  # noqa: PLC0415
    from ..data.raw_text import byte_ids, split_pieces  # noqa: PLC0415

    if not isinstance(tokenizer, RawBPETokenizer) or "\n" not in text or any("\n" in t for t in tokenizer.token_to_id):
        return np.asarray(tokenizer.encode(text), dtype=np.int64)
    ids: list[int] = []
    for number, line in enumerate(text.split("\n")):
        pieces = split_pieces(line)                 # " " + line, cut before each space
        if number:
            ids += byte_ids("\n")
            pieces[0] = pieces[0][1:]               # the dummy prefix " " begins the text only
        for piece in pieces:
            if piece:
                ids += tokenizer._encode_piece(piece)
    return np.asarray(ids, dtype=np.int64)


# -- the run ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Split:
    train: np.ndarray          # token ids of the first 90 %
    val: np.ndarray            # token ids of the held-out tail
    val_chars: int             # characters of the tail, for bits per character


def split_text(text: str, tokenizer, context: int) -> Split:
    cut = int(len(text) * (1 - VALIDATION_FRACTION))
    train_text, val_text = text[:cut], text[cut:]
    train, val = encode_text(tokenizer, train_text), encode_text(tokenizer, val_text)
    for name, ids in (("training part (the first 90 %)", train), ("held-out tail (the last 10 %)", val)):
        if len(ids) < context + 1:
            raise TrainingError(f"the text's {name} has {len(ids)} tokens, fewer than --context {context} + 1: "
                                f"the context is longer than the text; give a longer text or a smaller --context")
    return Split(train, val, len(val_text))


def model_config(args, vocab: int) -> LanguageModelConfig:
    try:
        return LanguageModelConfig(vocab_size=vocab, d_model=args.width, n_heads=args.heads, d_ff=4 * args.width,
                                   n_layers=args.layers, context=args.context, dropout=args.dropout,
                                   positional=args.positional, seed=args.seed, attention=args.attention,
                                   attention_window=args.window)
    except ValueError as error:
        raise TrainingError(str(error)) from None


def learning_rate(step: int, args) -> float:
    """nanoGPT's schedule: linear warm-up over ``warmup`` steps, then a cosine down to ``min_lr`` at ``steps``."""
    if step < args.warmup:
        return args.lr * (step + 1) / (args.warmup + 1)
    progress = min(1.0, (step - args.warmup) / max(1, args.steps - args.warmup))
    return args.min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (args.lr - args.min_lr)


def sample_batch(ids: np.ndarray, batch: int, context: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``batch`` random windows: inputs ids[i : i + context], targets ids[i + 1 : i + 1 + context]."""
    starts = rng.integers(0, len(ids) - context, size=batch)
    windows = np.stack([ids[s:s + context + 1] for s in starts])
    return windows[:, :-1], windows[:, 1:]


def evaluate(model: LanguageModel, ids: np.ndarray, context: int, max_windows: int, batch: int = 32) -> float:
    """Mean loss in nats per token over consecutive windows of ``ids`` (at most ``max_windows``)."""
    from ..decode import searching  # noqa: PLC0415

    count = min(max_windows, (len(ids) - 1) // context)
    starts = np.arange(count) * context
    total = 0.0
    with searching(model):
        for first in range(0, count, batch):
            chunk = starts[first:first + batch]
            windows = np.stack([ids[s:s + context + 1] for s in chunk])
            total += model.loss(windows[:, :-1], windows[:, 1:]).item() * len(chunk)
    return total / count


def bits_per_character(nats_per_token: float, split: Split) -> float:
    return nats_per_token * len(split.val) / split.val_chars / math.log(2)


def settings_of(args, data_sha256: str) -> dict:
    settings = {name: getattr(args, name) for name in DEFINING if name != "data_sha256"}
    return {**settings, "data": args.data or BUILTIN, "data_sha256": data_sha256}


def _say(args):
    return (lambda text: None) if args.quiet else (lambda text: print(text, flush=True))


def open_folder(args) -> tuple[Path, str]:
    """Check --out before any work: a folder of its own, no foreign files, and what it holds vs --resume."""
    out = check_out(args.out)
    foreign = foreign_run_names(out)
    if foreign:
        raise TrainingError(f"--out {out} holds {', '.join(foreign)} but no training run, and a run would "
                            f"replace them; choose another --out")
    state = run_state(out)
    if args.resume and state == "none":
        raise TrainingError(f"--resume: {out} holds no run to resume")
    if args.resume and state == "finished":
        raise TrainingError(f"--resume: the run in {out} has finished; --overwrite trains it again")
    if not args.resume and state in ("interrupted", "finished") and not args.overwrite:
        raise TrainingError(f"{out} already holds a language model run ({state}); pass --resume to continue an "
                            f"interrupted one, --overwrite to start again there, or choose another --out")
    if args.overwrite or state == "started":
        check_clearable(out)
    return out, state


def train_lm(args) -> dict:
    """The whole ``lm train`` command: check, read, tokenize, train with checkpoints, evaluate, save."""
    say = _say(args)
    out, state = open_folder(args)
    text = read_text(args.data) if args.data else builtin_text()
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    settings = settings_of(args, digest)
    with lock(out):
        if args.overwrite or state == "started":
            clear_run(out)
        resumed = load_resume(out, settings) if args.resume else None
        tokenizer = tokenizer_from_dict(resumed.tokenizer) if resumed else make_tokenizer(args.tokens, text,
                                                                                           args.bpe_vocab)
        split = split_text(text, tokenizer, args.context)
        config = model_config(args, len(tokenizer))
        say(f"{args.data or 'the built-in corpus (English side)'}: {len(text):,} characters, {len(tokenizer)} "
            f"{args.tokens} tokens; training on {len(split.train):,} tokens, held out {len(split.val):,}")
        ckpt.write_json_atomic(out / CONFIG_FILE, {"model": dataclasses.asdict(config), "training": settings})
        return run_training(args, out, config, tokenizer, split, settings, resumed, say)


def load_resume(out: Path, settings: dict):
    checkpoint = ckpt.load_checkpoint(out, prefer_final=False)
    saved = checkpoint.state.get("training")
    if not isinstance(saved, dict):
        raise TrainingError(f"--resume: {checkpoint.path} does not record its training settings")
    differences = [f"{name} {saved.get(name)!r} there, {settings[name]!r} now" for name in DEFINING
                   if saved.get(name) != settings[name]]
    if differences:
        raise TrainingError(f"--resume: the run in {out} has other settings ({'; '.join(differences)}); resume "
                            f"with the same ones, or --overwrite")
    return checkpoint


def run_training(args, out: Path, config: LanguageModelConfig, tokenizer, split: Split, settings: dict,
                 resumed, say) -> dict:
    from .. import optim  # noqa: PLC0415

    model = LanguageModel(config)
    if args.device != "cpu":
        model.to(args.device)
    optimizer = optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.99), eps=1e-8)
    rng = np.random.default_rng(args.seed)
    step, history = 0, []
    if resumed is not None:
        model.load_state_dict(resumed.weights)
        optimizer.load_state_dict(resumed.optimizer)
        try:
            rng.bit_generator.state = resumed.state["sampler"]
            model.load_rng_state_dict(resumed.state["dropout"])   # the dropout streams go on where they stopped
        except (KeyError, TypeError, ValueError) as error:
            raise TrainingError(f"--resume: {resumed.path} does not hold the random states of a language model "
                                f"run ({type(error).__name__}: {error}); --overwrite starts it again") from None
        step, history = resumed.step, list(resumed.state.get("history", []))
        say(f"resuming at step {step} from {resumed.path}")
    started, losses = time.monotonic(), []
    while step < args.steps:
        optimizer.lr = learning_rate(step, args)
        inputs, targets = sample_batch(split.train, args.batch, args.context, rng)
        optimizer.zero_grad()
        loss = model.loss(inputs, targets)
        loss.backward()
        optim.clip_grad_norm(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        step += 1
        if step % args.eval_every == 0 or step == args.steps:
            val = evaluate(model, split.val, args.context, args.eval_windows)
            history.append({"step": step, "train_loss": float(np.mean(losses)), "val_loss": val,
                            "val_bpc": bits_per_character(val, split)})
            say(f"step {step:>6}: train {np.mean(losses):.4f} nats/token, held-out {val:.4f} nats/token, "
                f"{history[-1]['val_bpc']:.3f} bits/char ({time.monotonic() - started:.0f} s)")
            losses = []
            state = {"model": dataclasses.asdict(config), "training": settings, "sampler": rng.bit_generator.state,
                     "dropout": model.rng_state_dict(), "history": history}
            ckpt.save_checkpoint(out, step, model.state_dict(), state, optimizer.state_dict(),
                                 tokenizer.to_dict(), keep_last=2)
    return finish(args, out, model, config, tokenizer, split, settings, history, say)


def finish(args, out: Path, model, config, tokenizer, split: Split, settings: dict, history: list, say) -> dict:
    from ..generate import generate  # noqa: PLC0415

    val = history[-1]["val_loss"] if history else evaluate(model, split.val, args.context, args.eval_windows)
    prompt = [int(split.val[0])]
    sample = tokenizer.decode(prompt + generate(model, prompt, 200, temperature=0.8, seed=args.seed))
    results = {"steps": args.steps, "val_loss": val, "val_bpc": bits_per_character(val, split),
               "perplexity": math.exp(val), "tokens_per_character": len(split.val) / split.val_chars,
               "history": history, "sample": sample, "options": settings}
    ckpt.save_final(out, model.state_dict(), {"model": dataclasses.asdict(config), "training": settings,
                                              "results": {k: results[k] for k in ("val_loss", "val_bpc")}},
                    tokenizer.to_dict())
    ckpt.write_json_atomic(out / RESULTS_FILE, results)
    say(f"held-out tail: {val:.4f} nats/token (perplexity {math.exp(val):.2f}), "
        f"{results['val_bpc']:.3f} bits per character\nsample:\n{sample}")
    return results


# -- sampling ---------------------------------------------------------------------------------------------
def load_lm(path: str, device: str = "cpu") -> tuple[LanguageModel, object]:
    """The language model and tokenizer saved in a run folder or checkpoint folder."""
    checkpoint = ckpt.load_checkpoint(path, with_optimizer=False)
    saved = checkpoint.state.get("model")
    if not isinstance(saved, dict) or saved.get("model") != "lm":
        raise ckpt.CheckpointError(f"{checkpoint.path}: not a language model (its configuration is not one of "
                                   "`lm train`'s); `translate` reads a translator's checkpoint")
    try:
        config = LanguageModelConfig(**saved)
    except (TypeError, ValueError) as error:
        raise ckpt.CheckpointError(f"{checkpoint.path}: the model configuration is broken ({error})") from None
    model = LanguageModel(config)
    model.load_state_dict(checkpoint.weights)
    if device != "cpu":
        model.to(device)
    return model, tokenizer_from_dict(checkpoint.tokenizer)


def default_prompt(tokenizer) -> str:
    """A line break, where the vocabulary has one (a text of one line has none: then its first character)."""
    if isinstance(tokenizer, CharTokenizer) and "\n" not in tokenizer.ids:
        return tokenizer.chars[0]
    return "\n"


def sample_lm(args) -> str:
    from ..generate import generate  # noqa: PLC0415

    model, tokenizer = load_lm(args.checkpoint, args.device)
    prompt = args.prompt if args.prompt is not None else default_prompt(tokenizer)
    if not prompt:
        raise TrainingError("--prompt is empty; give at least one character to start from")
    ids = list(encode_text(tokenizer, prompt))
    ids = ids[-model.config.context:]
    try:
        new = generate(model, ids, args.tokens, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p,
                       greedy=args.greedy, seed=args.seed, use_cache=not args.no_cache)
    except ValueError as error:
        raise TrainingError(str(error)) from None
    return prompt + tokenizer.decode(new)


# -- the command line ---------------------------------------------------------------------------------------
def add_parser(commands, checked, positive_int, finite_float) -> None:
    """``lm train`` and ``lm sample`` under the package's command line (``commands``: its subparsers)."""
    lm = commands.add_parser("lm", help="train a language model on text, or sample from one (chapter 15)",
                             description="A decoder-only Transformer language model (chapter 15).")
    sub = lm.add_subparsers(dest="lm_command", metavar="ACTION", parser_class=type(lm), required=True)
    train = sub.add_parser("train", help="train on a text (default: the built-in corpus's English sentences)",
                           description=__doc__.split("\n\n")[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    integer, number = checked(positive_int), checked(finite_float)
    train.add_argument("--out", default="runs/lm", help="the run folder (default runs/lm)")
    train.add_argument("--data", help="a UTF-8 text file (default: the built-in corpus's English sentences)")
    train.add_argument("--tokens", choices=("chars", "bpe"), default="chars",
                       help="characters (default) or the raw-text BPE of chapter 11")
    train.add_argument("--bpe-vocab", type=integer, default=1000, help="BPE vocabulary size (default 1000)")
    for flag, default, what in (("--layers", 4, "blocks"), ("--heads", 4, "heads"), ("--width", 128, "d_model"),
                                ("--context", 64, "tokens the model sees"), ("--batch", 12, "windows per step"),
                                ("--steps", 1000, "training steps"), ("--warmup", 100, "warm-up steps"),
                                ("--eval-every", 250, "steps between evaluations and checkpoints"),
                                ("--eval-windows", 200, "held-out windows evaluated")):
        train.add_argument(flag, type=integer, default=default, help=f"{what} (default {default})")
    train.add_argument("--lr", type=number, default=1e-3, help="peak learning rate (default 1e-3)")
    train.add_argument("--min-lr", type=number, default=1e-4, help="final learning rate (default 1e-4)")
    train.add_argument("--dropout", type=number, default=0.0, help="dropout (default 0)")
    train.add_argument("--positional", choices=("learned", "sinusoidal", "rope"), default="learned",
                       help="positions: a learned table (default), the sinusoid of §3.5, or rotary (RoPE)")
    train.add_argument("--attention", default="softmax", help="softmax, flash, local, linear (chapter 13)")
    train.add_argument("--window", type=integer, default=None, help="the window of --attention local")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--resume", action="store_true", help="continue the run in --out from its latest checkpoint")
    train.add_argument("--overwrite", action="store_true", help="delete the run in --out and train again")
    train.add_argument("--quiet", action="store_true")
    train.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    sample = sub.add_parser("sample", help="generate text from a trained language model")
    sample.add_argument("--checkpoint", default="runs/lm", help="a run folder or checkpoint folder (default runs/lm)")
    sample.add_argument("--prompt", help="the text to continue (default: a line break, or the vocabulary's first "
                                         "character when the text had none)")
    sample.add_argument("--tokens", type=integer, default=300, help="how many tokens to generate (default 300)")
    sample.add_argument("--temperature", type=number, default=0.8)
    sample.add_argument("--top-k", type=integer, default=None)
    sample.add_argument("--top-p", type=number, default=None)
    sample.add_argument("--greedy", action="store_true")
    sample.add_argument("--seed", type=int, default=0)
    sample.add_argument("--no-cache", action="store_true", help="recompute the whole window at each step")
    sample.add_argument("--device", default="cpu", choices=["cpu", "cuda"])


def run(args) -> int:
    if args.lm_command == "train":
        if args.resume and args.overwrite:
            raise TrainingError("--resume and --overwrite contradict each other; give one of them")
        train_lm(args)
    else:
        print(sample_lm(args))
    return 0


__all__ = ["train_lm", "sample_lm", "load_lm", "add_parser", "run", "CharTokenizer", "read_text", "builtin_text"]
