"""Per-op overhead of the autograd engine: microseconds per op on tiny arrays.

On (4, 4) arrays the arithmetic itself costs almost nothing, so the time of a
chain of small ops is the bookkeeping around each op: wrapping, recording the
graph, walking it backwards. We time a chain of 1,000 ops (alternately
``y * 0.999`` with a Python scalar and ``y + b`` with a (4, 4) tensor) in
three modes:

    no_grad    forward only, no graph recorded
    graph      forward, recording the graph
    fwd+bwd    forward with graph, then backward() from y.sum()

for minitransformer, PyTorch on the CPU (if installed) and plain NumPy
(forward only: NumPy has no graph). Each library runs in its own
subprocess (this script re-invoked with ``--worker LIB``) with the same
thread settings, the libraries take turns for several rounds, and the median
over rounds is reported.

    python benchmarks/speed/overhead.py               # 7 rounds, 1 thread
    python benchmarks/speed/overhead.py --rounds 11 --threads 2
    python benchmarks/speed/overhead.py --baseline /tmp/mt-before   # also another checkout, in the same rounds

Every result records the machine (CPU, load average, NumPy's BLAS and its kernel, torch's build and
threads: benchmarks/common.py). ``--baseline DIR`` adds a worker that imports the minitransformer of
DIR (e.g. ``git archive HEAD~3 minitransformer | tar -x -C DIR``): before and after, side by side.
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

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # benchmarks/: common.py

from common import describe_machine, library_record, load_average, machine_record  # noqa: E402

LIBRARIES = ("minitransformer", "torch", "numpy")
BASELINE = "minitransformer (baseline)"
MODES = ("no_grad", "graph", "fwd+bwd")


# -- workers: one library each, in a fresh process --------------------------------------------
def chain(a, b, n_ops: int):
    """n_ops alternating ops: multiply by a Python scalar, add a (4, 4) tensor."""
    y = a
    for i in range(n_ops):
        y = y * 0.999 if i % 2 == 0 else y + b
    return y


def time_per_op(run, n_ops: int, repeats: int) -> float:
    """Median microseconds per op of ``run()`` over ``repeats`` timed calls (after a warm-up)."""
    run()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) / n_ops * 1e6


def time_modes(a, b, no_grad_context, n_ops: int, repeats: int) -> dict[str, float]:
    """Microseconds per op of the chain of tensors ``a`` and ``b`` in each mode of MODES: under the library's
    ``no_grad_context``, recording the graph, and recording it then running backward."""
    def no_grad():
        with no_grad_context():
            chain(a, b, n_ops)

    def forward_backward():
        chain(a, b, n_ops).sum().backward()

    return {"no_grad": time_per_op(no_grad, n_ops, repeats),
            "graph": time_per_op(lambda: chain(a, b, n_ops), n_ops, repeats),
            "fwd+bwd": time_per_op(forward_backward, n_ops, repeats)}


def worker_minitransformer(n_ops: int, repeats: int) -> dict[str, float]:
    import numpy as np  # minitransformer comes from PYTHONPATH: this checkout, or --baseline's

    import minitransformer as mt

    a = mt.Tensor(np.ones((4, 4), np.float32), requires_grad=True)
    b = mt.Tensor(np.full((4, 4), 0.5, np.float32), requires_grad=True)
    return time_modes(a, b, mt.no_grad, n_ops, repeats)


def worker_torch(n_ops: int, repeats: int) -> dict[str, float]:
    import torch

    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    a = torch.ones((4, 4), dtype=torch.float32, requires_grad=True)
    b = torch.full((4, 4), 0.5, dtype=torch.float32, requires_grad=True)
    return time_modes(a, b, torch.no_grad, n_ops, repeats)


def worker_numpy(n_ops: int, repeats: int) -> dict[str, float]:
    import numpy as np

    a = np.ones((4, 4), np.float32)
    b = np.full((4, 4), 0.5, np.float32)
    return {"no_grad": time_per_op(lambda: chain(a, b, n_ops), n_ops, repeats)}


WORKERS = {"minitransformer": worker_minitransformer, "torch": worker_torch, "numpy": worker_numpy}


# -- driver ----------------------------------------------------------------------------------------
def available(library: str) -> bool:
    if library != "torch":
        return True
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def run_worker(library: str, args, env) -> dict:
    worker = "minitransformer" if library == BASELINE else library
    command = [sys.executable, __file__, "--worker", worker, "--ops", str(args.ops), "--repeats", str(args.repeats)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"worker {library} failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def format_table(medians: dict[str, dict[str, float]]) -> str:
    reference = medians.get("torch")
    width = max(16, *(len(lib) + 2 for lib in medians))
    header = f"{'library':<{width}}" + "".join(f"{mode:>20}" for mode in MODES)
    lines = [header, "-" * len(header)]
    for library, figures in medians.items():
        cells = []
        for mode in MODES:
            if mode not in figures:
                cells.append(f"{'—':>20}")
                continue
            ratio = f" (×{figures[mode] / reference[mode]:.2f})" if reference and mode in reference else ""
            cells.append(f"{figures[mode]:>9.2f} µs{ratio:>9}")
        lines.append(f"{library:<{width}}" + "".join(cells))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", choices=LIBRARIES, help=argparse.SUPPRESS)
    parser.add_argument("--ops", type=int, default=1000, help="ops in the chain (default 1000)")
    parser.add_argument("--repeats", type=int, default=5, help="timed chains per worker process (default 5)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds over all libraries (default 7, at least 5)")
    parser.add_argument("--threads", type=int, default=1, help="OMP/BLAS threads for every library (default 1)")
    parser.add_argument("--baseline", default=None,
                        help="a folder holding another minitransformer package, timed in the same rounds")
    parser.add_argument("--results", default=str(Path(__file__).resolve().parent / "results" / "overhead.json"),
                        help="JSON file for the figures the chapters quote (tools/quoted_numbers.py)")
    args = parser.parse_args()

    if args.worker:
        figures = WORKERS[args.worker](args.ops, args.repeats)
        print(json.dumps({"figures": figures, "record": library_record(args.worker)}))
        return 0

    threads = str(args.threads)
    env = dict(os.environ, OMP_NUM_THREADS=threads, OPENBLAS_NUM_THREADS=threads, MKL_NUM_THREADS=threads,
               VECLIB_MAXIMUM_THREADS=threads, NUMEXPR_NUM_THREADS=threads, MINITRANSFORMER_DEVICE="cpu",
               PYTHONPATH=str(ROOT))
    envs = {lib: env for lib in LIBRARIES}
    libraries = [lib for lib in LIBRARIES if available(lib)]
    if args.baseline:
        libraries.insert(1, BASELINE)
        envs[BASELINE] = dict(env, PYTHONPATH=str(Path(args.baseline).resolve()))
    machine = machine_record()
    samples: dict[str, list[dict[str, float]]] = {lib: [] for lib in libraries}
    records, loads = {}, [machine["load_average"]]
    for round_number in range(max(args.rounds, 5)):
        for library in libraries:  # take turns, so drift in machine load hits every library alike
            reply = run_worker(library, args, envs[library])
            samples[library].append(reply["figures"])
            records[library] = reply["record"]
        loads.append(load_average())
        print(f"round {round_number + 1} done, load average {loads[-1]}", file=sys.stderr)
    medians = {lib: {mode: statistics.median(s[mode] for s in runs) for mode in runs[0]}
               for lib, runs in samples.items()}

    print(f"Per-op overhead: µs per op, chain of {args.ops} ops on (4, 4) float32 arrays, "
          f"median of {max(args.rounds, 5)} rounds, {threads} thread(s); (×) = ratio to PyTorch")
    print(describe_machine(machine, records))
    print(f"load average (1 min) during the rounds: {min(l[0] for l in loads):.2f}–{max(l[0] for l in loads):.2f}")
    print(format_table(medians))

    def ratios(library: str) -> dict[str, float] | None:
        if "torch" not in medians or library not in medians:
            return None
        return {mode: round(v / medians["torch"][mode], 2) for mode, v in medians[library].items()}

    record = {"command": "python benchmarks/speed/overhead.py " + " ".join(sys.argv[1:]), "ops": args.ops,
              "rounds": max(args.rounds, 5), "threads": args.threads,
              "us_per_op": {lib: {mode: round(v, 2) for mode, v in figures.items()} for lib, figures in medians.items()},
              "ratio_to_torch": ratios("minitransformer"),
              "machine": machine, "load_average_per_round": loads[1:], "libraries": records}
    if args.baseline:
        record["baseline"] = {"package": str(Path(args.baseline).resolve()),
                              "us_per_op": {mode: round(v, 2) for mode, v in medians[BASELINE].items()},
                              "ratio_to_torch": ratios(BASELINE),
                              "after_over_before": {mode: round(v / medians[BASELINE][mode], 2)
                                                    for mode, v in medians["minitransformer"].items()}}
    Path(args.results).write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
