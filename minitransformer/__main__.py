"""Command line: ``python -m minitransformer train | translate | evaluate | attention | lm``.

    python -m minitransformer train                      # built-in corpus, en→ja (README.md: how long it takes)
    python -m minitransformer translate --checkpoint runs/enja "the cat ate the fish ."
    python -m minitransformer evaluate --checkpoint runs/enja --split test_heldout
    python -m minitransformer attention --checkpoint runs/enja "the cat ate the fish ." --out maps.png
    python -m minitransformer lm train --out runs/lm && python -m minitransformer lm sample --prompt "the"

Every refusal (a missing corpus, a corrupt or mismatched checkpoint, bad
options) is one clear line on stderr and a non-zero exit status.
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from typing import Any, Callable

from ._malloc import keep_freed_memory

EXIT_REFUSED = 2
EXIT_BROKEN_PIPE = 128 + 13   # the status of a process ended by SIGPIPE (13), which a shell's pipefail reports
ALPHA_HELP = ("length penalty α (default: the α the training run chose on its dev set with --choose-alpha, "
              "else 0.6, §6.1)")
DEFAULT_BEAM = 4          # beam size of translate and evaluate unless --beam or --greedy says otherwise (§6.1)
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
MAX_BLAS_THREADS = 4
_REEXEC_MARK = "MINITRANSFORMER_CLI_ENV"


def _restart_with_few_blas_threads(argv: list[str]) -> None:
    """Run the command again with at most ``MAX_BLAS_THREADS`` BLAS threads, unless the user chose a count.

    Our matrices are small (d_model 128-256). OpenBLAS starts one thread per core,
    and on a many-core machine most of them only spin-wait (benchmarks/speed/blas_spin.py
    measures the spinning, benchmarks/speed/train_step.py a step on one thread and on two).
    On a machine busy with other work, set OPENBLAS_NUM_THREADS=1 yourself: a BLAS
    thread that waits for a core another process holds stalls every product. The
    count is read when NumPy loads, which has already happened here, hence the restart.
    """
    if os.environ.get(_REEXEC_MARK) or any(name in os.environ for name in THREAD_VARIABLES):
        return
    from .training.distributed import local_ranks  # noqa: PLC0415 - the ranks of an MPI run on this machine share its cores

    threads = str(max(1, min(MAX_BLAS_THREADS, (os.cpu_count() or 1) // local_ranks())))
    env = dict(os.environ, OPENBLAS_NUM_THREADS=threads, **{_REEXEC_MARK: "1"})
    try:
        os.execve(sys.executable, [sys.executable, "-m", "minitransformer", *argv], env)
    except OSError:
        return  # cannot restart (unusual platforms): carry on with the default thread count


class _Parser(argparse.ArgumentParser):
    """argparse, but errors say which subcommand and exit with EXIT_REFUSED."""

    def error(self, message: str):  # noqa: D401 - argparse's hook
        self.print_usage(sys.stderr)
        self.exit(EXIT_REFUSED, f"{self.prog}: error: {message}\n")


def _checked(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type from a parser that raises ValueError with the reason."""
    def check(text: str) -> Any:
        try:
            return parse(text)
        except ValueError as error:
            reason = str(error) if "must be" in str(error) else f"expected a number, got {text!r}"
            raise argparse.ArgumentTypeError(reason) from None
    check.__name__ = getattr(parse, "__name__", "value")
    return check


def _add_train_options(parser: argparse.ArgumentParser) -> None:
    """One flag per field of TrainOptions (``max_tokens`` -> ``--max-tokens``), with the field's help."""
    from .training.options import TrainOptions  # noqa: PLC0415

    for option in dataclasses.fields(TrainOptions):
        cli = dict(option.metadata)
        flag = cli.pop("flag", "--" + option.name.replace("_", "-"))
        help_text = cli.pop("help").replace("%", "%%")
        if option.default is False:
            parser.add_argument(flag, dest=option.name, action="store_true", help=help_text)
        elif option.default is True:
            parser.add_argument(flag, dest=option.name, action="store_false", help=help_text)
        else:
            if "type" in cli:
                cli["type"] = _checked(cli["type"])
            parser.add_argument(flag, dest=option.name, default=option.default, help=help_text, **cli)


