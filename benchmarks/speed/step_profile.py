"""Where a training step of our engine spends its time: milliseconds per step for each Function's
forward and backward, Adam, and the rest (the graph walk, gradient bookkeeping, Python).

Not against PyTorch: it explains the ratios `train_step.py` reports. Each Function subclass's
``forward`` and ``backward`` (and ``Adam.step``, inherited from ``Optimizer``) is wrapped with a
timer for a second series of steps; times are *exclusive*, so a Function that calls its parent's
forward (``PackedAttention`` calls ``ScaledDotProductAttention``'s) is charged only for its own
lines. The wrappers cost a few microseconds per call, so the parts add up to slightly more than an
unwrapped step, which is measured first and reported beside them. Each configuration runs in a
fresh process with the environment of `train_step.py`'s workers (threads, glibc malloc, OpenBLAS
settings).

Where glibc's malloc is in use, one more step records the top of the heap (``sbrk(0)``) after each
Function's forward and backward: how far a step grows the heap, which Functions grow it, and how
much is handed back at the end. Under glibc's defaults that growth is what the next step touches
afresh, page by page (the page faults `train_step.py` counts).

    python benchmarks/speed/step_profile.py                         # tiny, small-N3, medium-h8; 2 threads; glibc defaults
    python benchmarks/speed/step_profile.py --configs medium-h8 --malloc keep
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # benchmarks/: common.py

from common import (CONFIGS, ROOT, library_record, load_average, machine_record, median,  # noqa: E402
                    random_batch, setup_worker_threads, worker_env)

RESULTS = Path(__file__).resolve().parent / "results" / "step_profile.json"
GROUPS = {   # Function (or optimiser) -> the part of the model it belongs to, for the summary
    "LinearFunction": "linear_layers", "ScaledDotProductAttention": "attention", "PackedAttention": "attention",
    "CrossEntropy": "loss", "LayerNormFunction": "layer_norm", "Dropout": "dropout", "Adam": "adam",
    "EmbeddingFunction": "embeddings", "Add": "residual_additions",
    "DropoutAdd": "dropout", "LinearCrossEntropy": "linear_layers",   # its own lines are the output GEMMs; its CrossEntropy part is "loss"
}


def _subclasses(cls) -> set:
    found, todo = set(), [cls]
    while todo:
        for sub in todo.pop().__subclasses__():
            found.add(sub)
            todo.append(sub)
    return found


def _heap_top():
    """A function returning the top of glibc's heap (sbrk(0)), or None where there is no such thing."""
    import ctypes
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    libc = ctypes.CDLL("libc.so.6")
    libc.sbrk.restype, libc.sbrk.argtypes = ctypes.c_void_p, [ctypes.c_long]
    return lambda: libc.sbrk(0)


def heap_growth(step, batch, methods: dict) -> dict | None:
    """One step with the heap top read after every method in ``methods`` (name -> (class, attribute))."""
    top = _heap_top()
    if top is None:
        return None
    grown: dict[str, float] = defaultdict(float)
    last, highest = [top()], [top()]

    def traced(method, name):
        def wrapper(*args, **kwargs):
            result = method(*args, **kwargs)
            now = top()
            if now > last[0]:
                grown[name] += now - last[0]
            last[0], highest[0] = now, max(highest[0], now)
            return result
        return wrapper

    originals = {name: getattr(cls, attribute) for name, (cls, attribute) in methods.items()}
    for name, (cls, attribute) in methods.items():
        setattr(cls, attribute, traced(originals[name], name))
    start = top()
    try:
        last[0] = highest[0] = start
        step(*batch)
    finally:
        for name, (cls, attribute) in methods.items():
            setattr(cls, attribute, originals[name])
    mb = 1e-6
    return {"growth_mb": round((highest[0] - start) * mb, 1), "after_step_mb": round((top() - start) * mb, 1),
            "by_part_mb": _nested({name: round(grow * mb, 1) for name, grow in grown.items() if grow * mb >= 0.05})}


def _nested(figures: dict[str, float]) -> dict[str, dict[str, float]]:
    """{"Dropout forward": 1.0} -> {"Dropout": {"forward": 1.0}}, largest first (keys the READMEs can quote)."""
    nested: dict[str, dict[str, float]] = {}
    for name, value in sorted(figures.items(), key=lambda item: -item[1]):
        part, method = name.split(" ", 1)
        nested.setdefault(part, {})[method] = value
    return nested


