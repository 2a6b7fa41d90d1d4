"""Flash attention against plain attention (scaled_dot_product_attention) on CuPy at long lengths.

For each length T (self-attention, causal, B = 1, h = 8, d_k = 64, float32) and each
implementation: the median time of forward + backward over ``--repeats`` runs (each
followed by a device synchronisation; one untimed warm-up run compiles the kernels),
and the device memory the step added: CuPy's pool is emptied of free blocks before
the run, so what it holds after the run beyond the live inputs is the step's peak.

Plain attention builds the (B, h, T, T) scores and keeps the weights for backward:
O(T²) memory. Flash attention (chapter 13) walks tiles of queries × keys with an
online softmax and recomputes the weights in backward: O(T·d + block²) memory, but
one Python loop iteration, a few kernel launches each, per tile.

    python benchmarks/speed/gpu_attention.py                       # lengths 1024, 4096, 16384 on CuPy
    python benchmarks/speed/gpu_attention.py --device cpu --lengths 128,256 --repeats 1   # a dry run of the script
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import minitransformer as mt  # noqa: E402
import minitransformer.functional as F  # noqa: E402
from minitransformer import backend  # noqa: E402
from minitransformer.functional.masks import causal_mask  # noqa: E402

HEADS, D_K = 8, 64


def device_tools(device: str):
    """(synchronise, bytes held by the memory pool, drop the pool's free blocks) for ``device``."""
    if device == "cpu":
        return (lambda: None), (lambda: 0), (lambda: None)
    import cupy  # noqa: PLC0415

    pool = cupy.get_default_memory_pool()
    return cupy.cuda.Device().synchronize, pool.total_bytes, pool.free_all_blocks


def implementations(length: int, device: str, block_sizes: list[int]) -> dict:
    plain = {"plain (SDPA)": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, causal_mask(length, device))[0]}
    if not hasattr(F, "flash_attention"):
        return plain
    flash = {f"flash, block {b}": (lambda b: lambda q, k, v: F.flash_attention(q, k, v, causal=True, block_size=b))(b)
             for b in block_sizes}
    return {**plain, **flash}


def measure(length: int, device: str, repeats: int, block_sizes: list[int]) -> list[dict]:
    synchronize, pool_bytes, free_blocks = device_tools(device)
    xp = backend.xp_for(device)
    draw = xp.random.default_rng(0)
    rows = []
    for name, attend in implementations(length, device, block_sizes).items():
        inputs = [mt.Tensor(draw.standard_normal((1, HEADS, length, D_K), dtype=xp.float32), requires_grad=True)
                  for _ in range(3)]
        upstream = mt.Tensor(xp.ones((1, HEADS, length, D_K), dtype=xp.float32))

        def step():
            for t in inputs:
                t.grad = None
            (attend(*inputs) * upstream).sum().backward()
            synchronize()

        try:
            step()                                  # warm-up: kernel compilation, pool growth
            free_blocks()
            held_before = pool_bytes()
            times = []
            for _ in range(repeats):
                start = time.perf_counter()
                step()
                times.append(time.perf_counter() - start)
            added = (pool_bytes() - held_before) / 2**20
            rows.append({"length": length, "attention": name, "ms": statistics.median(times) * 1e3,
                         "device_mib": added})
        except Exception as error:   # out of memory at a long length is a result, not a crash
            rows.append({"length": length, "attention": name, "error": f"{type(error).__name__}: {error}"[:200]})
        finally:
            del inputs
            free_blocks()
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--lengths", default="1024,4096,16384")
    parser.add_argument("--blocks", default="64,256", help="flash attention tile sizes")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not hasattr(F, "flash_attention"):
        print("minitransformer.functional has no flash_attention (chapter 13): timing plain attention only")
    rows = [row for length in map(int, args.lengths.split(","))
            for row in measure(length, args.device, args.repeats, [int(b) for b in args.blocks.split(",")])]
    print(f"\n| T | attention | fwd + bwd ms | device memory added (MiB) |\n|---|---|---|---|")
    for r in rows:
        cells = f"{r['ms']:.1f} | {r['device_mib']:.0f}" if "ms" in r else f"{r['error']} | —"
        print(f"| {r['length']:,} | {r['attention']} | {cells} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