def build_parser() -> argparse.ArgumentParser:
    from .training.options import alpha_value, finite_float, positive_int  # noqa: PLC0415 - keep `--help` of the package light

    parser = _Parser(prog="python -m minitransformer",
                     description="The Transformer of 'Attention Is All You Need', from scratch: train a "
                                 "translator, translate, evaluate.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    train = commands.add_parser(
        "train", help="train a translator (default: the built-in English→Japanese corpus)",
        description="Train a Transformer translator end to end: BPE, batches by tokens, label smoothing, Adam with "
                    "warm-up, checkpoints, averaging of the last checkpoints, then test BLEU with beam search, "
                    "example translations and an attention heat map (OUT/attention.png). --model lstm trains "
                    "the attention LSTM of 2015 (chapter 6) the same way.")
    _add_train_options(train)
    train.add_argument("--quick", action="store_true", help="a 20-second smoke run (preset 'quick')")

    translate = commands.add_parser(
        "translate", help="translate sentences with a trained model",
        description="Translate sentences given as arguments, else lines from stdin, else (on a terminal) "
                    "an interactive prompt. Sentences are brought into the form of the training corpus "
                    "(its case and punctuation spacing); words the model never saw are named on stderr.")
    translate.add_argument("sentences", nargs="*", help="sentences to translate")
    translate.add_argument("--checkpoint", default="runs/enja", help="a run folder or a checkpoint folder "
                                                                     "(default: runs/enja)")
    translate.add_argument("--beam", type=_checked(positive_int), help=f"beam size (default {DEFAULT_BEAM}, §6.1)")
    translate.add_argument("--greedy", action="store_true", help="greedy search (beam 1)")
    translate.add_argument("--alpha", type=_checked(alpha_value), help=ALPHA_HELP)
    translate.add_argument("--device", default="cpu", choices=["cpu", "cuda"])

    evaluate = commands.add_parser(
        "evaluate", help="BLEU of a trained model on a split",
        description="Corpus BLEU of a trained model with beam search. The split comes from the corpus "
                    "the model was trained on (the built-in corpus, or --data).")
    evaluate.add_argument("--checkpoint", default="runs/enja", help="a run folder or a checkpoint folder")
    evaluate.add_argument("--split", default="test", choices=["test", "test_heldout", "dev"])
    evaluate.add_argument("--data", help="a corpus folder to evaluate on instead of the training corpus")
    evaluate.add_argument("--beam", type=_checked(positive_int), help=f"beam size (default {DEFAULT_BEAM}, §6.1)")
    evaluate.add_argument("--greedy", action="store_true", help="greedy search (beam 1)")
    evaluate.add_argument("--alpha", type=_checked(alpha_value), help=ALPHA_HELP)
    evaluate.add_argument("--limit", type=_checked(positive_int), help="evaluate on the first N pairs only")
    evaluate.add_argument("--device", default="cpu", choices=["cpu", "cuda"])

    _add_attention_parser(commands)

    from .training import lm  # noqa: PLC0415 - chapter 15: lm train | lm sample

    lm.add_parser(commands, _checked, positive_int, finite_float)
    return parser


def _add_attention_parser(commands) -> None:
    attention = commands.add_parser(
        "attention", help="draw every attention head for one sentence",
        description="Translate one sentence greedily and draw the attention weights of every head, one PNG "
                    "per kind (encoder self-attention, decoder self-attention, encoder-decoder attention), "
                    "each a grid of layers × heads: OUT-encoder.png, OUT-decoder.png, OUT-cross.png. An attention "
                    "LSTM has one attention, encoder-decoder: OUT itself.")
    attention.add_argument("sentence", help="the source sentence")
    attention.add_argument("--checkpoint", default="runs/enja", help="a run folder or a checkpoint folder")
    attention.add_argument("--out", default="attention.png", help="where to write (default attention.png)")
    attention.add_argument("--kind", choices=["encoder", "decoder", "cross"], action="append",
                           help="only this kind (repeatable); with one kind, OUT is the file name itself")
    attention.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    attention.add_argument("--overwrite", action="store_true",
                           help="replace pictures that exist under the names OUT gives (OUT-cross.png, ...)")


