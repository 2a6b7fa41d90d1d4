"""The seed article's results table, measured: the attention LSTM beside the Transformer's four self-attentions.

The explainer this project grew from ends with a table of translation systems — Seq2Seq (LSTM), the
Transformer with vanilla attention, with FlashAttention and with sparse attention — scored on BLEU,
inference speed, memory and long-range dependencies, with numbers it calls illustrative ("概念的").
This script measures that table with our engine, one row per system:

    lstm      python -m minitransformer train --model lstm             (chapter 6: additive attention)
    softmax   python -m minitransformer train --attention softmax      (eq. 1, "vanilla")
    flash     python -m minitransformer train --attention flash        (chapter 13; the seed's FlashAttention)
    local     python -m minitransformer train --attention local --attention-window W   (the seed's sparse row)
    linear    python -m minitransformer train --attention linear       (chapter 13; not in the seed's table)

Every row of a corpus trains with the same recipe (corpus, BPE vocabulary, batches, schedule length),
the same training-minute budget (--minutes, wall clock with --threads BLAS threads: on a quiet machine
minutes × threads CPU-minutes; the CPU time is recorded), at about the same parameter count (the LSTM
sizes of presets.LSTM_MODELS are chosen for it; every run's count is recorded and printed), for each
seed. Each run is the ordinary command line in a process of its own; a second new process (this
script, --worker) then measures the run:

* test BLEU, beam 4 and α 0.6 (§6.1), and greedy, on the corpus's test split, by BLEU's tokenization
  for the target language (the corpus's own segmentation for small_parallel_enja);
* BLEU by source length (words), the seed's "long-range dependencies" column measured: test sentences
  in buckets of 1–6, 7–9, 10–12 and 13+ words, each scored on its own;
* BLEU on the 60 long sentences of benchmarks/quality/long_sentences.py (three clauses or more; built-in corpus);
* training target tokens/s: a fresh model of the same configuration, timed steps after warm-up steps;
* the peak memory of a training step: in the fresh process, the resident set added by two steps (the
  second holds Adam's moments) on the batch with the most tokens;
* decoding output tokens/s, greedy and beam 4, with the cache (chapter 9), over the test sources.

    python benchmarks/quality/seed_table.py                       # the full table, three seeds a row (about ten hours)
    python benchmarks/quality/seed_table.py --minutes 5 --seeds 0 --enja-minutes 15
    python benchmarks/quality/seed_table.py --quick --results /tmp/seed_table.json   # toy sizes, seconds per row
    python benchmarks/quality/seed_table.py --rows lstm,softmax --continue   # part of the full table; again later
    python benchmarks/quality/seed_table.py --render              # the chapter's tables (en, ja) from the results file

small_parallel_enja is read from --enja-data (default ../shared/data/small_parallel_enja); when that
folder is absent its column is skipped, with a note in the results file. Run the full table on a
quiet machine: training runs of a minute budget reach more steps on an idle machine, and every speed
is a timing. The results file records the machine (CPU, vector extensions, the OpenBLAS kernel, load
averages before and after each row).
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from common import (library_record, load_average, machine_record, memory_mib, reset_peak_memory,  # noqa: E402
                    worker_env)

RESULTS = Path(__file__).resolve().parent / "results" / "seed_table.json"
DEFAULT_ENJA = ROOT.parent / "shared" / "data" / "small_parallel_enja"
ROWS = ("lstm", "softmax", "flash", "local", "linear")
BUCKETS = ((1, 6), (7, 9), (10, 12), (13, None))     # source words (whitespace tokens), ends included

# The seed article's table (../shared/seeds/003_49a63cb49fe2a09a.txt, section 結果（表）). Its own words: a
# table that shows the gains "概念的に" (conceptually); "具体的な数値は、特定のデータセットやタスクによって
# 変動します" (the figures vary with dataset and task). No dataset, model size or hardware is named. Its
# memory is GPU memory at inference in GB; ours is the resident memory of a training step on the CPU.
SEED_ARTICLE = {
    "source": "../shared/seeds/003_49a63cb49fe2a09a.txt, section 結果（表）: illustrative ('概念的') figures; "
              "no dataset, model size or hardware stated",
    "rows": {
        "lstm": {"system": "Seq2Seq (LSTM)", "bleu": 25.0, "tokens_per_s": 150, "gpu_memory_gb": 4,
                 "long_range": "△", "note": "逐次処理、並列化困難"},
        "softmax": {"system": "Transformer (Vanilla Attention)", "bleu": 28.4, "tokens_per_s": 400,
                    "gpu_memory_gb": 12, "long_range": "◎", "note": "O(N^2)計算量、メモリ"},
        "flash": {"system": "Transformer (FlashAttention)", "bleu": 28.3, "tokens_per_s": 1200, "gpu_memory_gb": 6,
                  "long_range": "◎", "note": "GPUメモリI/O削減"},
        "local": {"system": "Transformer (Sparse Attention)", "bleu": 27.8, "tokens_per_s": 800, "gpu_memory_gb": 8,
                  "long_range": "〇 (限定的)", "note": "計算量O(N log N)を達成"},
    },
}
LABELS = {"en": {"lstm": "LSTM + additive attention", "softmax": "Transformer, softmax (vanilla)",
                 "flash": "Transformer, flash", "local": "Transformer, local (w = {window})",
                 "linear": "Transformer, linear"},
          "ja": {"lstm": "LSTM + 加法的アテンション", "softmax": "Transformer、通常のアテンション（vanilla）",
                 "flash": "Transformer、flash", "local": "Transformer、局所アテンション（w = {window}）",
                 "linear": "Transformer、線形アテンション"}}


def row_flags(row: str, window: int) -> list[str]:
    """The `train` options that make a row's model."""
    if row == "lstm":
        return ["--model", "lstm"]
    flags = ["--attention", row]
    return flags + ["--attention-window", str(window)] if row == "local" else flags


