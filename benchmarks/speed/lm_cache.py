"""The KV cache's speed-up when a language model generates text (chapter 15).

A decoder-only model of nanoGPT's CPU width (4 layers, 4 heads, d_model 128, d_ff 512, 65 characters)
with a context long enough for the whole text (random weights: the speed does not depend on them)
generates 256 and 1,024 tokens greedily after a 16-token prompt, ``generate(..., use_cache=True)``
against ``use_cache=False``:

* with the cache, step t runs every layer on ONE position and attends to t cached keys: O(t) work;
* without, step t runs every layer on all t positions again: O(t²) in attention, O(t) in the rest,
  so the whole text costs O(n²) (O(n³) attention) against the cache's O(n²) attention.

Both must produce the same tokens; the script checks it. ``--rounds`` rounds, medians reported.

    python benchmarks/speed/lm_cache.py                      # 256 and 1,024 tokens, 3 rounds
    python benchmarks/speed/lm_cache.py --quick              # 16 and 64 tokens, 1 round (a smoke run)

Writes benchmarks/speed/results/lm_cache.json (or --results) with the machine it ran on.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # benchmarks/: common.py

from common import machine_record, write_results  # noqa: E402

PROMPT = 16
VOCAB = 65


def time_generation(model, lengths: list[int], rounds: int) -> dict:
    from minitransformer.generate import generate

    prompt = list(range(PROMPT))
    record = {}
    for length in lengths:
        seconds = {True: [], False: []}
        tokens = {}
        for _ in range(rounds):
            for cached in (True, False):
                start = time.perf_counter()
                tokens[cached] = generate(model, prompt, length, greedy=True, use_cache=cached)
                seconds[cached].append(time.perf_counter() - start)
        if tokens[True] != tokens[False]:
            raise RuntimeError(f"{length} tokens: the cached and uncached texts differ")
        cache, plain = statistics.median(seconds[True]), statistics.median(seconds[False])
        record[str(length)] = {"cache_seconds": round(cache, 4), "no_cache_seconds": round(plain, 4),
                               "speedup": round(plain / cache, 2), "same_tokens": True}
        print(f"{length:>6} tokens: cache {cache:.2f} s, no cache {plain:.2f} s, speed-up {plain / cache:.1f}×")
    return record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="16 and 64 tokens, one round")
    parser.add_argument("--results", default=None,
                        help="JSON file (default benchmarks/speed/results/lm_cache.json)")
    args = parser.parse_args()
    import minitransformer.nn as nn

    lengths = [16, 64] if args.quick else [256, 1024]
    rounds = 1 if args.quick else args.rounds
    config = nn.LanguageModelConfig(vocab_size=VOCAB, context=PROMPT + max(lengths))
    model = nn.LanguageModel(config)
    record = {"model": {"n_layers": config.n_layers, "n_heads": config.n_heads, "d_model": config.d_model,
                        "d_ff": config.d_ff, "vocab_size": VOCAB, "prompt": PROMPT},
              "quick": args.quick, "rounds": rounds, "machine": machine_record(),
              "tokens": time_generation(model, lengths, rounds)}
    write_results(record, args.results, Path(__file__).parent / "results" / "lm_cache.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
