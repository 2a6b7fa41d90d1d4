"""Recipe: train on a Tatoeba corpus of raw text (ManyThings exports) and report test BLEU and chrF.

    python benchmarks/quality/tatoeba.py jpn-eng en-ja      # English -> Japanese, the recipe's step budget
    python benchmarks/quality/tatoeba.py jpn-eng ja-en      # Japanese -> English
    python benchmarks/quality/tatoeba.py fra-eng en-fr
    python benchmarks/quality/tatoeba.py deu-eng en-de
    python benchmarks/quality/tatoeba.py jpn-eng en-ja --steps 4000 --preset medium --vocab-size 8000

The corpora live in ../shared/data/tatoeba_manythings (see its ATTRIBUTION.md): raw sentences with
their capitals and punctuation, Japanese without spaces. The script runs the ordinary command line,

    python -m minitransformer train --data DATA --direction D --preset small --vocab-size 4000
                                    --steps N --tokenizer raw --no-eval --out OUT

(the raw-text BPE for every pair: even where the words are spaced, raw text glues punctuation to them),
then translates the whole test set once (beam 4, α = 0.6) and scores the same outputs several ways:

* BLEU with sacrebleu's "13a" tokenization (English, French, German targets), or on characters
  ("char") for Japanese, and BLEU on MeCab words ("ja-mecab") when fugashi and unidic-lite are
  installed;
* chrF and chrF++, which need no tokenization.

Every test pair is scored as a pair of its own: an English sentence with three Japanese translations
is three test sentences with one reference each, not one sentence with three references.

The recipe: the "small" model (2 + 2 layers, d_model 128) with a shared vocabulary of 4,000 raw-text
tokens, for a fixed number of optimizer steps (``--steps``, default 3,000). A budget in steps, not
minutes, gives the same model on every machine; on a machine shared with other jobs the same steps
take longer, so the results record the minutes they took, the CPU time, the BLAS threads and the load
average (at the start, the end and sampled every 15 s), and an estimate of the minutes on two quiet
cores from the CPU time. ``--minutes`` stops on time instead (with ``--steps`` as well: whichever
comes first). On a busy machine run it with OPENBLAS_NUM_THREADS=1: a BLAS thread waiting for a core
that another process holds only slows the others.

It prints a table and writes OUT/tatoeba_scores.json (and the outputs, OUT/test_outputs.txt). It is a
recipe, not a test: it takes as long as you give it. ``--rescore`` trains nothing and scores a finished
run's outputs again, for instance after ``pip install fugashi unidic-lite`` for the MeCab words.

``--test-limit N`` scores N test pairs spread evenly over the test file. The ManyThings files are
sorted by length, shortest first, so the first N pairs would be the shortest sentences only (the first
500 of jpn-eng average 3.7 English words against 6.4 for the whole set, and hold 369 distinct sources).

No published figure is for these exact files: the split is this project's (see the data README).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
SHARED = next((p / "shared" for p in (ROOT.parent, ROOT.parent.parent) if (p / "shared" / "data").is_dir()),
              ROOT.parent / "shared")
DEFAULT_STEPS = 3000
# Published figures for the same language pairs on Tatoeba test sets, for scale only: OPUS-MT models
# (Transformers trained with Marian on millions of OPUS pairs, 32k SentencePiece), scored with sacreBLEU
# on Tatoeba test sets of their own (other sentences, other years; chrF on a 0-1 scale there, x100 here).
PUBLISHED = {
    "en-ja": {"model": "Tatoeba-Challenge eng-jpn opus-2021-02-18", "test_set": "Tatoeba-test eng-jpn, 10,000 sentences",
              "bleu": 15.7, "chrf": 26.6,
              "where": "Helsinki-NLP/Tatoeba-Challenge, models/eng-jpn/README.md"},
    "ja-en": {"model": "opus-mt-ja-en (opus-2019-12-18)", "test_set": "Tatoeba.ja.en", "bleu": 41.7, "chrf": 58.9,
              "where": "huggingface.co/Helsinki-NLP/opus-mt-ja-en, README.md (Benchmarks)"},
    "en-fr": {"model": "opus-mt-en-fr (opus-2020-02-26)", "test_set": "Tatoeba.en.fr", "bleu": 50.5, "chrf": 67.2,
              "where": "huggingface.co/Helsinki-NLP/opus-mt-en-fr, README.md (Benchmarks)"},
    "en-de": {"model": "opus-mt-en-de (opus-2020-02-26)", "test_set": "Tatoeba.en.de", "bleu": 47.3, "chrf": 66.4,
              "where": "huggingface.co/Helsinki-NLP/opus-mt-en-de, README.md (Benchmarks)"},
}
PAIRS = {"jpn-eng": ("en-ja", "ja-en"), "fra-eng": ("en-fr", "fr-en"), "deu-eng": ("en-de", "de-en")}


def scores(hypotheses: list[str], references: list[str], target: str) -> dict:
    """BLEU under every tokenization that suits the target language, chrF and chrF++."""
    from minitransformer.bleu import corpus_bleu_score, tokenization_for  # noqa: PLC0415
    from minitransformer.chrf import corpus_chrf  # noqa: PLC0415

    default = tokenization_for(target, references)
    # the target's own tokenization first, then the others it could be scored with (to show the difference)
    tokenizations = [default] + (["ja-mecab"] if target == "ja" else []) + [
        other for other in ("13a", "none") if other != default]
    result = {}
    for tokenize in tokenizations:
        try:
            result[f"bleu_{tokenize}"] = round(corpus_bleu_score(hypotheses, references, tokenize=tokenize).score, 2)
        except ValueError as error:              # ja-mecab without fugashi: say so and go on
            result[f"bleu_{tokenize}"] = None
            print(f"(no BLEU on {tokenize}: {error})")
    result["chrf"] = round(corpus_chrf(hypotheses, references), 2)
    result["chrf++"] = round(corpus_chrf(hypotheses, references, word_order=2), 2)
    return result


def spread_sample(pairs: list, limit: int | None) -> list:
    """``limit`` items spread evenly over ``pairs`` (all of them for None or a limit >= len).

    Not the first ``limit``: the ManyThings files are sorted by length, so a prefix holds only the
    shortest sentences."""
    if limit is None or limit >= len(pairs):
        return list(pairs)
    if limit <= 0:
        raise ValueError(f"--test-limit must be positive, got {limit}")
    return [pairs[i * len(pairs) // limit] for i in range(limit)]


class LoadSampler:
    """The 1-minute load average, read every ``every`` seconds in a background thread."""

    def __init__(self, every: float = 15.0) -> None:
        import threading  # noqa: PLC0415
        self.samples = [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every,), daemon=True)
        self._thread.start()

    def _run(self, every: float) -> None:
        while not self._stop.wait(every):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])
        return {"load_average_at_start": round(self.samples[0], 1), "load_average_at_end": round(self.samples[-1], 1),
                "load_average_mean": round(sum(self.samples) / len(self.samples), 1),
                "load_average_max": round(max(self.samples), 1)}


def children_cpu_seconds() -> float:
    """User + system CPU time of the finished child processes so far."""
    import resource  # noqa: PLC0415
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def blas_threads() -> int:
    """The BLAS threads the training process uses: OPENBLAS_NUM_THREADS if set, else the command line's
    choice (one per core, at most 4; minitransformer/__main__.py)."""
    value = os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")
    return int(value) if value and value.isdigit() else max(1, min(4, os.cpu_count() or 1))


def quiet_minutes(cpu_seconds: float, threads: int) -> float:
    """Minutes the training would take alone on two cores with two BLAS threads, from its CPU time.

    With two threads both cores compute, so wall ≈ CPU / 2 (the small_parallel_enja run: 59.9 CPU
    minutes in 30.0). With one thread the CPU time is one core's work, and a second thread makes that
    1.25x faster on two quiet cores (minitransformer/__main__.py). An estimate: on a loaded machine the
    CPU time itself grows a little (caches shared with other jobs)."""
    return cpu_seconds / 60 / (2.0 if threads >= 2 else 1.25)


def rescore(out: Path, data: Path, direction: str) -> int:
    """Score a finished run's outputs again with every tokenization available now; update its scores file."""
    from minitransformer.data.loaders import load_corpus  # noqa: PLC0415

    scores_file, outputs_file = out / "tatoeba_scores.json", out / "test_outputs.txt"
    if not scores_file.is_file() or not outputs_file.is_file():
        print(f"{out}: no finished Tatoeba run here (tatoeba_scores.json and test_outputs.txt)", file=sys.stderr)
        return 2
    summary = json.loads(scores_file.read_text(encoding="utf-8"))
    pairs = spread_sample(load_corpus(data, direction).pairs("test", direction), summary["test_sentences"])
    hypotheses = outputs_file.read_text(encoding="utf-8").split("\n")[:-1]   # not splitlines(): an output may hold "\x1d"
    if len(hypotheses) != len(pairs):
        print(f"{outputs_file}: {len(hypotheses)} lines for {len(pairs)} test pairs", file=sys.stderr)
        return 2
    result = scores(hypotheses, [r for _, r in pairs], direction.split("-")[1])
    summary.update(result)
    scores_file.write_text(json.dumps(summary, ensure_ascii=False, indent=1), encoding="utf-8")
    print(", ".join(f"{key} {value}" for key, value in result.items()))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pair", choices=sorted(PAIRS), help="the Tatoeba folder")
    parser.add_argument("direction", help="en-xx or xx-en (ja, fr, de)")
    parser.add_argument("--steps", type=int, default=None,
                        help=f"optimizer steps (default {DEFAULT_STEPS} unless --minutes is given)")
    parser.add_argument("--minutes", type=float, default=None, help="stop on time instead (or as well)")
    parser.add_argument("--preset", default="small", help="model and schedule (default small)")
    parser.add_argument("--vocab-size", type=int, default=4000, help="raw-text BPE tokens (default 4000)")
    parser.add_argument("--data", default=None, help="the corpus folder (default ../shared/data/tatoeba_manythings/PAIR)")
    parser.add_argument("--out", default=None, help="run folder (default runs/tatoeba-PAIR-DIRECTION)")
    parser.add_argument("--test-limit", type=int, default=None,
                        help="score only N test pairs, spread evenly over the length-sorted file")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rescore", action="store_true",
                        help="train nothing: score OUT/test_outputs.txt again (after installing fugashi, say) "
                             "and update OUT/tatoeba_scores.json")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more `train` options")
    args = parser.parse_args()
    if args.direction not in PAIRS[args.pair]:
        print(f"direction {args.direction!r}: for {args.pair} choose one of {', '.join(PAIRS[args.pair])}",
              file=sys.stderr)
        return 2
    for name in ("steps", "minutes", "vocab_size", "test_limit"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            print(f"--{name.replace('_', '-')} must be positive, got {value}", file=sys.stderr)
            return 2
    if args.rescore:
        return rescore(Path(args.out or ROOT / "runs" / f"tatoeba-{args.pair}-{args.direction}"),
                       Path(args.data or SHARED / "data" / "tatoeba_manythings" / args.pair), args.direction)
    if args.steps is None and args.minutes is None:
        args.steps = DEFAULT_STEPS
    data = Path(args.data or SHARED / "data" / "tatoeba_manythings" / args.pair)
    out = Path(args.out or ROOT / "runs" / f"tatoeba-{args.pair}-{args.direction}")
    if not (data / "train.tsv.gz").is_file() and not (data / "train.tsv").is_file():
        print(f"{data}: corpus folder not found (pass --data)", file=sys.stderr)
        return 2
    budget = ([] if args.steps is None else ["--steps", str(args.steps)]) + (
        [] if args.minutes is None else ["--minutes", str(args.minutes)])
    command = [sys.executable, "-m", "minitransformer", "train", "--data", str(data), "--direction", args.direction,
               "--preset", args.preset, "--vocab-size", str(args.vocab_size), *budget, "--tokenizer", "raw",
               "--no-eval", "--out", str(out), "--overwrite", "--device", args.device, *args.extra]
    print("$", " ".join(command), flush=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    threads = blas_threads()
    load = LoadSampler()
    started, cpu_before = time.monotonic(), children_cpu_seconds()
    returncode = subprocess.run(command, cwd=ROOT, env=env).returncode
    train_wall, train_cpu = time.monotonic() - started, children_cpu_seconds() - cpu_before
    loads = load.stop()
    if returncode != 0:
        return 1

    from minitransformer.data.loaders import load_corpus  # noqa: PLC0415
    from minitransformer.translator import Translator  # noqa: PLC0415

    all_test = load_corpus(data, args.direction).pairs("test", args.direction)
    pairs = spread_sample(all_test, args.test_limit)
    translator = Translator.load(out, device=args.device)
    t0 = time.monotonic()
    sources = list(dict.fromkeys(s for s, _ in pairs))       # each distinct source once (search is deterministic)
    outputs = dict(zip(sources, translator.translate(sources, beam_size=4, alpha=0.6, warn_unseen=False)))
    hypotheses = [outputs[s] for s, _ in pairs]
    decode_seconds = time.monotonic() - t0
    target = args.direction.split("-")[1]
    result = scores(hypotheses, [r for _, r in pairs], target)
    run = json.loads((out / "results.json").read_text(encoding="utf-8"))
    config = run["config"]
    summary = {"command": "python benchmarks/quality/tatoeba.py " + " ".join(sys.argv[1:]),
               "pair": args.pair, "direction": args.direction, "preset": args.preset,
               "model": {key: config[key] for key in ("n_layers", "d_model", "n_heads", "d_ff", "dropout")},
               "vocab_size": config["tgt_vocab_size"], "max_tokens": run["training"]["max_tokens"],
               "steps_budget": args.steps, "minutes_budget": args.minutes,
               "steps": run["steps"], "epochs": round(run["epochs"], 2), "train_seconds": run["train_seconds"],
               "train_minutes": round(run["train_seconds"] / 60, 1), "train_wall_minutes": round(train_wall / 60, 1),
               "train_cpu_minutes": round(train_cpu / 60, 1), "blas_threads": threads,
               "quiet_2core_minutes_estimate": round(quiet_minutes(train_cpu, threads), 1),
               "final_model": run.get("final_model"), "dev_history": run.get("history"),
               "test_sentences": len(pairs), "test_sentences_in_file": len(all_test),
               "distinct_test_sources": len(sources), "decode_seconds": round(decode_seconds, 1),
               **loads, "cores": os.cpu_count(), **result, "published": PUBLISHED.get(args.direction),
               "examples": [{"source": s, "reference": r, "output": h}
                            for (s, r), h in list(zip(pairs, hypotheses))[::max(len(pairs) // 6, 1)][:6]]}
    (out / "test_outputs.txt").write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    (out / "tatoeba_scores.json").write_text(json.dumps(summary, ensure_ascii=False, indent=1), encoding="utf-8")
    bleus = ", ".join(f"{value} ({key[5:]})" for key, value in result.items() if key.startswith("bleu_"))
    print()
    print("| corpus | preset | steps | epochs | training | test sentences | BLEU (tokenization) | chrF | chrF++ |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(f"| tatoeba {args.pair} {args.direction} | {args.preset} | {run['steps']} | {run['epochs']:.2f} | "
          f"{run['train_seconds'] / 60:.1f} min | {len(pairs)} | {bleus} | {result['chrf']} | {result['chrf++']} |")
    print(f"(load average {loads['load_average_at_start']} at the start, {loads['load_average_mean']} on average, "
          f"on {os.cpu_count()} cores; training took {train_wall / 60:.1f} min of wall time and "
          f"{train_cpu / 60:.1f} min of CPU time, about {quiet_minutes(train_cpu, threads):.1f} min on two quiet cores (estimated from {threads} BLAS thread(s)); "
          f"{decode_seconds / 60:.1f} min for decoding the test set with beam 4)")
    for example in summary["examples"]:
        print(f"  {example['source']}\n    → {example['output']}\n    reference: {example['reference']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
