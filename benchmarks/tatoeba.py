"""Recipe: train on a Tatoeba corpus of raw text (ManyThings exports) and report test BLEU and chrF.

    python benchmarks/tatoeba.py jpn-eng en-ja --minutes 30     # English -> Japanese
    python benchmarks/tatoeba.py jpn-eng ja-en --minutes 30     # Japanese -> English
    python benchmarks/tatoeba.py fra-eng en-fr --minutes 30
    python benchmarks/tatoeba.py deu-eng en-de --minutes 30

The corpora live in ../shared/data/tatoeba_manythings (see its ATTRIBUTION.md): raw sentences with
their capitals and punctuation, Japanese without spaces. The script runs the ordinary command line,

    python -m minitransformer train --data DATA --direction D --preset medium --minutes M
                                    --tokenizer raw --no-eval --out OUT

(the raw-text BPE for every pair: even where the words are spaced, raw text glues punctuation to them),
then translates the test set once (beam 4, α = 0.6) and scores the same outputs several ways:

* BLEU with sacrebleu's "13a" tokenization (English, French, German targets), or on characters
  ("char") for Japanese, and BLEU on MeCab words ("ja-mecab") when fugashi and unidic-lite are
  installed;
* chrF and chrF++, which need no tokenization.

It prints a table and writes OUT/tatoeba_scores.json (and the outputs, OUT/test_outputs.txt). It is a recipe, not a test: it takes as long as
you give it. On a machine shared with other jobs the same minutes buy fewer steps, so the table
reports steps, epochs and the load average with the scores.

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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = next((p / "shared" for p in (ROOT.parent, ROOT.parent.parent) if (p / "shared" / "data").is_dir()),
              ROOT.parent / "shared")
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pair", choices=sorted(PAIRS), help="the Tatoeba folder")
    parser.add_argument("direction", help="en-xx or xx-en (ja, fr, de)")
    parser.add_argument("--minutes", type=float, default=30.0, help="training time budget (default 30)")
    parser.add_argument("--preset", default="medium")
    parser.add_argument("--data", default=None, help="the corpus folder (default ../shared/data/tatoeba_manythings/PAIR)")
    parser.add_argument("--out", default=None, help="run folder (default runs/tatoeba-PAIR-DIRECTION)")
    parser.add_argument("--test-limit", type=int, default=None, help="score only the first N test sentences")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more `train` options")
    args = parser.parse_args()
    if args.direction not in PAIRS[args.pair]:
        print(f"direction {args.direction!r}: for {args.pair} choose one of {', '.join(PAIRS[args.pair])}",
              file=sys.stderr)
        return 2
    data = Path(args.data or SHARED / "data" / "tatoeba_manythings" / args.pair)
    out = Path(args.out or ROOT / "runs" / f"tatoeba-{args.pair}-{args.direction}")
    if not (data / "train.tsv.gz").is_file() and not (data / "train.tsv").is_file():
        print(f"{data}: corpus folder not found (pass --data)", file=sys.stderr)
        return 2
    load = os.getloadavg()[0]
    command = [sys.executable, "-m", "minitransformer", "train", "--data", str(data), "--direction", args.direction,
               "--preset", args.preset, "--minutes", str(args.minutes), "--tokenizer", "raw", "--no-eval",
               "--out", str(out), "--overwrite", "--device", args.device, *args.extra]
    print("$", " ".join(command), flush=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    started = time.monotonic()
    if subprocess.run(command, cwd=ROOT, env=env).returncode != 0:
        return 1
    train_wall = time.monotonic() - started

    from minitransformer.data.loaders import load_corpus  # noqa: PLC0415
    from minitransformer.translator import Translator  # noqa: PLC0415

    pairs = load_corpus(data, args.direction).pairs("test", args.direction)[:args.test_limit]
    translator = Translator.load(out, device=args.device)
    t0 = time.monotonic()
    hypotheses = translator.translate([s for s, _ in pairs], beam_size=4, alpha=0.6, warn_unseen=False)
    decode_seconds = time.monotonic() - t0
    target = args.direction.split("-")[1]
    result = scores(hypotheses, [r for _, r in pairs], target)
    run = json.loads((out / "results.json").read_text(encoding="utf-8"))
    summary = {"pair": args.pair, "direction": args.direction, "preset": args.preset, "minutes": args.minutes,
               "steps": run["steps"], "epochs": round(run["epochs"], 2), "train_seconds": run["train_seconds"],
               "test_sentences": len(pairs), "decode_seconds": round(decode_seconds, 1),
               "load_average_at_start": round(load, 1), "cores": os.cpu_count(), **result,
               "examples": [{"source": s, "reference": r, "output": h}
                            for (s, r), h in list(zip(pairs, hypotheses))[:5]]}
    (out / "test_outputs.txt").write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    (out / "tatoeba_scores.json").write_text(json.dumps(summary, ensure_ascii=False, indent=1), encoding="utf-8")
    bleus = ", ".join(f"{value} ({key[5:]})" for key, value in result.items() if key.startswith("bleu_"))
    print()
    print("| corpus | preset | steps | epochs | training | test sentences | BLEU (tokenization) | chrF | chrF++ |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(f"| tatoeba {args.pair} {args.direction} | {args.preset} | {run['steps']} | {run['epochs']:.2f} | "
          f"{run['train_seconds'] / 60:.1f} min | {len(pairs)} | {bleus} | {result['chrf']} | {result['chrf++']} |")
    print(f"(load average {load:.1f} on {os.cpu_count()} cores at the start; wall {train_wall / 60:.1f} min for "
          f"training, {decode_seconds / 60:.1f} min for decoding the test set with beam 4)")
    for example in summary["examples"]:
        print(f"  {example['source']}\n    → {example['output']}\n    reference: {example['reference']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
