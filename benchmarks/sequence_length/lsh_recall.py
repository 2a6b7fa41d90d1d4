"""How often LSH puts a query's best keys in its own bucket, against the number of hashing rounds (chapter 13).

    python benchmarks/sequence_length/lsh_recall.py          # a few seconds; writes benchmarks/sequence_length/results/lsh_recall.json

Reformer (Kitaev et al., 2020) attends only within a bucket, so what it loses is the share of the keys
that matter which land in another bucket. For seeded Gaussian queries and unit-length keys (shared-QK
keys are unit length; the best key by q·k is then the one at the smallest angle), ``F.bucket_recall``
counts the queries whose top-1 (and top-8) keys share a bucket with them in at least one of r rounds,
for r = 1, 2, 4, 8 and 16 and 8 or 32 buckets, and the chance level 1 − (1 − 1/b)^r of a random bucket.
Nothing is timed: the counts follow from the seed.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
RESULTS = Path(__file__).resolve().parent / "results" / "lsh_recall.json"

N_QUERIES, N_KEYS, D, SEED = 512, 1024, 64, 0
HASHES, BUCKETS, TOPS = (1, 2, 4, 8, 16), (8, 32), (1, 8)


def measure() -> dict:
    import minitransformer.functional as F  # noqa: PLC0415

    data = np.random.default_rng(SEED)
    queries, keys = data.standard_normal((N_QUERIES, D)), data.standard_normal((N_KEYS, D))
    keys /= np.linalg.norm(keys, axis=-1, keepdims=True)
    rows = [{"buckets": b, "hashes": r, "top": top, "recall": round(F.bucket_recall(queries, keys, b, r, top, SEED), 4),
             "chance": round(1 - (1 - 1 / b) ** r, 4)} for b in BUCKETS for top in TOPS for r in HASHES]
    return {"command": "python benchmarks/sequence_length/lsh_recall.py", "queries": N_QUERIES, "keys": N_KEYS, "d": D,
            "seed": SEED, "rows": rows,
            "by": {f"b{row['buckets']}_top{row['top']}_r{row['hashes']}": row["recall"] for row in rows}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    results = measure()
    tmp = args.results.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    tmp.replace(args.results)
    for row in results["rows"]:
        print(f"{row['buckets']:>3} buckets, top {row['top']}, {row['hashes']:>2} rounds: recall {row['recall']:.3f} "
              f"(chance {row['chance']:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