def _beam_size(args) -> int:
    """The beam of translate or evaluate: 1 for --greedy, else --beam, else DEFAULT_BEAM.

    ``--greedy --beam 3`` asks for two searches; rather than let one of them win silently, it is refused.
    (``--beam`` has no default in the parser, so that a --beam the user gave can be told from none.)
    """
    if args.greedy and args.beam not in (None, 1):
        raise _Refusal(f"--greedy and --beam {args.beam} contradict each other (--greedy is --beam 1); "
                       "give one of them")
    return 1 if args.greedy else args.beam or DEFAULT_BEAM


def _check_beam(beam: int, translator) -> None:
    """A beam no wider than the model's vocabulary (decode.check_beam_width says why)."""
    from .decode import check_beam_width  # noqa: PLC0415

    try:
        check_beam_width(beam, translator.model.config.tgt_vocab_size, "--beam")
    except ValueError as error:
        raise _Refusal(str(error)) from None


def cmd_train(args) -> int:
    from .training.trainer import TrainOptions, train  # noqa: PLC0415

    if args.quick and args.preset not in (None, "quick"):
        raise _Refusal("--quick is the preset 'quick'; do not combine it with --preset")
    options = TrainOptions(**{option.name: getattr(args, option.name) for option in dataclasses.fields(TrainOptions)})
    if args.quick:
        options.preset = "quick"
    train(options)
    return 0


def _load_translator(args):
    """The model the user named; when a run folder has no final model yet, say which checkpoint is used."""
    from .checkpoint import FINAL_DIR, resolve_checkpoint  # noqa: PLC0415
    from .translator import Translator  # noqa: PLC0415

    folder = resolve_checkpoint(args.checkpoint)
    named = os.path.abspath(args.checkpoint)
    if os.path.isdir(named) and folder.name != FINAL_DIR and os.path.abspath(folder) != named:
        print(f"note: {args.checkpoint} has no final model (the run has not finished); using {folder}",
              file=sys.stderr)
    translator = Translator.load(args.checkpoint, device=args.device)
    translator.warn = lambda message: print(f"warning: {message}", file=sys.stderr)   # unseen words, truncation
    return translator


def _alpha(args, translator) -> float:
    """--alpha when given; else the α the training run chose on dev (saved with the model); else §6.1's 0.6."""
    from .decode import DEFAULT_ALPHA  # noqa: PLC0415

    if args.alpha is not None:
        return args.alpha
    return getattr(translator, "alpha", DEFAULT_ALPHA)


def cmd_translate(args) -> int:
    beam = _beam_size(args)
    translator = _load_translator(args)
    _check_beam(beam, translator)
    alpha = _alpha(args, translator)

    def run(sentences: list[str]) -> None:
        outputs = translator.translate(sentences, beam_size=beam, alpha=alpha)
        for sentence, output in zip(sentences, outputs):
            if not sentence.strip():
                print("", flush=True)
                print("warning: empty sentence, nothing to translate", file=sys.stderr)
            else:
                print(output, flush=True)

    if args.sentences:
        run(args.sentences)
    elif sys.stdin is None:             # started with stdin closed (`<&-`): no pipe, no terminal
        raise _Refusal("nothing to translate: stdin is closed; give the sentences as arguments or on stdin")
    elif not sys.stdin.isatty():
        run(_stdin_lines(sys.stdin))
    else:
        print("Type a sentence ('The cat ate the fish.'); Ctrl-D to quit.",
              file=sys.stderr)
        while True:
            try:
                line = input("> ")
            except EOFError:
                print(file=sys.stderr)
                break
            if line.strip():
                run([line])
    return 0


def _stdin_lines(stream) -> list[str]:
    """The lines of a piped stdin, read as the corpus reader reads a file: a byte-order mark at the start is
    dropped (it would reach the first sentence as a character), and text with NUL bytes (UTF-16 or UTF-32
    saved without a mark is valid UTF-8, a NUL beside every letter) is refused, naming the likely encoding."""
    import io  # noqa: PLC0415
    from .data.loaders import BYTE_ORDER_MARK, likely_encoding, nul_error  # noqa: PLC0415

    encoding = getattr(stream, "encoding", None) or "utf-8"
    raw = stream.buffer.read() if hasattr(stream, "buffer") else stream.read().encode(encoding, "surrogateescape")
    if b"\0" in raw:
        raise _Refusal(nul_error("stdin", raw[:4096]))
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as error:
        guess = f"; it looks like {likely_encoding(raw[:4096])}" if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise _Refusal(f"stdin: not valid {encoding} ({error.reason} at byte {error.start}){guess}: "
                       f"give the sentences in {encoding}") from None
    text = text[1:] if text.startswith(BYTE_ORDER_MARK) else text
    return [line.rstrip("\n") for line in io.StringIO(text, newline=None)]   # any line ending, as before


