"""Decoding speed: greedy and beam-4 search, with and without the attention cache, ours vs PyTorch.

64 random source sentences (the ``small-N3`` benchmark model: d_model 128, 3 + 3 layers,
vocabulary 4,000, sources of up to 24 tokens) are decoded to exactly 50 tokens: the
end-of-sentence id is one the model can never produce, so no hypothesis stops early.

* with the cache: each step runs the decoder on ONE new position per row; self-attention
  keys/values are appended to a cache, cross-attention keys/values of the memory are
  projected once (minitransformer's ``model.decode_step``; the same in
  benchmarks/speed/torch_reference.py for PyTorch);
* without: each step re-runs the decoder over the whole prefix (t positions at step t).

Ours is ``minitransformer.decode.greedy_decode`` / ``beam_search`` (which also keep the
Python bookkeeping of finished sentences, length penalties and n-best lists); PyTorch's
is the plain loops ``greedy`` / ``beam`` of torch_reference.py. Each library runs in its
own worker process, the two take turns, ``--rounds`` rounds, medians reported. The
greedy outputs of the two libraries are compared as a sanity check (same weights, so
the same tokens up to float32 near-ties).

    python benchmarks/speed/decode.py                  # small-N3 model, 3 rounds, glibc's default malloc
    python benchmarks/speed/decode.py --rounds 5 --malloc keep --config tiny
    python benchmarks/speed/decode.py --beams 4,8 --baseline /tmp/mt-before   # another checkout in the same rounds

Every result records the machine (benchmarks/common.py: CPU, load average, NumPy's BLAS and its
kernel, torch's build and threads). Where OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are set, ``--openblas
auto`` (the default) runs everything twice, with them and without them.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # benchmarks/: common.py

from common import (BOS, CONFIGS, Worker, describe_machine, library_record, load_average,  # noqa: E402
                    machine_record, median, memory_mib, openblas_settings, pause, random_batch, serve,
                    setup_worker_threads, worker_env)

SENTENCES = 64
LENGTH = 50
NEVER = -1          # an eos id no argmax can return: every search runs the full LENGTH steps
MODES = ("greedy, cache", "greedy, no cache", "beam 4, cache", "beam 4, no cache")
BASELINE = "baseline"   # the worker that imports --baseline's minitransformer


def sources(config_name: str):
    config = CONFIGS[config_name].with_batch(SENTENCES)
    return config, random_batch(config, seed=7)[0]                   # (64, L) with padding


def worker(library: str, args) -> None:
    import numpy as np

    from train_step import build_ours, build_torch

    setup_worker_threads(library)
    config, src = sources(args.config)
    if library == "minitransformer":
        from minitransformer.decode import beam_search, greedy_decode

        model, *_ = build_ours(config, dropout=0.1)
        model.eval()
        runs = {
            "greedy": lambda cache: greedy_decode(model, src, BOS, NEVER, max_len=LENGTH, use_cache=cache),
            "beam": lambda cache, k: [h[0].tokens for h in beam_search(model, src, BOS, NEVER, beam_size=k,
                                                                       max_len=LENGTH, use_cache=cache)],
        }
    else:
        import torch

        from torch_reference import beam, greedy

        with np.load(args.state) as saved:
            model, *_ = build_torch(config, 0.1, dict(saved))
        model.eval()
        src_t = torch.from_numpy(src)
        runs = {
            "greedy": lambda cache: greedy(model, src_t, BOS, LENGTH, use_cache=cache).tolist(),
            "beam": lambda cache, k: beam(model, src_t, BOS, LENGTH, k, use_cache=cache).tolist(),
        }

    def run(mode: str) -> dict:
        search, cache = mode.split(",")[0].split(), mode.endswith(", cache")
        start = time.perf_counter()
        tokens = runs["greedy"](cache) if search[0] == "greedy" else runs["beam"](cache, int(search[1]))
        seconds = time.perf_counter() - start
        if any(len(t) != LENGTH for t in tokens):
            raise RuntimeError(f"{library} {mode}: expected {LENGTH} tokens per sentence")
        return {"seconds": seconds, "tokens": tokens if cache else None}

    run("greedy, cache")  # warm-up
    serve({"run": run, "memory": memory_mib}, {"ready": True, "record": library_record(library)})


def key_of(mode: str) -> str:
    """'beam 4, no cache' -> 'beam4_no_cache': a key that tools/quoted_numbers.py can name."""
    return mode.replace("beam ", "beam").replace(",", "").replace(" ", "_")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="small-N3", choices=list(CONFIGS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--malloc", choices=("default", "keep", "both"), default="default")
    parser.add_argument("--openblas", choices=("auto", "as-set", "unset", "both"), default="auto",
                        help="OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE as set, removed, or both in turn "
                             "(auto: both where any is set)")
    parser.add_argument("--beams", default=None, help="beam sizes to time with the cache instead of the default "
                        "modes, e.g. 4,8 (greedy with the cache is always timed)")
    parser.add_argument("--modes", default=",".join(m.replace(", ", "+") for m in MODES),
                        help="which of: " + ", ".join(m.replace(", ", "+") for m in MODES))
    parser.add_argument("--baseline", default=None,
                        help="a folder holding another minitransformer package, timed in the same rounds")
    parser.add_argument("--results", default=None, help="JSON file for the figures the READMEs quote "
                        "(default benchmarks/speed/results/decode_{threads}t.json)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--state", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker("minitransformer" if args.worker == BASELINE else args.worker, args)
        return 0
    if args.beams:
        modes = ["greedy, cache"] + [f"beam {int(b)}, cache" for b in args.beams.split(",")]
    else:
        modes = [m.replace("+", ", ") for m in args.modes.split(",")]
    config, _ = sources(args.config)
    script = str(Path(__file__).resolve())
    machine = machine_record()
    print(f"{SENTENCES} sentences decoded to {LENGTH} tokens, model '{args.config}' (d_model {config.d_model}, "
          f"{config.n_layers}+{config.n_layers} layers, vocab {config.vocab}), {args.threads} threads, "
          f"{args.rounds} rounds")
    settings = ("default", "keep") if args.malloc == "both" else (args.malloc,)
    record: dict = {"command": "python benchmarks/speed/decode.py " + " ".join(sys.argv[1:]), "config": args.config,
                    "threads": args.threads, "rounds": args.rounds, "machine": machine}
    for blas in openblas_settings(args.openblas):
        for malloc in settings:
            part = record.setdefault(malloc, {}) if blas == "as-set" else record.setdefault(
                "openblas_unset", {}).setdefault(malloc, {})
            part.update(measure_setting(args, modes, config, script, malloc, blas, machine))
    path = Path(args.results or Path(__file__).resolve().parent / "results" / f"decode_{args.threads}t.json")
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


def measure_setting(args, modes, config, script, malloc: str, blas: str, machine: dict) -> dict:
    """Every mode, ``args.rounds`` rounds, the workers in turn (the order alternating): one table."""
    import numpy as np

    from train_step import our_initial_state

    env = worker_env(args.threads, malloc, blas)
    with tempfile.TemporaryDirectory() as folder:
        state_path = str(Path(folder) / "state.npz")
        np.savez(state_path, **our_initial_state(config))
        workers = {"minitransformer": Worker(script, "minitransformer", ["--config", args.config], env)}
        if args.baseline:
            workers[BASELINE] = Worker(script, BASELINE, ["--config", args.config],
                                       worker_env(args.threads, malloc, blas, package_root=args.baseline))
        workers["torch"] = Worker(script, "torch", ["--config", args.config, "--state", state_path], env)
    seconds = {(lib, m): [] for lib in workers for m in modes}
    tokens, loads = {}, [load_average()]
    try:
        for round_index in range(args.rounds):
            for mode in modes:
                order = list(workers) if round_index % 2 == 0 else list(workers)[::-1]
                for lib in order:
                    pause()
                    reply = workers[lib].call("run", mode=mode)
                    seconds[lib, mode].append(reply["seconds"])
                    if reply["tokens"] is not None:
                        tokens[lib, mode] = reply["tokens"]
            loads.append(load_average())
        memory = {lib: w.call("memory") for lib, w in workers.items()}
    finally:
        for w in workers.values():
            w.close()
    records = {lib: w.ready["record"] for lib, w in workers.items()}
    print(f"\nglibc malloc: {malloc}; OpenBLAS overrides {blas}")
    print(describe_machine({**machine, "load_average": loads[0]}, records))
    print(f"load average (1 min) during the rounds: {min(l[0] for l in loads):.2f}–{max(l[0] for l in loads):.2f}")
    result: dict = {"openblas_env": blas, "load_average_per_round": loads, "libraries": records}
    others = [lib for lib in workers if lib != "torch"]
    short = {"minitransformer": "ours", BASELINE: "before", "torch": "torch"}
    header = f"{'search':<18}" + "".join(f"{short[lib] + ' s':>10}" for lib in workers) + "".join(
        f"{short[lib] + '/torch':>14}" for lib in others) + (f"{'ours/before':>13}" if args.baseline else "")
    print(header + "\n" + "-" * len(header))
    for mode in modes:
        medians = {lib: median(seconds[lib, mode]) for lib in workers}
        line = f"{mode:<18}" + "".join(f"{medians[lib]:>10.2f}" for lib in workers) + "".join(
            f"{medians[lib] / medians['torch']:>14.2f}" for lib in others)
        entry = {"ours_s": round(medians["minitransformer"], 2), "torch_s": round(medians["torch"], 2),
                 "ratio": round(medians["minitransformer"] / medians["torch"], 2)}
        if args.baseline:
            line += f"{medians['minitransformer'] / medians[BASELINE]:>13.2f}"
            entry.update(baseline_s=round(medians[BASELINE], 2),
                         baseline_ratio=round(medians[BASELINE] / medians["torch"], 2),
                         after_over_before=round(medians["minitransformer"] / medians[BASELINE], 2))
            if (BASELINE, mode) in tokens and ("minitransformer", mode) in tokens:
                entry["same_outputs_as_baseline"] = tokens[BASELINE, mode] == tokens["minitransformer", mode]
                line += "  same outputs" if entry["same_outputs_as_baseline"] else "  OUTPUTS DIFFER"
        print(line)
        result[key_of(mode)] = entry
    for search in sorted({m.split(",")[0] for m in modes}):
        cached, uncached = f"{search}, cache", f"{search}, no cache"
        if cached in modes and uncached in modes:
            speedups = {lib: median(seconds[lib, uncached]) / median(seconds[lib, cached]) for lib in workers}
            print(f"cache speed-up, {search}: " + ", ".join(f"{lib} {v:.1f}×" for lib, v in speedups.items()))
            result[key_of(f"cache speedup {search}")] = {lib: round(v, 1) for lib, v in speedups.items()}
    if ("torch", "greedy, cache") in tokens:
        same = sum(a == b for a, b in zip(tokens["minitransformer", "greedy, cache"], tokens["torch", "greedy, cache"]))
        print(f"greedy outputs identical in both libraries: {same}/{SENTENCES} sentences")
    print("peak RSS of the decoding workers: " + ", ".join(f"{lib} {memory[lib]['VmHWM']:.0f} MiB" for lib in workers))
    result["rss_mib"] = {lib: round(memory[lib]["VmHWM"]) for lib in memory}
    return result


if __name__ == "__main__":
    sys.exit(main())
