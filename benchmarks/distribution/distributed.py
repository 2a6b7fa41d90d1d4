"""Data parallelism on this machine (chapter 14): steps per second on 1 and 2 ranks, and the all-reduce's share.

For each model size (the default "small" model, and the paper's "base"), on synthetic sentence pairs of
the built-in corpus's lengths and the default recipe's batches of <= 1,000 tokens:

  1 rank     one process, no MPI: ``train.train_step`` as ``python -m minitransformer train`` runs it, with
             2 BLAS threads (what the command chooses on 2 cores) and with 1
  2 ranks    ``mpiexec -n 2``, 1 BLAS thread each: the same step plus the all-reduce; each step trains on
             two batches, one per rank
  all-reduce the all-reduce of one step's flat buffer alone (after a barrier, so no rank waits for the
             other's backward), and inside the steps (which includes that wait)

Medians over the timed steps. The machine's load average is recorded before and after: on a shared
machine every figure here moves with it.

    python benchmarks/distribution/distributed.py                   # both sizes -> benchmarks/distribution/results/distributed.json
    python benchmarks/distribution/distributed.py --sizes small --steps 10
    python benchmarks/distribution/distributed.py --summarize       # the comparisons again, from the recorded timings

The 1-rank and 2-rank setups train on different batches (two ranks take two batches a step), so the
comparison is made in target tokens per second, which counts what each step trained on; batches per
second is kept beside it. The all-reduce's share of a step is given twice: timed alone, after a barrier,
and inside the steps, where a rank also waits for the other to finish its backward pass.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
RESULTS = Path(__file__).resolve().parent / "results" / "distributed.json"
MAX_TOKENS = 1000          # the default recipe's batches ("small"); the paper's base used ~25,000
DEFAULT_STEPS = {"small": 20, "base": 3}


# -- the worker: one process, or one rank of an MPI run -------------------------------------------
def worker(size_name: str, steps: int, warmup: int, use_mpi: bool) -> None:
    import numpy as np

    from minitransformer.training import distributed
    from minitransformer.data.batching import epoch_batches
    from minitransformer.nn.transformer import Transformer, TransformerConfig
    from minitransformer.optim import Adam, NoamSchedule
    from minitransformer.presets import PRESETS
    from minitransformer.training.trainer import TrainState, train_step

    world = distributed.init_world() if use_mpi else distributed.SINGLE
    recipe = PRESETS[size_name]
    vocab = recipe["vocab_size"]
    config = TransformerConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, max_len=256, **recipe["model"])
    model = Transformer(config)
    optimizer = Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9)
    schedule = NoamSchedule(optimizer, config.d_model, warmup=recipe["warmup"], factor=recipe["factor"])
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 16, size=(4000, 2))          # the built-in corpus's sentences: 5-15 tokens
    examples = [(list(rng.integers(4, vocab, s)), list(rng.integers(4, vocab, t))) for s, t in lengths]
    batches = epoch_batches(examples, MAX_TOKENS, pad_id=0, seed=0, epoch=0)
    run = SimpleNamespace(model=model, optimizer=optimizer, schedule=schedule, world=world, state=TrainState(),
                          step_totals=None, loop_started=time.monotonic())
    distributed.broadcast_parameters(world, optimizer.params)

    reduce_seconds: list[float] = []
    if world.comm is not None:                              # time the all-reduce inside each step
        real = world.all_reduce_sum

        def timed(buffer):
            t0 = time.perf_counter()
            real(buffer)
            reduce_seconds.append(time.perf_counter() - t0)
        object.__setattr__(world, "all_reduce_sum", timed)

    step_seconds, tokens = [], []
    model.train()
    for step in range(warmup + steps):
        batch = batches[(step * world.size + world.rank) % len(batches)]
        world.barrier()
        t0 = time.perf_counter()
        train_step(run, batch)
        if step >= warmup:
            step_seconds.append(time.perf_counter() - t0)
            tokens.append(run.step_totals.tokens if run.step_totals else batch.n_tgt_tokens)
    alone = []
    if world.comm is not None:
        buffer = distributed.flatten([p.data for p in optimizer.params])
        for _ in range(max(3, steps // 2)):
            world.barrier()
            t0 = time.perf_counter()
            real(buffer)
            alone.append(time.perf_counter() - t0)
    if world.is_root:
        step = statistics.median(step_seconds)
        result = {"parameters": model.num_parameters(), "ranks": world.size, "steps_timed": steps,
                  "step_seconds": round(step, 4), "steps_per_second": round(1 / step, 3),
                  "target_tokens_per_second": round(statistics.median(tokens) / step, 1),
                  "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS")}
        if alone:
            result.update(all_reduce_seconds=round(statistics.median(alone), 5),
                          all_reduce_in_step_seconds=round(statistics.median(reduce_seconds[warmup:]), 5),
                          all_reduce_share=round(statistics.median(alone) / step, 4),
                          buffer_megabytes=round(buffer.nbytes / 2**20, 1))
        print("RESULT " + json.dumps(result), flush=True)


# -- the driver --------------------------------------------------------------------------------------
def _median_round(measured: list[dict]) -> dict:
    """The round with the median step time (its all-reduce figures come with it)."""
    ordered = sorted(measured, key=lambda r: r["step_seconds"])
    return {**ordered[len(ordered) // 2], "step_seconds_rounds": [r["step_seconds"] for r in measured]}


def launch(size_name: str, ranks: int, threads: int, steps: int, warmup: int) -> dict:
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), PYTHONPATH=str(ROOT),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    command = [sys.executable, __file__, "--worker", size_name, "--steps", str(steps), "--warmup", str(warmup)]
    if ranks > 1:
        mpiexec = Path(sys.executable).parent / "mpiexec"
        command = [str(mpiexec) if mpiexec.exists() else "mpiexec", "-n", str(ranks), *command, "--mpi"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return json.loads(lines[-1][len("RESULT "):])


SETUPS = ("one_rank_2_threads", "one_rank_1_thread", "two_ranks")


def summarize(size: dict) -> dict:
    """The comparisons of one model size, from its three setups' measured records only (nothing timed)."""
    measured = {k: v for k, v in size.items() if k in SETUPS or k in ("parameters", "steps", "rounds",
                                                                      "buffer_megabytes")}
    one = max((size["one_rank_2_threads"], size["one_rank_1_thread"]), key=lambda r: r["steps_per_second"])
    two = size["two_ranks"]
    return {**measured,
            "steps_per_second_1_rank": one["steps_per_second"], "steps_per_second_2_ranks": two["steps_per_second"],
            "one_rank_setup": "2 BLAS threads" if one is size["one_rank_2_threads"] else "1 BLAS thread",
            # like with like: the setups train on different batches, so compare the target tokens each trains
            # on per second (two ranks: both ranks' tokens), against the faster single process
            "speedup_in_tokens_per_second": round(two["target_tokens_per_second"] / one["target_tokens_per_second"], 2),
            "speedup_in_batches_per_second": round(2 * two["steps_per_second"] / one["steps_per_second"], 2),
            "all_reduce_share": two["all_reduce_share"],
            "all_reduce_percent": round(100 * two["all_reduce_share"], 1),
            "all_reduce_in_step_share": round(two["all_reduce_in_step_seconds"] / two["step_seconds"], 4),
            "all_reduce_in_step_percent": round(100 * two["all_reduce_in_step_seconds"] / two["step_seconds"], 1),
            "all_reduce_in_step_ms": round(1e3 * two["all_reduce_in_step_seconds"], 2),
            "all_reduce_alone_ms": round(1e3 * two["all_reduce_seconds"], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", nargs="+", default=["small", "base"], choices=["small", "base"])
    parser.add_argument("--steps", type=int, help="timed steps (default: 20 for small, 3 for base)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="each setup is launched this many times, in turns")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--mpi", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--summarize", action="store_true",
                        help="recompute the comparisons of --out from its recorded timings, timing nothing")
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.steps, args.warmup, args.mpi)
        return
    if args.summarize:
        results = json.loads(args.out.read_text())
        for size_name in ("small", "base"):
            if size_name in results:
                results[size_name] = summarize(results[size_name])
        args.out.write_text(json.dumps(results, indent=1) + "\n")
        print(f"rewrote the comparisons in {args.out}")
        return
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results.update(command="python benchmarks/distribution/distributed.py " + " ".join(sys.argv[1:]),
                   cpus=os.cpu_count(), max_tokens=MAX_TOKENS, load_average_before=list(os.getloadavg()))
    for size_name in args.sizes:
        steps = args.steps or DEFAULT_STEPS[size_name]
        setups = {"one_rank_2_threads": (1, 2), "one_rank_1_thread": (1, 1), "two_ranks": (2, 1)}
        rounds: dict[str, list[dict]] = {name: [] for name in setups}
        for _ in range(args.rounds):                         # the setups take turns: a burst of load hits all
            for name, (ranks, threads) in setups.items():
                rounds[name].append(launch(size_name, ranks, threads, steps, args.warmup))
        best = {name: _median_round(measured) for name, measured in rounds.items()}
        results[size_name] = summarize({"parameters": best["two_ranks"]["parameters"], "steps": steps,
                                        "rounds": args.rounds, "buffer_megabytes": best["two_ranks"]["buffer_megabytes"],
                                        **best})
        print(json.dumps({size_name: results[size_name]}, indent=1), flush=True)
    results["load_average_after"] = list(os.getloadavg())
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