def cmd_evaluate(args) -> int:
    from .bleu import tokenization_for  # noqa: PLC0415
    from .checkpoint import load_checkpoint  # noqa: PLC0415
    from .chrf import corpus_chrf_score  # noqa: PLC0415
    from .data.run_data import load_data  # noqa: PLC0415
    from . import presets  # noqa: PLC0415

    beam = _beam_size(args)
    translator = _load_translator(args)
    _check_beam(beam, translator)
    state = load_checkpoint(args.checkpoint, with_optimizer=False).state
    settings = state.get("training") or {}
    if not settings and args.data is None:
        raise _Refusal(f"{args.checkpoint}: the checkpoint does not say which corpus it was trained on; pass --data")
    direction = settings.get("direction") or "en-ja"
    try:
        preset = presets.resolve(settings.get("preset"), saved=True)
    except ValueError as error:
        raise _Refusal(f"{args.checkpoint}: {error}") from None
    data = args.data or _trained_corpus_folder(args, settings, state)
    # the run's --limit belongs to the data it was given for: another corpus (--data) is read whole
    corpus = load_data(data, direction, presets.PRESETS[preset]["corpus"],
                       limit=settings.get("limit") if args.data is None else None)
    if args.data is None:
        _warn_if_the_corpus_changed(args, state, data, corpus)
    pairs = corpus.pairs(args.split, direction)
    if args.limit:
        pairs = pairs[:args.limit]
    if not pairs:
        raise _Refusal(f"the split {args.split!r} of corpus {corpus.name!r} is empty")
    started = time.monotonic()
    tokenize = tokenization_for(direction.split("-")[-1], [ref for _, ref in pairs])
    alpha = _alpha(args, translator)
    score, hypotheses = translator.bleu(pairs, beam_size=beam, alpha=alpha, tokenize=tokenize)
    chrf = corpus_chrf_score(hypotheses, [ref for _, ref in pairs])
    exact = sum(h.split() == ref.split() for h, (_, ref) in zip(hypotheses, pairs)) / len(pairs)
    print(f"{corpus.name} {args.split} ({direction}, {len(pairs)} sentences, "
          f"{'greedy' if beam == 1 else f'beam {beam}, α {alpha:g}'}): BLEU {score.score:.2f} "
          f"({tokenize} tokens), {chrf}  "
          f"[{'/'.join(f'{p:.1f}' for p in score.precisions)}, BP {score.bp:.3f}, ratio {score.ratio:.3f}], "
          f"{100 * exact:.1f}% exact, {time.monotonic() - started:.1f} s")
    return 0


def cmd_lm(args) -> int:
    from .training.lm import run  # noqa: PLC0415

    return run(args)


def _trained_corpus_folder(args, settings: dict, state: dict) -> str | None:
    """The corpus folder the run trained on: its resolved path as the run recorded it (so that evaluate
    from another folder scores that corpus); a run from before corpora were recorded kept it as typed."""
    data = settings.get("data")
    recorded = state.get("corpus")
    if isinstance(recorded, dict) and isinstance(recorded.get("path"), str):
        return recorded["path"]
    if data is not None and "corpus" not in state:
        print(f"note: {args.checkpoint} was trained before runs recorded where their corpus is and what it held; "
              f"reading {data} from the current folder, unchecked", file=sys.stderr)
    return data


def _warn_if_the_corpus_changed(args, state: dict, data: str | None, corpus) -> None:
    """Warn, naming the files, when the run's corpus is no longer what the model was trained on."""
    from .data import fingerprint  # noqa: PLC0415

    recorded = state.get("corpus")
    if data is None or not isinstance(recorded, dict):
        return
    changed = fingerprint.differences(recorded, fingerprint.fingerprint(data, corpus))
    if changed:
        print(f"warning: the corpus {data} is not the one {args.checkpoint} was trained on: {'; '.join(changed)}; "
              f"scoring it as it is now", file=sys.stderr)