# -- the driver ------------------------------------------------------------------------------------
def corpora(args) -> list[dict]:
    """The corpora of the table: the built-in one, and small_parallel_enja where its folder exists."""
    chosen = [{"name": "builtin", "data": None, "preset": args.preset, "minutes": args.minutes,
               "seeds": args.seeds, "long_sentences": args.long_count}]
    enja = Path(args.enja_data)
    if args.enja_minutes <= 0:
        chosen.append({"name": "small_parallel_enja", "skipped": "not run: --enja-minutes 0 (the built-in corpus only)"})
    elif enja.is_dir():
        chosen.append({"name": "small_parallel_enja", "data": str(enja.resolve()), "preset": args.enja_preset,
                       "minutes": args.enja_minutes, "seeds": args.enja_seeds, "long_sentences": 0})
    else:
        chosen.append({"name": "small_parallel_enja", "skipped": f"{args.enja_data}: no such folder; pass "
                       f"--enja-data (see ../shared/data/README.md)"})
    return chosen


def train_row(args, corpus: dict, row: str, seed: int, out: Path) -> dict:
    """One row's training run: the command line in a process of its own; its CPU time and the load around it."""
    command = [sys.executable, "-m", "minitransformer", "train", "--out", str(out), "--overwrite", "--quiet",
               "--no-eval", "--no-plot", "--preset", corpus["preset"], "--seed", str(seed),
               *row_flags(row, args.window)]
    command += ["--steps", str(args.steps)] if args.steps else ["--minutes", f"{corpus['minutes']:g}"]
    if corpus["data"]:
        command += ["--data", corpus["data"], "--direction", "en-ja"]
    if args.limit:
        command += ["--limit", str(args.limit)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), **{name: str(args.threads) for name in
                                                     ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")})
    load_before = round(os.getloadavg()[0], 2)
    cpu_before = _children_cpu_seconds()
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise RunFailed(f"training failed: $ {' '.join(command)}\n{result.stderr[-3000:]}")
    return {"command": " ".join(["python", *command[1:]]), "load_before": load_before,
            "load_after": round(os.getloadavg()[0], 2),
            "cpu_minutes": round((_children_cpu_seconds() - cpu_before) / 60, 2)}


def measure_row(args, out: Path, long_count: int) -> dict:
    """This script as a worker in a new process: the measurements of one trained run."""
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", str(out), "--long-count",
               str(long_count), "--warmup-steps", str(args.warmup_steps), "--timed-steps", str(args.timed_steps)]
    result = subprocess.run(command, cwd=ROOT, env=worker_env(args.threads, "default"), capture_output=True,
                            text=True)
    if result.returncode != 0:
        raise RunFailed(f"measuring {out} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


class RunFailed(Exception):
    """One run of the table could not be trained or measured; the table goes on without it."""


def _children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def summarize(runs: list[dict]) -> dict:
    """The mean over seeds of every figure (BLEU by bucket: per bucket), with the sample standard deviation
    (``KEY_sd``) of each scalar where there are two seeds or more, and the range of the test BLEU; runs that
    failed are left out (and counted)."""
    failed = sum("failed" in run for run in runs)
    runs = [run for run in runs if "failed" not in run]
    if not runs:
        return {"seeds": 0, "failed": failed}
    mean: dict = {}
    for key, value in runs[0].items():
        if key == "bleu_by_source_words":
            mean[key] = {bucket: round(statistics.fmean(run[key][bucket]["bleu"] for run in runs), 2)
                         for bucket in value}
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and key != "seed":
            mean[key] = round(statistics.fmean(run[key] for run in runs), 2)
            if len(runs) > 1:         # the spread between seeds: what a difference between rows must exceed
                mean[f"{key}_sd"] = round(statistics.stdev(run[key] for run in runs), 2)
    mean["test_bleu_min"] = min(run["test_bleu"] for run in runs)
    mean["test_bleu_max"] = max(run["test_bleu"] for run in runs)
    mean["seeds"] = len(runs)
    if failed:
        mean["failed"] = failed
    return mean


def run_table(args, results_path: Path) -> dict:
    """Every corpus, row and seed; the results file is rewritten after each run, so that a long table
    interrupted keeps what it measured. With --continue, the runs the results file already holds (same
    settings, same machine) are kept and only the missing ones are trained: the full table, hours of a
    quiet machine, can be measured a few rows at a time."""
    runs_root = Path(args.runs)
    command = "python benchmarks/quality/seed_table.py " + " ".join(sys.argv[1:])
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    table: dict = {"command": command, "date": started, "quick": args.quick, "machine": machine_record(),
                   "settings": {"threads": args.threads, "window": args.window, "steps": args.steps,
                                "limit": args.limit, "warmup_steps": args.warmup_steps,
                                "timed_steps": args.timed_steps,
                                "buckets": [f"{lo}-{hi}" if hi else f"{lo}+" for lo, hi in BUCKETS]},
                   "seed_article": SEED_ARTICLE, "corpora": {}}
    earlier = continued_table(table, results_path) if args.continue_ else None
    if earlier is not None:
        table = {**earlier, "continued": [*earlier.get("continued", []), {"command": command, "date": started,
                                                                           "load_average": load_average()}]}
    rows = args.rows.split(",")
    for corpus in corpora(args):
        if "skipped" in corpus:
            if corpus["name"] not in table["corpora"] or "skipped" in table["corpora"][corpus["name"]]:
                table["corpora"][corpus["name"]] = {"skipped": corpus["skipped"]}
            print(f"{corpus['name']}: skipped ({corpus['skipped']})", flush=True)
            continue
        entry = continued_corpus(table["corpora"].get(corpus["name"]), corpus)
        table["corpora"][corpus["name"]] = entry
        for row in rows:
            runs: list[dict] = entry["rows"].get(row, {}).get("runs", [])
            for seed in corpus["seeds"]:
                if any(run["seed"] == seed and "failed" not in run for run in runs):
                    print(f"{corpus['name']:<20} {row:<8} seed {seed}: kept from {results_path.name}", flush=True)
                    continue
                runs = [run for run in runs if run["seed"] != seed]
                runs.append(measured_run(args, corpus, row, seed, runs_root / corpus["name"] / f"{row}-seed{seed}"))
                runs.sort(key=lambda run: run["seed"])
                library = next((run.pop("library") for run in runs if "library" in run), None)   # alike in each
                if library and not table.get("library"):
                    table["library"] = library
                entry["rows"][row] = {"label": LABELS["en"][row].format(window=args.window), "runs": runs,
                                      "mean": summarize(runs)}
                entry["rows"] = {name: entry["rows"][name] for name in ROWS if name in entry["rows"]}
                write(table, results_path)
    return table


def continued_table(fresh: dict, path: Path) -> dict | None:
    """The earlier table that --continue adds to, or None when there is none yet; refuses one that was
    measured with other settings or on another kind of machine, naming what differs."""
    if not path.exists():
        return None
    earlier = json.loads(path.read_text(encoding="utf-8"))
    differences = [f"{key}: {earlier.get(key)!r} there, {fresh[key]!r} now" for key in ("quick", "settings")
                   if earlier.get(key) != fresh[key]]
    then, now = earlier.get("machine", {}), fresh["machine"]
    for key in ("cpu", "openblas_kernel", "isa_caps", "openblas_overrides"):
        was, is_ = then.get(key), now.get(key)
        if key == "cpu":     # the load and the caches' sizes aside: the same CPU model and vector extensions
            was, is_ = ({k: v for k, v in (d or {}).items() if k in ("model", "family_model", "cores", "simd")}
                        for d in (was, is_))
        if was != is_:
            differences.append(f"machine {key}: {was!r} there, {is_!r} now")
    if differences:
        raise SystemExit(f"{path}: cannot continue a table measured otherwise ({'; '.join(differences)}); "
                         f"measure it anew without --continue, or pass another --results")
    return earlier


def continued_corpus(earlier: dict | None, corpus: dict) -> dict:
    """A corpus's entry: the earlier one when it was trained by the same recipe (its runs kept), else new."""
    recipe = {key: corpus[key] for key in ("data", "preset", "minutes")}
    if earlier and "rows" in earlier:
        if {key: earlier.get(key) for key in recipe} != recipe:
            raise SystemExit(f"{corpus['name']}: the results file holds runs of {earlier.get('preset')}, "
                             f"{earlier.get('minutes')} minutes, data {earlier.get('data')}, not of "
                             f"{recipe['preset']}, {recipe['minutes']} minutes, data {recipe['data']}; "
                             f"measure it anew without --continue, or pass another --results")
        return {**earlier, "seeds": sorted(set(earlier.get("seeds", [])) | set(corpus["seeds"]))}
    return {**recipe, "seeds": list(corpus["seeds"]), "rows": {}}


def measured_run(args, corpus: dict, row: str, seed: int, out: Path) -> dict:
    """One run trained and measured, or the reason it failed."""
    try:
        record = {"seed": seed, **train_row(args, corpus, row, seed, out)}
        measured = measure_row(args, out, corpus["long_sentences"])
    except RunFailed as error:
        print(f"{corpus['name']} {row} seed {seed}: {error}", file=sys.stderr, flush=True)
        return {"seed": seed, "failed": str(error)}
    print(f"{corpus['name']:<20} {row:<8} seed {seed}: {measured['parameters']:,} parameters, "
          f"{measured['steps']} steps, test BLEU {measured['test_bleu']:.2f} (beam 4), "
          f"{measured['train_target_tokens_per_s']:,.0f} training tokens/s, "
          f"step +{measured['step_added_mib']:.0f} MiB", flush=True)
    return {**record, **measured}


def write(table: dict, path: Path) -> None:
    """The results file (one writer: this script), with the load average at the time of writing."""
    table["load_when_written"] = round(os.getloadavg()[0], 2)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(table, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    temporary.replace(path)


# -- the worker: one trained run, measured in a new process ------------------------------------------
def worker(out: Path, long_count: int, warmup_steps: int, timed_steps: int) -> dict:
    """Every figure of one run. The training step's memory comes first, while the process is new."""
    from minitransformer import models
    from minitransformer.data import run_data
    from minitransformer.data.batching import epoch_batches
    from minitransformer.optim import Adam, clip_grad_norm
    from minitransformer.presets import PRESETS
    from minitransformer.training.trainer import CLIP_NORM, MAX_LEN, batch_loss, encode_pairs
    from minitransformer.translator import Translator

    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    settings = results["training"]
    translator = Translator.load(out)
    tokenizer, config = translator.tokenizer, translator.model.config
    corpus = run_data.load_data(settings["data"], settings["direction"], PRESETS[settings["preset"]]["corpus"],
                              limit=settings["limit"])
    direction = settings["direction"]
    examples = encode_pairs(tokenizer, corpus.pairs("train", direction), MAX_LEN)
    batches = epoch_batches(examples, settings["max_tokens"], config.pad_id, settings["seed"], 0,
                            tokenizer.bos_id, tokenizer.eos_id)

    # a training step: a new model of the same configuration (its weights do not change the cost)
    model = models.build_model(config)
    model.train()
    optimizer = Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)

    def step(batch) -> None:
        optimizer.zero_grad()
        batch_loss(model, batch).backward()
        clip_grad_norm(optimizer.params, CLIP_NORM)
        optimizer.step()

    largest = max(batches, key=lambda b: b.src.size + b.tgt_in.size)
    peak_reset = reset_peak_memory()
    before = memory_mib()["VmRSS"]
    for _ in range(2):                      # the second step also holds Adam's moments
        step(largest)
    peak = memory_mib()["VmHWM"]
    for batch in batches[:warmup_steps]:
        step(batch)
    timed = [batches[(warmup_steps + i) % len(batches)] for i in range(timed_steps)]
    started = time.perf_counter()
    for batch in timed:
        step(batch)
    train_seconds = time.perf_counter() - started
    del model, optimizer

    # decoding and BLEU: the run's final model
    from minitransformer.bleu import corpus_bleu_score, tokenization_for
    from minitransformer.decode import decode_sentences

    pairs = corpus.pairs("test", direction)
    references = [ref for _, ref in pairs]
    tokenize = tokenization_for(direction.split("-")[-1], references)
    sources = translator.encode_sources([src for src, _ in pairs])
    decoded = {}
    for name, beam in (("greedy", 1), ("beam4", 4)):
        started = time.perf_counter()
        ids = decode_sentences(translator.model, sources, tokenizer.bos_id, tokenizer.eos_id, beam_size=beam,
                               alpha=0.6)
        seconds = time.perf_counter() - started
        decoded[name] = {"outputs": [tokenizer.decode(x) for x in ids],
                         "tokens_per_s": sum(len(x) + 1 for x in ids) / seconds}   # + 1: the eos it wrote
    hypotheses = decoded["beam4"]["outputs"]
    by_bucket = {}
    for lo, hi in BUCKETS:
        chosen = [i for i, (src, _) in enumerate(pairs) if lo <= len(src.split()) and (hi is None or
                                                                                       len(src.split()) <= hi)]
        bleu = corpus_bleu_score([hypotheses[i] for i in chosen], [references[i] for i in chosen],
                                 tokenize=tokenize).score if chosen else 0.0
        by_bucket[f"{lo}-{hi}" if hi else f"{lo}+"] = {"sentences": len(chosen), "bleu": round(bleu, 2)}
    record = {
        "parameters": translator.model.num_parameters(), "steps": results["steps"],
        "epochs": round(results["epochs"], 2), "train_seconds": results["train_seconds"],
        "final_model": results["final_model"], "bleu_tokenize": tokenize, "test_sentences": len(pairs),
        "test_bleu": round(corpus_bleu_score(hypotheses, references, tokenize=tokenize).score, 2),
        "test_bleu_greedy": round(corpus_bleu_score(decoded["greedy"]["outputs"], references,
                                                    tokenize=tokenize).score, 2),
        "bleu_by_source_words": by_bucket,
        "train_target_tokens_per_s": round(sum(b.n_tgt_tokens for b in timed) / train_seconds, 1),
        "step_peak_mib": round(peak, 1), "step_added_mib": round(peak - before, 1), "peak_reset": peak_reset,
        "largest_batch": {"sentences": int(largest.src.shape[0]), "source_length": int(largest.src.shape[1]),
                          "target_length": int(largest.tgt_in.shape[1])},
        "greedy_tokens_per_s": round(decoded["greedy"]["tokens_per_s"], 1),
        "beam4_tokens_per_s": round(decoded["beam4"]["tokens_per_s"], 1),
    }
    if long_count:
        from long_sentences import long_sentences, score

        record["long_sentences"] = long_count
        record.update({f"long_sentences_{key}": value for key, value in
                       score(translator, long_sentences(long_count, training=corpus)).items()
                       if key in ("bleu", "exact_match")})      # none of them in the run's corpus
    record["library"] = library_record("minitransformer")
    return record


# -- the chapter's tables --------------------------------------------------------------------------
HEADERS = {
    "en": {"quality": ["system", "parameters", "test BLEU, built-in (beam 4)", "test BLEU, small_parallel_enja",
                       "BLEU by source words: {buckets}", "60 long sentences (BLEU)"],
           "cost": ["system", "training target tokens/s", "peak memory of a training step (MiB added)",
                    "decoding tokens/s, greedy", "decoding tokens/s, beam 4"],
           "seed": ["seed article (illustrative)", "BLEU", "inference tokens/s", "GPU memory (GB)",
                    "long-range dependencies"],
           "real": ["small_parallel_enja, en→ja", "parameters", "steps", "test BLEU, beam 4 / greedy",
                    "BLEU by source words: {buckets}", "training target tokens/s",
                    "training step (MiB added)", "decoding tokens/s, greedy / beam 4"],
           "skipped": "not measured"},
    "ja": {"quality": ["システム", "パラメータ数", "テスト BLEU、組み込みコーパス（ビーム 4）",
                       "テスト BLEU、small_parallel_enja", "原言語の文の語数別 BLEU：{buckets}",
                       "60 の長い文（BLEU）"],
           "cost": ["システム", "学習の目的言語側トークン/秒", "学習 1 ステップのピークメモリ（増分 MiB）",
                    "貪欲デコードのトークン/秒", "ビームサーチ（ビーム 4）のトークン/秒"],
           "seed": ["出発点の記事（概念的な値）", "BLEU", "推論のトークン/秒", "GPU メモリ（GB）", "長距離依存性"],
           "real": ["small_parallel_enja、英→日", "パラメータ数", "ステップ数", "テスト BLEU、ビーム 4 / 貪欲",
                    "原言語の文の語数別 BLEU：{buckets}", "学習の目的言語側トークン/秒",
                    "学習 1 ステップ（増分 MiB）", "デコードのトークン/秒、貪欲 / ビーム 4"],
           "skipped": "未測定"},
}


def _fig(value, key: str, decimals: int, thousands: bool = False) -> str:
    """A figure and its marker (tools/quoted_numbers.py), as the chapter quotes it."""
    text = f"{value:,.{decimals}f}" if thousands else f"{value:.{decimals}f}"
    return f"{text}<!-- fig seed_table.json:{key} -->"


def render_markdown(results: dict, language: str = "en") -> str:
    """The tables of the chapter (ours: quality and cost on the built-in corpus, then every figure of the
    real corpus where its column was measured; the seed's), every figure with its marker; a figure no run
    measured (a corpus skipped, every seed of a row failed) reads "not measured"."""
    words = HEADERS[language]
    window = results["settings"]["window"]
    buckets = results["settings"]["buckets"]

    def cell(corpus: str, row: str, key: str, decimals: int, thousands: bool = False) -> str:
        mean = results["corpora"].get(corpus, {}).get("rows", {}).get(row, {}).get("mean", {})
        value = mean
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value is None:
            return words["skipped"]
        figure = _fig(value, f"corpora.{corpus}.rows.{row}.mean.{key}", decimals, thousands)
        if isinstance(mean.get(f"{key}_sd"), (int, float)):      # two seeds or more: mean ± sd (n)
            figure += (f" ± {_fig(mean[key + '_sd'], f'corpora.{corpus}.rows.{row}.mean.{key}_sd', decimals, thousands)}"
                       f" (n = {mean['seeds']})")
        return figure

    quality = [words["quality"][:4] + [words["quality"][4].format(buckets=" / ".join(buckets)),
                                       words["quality"][5]]]
    cost = [words["cost"]]
    for row in results["corpora"]["builtin"]["rows"]:
        label = LABELS[language][row].format(window=window)
        by_bucket = " / ".join(cell("builtin", row, f"bleu_by_source_words.{b}", 1) for b in buckets)
        quality.append([label, cell("builtin", row, "parameters", 0, thousands=True),
                        cell("builtin", row, "test_bleu", 2), cell("small_parallel_enja", row, "test_bleu", 2),
                        by_bucket, cell("builtin", row, "long_sentences_bleu", 2)])
        cost.append([label] + [cell("builtin", row, key, 0, thousands=True) for key in
                               ("train_target_tokens_per_s", "step_added_mib", "greedy_tokens_per_s",
                                "beam4_tokens_per_s")])
    real = [words["real"][:4] + [words["real"][4].format(buckets=" / ".join(buckets))] + words["real"][5:]]
    for row in results["corpora"].get("small_parallel_enja", {}).get("rows", {}):
        enja = functools.partial(cell, "small_parallel_enja", row)
        real.append([LABELS[language][row].format(window=window), enja("parameters", 0, thousands=True),
                     enja("steps", 0, thousands=True), f"{enja('test_bleu', 2)} / {enja('test_bleu_greedy', 2)}",
                     " / ".join(enja(f"bleu_by_source_words.{b}", 1) for b in buckets),
                     enja("train_target_tokens_per_s", 0, thousands=True), enja("step_added_mib", 0),
                     f"{enja('greedy_tokens_per_s', 0, thousands=True)} / {enja('beam4_tokens_per_s', 0, thousands=True)}"])
    seed = [words["seed"]]
    for row, entry in SEED_ARTICLE["rows"].items():
        key = f"seed_article.rows.{row}"
        seed.append([entry["system"], _fig(entry["bleu"], f"{key}.bleu", 1),
                     _fig(entry["tokens_per_s"], f"{key}.tokens_per_s", 0, thousands=True),
                     _fig(entry["gpu_memory_gb"], f"{key}.gpu_memory_gb", 0), entry["long_range"]])
    tables = (quality, cost, real, seed) if len(real) > 1 else (quality, cost, seed)
    return "\n\n".join(_table(rows) for rows in tables)


def _table(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows[1:]])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="toy sizes, 3 steps a row, one seed: seconds per row "
                                                             "(writes to a temporary file unless --results)")
    parser.add_argument("--rows", default=",".join(ROWS), help=f"rows to measure (default {','.join(ROWS)})")
    parser.add_argument("--minutes", type=float, default=10.0, help="training minutes per run, built-in corpus")
    parser.add_argument("--seeds", default="0,1,2", help="seeds on the built-in corpus (default 0,1,2)")
    parser.add_argument("--preset", default="small", help="recipe on the built-in corpus (default small)")
    parser.add_argument("--enja-data", default=str(DEFAULT_ENJA), help="the small_parallel_enja folder")
    parser.add_argument("--enja-minutes", type=float, default=30.0, help="training minutes per run there (0: skip "
                        "that corpus)")
    parser.add_argument("--enja-seeds", default="0,1,2", help="seeds on small_parallel_enja (default 0,1,2: a row is ranked "
                        "against the spread between its seeds)")
    parser.add_argument("--enja-preset", default="medium", help="recipe on small_parallel_enja (default medium)")
    parser.add_argument("--window", type=int, default=4, help="± positions of the local row's window (default 4)")
    parser.add_argument("--threads", type=int, default=2, help="BLAS threads of every process (default 2)")
    parser.add_argument("--long-count", type=int, default=60, help="long sentences scored (default 60)")
    parser.add_argument("--warmup-steps", type=int, default=3, help="untimed steps before the timed ones")
    parser.add_argument("--timed-steps", type=int, default=40, help="timed training steps (default 40)")
    parser.add_argument("--runs", help="folder for the run folders (default runs/seed-table; with --quick, "
                                       "beside the results file)")
    parser.add_argument("--results", help=f"the results file (default {RESULTS.relative_to(ROOT)})")
    parser.add_argument("--continue", dest="continue_", action="store_true",
                        help="keep the runs --results already holds (same settings, same kind of machine) and "
                             "measure only the missing ones: the full table a few rows at a time")
    parser.add_argument("--render", action="store_true", help="print the chapter's tables (en, ja) from --results")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(Path(args.worker), args.long_count, args.warmup_steps, args.timed_steps),
                         ensure_ascii=False))
        return 0
    if args.render:
        results = json.loads(Path(args.results or RESULTS).read_text(encoding="utf-8"))
        for language in ("en", "ja"):
            print(f"<!-- {language} -->\n{render_markdown(results, language)}\n")
        return 0
    unknown = sorted(set(args.rows.split(",")) - set(ROWS))
    if unknown:
        parser.error(f"unknown rows {unknown}; choose from {', '.join(ROWS)}")
    args.seeds = [int(s) for s in args.seeds.split(",")]
    args.enja_seeds = [int(s) for s in args.enja_seeds.split(",")]
    args.steps, args.limit = None, None
    if args.quick:        # toy: the same pipeline in seconds a row; its figures mean nothing
        args.preset = args.enja_preset = "toy"
        args.steps, args.limit, args.seeds, args.enja_seeds = 3, 12, [0], [0]
        args.long_count, args.warmup_steps, args.timed_steps = 4, 1, 2
        if not args.results:
            args.results = str(Path(tempfile.mkdtemp(prefix="seed-table-")) / "seed_table.json")
        args.runs = args.runs or str(Path(args.results).parent / "runs")
    args.runs = args.runs or str(ROOT / "runs" / "seed-table")
    results_path = Path(args.results or RESULTS)
    table = run_table(args, results_path)
    write(table, results_path)
    print(f"wrote {results_path}")
    failed = [f"{name} {row}" for name, corpus in table["corpora"].items() for row, entry in
              corpus.get("rows", {}).items() if entry["mean"].get("failed")]
    if failed:
        print(f"runs that failed (see the results file): {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
