"""Each plain form of chapters 5 and 6 against its fast twin in minitransformer/fast/: what the speed work buys.

At the sizes of a small Transformer batch: 64 sentences × 24 tokens = 1,536 token positions, d_model = 128
(layer norm, dropout), d_ff = 512 (the dropout of the feed-forward's hidden layer) and attention scores of
4 heads, (64, 4, 24, 24) (the row maximum and sum). float32 on the CPU. Layer norm and dropout are timed
forward + backward through the engine, the row reductions on arrays. The two forms of one pair are timed
in alternation, block after block, and each keeps the median of its blocks, so that a load that comes and
goes falls on both. Before any timing each pair must agree (tests/fast/ proves it on many more shapes).

    python benchmarks/speed/plain_vs_fast.py [--blocks 15] [--results FILE]
    OPENBLAS_NUM_THREADS=1 python benchmarks/speed/plain_vs_fast.py     # one BLAS thread (recorded in the file)

Prints one line per pair: plain µs, fast µs and plain/fast (> 1: the fast twin is faster), and writes them
with the machine and its load to results/plain_vs_fast.json (the chapters quote the ratios).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # benchmarks/: common.py
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # run from a checkout without installing

import minitransformer as mt  # noqa: E402
import minitransformer.functional as F  # noqa: E402
from common import load_average, machine_record  # noqa: E402
from minitransformer.fast import dropout as fast_dropout, normalization as fast_normalization, rows as fast_rows  # noqa: E402
from minitransformer.functional import rows as plain_rows  # noqa: E402
from minitransformer.generator import Generator  # noqa: E402

POSITIONS, D_MODEL, D_FF, SCORES, P_DROP = 64 * 24, 128, 512, (64, 4, 24, 24), 0.1


def forward_backward(fn, inputs):
    """One call: fn(*inputs), then backward with a fixed upstream gradient of ones."""
    def run():
        for t in inputs:
            t.grad = None
        out = fn(*inputs)
        out.backward(np.ones(out.shape, dtype=out.dtype))
    return run


def timed(run, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        run()
    return (time.perf_counter() - start) / calls * 1e6


def compare(plain, fast, blocks: int, calls: int) -> dict:
    """Median µs per call of each, their blocks interleaved (plain, fast, plain, fast, ...)."""
    plain(), fast()                                            # warm caches and allocators
    times = {"plain": [], "fast": []}
    for _ in range(blocks):
        times["plain"].append(timed(plain, calls))
        times["fast"].append(timed(fast, calls))
    plain_us, fast_us = statistics.median(times["plain"]), statistics.median(times["fast"])
    return {"plain_us": round(plain_us, 1), "fast_us": round(fast_us, 1), "ratio": round(plain_us / fast_us, 2)}


def pairs(rng):
    """name -> (shape, plain run, fast run, a check that both give the same numbers)."""
    def leaf(*shape):
        return mt.Tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)

    x, weight, bias = leaf(POSITIONS, D_MODEL), leaf(D_MODEL), leaf(D_MODEL)
    hidden = leaf(POSITIONS, D_FF)
    scores = rng.random(SCORES).astype(np.float32)      # like exp(s − max s): the sums have no cancellation

    def same_layer_norm():
        np.testing.assert_allclose(fast_normalization.layer_norm(x, weight, bias).numpy(),
                                   F.layer_norm(x, weight, bias).numpy(), rtol=1e-4, atol=1e-5)

    def same_dropout(inputs):
        np.testing.assert_array_equal(F.dropout(inputs, P_DROP, generator=fast_dropout.FastGenerator(1)).numpy(),
                                      F.dropout(inputs, P_DROP, generator=Generator(1)).numpy())

    def same_rows():
        np.testing.assert_array_equal(fast_rows.row_max(scores), plain_rows.row_max(scores))
        np.testing.assert_allclose(fast_rows.row_sum(scores), plain_rows.row_sum(scores), rtol=1e-5)

    plain_gen, fast_gen = Generator(0), fast_dropout.FastGenerator(0)
    return {
        "layer_norm": (f"{POSITIONS}x{D_MODEL}", forward_backward(F.layer_norm, [x, weight, bias]),
                       forward_backward(fast_normalization.layer_norm, [x, weight, bias]), same_layer_norm),
        "dropout": (f"{POSITIONS}x{D_MODEL}", forward_backward(lambda t: F.dropout(t, P_DROP, generator=plain_gen), [x]),
                    forward_backward(lambda t: F.dropout(t, P_DROP, generator=fast_gen), [x]), lambda: same_dropout(x)),
        "dropout_ffn": (f"{POSITIONS}x{D_FF}",
                        forward_backward(lambda t: F.dropout(t, P_DROP, generator=plain_gen), [hidden]),
                        forward_backward(lambda t: F.dropout(t, P_DROP, generator=fast_gen), [hidden]),
                        lambda: same_dropout(hidden)),
        "row_max": ("x".join(map(str, SCORES)), lambda: plain_rows.row_max(scores), lambda: fast_rows.row_max(scores),
                    same_rows),
        "row_sum": ("x".join(map(str, SCORES)), lambda: plain_rows.row_sum(scores), lambda: fast_rows.row_sum(scores),
                    same_rows),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=15, help="timed blocks of each form (their median is kept)")
    parser.add_argument("--calls", type=int, default=20, help="calls per block")
    parser.add_argument("--results", default=str(Path(__file__).resolve().parent / "results" / "plain_vs_fast.json"),
                        help="JSON file for the figures the chapters quote (tools/quoted_numbers.py)")
    args = parser.parse_args()
    load_before = load_average()
    print(f"plain form against its fast twin, float32 on the CPU, median of {args.blocks} blocks of {args.calls} calls")
    print(f"{'pair':12s} {'shape':>14s} {'plain µs':>10s} {'fast µs':>10s} {'ratio':>7s}")
    measured = {}
    for name, (shape, plain, fast, same) in pairs(np.random.default_rng(0)).items():
        same()                                                 # the two must agree before their speed means anything
        measured[name] = {"shape": shape, **compare(plain, fast, args.blocks, args.calls)}
        row = measured[name]
        print(f"{name:12s} {shape:>14s} {row['plain_us']:10.1f} {row['fast_us']:10.1f} {row['ratio']:6.2f}x")
    record = {"command": "python benchmarks/speed/plain_vs_fast.py", "blocks": args.blocks, "calls": args.calls,
              "machine": machine_record(), "load_average_before": load_before, "load_average_after": load_average(),
              "blas_threads": {name: os.environ.get(name) for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")},
              "pairs": measured}
    Path(args.results).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.results}")


if __name__ == "__main__":
    main()
