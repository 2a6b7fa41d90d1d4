"""Recipe: train on small_parallel_enja (50,000 English–Japanese pairs), one run per seed, and report test BLEU.

    python benchmarks/quality/small_parallel_enja.py                      # seeds 0, 1, 2: three hours, en→ja
    python benchmarks/quality/small_parallel_enja.py --direction ja-en    # the other way, with the same recipe
    python benchmarks/quality/small_parallel_enja.py --seeds 1 --continue # add one seed to the results file
    python benchmarks/quality/small_parallel_enja.py --minutes 10 --seeds 0 --results /tmp/spe-10min.json

The corpus (Tanaka corpus sentences of 4–16 words, English tokenized and
lowercased, Japanese segmented by KyTea) lives in ../shared/data/small_parallel_enja
(see its ATTRIBUTION.md). Its README reports no BLEU. The only score we know
on this set is self-reported by a hobby repository (refiute/primitiv_practice on
GitHub): "BLEU about 37" for a Bahdanau-style attention LSTM trained on a GPU,
greedy decoding, tokenization unstated; a hint of scale, not a baseline.

For each seed the script runs the ordinary command line in a subprocess,

    python -m minitransformer train --data DATA --direction en-ja --preset medium --minutes M --seed S --out OUT

with ``--cooldown 0.2 --average 16 --choose-average --choose-alpha`` (eq. 3's rate falls linearly to zero
over the last fifth of the hour; the final model is the last checkpoint or the average of the last 2, 4, 8
or 16 that does best on dev; the length penalty α is the one of 0, 0.3, 0.6, 1, 1.5, 2 that does best on
the whole dev set with beam 4, or a larger one, in steps of 0.5, while the largest tried wins). A second
process then scores the final model on the test set with greedy search too, for comparison with greedy
systems. The results file keeps every run (each seed's steps, learning curve, dev choices, test BLEU beam 4
and greedy, with BLEU's signature) and the mean, standard deviation and count of each figure over the seeds:
one run is one draw, and a difference between two recipes is a finding only where it is larger than the
spread between the seeds of one recipe. It is rewritten after every run, so an interrupted series keeps
what it measured; ``--continue`` keeps the runs it holds (same recipe, same kind of CPU) and trains only
the missing seeds, so that the hours can be spread over several sittings. On a machine shared with
other jobs the same minutes buy fewer steps, so report the step count with the BLEU.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))     # common.py

from common import load_average, machine_record  # noqa: E402
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "small_parallel_enja"
RECIPE_FLAGS = ["--cooldown", "0.2", "--average", "16", "--choose-average", "--choose-alpha"]
# the figures of a run that vary with the seed: summarized over the seeds as mean, sd and n
VARYING = ("steps", "epochs", "train_minutes", "test_bleu", "test_bleu_greedy", "alpha", "dev_bleu_last_checkpoint",
           "dev_bleu_average", "test_bleu_at_given_alpha")
# what must be the same for --continue to add to a results file: the recipe, and the CPU that set its pace
SAME_RECIPE = ("preset", "direction", "minutes", "data", "extra")
SAME_CPU = ("model", "family_model", "cores", "simd")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="the small_parallel_enja folder")
    parser.add_argument("--minutes", type=float, default=60.0, help="training time budget of each run (default 60)")
    parser.add_argument("--preset", default="medium")
    parser.add_argument("--direction", default="en-ja", choices=["en-ja", "ja-en"])
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds, one run each (default 0,1,2)")
    parser.add_argument("--continue", dest="continue_", action="store_true",
                        help="keep the runs the results file holds (same recipe, same kind of CPU); train the rest")
    parser.add_argument("--runs", default=str(ROOT / "runs"), help="where the run folders go (one per seed)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--results", default=None,
                        help="JSON file for the figures the chapters quote (tools/quoted_numbers.py; "
                             "default results/small_parallel_enja_DIRECTION_seeds.json beside this script)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)   # a run folder: score it greedily, print JSON
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="more `train` options")
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(greedy_test_score(Path(args.worker))))
        return 0
    try:
        seeds = sorted({int(s) for s in args.seeds.split(",") if s.strip()})
    except ValueError:
        parser.error(f"--seeds takes comma-separated integers, got {args.seeds!r}")
    if not seeds or min(seeds) < 0:
        parser.error(f"--seeds needs at least one seed >= 0, got {args.seeds!r}")
    results_path = Path(args.results or Path(__file__).resolve().parent / "results" /
                        f"small_parallel_enja_{args.direction}_seeds.json")
    if not Path(args.data).is_dir():
        print(f"{args.data}: corpus folder not found (pass --data)", file=sys.stderr)
        return 2

    recipe = {"preset": args.preset, "direction": args.direction, "minutes": args.minutes,
              "data": Path(args.data).name, "extra": args.extra}
    table = {"command": "python " + " ".join([str(Path(sys.argv[0]).resolve().relative_to(ROOT)), *sys.argv[1:]])
             if argv is None else "python benchmarks/quality/small_parallel_enja.py " + " ".join(argv),
             **recipe, "recipe_flags": RECIPE_FLAGS, "machine": machine_record(), "runs": []}
    if args.continue_:
        table = continued(table, results_path)
    for seed in seeds:
        if any(run["seed"] == seed for run in table["runs"]):
            print(f"seed {seed}: kept from {results_path.name}", flush=True)
            continue
        run = train_seed(args, seed)
        if run is None:
            return 1
        table["runs"] = sorted([*table["runs"], run], key=lambda r: r["seed"])
        table["summary"] = summarize(table["runs"])
        results_path.parent.mkdir(parents=True, exist_ok=True)
        temporary = results_path.with_name(f".tmp-{results_path.name}")
        temporary.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(temporary, results_path)
    print_table(table)
    return 0


def train_seed(args, seed: int) -> dict | None:
    """One seed trained by the command line, then scored greedily in a process of its own; None if it failed."""
    out = Path(args.runs) / f"small_parallel_enja_{args.direction}_seed{seed}"
    command = [sys.executable, "-m", "minitransformer", "train", "--data", args.data, "--direction", args.direction,
               "--preset", args.preset, "--minutes", str(args.minutes), "--seed", str(seed), "--out", str(out),
               "--overwrite", "--device", args.device, *RECIPE_FLAGS, *args.extra]
    print("$", " ".join(command), flush=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    load_before, cpu_before = load_average(), _children_cpu_seconds()
    if subprocess.run(command, cwd=ROOT, env=env).returncode != 0:
        print(f"seed {seed}: training failed; the results file keeps the seeds before it", file=sys.stderr)
        return None
    cpu_minutes = (_children_cpu_seconds() - cpu_before) / 60
    scored = subprocess.run([sys.executable, __file__, "--worker", str(out)], cwd=ROOT, env=env,
                            capture_output=True, text=True)
    if scored.returncode != 0:
        print(f"seed {seed}: greedy scoring failed:\n{scored.stderr}", file=sys.stderr)
        return None
    greedy = json.loads(scored.stdout.strip().splitlines()[-1])
    return {"seed": seed, **run_record(json.loads((out / "results.json").read_text(encoding="utf-8"))),
            "cpu_minutes": round(cpu_minutes, 1), "test_bleu_greedy": greedy["bleu"],
            "bleu_signature": greedy["signature"], "load_average_before": load_before,
            "load_average_after": load_average()}


def run_record(results: dict) -> dict:
    """The figures of one finished run that the chapters quote, from its results.json."""
    history = results.get("history", [])
    record = {
        "steps": results["steps"], "epochs": round(results["epochs"], 1),
        "train_minutes": round(results["train_seconds"] / 60, 1),
        "dev_bleu_greedy_by_epoch": [round(h["dev_bleu_greedy"], 1) for h in history],
        # the learning curve: greedy dev BLEU at each epoch's end, against steps and minutes of training
        "learning_curve": [{"epoch": h["epoch"], "step": h["step"], "minutes": h.get("minutes"),
                            "dev_loss": round(h["dev_loss"], 3), "dev_bleu_greedy": round(h["dev_bleu_greedy"], 1)}
                           for h in history],
        "test_bleu": results.get("test_bleu"), "final_model": results.get("final_model"),
        "recipe": {name: results["options"].get(name) for name in ("max_tokens", "vocab_size", "seed", "cooldown",
                                                                    "average", "choose_average", "beam", "alpha",
                                                                    "choose_alpha")}}
    choice = results.get("final_choice") or {}         # the dev scores the final model was chosen on (§6.1)
    if choice:
        record.update(dev_bleu_last_checkpoint=choice["dev_bleu_last_checkpoint"],
                      averaged_checkpoints=choice["averaged_checkpoints"], dev_bleu_average=choice["dev_bleu_average"],
                      dev_bleu_by_window=choice.get("dev_bleu_by_window", {}))
    alpha_choice = results.get("alpha_choice") or {}   # the length penalty, chosen on the whole dev set
    if alpha_choice:
        record.update(alpha=alpha_choice["alpha"], dev_sentences_alpha=alpha_choice.get("dev_sentences"),
                      dev_bleu_by_alpha=alpha_choice.get("dev_bleu_by_alpha", {}))
        if "test_bleu_at_given_alpha" in alpha_choice:   # the same weights at --alpha: what the choice changed
            record.update(given_alpha=alpha_choice["given_alpha"],
                          test_bleu_at_given_alpha=alpha_choice["test_bleu_at_given_alpha"])
    return record


def summarize(runs: list[dict]) -> dict:
    """Mean, sample standard deviation (None for one run) and count of every figure that varies with the seed."""
    summary = {"n": len(runs), "seeds": [run["seed"] for run in runs]}
    for key in VARYING:
        values = [run[key] for run in runs if isinstance(run.get(key), (int, float))]
        if values:
            summary[key] = {"mean": round(statistics.fmean(values), 2),
                            "sd": round(statistics.stdev(values), 2) if len(values) > 1 else None,
                            "n": len(values), "min": min(values), "max": max(values)}
    return summary


def continued(fresh: dict, path: Path) -> dict:
    """The results file that --continue adds to (or ``fresh`` when there is none): refused, naming what differs,
    when it holds runs of another recipe or from another kind of CPU (the minutes would buy other steps)."""
    if not path.exists():
        return fresh
    earlier = json.loads(path.read_text(encoding="utf-8"))
    differences = [f"{key}: {earlier.get(key)!r} there, {fresh[key]!r} now" for key in SAME_RECIPE
                   if earlier.get(key) != fresh[key]]
    was, now = ({k: v for k, v in (record.get("machine", {}).get("cpu") or {}).items() if k in SAME_CPU}
                for record in (earlier, fresh))
    if was != now:
        differences.append(f"CPU {was!r} there, {now!r} now")
    if differences:
        raise SystemExit(f"{path}: cannot continue runs measured otherwise ({'; '.join(differences)}); "
                         f"measure anew without --continue, or pass another --results")
    return {**earlier, "continued": [*earlier.get("continued", []),
                                     {"command": fresh["command"], "date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                         time.gmtime())}]}


def greedy_test_score(out: Path) -> dict:
    """Test BLEU of the run's final model with greedy search, on the corpus's own segmentation, and the
    sacreBLEU-style signature of the score (our BLEU is checked against sacrebleu in tests/test_bleu.py)."""
    sys.path.insert(0, str(ROOT))
    from minitransformer.bleu import tokenization_for
    from minitransformer.data.run_data import load_data
    from minitransformer.translator import Translator

    settings = json.loads((out / "results.json").read_text(encoding="utf-8"))["options"]
    translator = Translator.load(out)
    corpus = load_data(settings["data"], settings["direction"], limit=settings.get("limit"))
    pairs = corpus.pairs("test", settings["direction"])
    tokenize = tokenization_for(settings["direction"].split("-")[-1], [ref for _, ref in pairs])
    score, _ = translator.bleu(pairs, beam_size=1, tokenize=tokenize)
    return {"bleu": round(score.score, 2), "signature": bleu_signature(tokenize)}


def bleu_signature(tokenize: str) -> str:
    """sacreBLEU's signature for a score computed as ours is: one reference, case kept, exponential smoothing
    of sacrebleu's corpus_bleu defaults, the given tokenization; the version names our implementation."""
    return f"nrefs:1|case:mixed|eff:no|tok:{tokenize}|smooth:exp|version:minitransformer"


def print_table(table: dict) -> None:
    summary = table.get("summary") or summarize(table["runs"])
    print(f"\n| seed | steps | epochs | α | test BLEU beam 4 | greedy |\n|---|---|---|---|---|---|")
    for run in table["runs"]:
        print(f"| {run['seed']} | {run['steps']} | {run['epochs']} | {run.get('alpha', '')} | "
              f"{run['test_bleu']:.2f} | {run['test_bleu_greedy']:.2f} |")
    for key in ("test_bleu", "test_bleu_greedy", "steps"):
        if key in summary:
            figure = summary[key]
            spread = "" if figure["sd"] is None else f" ± {figure['sd']:.2f}"
            print(f"{key}: {figure['mean']:.2f}{spread} (n = {figure['n']})")
    if table["runs"]:
        print(f"BLEU signature: {table['runs'][0]['bleu_signature']}")


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    sys.exit(main())
