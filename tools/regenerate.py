"""Regenerate every results file and figure the book quotes, at their recorded settings; or, with
--quick, run every script that has a quick variant at a toy size into a temporary folder, to show the
whole pipeline still runs (CI does that: tests/book/test_regenerate.py, marked `later`).

    python tools/regenerate.py --list           # the steps, what each writes, and the time they take
    python tools/regenerate.py                  # all of it (hours: see --list), then quoted_numbers.py update
    python tools/regenerate.py --only heads table3
    python tools/regenerate.py --deterministic  # only what does not time anything (safe on a busy machine)
    python tools/regenerate.py --quick          # minutes; writes nothing in the repository

Timing steps must run on a quiet machine: their figures are only as good as the machine's quiet. A
step whose requirement is missing (torch, mpi4py, a GPU, the real corpora in ../shared/data) is
skipped with its reason. The book's default run is trained with the BLAS settings heads.json records
for it (its `run.blas_environment`), because BLAS's summation order decides the weights.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from quoted_numbers import FigureError, load_results  # noqa: E402

DATA = ROOT.parent / "shared" / "data"
RUN = "runs/enja"                               # the book's default run (chapters 11 and 12)


@dataclass
class Step:
    name: str
    command: str                                # run from the repository root; {python} is this interpreter
    writes: str                                 # what it (re)writes, for the reader
    minutes: float                              # on a quiet 2-core machine
    timing: bool = False                        # measures time: needs a quiet machine
    needs: tuple = ()                           # "torch", "mpi4py", "gpu", "data", "bwrap", "nbgrader"
    quick: str | None = None                    # the toy-size variant, {tmp} a scratch folder
    why_no_quick: str = ""
    env: dict = field(default_factory=dict)


STEPS = [
    Step("counts", "{python} benchmarks/book/book_counts.py", "counts.json", 0.1,
         quick="{python} benchmarks/book/book_counts.py --results {tmp}/counts.json"),
    Step("chapter_figures", "{python} benchmarks/book/chapter_figures.py", "chapter_figures.json", 1,
         quick="{python} benchmarks/book/chapter_figures.py --results {tmp}/chapter_figures.json"),
    Step("sparse_patterns", "{python} benchmarks/sequence_length/sparse_patterns.py && {python} benchmarks/sequence_length/lsh_recall.py",
         "sparse_patterns.json, lsh_recall.json and chapters/figures/13-sparse-patterns.png (counts, nothing timed)",
         0.1, quick="{python} benchmarks/sequence_length/sparse_patterns.py --results {tmp}/sparse_patterns.json --figure "
                    "{tmp}/13-sparse-patterns.png && {python} benchmarks/sequence_length/lsh_recall.py --results {tmp}/lsh_recall.json"),
    Step("proof", "{python} benchmarks/speed/train_step.py --proof-only", "train_step_proof.json", 0.3, needs=("torch",),
         quick="{python} benchmarks/speed/train_step.py --proof-only --results {tmp}/train_step_proof.json"),
    Step("default_run", "{python} -m minitransformer train --out runs/readme-enja && {python} tools/quoted_numbers.py "
         "record-run runs/readme-enja", "default_run.json (the README's run: its scores and its time)", 3, timing=True,
         why_no_quick="the heads step's quick variant trains the same way"),
    Step("heads", "{python} benchmarks/quality/heads.py --train --run " + RUN + " --history " + RUN + "-history",
         f"heads.json, and the default run in {RUN} (chapters 11 and 12's figures are drawn from it)", 4,
         quick="{python} benchmarks/quality/heads.py --train --train-args=--preset=toy --run {tmp}/run --history "
               "{tmp}/history --sentences 20 --history-sentences 5 --out {tmp}/heads.json"),
    Step("long_sentences", "{python} benchmarks/quality/long_sentences.py --run " + RUN + " --label default",
         "long_sentences.json (the default run's score on long sentences)", 1,
         quick="{python} benchmarks/quality/long_sentences.py --run {tmp}/run --label quick --count 3 "
               "--results {tmp}/long_sentences.json"),
    Step("trained_attention", "{python} benchmarks/sequence_length/attention_rank.py --run " + RUN + " && {python} "
         "benchmarks/sequence_length/attention_rank.py --render && {python} benchmarks/sequence_length/long_sequences.py --error --run " + RUN,
         "attention_rank.json, figures/13-attention-rank.png and attention_error.json (the default run's own "
         "attention: its rank, and each approximation's error on it; nothing timed)", 1,
         quick="{python} benchmarks/sequence_length/attention_rank.py --run {tmp}/run --sentences 5 --results "
               "{tmp}/attention_rank.json && {python} benchmarks/sequence_length/attention_rank.py --render --results "
               "{tmp}/attention_rank.json --figure {tmp}/13-attention-rank.png && {python} "
               "benchmarks/sequence_length/long_sequences.py --error --quick --run {tmp}/run --sentences 3"),
    Step("decoding_caches", "{python} benchmarks/sequence_length/long_sequences.py --cache",
         "long_sequences_cache.json (what the softmax cache and the linear state hold, 1,024 to 16,384 steps)", 3,
         quick="{python} benchmarks/sequence_length/long_sequences.py --cache --quick --lengths 16,32"),
    Step("table3", "OPENBLAS_NUM_THREADS=1 {python} benchmarks/quality/table3.py", "table3.json", 20, timing=True,
         quick="OPENBLAS_NUM_THREADS=1 {python} benchmarks/quality/table3.py --quick --seeds 1 --out {tmp}/table3.json"),
    Step("table3-1400", "OPENBLAS_NUM_THREADS=1 {python} benchmarks/quality/table3.py --labels 'h=1;positions=learned' "
         "--steps 1400 --out benchmarks/quality/results/table3-1400steps.json", "table3-1400steps.json", 15, timing=True,
         why_no_quick="the same script as table3's quick step"),
    Step("table3-120", "OPENBLAS_NUM_THREADS=1 {python} benchmarks/quality/table3.py --steps 120 "
         "--out benchmarks/quality/results/table3-120steps.json", "table3-120steps.json", 8, timing=True,
         why_no_quick="the same script as table3's quick step"),
    Step("table1", "{python} benchmarks/sequence_length/table1.py && {python} benchmarks/sequence_length/table1.py --render",
         "table1.json, chapter 13's Table 1, figures/13-table1.png", 3, timing=True,
         quick="{python} benchmarks/sequence_length/table1.py --quick"),
    Step("long_sequences", "{python} benchmarks/sequence_length/long_sequences.py && {python} benchmarks/sequence_length/long_sequences.py --render",
         "long_sequences.json, chapter 13's tables, figures/13-memory-time.png", 25, timing=True,
         quick="{python} benchmarks/sequence_length/long_sequences.py --quick"),
    Step("attention_kinds", "{python} benchmarks/sequence_length/attention_kinds_bleu.py --steps 400 --kinds softmax,linear,local,flash"
         " && {python} benchmarks/sequence_length/attention_kinds_bleu.py --render", "attention_kinds_bleu.json, chapter 13's table",
         40, timing=True, why_no_quick="it writes only the book's results file; each kind's training is in the tests"),
    Step("distributed", "{python} benchmarks/distribution/distributed.py", "distributed.json", 10, timing=True, needs=("mpi4py",),
         quick="{python} benchmarks/distribution/distributed.py --sizes small --steps 2 --warmup 1 --rounds 1 "
               "--out {tmp}/distributed.json"),
    Step("fused_vs_composed", "{python} benchmarks/speed/fused_vs_composed.py", "fused_vs_composed.json", 2, timing=True,
         quick="{python} benchmarks/speed/fused_vs_composed.py --repeats 1 --results {tmp}/fused_vs_composed.json"),
    Step("plain_vs_fast", "{python} benchmarks/speed/plain_vs_fast.py",
         "plain_vs_fast.json (each plain form of chapters 5 and 6 against its fast twin)", 0.1, timing=True,
         quick="{python} benchmarks/speed/plain_vs_fast.py --blocks 1 --calls 1 --results {tmp}/plain_vs_fast.json"),
    Step("overhead", "{python} benchmarks/speed/overhead.py --rounds 9 --baseline /tmp/mt-before --results "
         "benchmarks/speed/results/speed_overhead_quiet.json && {python} benchmarks/speed/overhead.py",
         "speed_overhead_quiet.json, overhead.json", 8, timing=True, needs=("torch",),
         quick="{python} benchmarks/speed/overhead.py --rounds 1 --repeats 1 --ops 50 --results {tmp}/overhead.json"),
    Step("decode", "{python} benchmarks/speed/decode.py --threads 1 --rounds 5 --beams 4,8 --baseline /tmp/mt-before "
         "--openblas as-set --results benchmarks/speed/results/speed_decode_quiet.json && {python} benchmarks/speed/decode.py",
         "speed_decode_quiet.json, decode_2t.json", 20, timing=True, needs=("torch",),
         quick="{python} benchmarks/speed/decode.py --config tiny --rounds 1 --beams 4 --results {tmp}/decode.json"),
    Step("decode_1t", "{python} benchmarks/speed/decode.py --threads 1 --rounds 3 --openblas as-set", "decode_1t.json", 5,
         timing=True, needs=("torch",), why_no_quick="the same script as the decode step's quick run"),
    Step("train_step_threads", "{python} benchmarks/speed/train_step.py --rounds 5 --malloc both --openblas as-set --results "
         "benchmarks/speed/results/train_step_2t_both.json && {python} benchmarks/speed/train_step.py --threads 1 --rounds 5 "
         "--malloc both --openblas as-set --results benchmarks/speed/results/train_step_1t_both.json",
         "train_step_2t_both.json, train_step_1t_both.json (two threads against one)", 20, timing=True, needs=("torch",),
         why_no_quick="the same script as the train_step step's quick run"),
    Step("train_step", "{python} benchmarks/speed/train_step.py --rounds 5 --malloc both --openblas both --baseline "
         "/tmp/mt-before --results benchmarks/speed/results/speed_train_step_quiet.json",
         "speed_train_step_quiet*.json", 30, timing=True, needs=("torch",),
         quick="{python} benchmarks/speed/train_step.py --configs tiny --rounds 1 --malloc default --openblas as-set "
               "--no-floor --skip-proof --results {tmp}/train_step.json"),
    Step("train_step_avx2", "{python} benchmarks/speed/train_step.py --isa avx2 --rounds 5 --malloc both --results "
         "benchmarks/speed/results/speed_train_step_avx2.json", "speed_train_step_avx2.json (the AVX2-only kind)", 10,
         timing=True, needs=("torch",),
         quick="{python} benchmarks/speed/train_step.py --isa avx2 --configs tiny --rounds 1 --malloc default --no-floor "
               "--skip-proof --results {tmp}/train_step_avx2.json"),
    Step("train_step_avx2_floors", "{python} benchmarks/speed/train_step.py --isa avx2 --malloc default --configs "
         "small-N3,medium-h8 --rounds 5 --skip-proof", "train_step_2t_default_avx2.json (each library against its own "
         "GEMM floor, the AVX2-only kind)", 2, timing=True, needs=("torch",),
         quick="{python} benchmarks/speed/train_step.py --isa avx2 --configs tiny --rounds 1 --malloc default "
               "--skip-proof --results {tmp}/train_step_avx2_floors.json"),
    Step("step_profile", "{python} benchmarks/speed/step_profile.py --steps 10", "step_profile.json", 5, timing=True,
         quick="{python} benchmarks/speed/step_profile.py --configs tiny --steps 2 --results {tmp}/step_profile.json"),
    Step("memory", "{python} benchmarks/speed/memory.py --threads 1 && {python} benchmarks/speed/memory.py --threads 1 "
         "--explicit-attention", "memory_sdpa.json, memory_explicit.json", 10, timing=True, needs=("torch",),
         quick="{python} benchmarks/speed/memory.py --lengths 64 --no-decode --results {tmp}/memory.json"),
    Step("blas_spin", "{python} benchmarks/speed/blas_spin.py", "blas_spin.json", 1, timing=True,
         why_no_quick="it times OpenBLAS's threads for a minute; there is nothing smaller to time"),
    Step("readme_commands", "{python} benchmarks/book/readme_commands.py && {python} benchmarks/book/readme_commands.py --isa avx2",
         "readme_commands.json and readme_commands_avx2.json (the AVX2-only kind)", 18, timing=True,
         why_no_quick="it times the README's two commands from a fresh clone, which CI runs as they are"),
    Step("small_parallel_enja", "{python} benchmarks/quality/small_parallel_enja.py && {python} "
         "benchmarks/quality/small_parallel_enja.py --direction ja-en",
         "small_parallel_enja_en-ja_seeds.json, small_parallel_enja_ja-en_seeds.json", 370, timing=True,
         needs=("data",), why_no_quick="it needs the real corpus and an hour of training per seed and direction; "
                                       "tests/book/test_small_parallel_enja_recipe.py runs a toy series"),
    Step("tatoeba", "for d in 'jpn-eng en-ja --steps 3000' 'jpn-eng ja-en --steps 3000' 'fra-eng en-fr --steps 2000 "
         "--minutes 10' 'deu-eng en-de --steps 2000 --minutes 10'; do OPENBLAS_NUM_THREADS=1 {python} "
         "benchmarks/quality/tatoeba.py $d; done", "tatoeba_*.json (copy each OUT/tatoeba_scores.json into "
         "tatoeba_PAIR_DIRECTION.json, as benchmarks/quality/real_corpora.md says)", 50, timing=True, needs=("data",),
         why_no_quick="it needs the real corpora and minutes of training each"),
    Step("tatoeba_diagnosis", "{python} benchmarks/quality/tatoeba_diagnosis.py --run runs/tatoeba-jpn-eng-en-ja --outputs "
         "runs/tatoeba-jpn-eng-en-ja/test_outputs.txt", "tatoeba_diagnosis.json", 5, needs=("data",),
         why_no_quick="it diagnoses the Tatoeba run the tatoeba step trains"),
    Step("unigram_vs_bpe", "{python} benchmarks/quality/unigram_vs_bpe.py", "unigram_vs_bpe.json", 5, timing=True,
         needs=("data",), why_no_quick="it needs the real Tatoeba corpus"),
    Step("raw_bpe_speed", "{python} benchmarks/quality/raw_bpe_speed.py --results benchmarks/quality/results/raw_bpe_speed.json",
         "raw_bpe_speed.json", 5, timing=True, needs=("data",), why_no_quick="it needs the real Tatoeba corpus"),
    Step("grader", "{python} benchmarks/book/grader.py", "grader.json", 15, timing=True, needs=("bwrap", "nbgrader"),
         why_no_quick="the cheat suite is its quick form: tests/exercises/test_cheats.py and tests/exercises/test_nbgrader.py"),
    Step("seed_table", "{python} benchmarks/quality/seed_table.py", "seed_table.json", 660, timing=True,
         why_no_quick="tests/book/test_seed_table.py runs its quick mode"),
    Step("lm_cache", "{python} benchmarks/speed/lm_cache.py", "lm_cache.json", 5, timing=True,
         quick="{python} benchmarks/speed/lm_cache.py --quick --results {tmp}/lm_cache.json"),
    Step("tinyshakespeare", "{python} benchmarks/quality/tinyshakespeare.py --positionals sinusoidal,rope",
         "tinyshakespeare.json", 40, timing=True, needs=("torch", "data"),
         quick="{python} benchmarks/quality/tinyshakespeare.py --iters 5 --eval-batches 2 --positionals rope "
               "--results {tmp}/tinyshakespeare.json"),
    Step("tinyshakespeare_avx2", "{python} benchmarks/quality/tinyshakespeare.py --isa avx2",
         "tinyshakespeare_avx2.json (the same recipe on the AVX2-only kind, emulated: ours against the twin)", 10,
         timing=True, needs=("torch", "data"),
         quick="{python} benchmarks/quality/tinyshakespeare.py --isa avx2 --iters 2 --eval-batches 1 "
               "--results {tmp}/tinyshakespeare_avx2.json"),
    Step("japanese_lm", "OPENBLAS_NUM_THREADS=1 {python} benchmarks/quality/japanese_lm.py", "japanese_lm.json "
         "(the Shakespeare recipe on small_parallel_enja's Japanese side, raw-text BPE; its samples)", 10, timing=True,
         needs=("data",), quick="OPENBLAS_NUM_THREADS=1 {python} benchmarks/quality/japanese_lm.py --quick "
                                "--results {tmp}/japanese_lm.json"),
    Step("figures", "{python} chapters/figures/make_02.py && {python} chapters/figures/make_04_05.py && "
         "{python} chapters/figures/make_measured.py && {python} chapters/figures/make_10_11.py " + RUN +
         " && {python} chapters/figures/make_12.py " + RUN + " && {python} chapters/figures/make_ja.py --run " + RUN,
         "every figure in chapters/figures/ and chapters/figures/ja/ (the notebooks' seeded ones included)", 15,
         quick="{python} chapters/figures/make_measured.py {tmp} && {python} chapters/figures/make_10_11.py {tmp}/run "
               "{tmp}/heads.json {tmp} && {python} chapters/figures/make_12.py {tmp}/run {tmp}/heads.json {tmp}"),
    Step("update", "{python} tools/quoted_numbers.py update && {python} tools/quoted_numbers.py check",
         "every quoted number rewritten from its results file, then checked", 0.2,
         quick="{python} tools/quoted_numbers.py check"),
]


# Results the book quotes that no step writes again: records of earlier runs, kept as they were measured
RECORDS = {
    "enja-default-run.json": "the 1,400-step default run of an earlier recipe, which chapter 12 compares with",
    "speed_decode_1t.json": "a before/after run against the package of commit aa839c4 on a loaded machine",
    "speed_overhead_1t.json": "a before/after run against the package of commit aa839c4 on a loaded machine",
    "speed_overhead_1t_end.json": "a before/after run against the package of commit aa839c4 on a loaded machine",
    "speed_overhead_1t_load2.json": "a before/after run against the package of commit aa839c4 on a loaded machine",
    "speed_train_step_1t.json": "a before/after run against the package of commit aa839c4 on a loaded machine",
    "speed_train_step_1t_openblas-unset.json": "a before/after run against the package of commit aa839c4",
    "speed_linear_cross_entropy.json": "one change measured against the package just before it",
    "step_profile_two_functions.json": "one change measured against the package just before it",
    "tatoeba_jpn-eng_en-ja_medium_12min.json": "the first Tatoeba recipe, kept to compare the present one with",
    "small_parallel_enja_en-ja.json": "one seed of the present recipe (commit 7388769), written before the script ran "
                                      "several seeds; chapter 11 quotes it until the three-seed series is measured",
    "small_parallel_enja_ja-en.json": "one seed of the present recipe (commit e5b25e4), written before the script ran "
                                      "several seeds; chapter 11 quotes it until the three-seed series is measured",
    "small_parallel_enja_en-ja_before-cooldown.json": "the small_parallel_enja recipe before --cooldown (commit af094dd), "
                                                      "which chapter 11 compares with",
    "small_parallel_enja_ja-en_before-cooldown.json": "the small_parallel_enja recipe before --cooldown (commit af094dd), "
                                                      "which chapter 11 compares with",
    "small_parallel_enja_en-ja_before-choose-alpha.json": "the small_parallel_enja recipe with --cooldown, before "
                                                          "--choose-alpha (commit e6fc879), which chapter 11 compares with",
    "small_parallel_enja_ja-en_before-choose-alpha.json": "the small_parallel_enja recipe with --cooldown, before "
                                                          "--choose-alpha (commit 5bc3f3a), which chapter 11 compares with",
    "small_parallel_enja_en-ja_before-alpha-search.json": "the small_parallel_enja recipe with --choose-alpha on the "
                                                          "grid alone (commit 548626d), which chapter 11 compares with",
    "small_parallel_enja_ja-en_before-alpha-search.json": "the small_parallel_enja recipe with --choose-alpha on the "
                                                          "grid alone (commit b3c2d07), which chapter 11 compares with",
}


def missing(step: Step) -> str | None:
    """Why a step cannot run here, or None."""
    for need in step.needs:
        if need in ("torch", "mpi4py") and importlib.util.find_spec(need) is None:
            return f"{need} is not installed"
        if need == "nbgrader" and importlib.util.find_spec(need) is None:
            return "nbgrader is not installed (pip install -e \".[classroom]\")"
        if need == "bwrap" and shutil.which("bwrap") is None:
            return "bubblewrap is not installed (apt-get install bubblewrap)"
        if need == "data" and not DATA.is_dir():
            return f"no {DATA} (the real corpora)"
    return None


def recorded_environment(step: Step) -> dict:
    """The default run is trained with the BLAS settings its results file records."""
    if step.name != "heads":
        return {}
    try:
        recorded = load_results("heads.json").get("run", {}).get("blas_environment") or {}
    except FigureError:
        return {}
    return {k: v for k, v in recorded.items() if v is not None}


def run_step(step: Step, command: str, env: dict) -> float:
    started = time.monotonic()
    print(f"\n== {step.name}: {command}", flush=True)
    done = subprocess.run(command, shell=True, cwd=ROOT, env={**os.environ, "MPLBACKEND": "Agg", **env})
    if done.returncode:
        raise SystemExit(f"{step.name} failed (exit {done.returncode}): {command}")
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print the steps and their estimated time")
    parser.add_argument("--quick", action="store_true", help="every quick variant, into a temporary folder")
    parser.add_argument("--deterministic", action="store_true", help="only the steps that time nothing")
    parser.add_argument("--only", nargs="+", metavar="STEP", help="these steps only")
    args = parser.parse_args(argv)
    names = {s.name for s in STEPS}
    if args.only and set(args.only) - names:
        parser.error(f"unknown steps {sorted(set(args.only) - names)}; known: {', '.join(s.name for s in STEPS)}")
    steps = [s for s in STEPS if (not args.only or s.name in args.only) and not (args.deterministic and s.timing)]
    if args.list or not args.quick:
        total = sum(s.minutes for s in steps)
        for s in steps:
            note = "timing, needs a quiet machine" if s.timing else "deterministic"
            print(f"{s.name:<20} {s.minutes:5.1f} min  {note:<30} {s.writes}")
        print(f"{'total':<20} {total:5.0f} min on a quiet 2-core machine (about {total / 60:.1f} hours)")
        if args.list:
            return 0
    python = shlex.quote(sys.executable)
    if args.quick:
        tmp = Path(tempfile.mkdtemp(prefix="regenerate-quick-"))
        try:
            spent = 0.0
            for s in steps:
                reason = missing(s) or (None if s.quick else (s.why_no_quick or "no quick variant"))
                if reason:
                    print(f"\n== {s.name}: skipped ({reason})")
                    continue
                spent += run_step(s, s.quick.format(python=python, tmp=shlex.quote(str(tmp))), {})
            print(f"\nquick run done in {spent:.0f} s; nothing in the repository was written")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return 0
    for s in steps:
        reason = missing(s)
        if reason:
            print(f"\n== {s.name}: skipped ({reason})")
            continue
        command = s.command
        if s.name == "heads" and (ROOT / RUN).exists():      # a run is there: score it, never overwrite it
            command = command.replace(" --train", "")
            print(f"{RUN} exists: scoring it (move it aside to train the book's run again)")
        run_step(s, command.format(python=python), recorded_environment(s))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
