"""The built-in corpus trained with each self-attention of chapter 13: test BLEU side by side.

Each kind is one `python -m minitransformer train` run with the same preset, steps and
seed; only `--attention` (and `--attention-window` for "local") differs. The test BLEU
(beam 4) and exact-match rates come from each run's results.json and are collected in
benchmarks/sequence_length/results/attention_kinds_bleu.json. Runs one after another (each takes minutes).

    python benchmarks/sequence_length/attention_kinds_bleu.py                  # preset "small" (the README's run), window 4
    python benchmarks/sequence_length/attention_kinds_bleu.py --steps 400      # shorter runs, the same for every kind
    python benchmarks/sequence_length/attention_kinds_bleu.py --preset quick   # a short smoke run (writes nothing)
    python benchmarks/sequence_length/attention_kinds_bleu.py --collect        # the JSON from the runs finished so far
    python benchmarks/sequence_length/attention_kinds_bleu.py --render         # chapter 13's table from the JSON
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
RESULTS = Path(__file__).resolve().parent / "results" / "attention_kinds_bleu.json"
KINDS = ("softmax", "flash", "local", "linear")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="small")
    parser.add_argument("--window", type=int, default=4)
    parser.add_argument("--steps", type=int, help="training steps of every run (default: the preset's)")
    parser.add_argument("--runs", default="runs/attention-kinds", help="folder for the four run folders")
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--render", action="store_true", help="fill chapter 13's table from the JSON")
    parser.add_argument("--collect", action="store_true",
                        help="write the JSON from the runs already finished under --runs (no training)")
    args = parser.parse_args()
    if args.render:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from long_sequences import CHAPTER, fill_region

        fill_region(CHAPTER, "benchmarks/sequence_length/results/attention_kinds_bleu.json",
                    render_markdown(json.loads(RESULTS.read_text(encoding="utf-8"))))
        print(f"wrote the table into {CHAPTER}")
        return 0
    rows = []
    if args.collect:
        for kind in args.kinds.split(","):
            if (ROOT / args.runs / kind / "results.json").exists():
                rows.append(row_of(kind, args, Path(args.runs) / kind))
        write(rows, args)
        return 0
    for kind in args.kinds.split(","):
        out = Path(args.runs) / kind
        command = [sys.executable, "-m", "minitransformer", "train", "--preset", args.preset, "--attention", kind,
                   "--out", str(out), "--overwrite", "--quiet"]
        if kind == "local":
            command += ["--attention-window", str(args.window)]
        if args.steps:
            command += ["--steps", str(args.steps)]
        load = os.getloadavg()[0]
        started = time.monotonic()
        subprocess.run(command, check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        row = row_of(kind, args, out)
        row.update(wall_seconds=round(time.monotonic() - started, 1), load_before=round(load, 2),
                   load_after=round(os.getloadavg()[0], 2))
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.preset != "quick":
        write(rows, args)
    return 0


def row_of(kind: str, args, out: Path) -> dict:
    """What one run's results.json says about its test sets."""
    results = json.loads((ROOT / out / "results.json").read_text(encoding="utf-8"))
    return {"attention": kind, "window": results["config"].get("attention_window"), "steps": results["steps"],
            "train_seconds": results["train_seconds"],
            **{key: results.get(key) for key in ("test_bleu", "test_exact_match", "test_heldout_bleu",
                                                 "test_heldout_exact_match")}}


def write(rows: list, args) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
                                   "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                   "preset": args.preset, "cpus": os.cpu_count(),
                                   "load_when_written": round(os.getloadavg()[0], 2), "rows": rows}, indent=1) + "\n",
                       encoding="utf-8")
    print(f"wrote {RESULTS}")


def render_markdown(results: dict) -> str:
    """Chapter 13's side-by-side table, from the results file only."""
    lines = ["| self-attention | test BLEU (beam 4) | exact match | held-out BLEU | held-out exact match | "
             "training time |", "|---|---|---|---|---|---|"]
    for row in results["rows"]:
        name = row["attention"] + (f", w = {row['window']}" if row["window"] else "")
        lines.append(f"| {name} | {row['test_bleu']:.2f} | {100 * row['test_exact_match']:.1f} % | "
                     f"{row['test_heldout_bleu']:.2f} | {100 * row['test_heldout_exact_match']:.1f} % | "
                     f"{row['train_seconds']:.0f} s |")
    loads = [row[key] for row in results["rows"] for key in ("load_before", "load_after") if key in row] or \
        [results["load_when_written"]]
    lines += ["", f"Preset `{results['preset']}`, {results['rows'][0]['steps']:,} steps each, seed 0; written "
                  f"{results['date']} on {results['cpus']} CPU cores shared with other jobs (1-minute load average "
                  f"{min(loads):.1f}–{max(loads):.1f}), so the training times say little. "
                  f"Command: `{results['command']}`."]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