def profile(config_name: str, steps: int) -> dict:
    """Build our model for ``config_name``, time ``steps`` plain steps, then ``steps`` timed by part."""
    import minitransformer  # noqa: F401  (every Function subclass is defined on import)
    import minitransformer.nn  # noqa: F401
    from minitransformer.fast.adam import FastAdam
    from minitransformer.tensor import Function
    from train_step import build_ours

    config = CONFIGS[config_name]
    _, _, _, step = build_ours(config, dropout=0.1)
    batches = [random_batch(config, seed) for seed in range(4)]
    for batch in batches[:2]:                       # warm-up: optimiser state, allocator
        step(*batch)
    plain = []
    for i in range(steps):
        start = time.perf_counter()
        step(*batches[i % 4])
        plain.append(time.perf_counter() - start)

    methods = {f"{cls.__name__} {name}": (cls, name) for cls in _subclasses(Function)
               for name in ("forward", "backward") if name in cls.__dict__}
    methods["Adam step"] = (FastAdam, "step")   # the optimiser build_ours makes, as `train` does
    heap = heap_growth(step, batches[2], methods)

    spent: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    children = [0.0]                                # time of wrapped calls inside the current one

    def timed(method, name):
        def wrapper(*args, **kwargs):
            outer, children[0] = children[0], 0.0
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                spent[name] += elapsed - children[0]
                calls[name] += 1
                children[0] = outer + elapsed
        return wrapper

    for name, (cls, attribute) in methods.items():  # every Function's forward and backward, and Adam's update
        setattr(cls, attribute, timed(getattr(cls, attribute), name))
    start = time.perf_counter()
    for i in range(steps):
        step(*batches[i % 4])
    wrapped_ms = (time.perf_counter() - start) / steps * 1e3
    parts = {name: {"ms": round(seconds / steps * 1e3, 3), "calls": calls[name] // steps}
             for name, seconds in sorted(spent.items(), key=lambda item: -item[1])}
    accounted = sum(part["ms"] for part in parts.values())
    groups: dict[str, float] = defaultdict(float)
    for name, part in parts.items():
        groups[GROUPS.get(name.split()[0], "other_functions")] += part["ms"]
    groups["rest"] = wrapped_ms - accounted           # the graph walk, gradient bookkeeping, Python
    return {"step_ms": round(median(plain) * 1e3, 2), "wrapped_step_ms": round(wrapped_ms, 2),
            "rest_ms": round(wrapped_ms - accounted, 2), "parts": parts,
            "groups": {name: round(ms, 1) for name, ms in sorted(groups.items(), key=lambda item: -item[1])},
            "heap": heap}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default="tiny,small-N3,medium-h8")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--malloc", choices=("default", "keep"), default="default")
    parser.add_argument("--openblas", choices=("as-set", "unset"), default="as-set")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--results", default=str(RESULTS))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        setup_worker_threads("minitransformer")
        print(json.dumps({"profile": profile(args.worker, args.steps), "record": library_record("minitransformer")}))
        return 0

    record = {"command": "python benchmarks/speed/step_profile.py " + " ".join(sys.argv[1:]), "threads": args.threads,
              "malloc": args.malloc, "openblas": args.openblas, "machine": machine_record(), "configs": {}}
    for name in args.configs.split(","):
        environment = worker_env(args.threads, args.malloc, args.openblas, str(ROOT))
        load = load_average()
        output = subprocess.run([sys.executable, __file__, "--worker", name, "--steps", str(args.steps)],
                                env=environment, capture_output=True, text=True, check=True).stdout
        result = json.loads(output.strip().splitlines()[-1])
        record["configs"][name] = {**result["profile"], "load_average": load, "libraries": result["record"]}
        profiled = result["profile"]
        print(f"\n{name}: {profiled['step_ms']} ms per step ({profiled['wrapped_step_ms']} ms with the timers), "
              f"load average {load[0]}")
        for part, figures in list(profiled["parts"].items())[:14]:
            print(f"  {part:<40} {figures['ms']:8.2f} ms  {figures['calls']:4d} calls")
        print(f"  {'rest (graph walk, bookkeeping, Python)':<40} {profiled['rest_ms']:8.2f} ms")
        print("  by part of the model: " + ", ".join(f"{name} {ms}" for name, ms in profiled["groups"].items()))
        heap = profiled["heap"]
        if heap:
            largest = sorted(((f"{part} {method}", mb) for part, methods in heap["by_part_mb"].items()
                              for method, mb in methods.items()), key=lambda item: -item[1])
            raised = ", ".join(f"{name} {mb}" for name, mb in largest[:6])
            print(f"  glibc's heap: its top rose {heap['growth_mb']} MB during the step and ended "
                  f"{heap['after_step_mb']} MB from where it started" + (f"; raised by {raised}" if raised else ""))
    Path(args.results).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {args.results}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
