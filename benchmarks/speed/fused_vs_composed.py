"""Fused Functions against the same math composed from primitive ops: forward + backward time.

Sizes are those of a small Transformer batch: 1,536 token positions (e.g. 32
sentences × 48 tokens), d_model = 128 for layer norm, a 4,000-token
vocabulary for softmax and cross-entropy. float32, median of repeats.

    python benchmarks/speed/fused_vs_composed.py [--repeats 20] [--device cpu|cuda]

Prints one line per function: composed ms, fused ms, and composed/fused (> 1 means the
fused version is faster).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))   # run from a checkout without installing

import minitransformer as mt
import minitransformer.functional as F
from minitransformer import backend
from minitransformer.fast import normalization as fast_normalization

ROWS, D_MODEL, VOCAB, PAD, SMOOTHING = 1536, 128, 4000, 0, 0.1


# -- the same math from primitive ops (the engine's Exp, Sum, Div, Sub, ...) ----------------------

def composed_softmax(x):
    e = (x - x.max(axis=-1, keepdims=True).detach()).exp()
    return e / e.sum(axis=-1, keepdims=True)


def composed_log_softmax(x):
    shifted = x - x.max(axis=-1, keepdims=True).detach()
    return shifted - shifted.exp().sum(axis=-1, keepdims=True).log()


def composed_cross_entropy(logits, targets, smoothing=SMOOTHING, pad=PAD):
    xp = backend.xp_of(logits.data)
    n, vocab = logits.shape
    valid = targets != pad
    q = xp.full((n, vocab), smoothing / (vocab - 1), dtype=logits.dtype)   # the smoothed target distribution
    q[:, pad] = 0
    q[xp.arange(n), targets] += 1 - smoothing
    q *= valid[:, None]
    return -(mt.Tensor(q) * composed_log_softmax(logits)).sum() / int(valid.sum())


def composed_layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    variance = (centered * centered).mean(axis=-1, keepdims=True)
    return centered / (variance + eps).sqrt() * weight + bias


def time_forward_backward(fn, inputs, repeats: int, sync) -> float:
    """Median milliseconds of fn(*inputs) followed by backward with a fixed upstream gradient."""
    out = fn(*inputs)
    upstream = backend.xp_of(out.data).ones_like(out.data)
    times = []
    for _ in range(repeats + 2):
        for t in inputs:
            if isinstance(t, mt.Tensor):
                t.grad = None
        sync()
        start = time.perf_counter()
        fn(*inputs).backward(upstream)
        sync()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times[2:])   # the first two warm caches and allocators


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--results", default=str(Path(__file__).resolve().parent / "results" / "fused_vs_composed.json"),
                        help="JSON file for the figures the chapters quote (tools/quoted_numbers.py)")
    args = parser.parse_args()
    xp = backend.xp_for(args.device)
    sync = (lambda: xp.cuda.Device().synchronize()) if args.device != "cpu" else (lambda: None)
    rng = np.random.default_rng(0)

    def leaf(shape, scale=1.0):
        return mt.Tensor(xp.asarray((scale * rng.standard_normal(shape)).astype(np.float32)), requires_grad=True)

    scores = leaf((ROWS, VOCAB), 3.0)
    targets = xp.asarray(rng.integers(0, VOCAB, ROWS))
    targets[::10] = PAD                                       # some padding positions
    x, weight, bias = leaf((ROWS, D_MODEL)), leaf((D_MODEL,)), leaf((D_MODEL,))

    cases = [
        ("softmax", f"{ROWS}x{VOCAB}", composed_softmax, lambda s: F.softmax(s), [scores]),
        ("log_softmax", f"{ROWS}x{VOCAB}", composed_log_softmax, lambda s: F.log_softmax(s), [scores]),
        ("cross_entropy (ls=0.1, pad)", f"{ROWS}x{VOCAB}", lambda s: composed_cross_entropy(s, targets),
         lambda s: F.cross_entropy(s, targets, SMOOTHING, PAD), [scores]),
        # the layer norm the models run: fast/normalization.py's (plain_vs_fast.py sets it against F.layer_norm)
        ("layer_norm", f"{ROWS}x{D_MODEL}", composed_layer_norm, fast_normalization.layer_norm, [x, weight, bias]),
    ]
    print(f"forward + backward, float32, device={args.device}, median of {args.repeats}")
    print(f"{'function':30s} {'shape':>10s} {'composed ms':>12s} {'fused ms':>10s} {'ratio':>7s}")
    functions = {}
    for name, shape, composed, fused, inputs in cases:
        # the two must agree before their speed means anything
        np.testing.assert_allclose(backend.asnumpy(fused(*inputs).data), backend.asnumpy(composed(*inputs).data),
                                   rtol=2e-3, atol=1e-5)
        t_composed = time_forward_backward(composed, inputs, args.repeats, sync)
        t_fused = time_forward_backward(fused, inputs, args.repeats, sync)
        print(f"{name:30s} {shape:>10s} {t_composed:12.2f} {t_fused:10.2f} {t_composed / t_fused:6.2f}x")
        functions[name.split(" ")[0]] = {"shape": shape, "composed_ms": round(t_composed, 2),
                                         "fused_ms": round(t_fused, 2), "ratio": round(t_composed / t_fused, 2)}
    Path(args.results).write_text(json.dumps({"command": "python benchmarks/speed/fused_vs_composed.py", "device": args.device,
                                              "repeats": args.repeats, "functions": functions}, indent=1) + "\n")
    print(f"wrote {args.results}")


if __name__ == "__main__":
    main()