def cmd_attention(args) -> int:
    from .attention_maps import attention_maps, check_kinds, draw_attention_maps, model_kinds  # noqa: PLC0415

    if not args.out.strip():
        raise _Refusal("--out is empty; name the picture file (default attention.png)")
    _check_picture_folder(args.out)                 # before the model is loaded and the sentence translated
    translator = _load_translator(args)
    try:
        check_kinds(translator.model, args.kind or ())
    except ValueError as error:
        raise _Refusal(str(error)) from None
    _check_no_picture_replaced(args, args.kind or model_kinds(translator.model))
    maps = attention_maps(translator, args.sentence)
    print("output: " + " ".join(maps.output))
    kinds = args.kind or model_kinds(translator.model)
    for path in draw_attention_maps(maps, args.out, kinds, sentence=args.sentence):
        print(path)
    return 0


def _check_picture_folder(out: str) -> None:
    """Refuse an --out whose folder cannot be made: a part of the path that exists and is no folder
    (README.md/x.png) used to be found only after translating, as a FileExistsError."""
    text = os.path.expanduser(out)
    folder = text if text.endswith(("/", os.sep)) or os.path.isdir(text) else os.path.dirname(text)
    folder = os.path.abspath(folder or ".")
    while not os.path.exists(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)              # the nearest part of the path that exists
    if not os.path.isdir(folder):
        raise _Refusal(f"--out {out}: {folder} is a file, not a folder, so no picture can be written inside it")


def _check_no_picture_replaced(args, kinds) -> None:
    """Refuse, before translating, to replace a picture that --out did not name itself (OUT-cross.png beside
    OUT, or OUT.png for OUT) unless --overwrite says so: those are files of yours until this command writes them."""
    from .attention_maps import picture_paths  # noqa: PLC0415

    named = os.path.abspath(os.path.expanduser(args.out))
    existing = [str(path) for path in picture_paths(args.out, kinds)
                if (path.exists() or path.is_symlink()) and os.path.abspath(path) != named]
    if existing and not args.overwrite:
        raise _Refusal(f"--out {args.out} would replace {', '.join(existing)}, which exist"
                       f"{'s' if len(existing) == 1 else ''}; pass --overwrite to replace "
                       f"{'it' if len(existing) == 1 else 'them'}, or choose another --out")


class _Refusal(Exception):
    """A request the command refuses; printed as one line."""


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_REFUSED
    if argv is None:
        _restart_with_few_blas_threads(sys.argv[1:])
    keep_freed_memory()  # freed pages stay for the next step (_malloc.py; MINITRANSFORMER_MALLOC=0 opts out)
    from .checkpoint import CheckpointError  # noqa: PLC0415
    from .data.loaders import CorpusError  # noqa: PLC0415
    from .training.options import TrainingError  # noqa: PLC0415

    handlers = {"train": cmd_train, "translate": cmd_translate, "evaluate": cmd_evaluate, "attention": cmd_attention,
                "lm": cmd_lm}
    for name in ("checkpoint", "data"):     # '~/runs/enja' in quotes reaches us unexpanded: it means the home folder
        if isinstance(getattr(args, name, None), str):
            setattr(args, name, os.path.expanduser(getattr(args, name)))
    try:
        return handlers[args.command](args)
    except BrokenPipeError:     # the reader went away (translate … | head -1): stop quietly, as `yes | head` does
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except (_Refusal, CheckpointError, CorpusError, TrainingError) as error:
        print(f"{parser.prog} {args.command}: error: {error}", file=sys.stderr)
        return EXIT_REFUSED
    except KeyboardInterrupt:
        print(f"\n{parser.prog} {args.command}: interrupted", file=sys.stderr)
        return 130
    except (OSError, RuntimeError, ValueError) as error:  # e.g. a full disk, no GPU, a bad file
        print(f"{parser.prog} {args.command}: error: {type(error).__name__}: {error}", file=sys.stderr)
        return 1


def _quiet_stdout() -> None:
    """Point stdout at the null device, so that Python's flush at exit does not fail on the closed pipe again
    (the recipe of Python's documentation for SIGPIPE)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, AttributeError, ValueError):    # no file descriptor (stdout replaced, as under pytest)
        pass


if __name__ == "__main__":
    sys.exit(main())
