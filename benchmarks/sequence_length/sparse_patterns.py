"""The sparse patterns of chapter 13 drawn and counted: Sparse Transformer's strided and fixed patterns,
Longformer's dilated window with global tokens, BigBird's window, global and random blocks.

    python benchmarks/sequence_length/sparse_patterns.py     # a few seconds; writes benchmarks/sequence_length/results/sparse_patterns.json
                                             # and chapters/figures/13-sparse-patterns.png (and its ja/ twin)

Each pattern is built by its function in minitransformer/functional/sparse_patterns.py at n = 64 and
counted: the (query, key) pairs it allows, against the n(n + 1)/2 of a causal mask or the n² of a full one,
and the tiles of 8 × 8 that flash_attention computes for it (``covering_layout``), out of 64. Nothing is
timed: the counts follow from the definitions (and BigBird's seed).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
RESULTS = Path(__file__).resolve().parent / "results" / "sparse_patterns.json"
FIGURE = ROOT / "chapters" / "figures" / "13-sparse-patterns.png"
N, BLOCK, STRIDE, SUMMARY, WINDOW, DILATION, GLOBALS, RANDOM, SEED = 64, 8, 8, 2, 3, 2, (0, 32), 1, 0


def patterns() -> dict:
    """name -> (title, causal, (n, n) mask)."""
    import minitransformer.functional as F  # noqa: PLC0415

    return {
        "strided": (f"strided (l = {STRIDE})", True, np.logical_or(*F.strided_pattern(N, STRIDE, device="cpu"))),
        "fixed": (f"fixed (l = {STRIDE}, c = {SUMMARY})", True,
                  np.logical_or(*F.fixed_pattern(N, STRIDE, SUMMARY, device="cpu"))),
        "longformer": (f"Longformer (w = {WINDOW}, d = {DILATION}, {len(GLOBALS)} global)", False,
                       F.longformer_pattern(N, WINDOW, DILATION, GLOBALS, device="cpu")),
        "bigbird": (f"BigBird (b = {BLOCK}, r = {RANDOM}, g = 1)", False,
                    F.expand_layout(F.bigbird_layout(N // BLOCK, RANDOM, 1, SEED), BLOCK, N, device="cpu")),
    }


def measure() -> dict:
    import minitransformer.functional as F  # noqa: PLC0415

    counts = {}
    for name, (title, causal, mask) in patterns().items():
        whole = N * (N + 1) // 2 if causal else N * N
        counts[name] = {"title": title, "causal": causal, "pairs": int(mask.sum()), "of_pairs": whole,
                        "share": round(float(mask.sum()) / whole, 4),
                        "tiles": int(F.covering_layout(mask, BLOCK).sum()), "of_tiles": (N // BLOCK) ** 2}
    return {"command": "python benchmarks/sequence_length/sparse_patterns.py", "n": N, "block": BLOCK, "patterns": counts}


def draw(results: dict, path: Path = FIGURE) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from minitransformer.figure_language import saving_chapter_figures  # noqa: PLC0415

    fig, axes = plt.subplots(1, 4, figsize=(12, 3.4))
    for ax, (name, (title, _, mask)) in zip(axes, patterns().items()):
        count = results["patterns"][name]
        ax.imshow(mask, cmap="Blues", vmin=0, vmax=1.3)
        for edge in range(BLOCK, N, BLOCK):                  # the flash tiles
            ax.axhline(edge - 0.5, color="lightgray", linewidth=0.4)
            ax.axvline(edge - 0.5, color="lightgray", linewidth=0.4)
        ax.set_title(f"{title}\n{count['pairs']} pairs, {count['tiles']} of {count['of_tiles']} tiles", fontsize=9)
        ax.set_xlabel("key j")
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0].set_ylabel("query i")
    fig.tight_layout()
    fig.savefig(path, dpi=90, bbox_inches="tight")
    if path == FIGURE:                                      # the Japanese edition's copy, chapters/figures/ja/
        with saving_chapter_figures("ja"):
            fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--figure", type=Path, default=FIGURE)
    args = parser.parse_args(argv)
    results = measure()
    tmp = args.results.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    tmp.replace(args.results)
    draw(results, args.figure)
    for name, count in results["patterns"].items():
        print(f"{name}: {count['pairs']} of {count['of_pairs']} pairs, {count['tiles']} of {count['of_tiles']} tiles")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
