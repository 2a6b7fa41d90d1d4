"""Draw the timing figures of chapters 7 and 9 from the results files of the benchmarks that measured them.

    python chapters/figures/make_measured.py [OUT_DIR]

07-heads-cost.png: training time of the Table 3 runs at constant FLOPs against the number of heads,
row (A) of table3.json (benchmarks/quality/table3.py, chapter 12), three seeds each.
07-table1.png: left, the time of one self-attention layer and one LSTM layer against n, from table1.json
(benchmarks/sequence_length/table1.py, chapter 13); right, Table 1's work per layer, n²·d against n·d².
09-cache.png: decoding 64 sentences with and without the attention cache, greedy and beam 4, from
decode_2t.json (benchmarks/speed/decode.py, two threads), ours and PyTorch's.
11-small-parallel-enja.png: the learning curve of the small_parallel_enja recipe (greedy dev BLEU at each
epoch's end against minutes of training) and its final test BLEU, from small_parallel_enja_en-ja.json and, once
it has been run, small_parallel_enja_ja-en.json (benchmarks/quality/small_parallel_enja.py); beside them the
en→ja run without the cool-down, small_parallel_enja_en-ja_before-cooldown.json.

Nothing is timed here: a figure changes when its benchmark is run again.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from quoted_numbers import FigureError, load_results  # noqa: E402


def heads_cost(table3: dict):
    import matplotlib.pyplot as plt  # noqa: PLC0415

    rows = [r for r in table3["rows"] if r["row"] in ("base", "A")]
    heads = [r["changes"].get("n_heads", table3["base"]["n_heads"]) for r in rows]
    order = np.argsort(heads)
    seconds = [[run["train_seconds"] for run in rows[i]["runs"]] for i in order]
    h = [heads[i] for i in order]
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.errorbar(h, [np.mean(s) for s in seconds], yerr=[np.std(s, ddof=1) for s in seconds], fmt="o-", capsize=3)
    for x, s in zip(h, seconds):
        ax.plot([x] * len(s), s, ".", color="gray")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, max(max(s) for s in seconds) * 1.2)
    ax.set_xlabel("number of heads h  (d_k = d_model / h)")
    ax.set_ylabel("seconds")
    steps, d_model = table3["setting"]["steps"], table3["base"]["d_model"]
    ax.set_title(f"{steps} training steps, d_model={d_model}, same FLOPs for every h", fontsize=10)
    fig.tight_layout()
    return fig


def table1_figure(table1: dict):
    import matplotlib.pyplot as plt  # noqa: PLC0415

    lengths, d = table1["lengths"], table1["d"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    for name, label, marker in (("recurrent", "LSTM (engine)", "o-"), ("self-attention", "self-attention (engine)", "s-")):
        axes[0].loglog(lengths, 1e3 * np.array(table1["rows"][name]["seconds"]), marker, label=label)
    axes[0].set_xlabel("sequence length n")
    axes[0].set_ylabel("forward + backward, ms")
    axes[0].set_title(f"measured, d = {d}")
    axes[0].legend(fontsize=8)
    ns = np.array([8, 4096])
    axes[1].loglog(ns, ns * d * d, label="recurrent: n·d²")
    axes[1].loglog(ns, ns * ns * d, label="self-attention: n²·d")
    axes[1].axvline(d, color="gray", ls=":", lw=1)
    axes[1].text(d * 1.1, d ** 3 * 30, "n = d", color="gray")
    axes[1].set_xlabel("sequence length n")
    axes[1].set_title("Table 1: work per layer")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    return fig


def cache_figure(decode: dict):
    import matplotlib.pyplot as plt  # noqa: PLC0415

    measured = decode["default"]
    groups = [("greedy", "greedy"), ("beam4", "beam 4")]
    fig, ax = plt.subplots(figsize=(6, 3.2))
    width = 0.2
    bars = (("no_cache", "ours_s", "ours, no cache"), ("cache", "ours_s", "ours, with the cache"),
            ("no_cache", "torch_s", "PyTorch, no cache"), ("cache", "torch_s", "PyTorch, with the cache"))
    for offset, (cache, library, name) in zip((-1.5, -0.5, 0.5, 1.5), bars):
        values = [measured[f"{g}_{cache}"][library] for g, _ in groups]
        ax.bar(np.arange(len(groups)) + offset * width, values, width, label=name)
    ax.set_xticks(np.arange(len(groups)), [label for _, label in groups])
    ax.set_ylabel("seconds")
    ax.set_title(f"decoding 64 sentences to length 50, model {decode['config']}", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


ARROWS = {"en-ja": "en→ja", "ja-en": "ja→en"}
REPORTED_LSTM_BLEU = 37     # refiute/primitiv_practice: an attention LSTM on a GPU, greedy, self-reported


def learning_curve_figure(runs: dict, before: dict | None = None):
    """Greedy dev BLEU against minutes for each direction's run, and the final model's test BLEU (beam 4);
    with ``before``, the en→ja run of the recipe without the cool-down, and the span the cool-down took."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(6, 3.4))
    cooldown = (runs.get("en-ja", {}).get("recipe") or {}).get("cooldown")
    if cooldown:
        minutes = runs["en-ja"]["train_minutes"]
        ax.axvspan(minutes * (1 - cooldown), minutes, color="gray", alpha=0.12, lw=0, label="cool-down (--cooldown)")
    if before is not None:
        curve = before["learning_curve"]
        ax.plot([c["minutes"] for c in curve], [c["dev_bleu_greedy"] for c in curve], ":", color="gray",
                label="dev BLEU, greedy (en→ja), without the cool-down")
    for (direction, run), marker in zip(runs.items(), "os"):
        curve = run["learning_curve"]
        line, = ax.plot([c["minutes"] for c in curve], [c["dev_bleu_greedy"] for c in curve], marker + "-",
                        label=f"dev BLEU, greedy ({ARROWS[direction]})")
        ax.plot([run["train_minutes"]], [run["test_bleu"]], "*", markersize=12, color=line.get_color(),
                label=f"test BLEU, beam 4, final model ({ARROWS[direction]})")
    ax.axhline(REPORTED_LSTM_BLEU, color="gray", ls=":", lw=1)
    ax.text(1, REPORTED_LSTM_BLEU + 0.6, "about 37: an attention LSTM on a GPU, self-reported", color="gray", fontsize=8)
    ax.set_xlabel("minutes of training")
    ax.set_ylabel("BLEU")
    ax.set_ylim(0, REPORTED_LSTM_BLEU + 5)
    ax.set_title("small_parallel_enja, preset medium, 2 CPU cores", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def small_parallel_runs() -> dict:
    """The recipe's results files that exist: en→ja first, then ja→en."""
    runs = {}
    for direction in ARROWS:
        try:
            runs[direction] = load_results(f"small_parallel_enja_{direction}.json")
        except FigureError:                 # that direction has not been run
            continue
    return runs


def main() -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    heads_cost(load_results("table3.json")).savefig(out / "07-heads-cost.png", dpi=90, bbox_inches="tight")
    table1_figure(load_results("table1.json")).savefig(out / "07-table1.png", dpi=90, bbox_inches="tight")
    cache_figure(load_results("decode_2t.json")).savefig(out / "09-cache.png", dpi=90, bbox_inches="tight")
    runs = small_parallel_runs()
    if runs:
        try:
            before = load_results("small_parallel_enja_en-ja_before-cooldown.json")
        except FigureError:
            before = None
        learning_curve_figure(runs, before).savefig(out / "11-small-parallel-enja.png", dpi=90, bbox_inches="tight")


if __name__ == "__main__":
    main()
