"""Table 1 of the paper, all four rows and all three columns, measured with the engine (chapter 13).

| layer                         | work per layer | sequential operations | maximum path length |
| self-attention                | O(n²·d)        | O(1)                  | O(1)                |
| recurrent (an LSTM here)      | O(n·d²)        | O(n)                  | O(n)                |
| convolutional (kernel k)      | O(k·n·d²)      | O(1)                  | O(log_k n) dilated, O(n/k) plain |
| self-attention, restricted r  | O(r·n·d)       | O(1)                  | O(n/r)              |

(r is the paper's neighbourhood size; our restricted layer sees w keys on each side, r = 2w + 1.)

* work: the time of one forward + backward against n;
* sequential operations: the depth of the engine's graph (the longest chain of
  Functions from the input to the output; each link must wait for the one before),
  with the LSTM's recurrence unrolled into one chain of Functions per step;
* maximum path length: how many stacked layers it takes before the *last* output
  depends on the *first* input, tested with a gradient (exactly zero until then). The
  recurrent layer connects them in one layer, but through n − 1 recurrent steps: its
  path is as deep as its graph, which grows with n.

    python benchmarks/sequence_length/table1.py            # writes benchmarks/sequence_length/results/table1.json
    python benchmarks/sequence_length/table1.py --quick    # small n, writes nothing
    python benchmarks/sequence_length/table1.py --render   # chapter 13's Table 1 and figures/13-table1.png from the JSON
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import minitransformer as mt  # noqa: E402
import minitransformer.functional as F  # noqa: E402
import minitransformer.nn as nn  # noqa: E402
from minitransformer.functional.multi_head import merge_heads, split_heads  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "table1.json"
FIGURE = ROOT / "chapters" / "figures" / "13-table1.png"
sys.path.insert(0, str(ROOT / "benchmarks"))


class Recurrent(nn.Module):
    """One LSTM layer of width d (nn.LSTM, the layer of chapter 6's translator): h_t from x_t and h_{t−1}.

    nn.LSTM runs its n steps inside one Function (functional/lstm.py: the loop and its backward written
    out), so the engine's graph shows one node where the recurrence takes n steps one after another.
    ``unrolled`` runs the same cell, with the same weights, one position at a time: one chain of nodes per
    step, the graph whose depth counts the sequential operations. Both give the same outputs.
    """

    def __init__(self, d: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(d, d)

    def forward(self, x):
        return self.lstm(x)[0]                                  # (B, n, d): the h_t of every step

    def unrolled(self, x):
        cell, state, states = self.lstm.cells[0], None, []
        for t in range(x.shape[1]):
            state = cell(x[:, t], state)                        # step t needs step t − 1
            states.append(state[0])
        return mt.stack(states, axis=1)                         # (B, n, d)


class Conv1d(nn.Module):
    """y_t = Σ_{o=−1,0,1} x_{t+o} W_o + b, kernel 3, zero padding: k shifted matrix products."""

    def __init__(self, d: int, kernel: int = 3) -> None:
        super().__init__()
        if kernel % 2 != 1:
            raise ValueError(f"Conv1d: use an odd kernel size so the output keeps the length, got {kernel}")
        self.kernel = kernel
        self.taps = nn.ModuleList([nn.Linear(d, d, bias=(o == 0)) for o in range(kernel)])

    def forward(self, x):
        batch, length, width = x.shape
        half = self.kernel // 2
        zeros = mt.Tensor(np.zeros((batch, half, width), dtype=x.dtype))
        padded = mt.concatenate([zeros, x, zeros], axis=1)                      # (B, n + k − 1, d)
        out = self.taps[0](padded[:, 0:length])
        for o in range(1, self.kernel):
            out = out + self.taps[o](padded[:, o:o + length])                   # x_{t + o − half} W_o
        return out                                                              # (B, n, d)


class RestrictedSelfAttention(nn.Module):
    """Multi-head self-attention where position i sees only i − r … i + r (Table 1's last row)."""

    def __init__(self, d: int, heads: int, r: int) -> None:
        super().__init__()
        self.heads, self.r = heads, r
        self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        q, k, v = (split_heads(w(x), self.heads) for w in (self.w_q, self.w_k, self.w_v))   # (B, h, n, d_k)
        return self.w_o(merge_heads(F.local_attention(q, k, v, self.r)))


def make_layers(d: int, heads: int, r: int) -> dict:
    return {"self-attention": nn.MultiHeadAttention(d, heads), "recurrent": Recurrent(d),
            "convolutional, k = 3": Conv1d(d, 3), f"restricted self-attention, r = {r}":
            RestrictedSelfAttention(d, heads, r)}


def graph_depth(output) -> int:
    """The longest chain of Functions from any leaf to ``output``: the sequential operations."""
    depth, stack = {}, [(output, False)]
    while stack:
        t, inputs_done = stack.pop()
        if id(t) in depth:
            continue
        inputs = t.creator.inputs if t.creator is not None else ()
        if inputs_done or not inputs:
            depth[id(t)] = 1 + max((depth[id(i)] for i in inputs), default=-1)   # a leaf has depth 0
        else:
            stack.append((t, True))
            stack.extend((i, False) for i in inputs if id(i) not in depth)
    return depth[id(output)]


def last_output_sees_first_input(layer, n: int, d: int, n_layers: int, rng) -> bool:
    """True when d(out[:, −1]) / d(x[:, 0]) ≠ 0 after ``n_layers`` applications of ``layer``."""
    x = mt.Tensor(rng.standard_normal((1, n, d)), requires_grad=True)
    out = x
    for _ in range(n_layers):
        out = layer(out)
    out[:, n - 1].sum().backward()
    return bool(np.abs(x.grad[:, 0]).max() > 0)


def path_length(layer, n: int, d: int, rng, most: int = 64) -> int | None:
    """The fewest stacked layers after which the last output depends on the first input."""
    for n_layers in range(1, most + 1):
        if last_output_sees_first_input(layer, n, d, n_layers, rng):
            return n_layers
    return None


def time_layer(layer, x, repeats: int) -> float:
    def step():
        layer.zero_grad()
        layer(x).sum().backward()

    step()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - start)
    return best


def measure(lengths, d: int = 64, heads: int = 4, r: int = 8, repeats: int = 3, path_n: int = 32,
            depth_lengths=(32, 64), seed: int = 0) -> dict:
    """All three columns for every row; float32 for time, float64 for the gradient test."""
    rng = np.random.default_rng(seed)
    layers = make_layers(d, heads, r)
    rows = {}
    for name, layer in layers.items():
        times = []
        for n in lengths:
            x = mt.Tensor(rng.standard_normal((1, n, d)).astype(np.float32), requires_grad=True)
            times.append(time_layer(layer, x, repeats))
        graph_of = getattr(layer, "unrolled", layer)            # a recurrence as its chain of steps
        depths = [graph_depth(graph_of(mt.Tensor(rng.standard_normal((1, n, d))))) for n in depth_lengths]
        layer.to(np.float64)
        rows[name] = {"seconds": times, "graph_depth": depths, "layers_to_connect": path_length(layer, path_n, d, rng)}
        layer.to(np.float32)
    return {"lengths": list(lengths), "d": d, "heads": heads, "r": r, "path_n": path_n,
            "depth_lengths": list(depth_lengths), "rows": rows}


JA_LABELS = {"self-attention": "セルフアテンション", "recurrent": "再帰", "convolutional, k = 3": "畳み込み、k = 3"}


def label(name: str, results: dict, language: str = "en") -> str:
    """A row's name for the reader. The restricted row's ``r`` is recorded as local_attention's window, a
    reach of w keys on each side: a neighbourhood of size 2w + 1 in the paper's terms (§4)."""
    if name.startswith("restricted self-attention"):
        w = results["r"]
        if language == "ja":
            return f"制限付きセルフアテンション、片側 w = {w}（r = {2 * w + 1}）"
        return f"restricted self-attention, w = {w} a side (r = {2 * w + 1})"
    return JA_LABELS.get(name, name) if language == "ja" else name


def render_markdown(results: dict, language: str = "en") -> str:
    """Chapter 13's Table 1, from the results file only (``language`` "ja": the Japanese chapter's)."""
    rows, lengths = results["rows"], results["lengths"]
    shown = [n for n in lengths if n in (16, 64, 256, 1024, 2048)]
    ja = language == "ja"
    depth_n = f"{results['depth_lengths'][0]} / {results['depth_lengths'][1]}"
    head = ("| 層 | " if ja else "| layer | ") + " | ".join(f"n = {n:,}" for n in shown) + (
        f" | グラフの深さ、n = {depth_n} | 最後の出力が最初の入力を見るまでの層数（n = {results['path_n']}） |" if ja else
        f" | graph depth, n = {depth_n} | layers until the last output sees the first input (n = {results['path_n']}) |")
    intro = (f"1 つの層の順伝播 + 逆伝播の時間（ms。d = {results['d']}、float32）と、残りの 2 つの列は次のとおりです。" if ja
             else f"Forward + backward of one layer (ms), d = {results['d']}, float32; then the other two columns:")
    lines = [intro, "", head, "|---" * (len(shown) + 3) + "|"]
    for name, row in rows.items():
        times = " | ".join(f"{1e3 * row['seconds'][lengths.index(n)]:.3g}" for n in shown)
        depth = " / ".join(str(x) for x in row["graph_depth"])
        lines.append(f"| {label(name, results, language)} | {times} | {depth} | {row['layers_to_connect']} |")
    if ja:
        lines += ["", f"測定：{results['date']}、{results['cpus']} CPU コア。1 分間のロードアベレージは測定前 "
                      f"{results['load_before']}、測定後 {results['load_after']} でした（コアは他のジョブと共有しています）。"
                      f"コマンド：`{results['command']}`。"]
    else:
        lines += ["", f"Measured {results['date']} on {results['cpus']} CPU cores; 1-minute load average "
                      f"{results['load_before']} before and {results['load_after']} after (the cores are shared with "
                      f"other jobs). Command: `{results['command']}`."]
    return "\n".join(lines)


def draw(results: dict, path: Path = FIGURE, language: str = "en") -> None:
    """Time of one layer against n, every row, from the results file only; in another ``language`` (ja) the
    figure goes to chapters/figures/LANGUAGE/ with its labels translated."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for (name, row), marker in zip(results["rows"].items(), "osd^"):
        ax.loglog(results["lengths"], 1e3 * np.array(row["seconds"]), marker + "-", label=label(name, results))
    ax.set_xlabel("sequence length n")
    ax.set_ylabel("forward + backward, ms")
    ax.set_title(f"Table 1 measured, d = {results['d']}", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    from minitransformer.figure_language import save_chapter_figure  # noqa: PLC0415

    save_chapter_figure(fig, path, language, dpi=90, bbox_inches="tight")
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--render", action="store_true", help="fill chapter 13's Table 1 from the JSON")
    args = parser.parse_args()
    if args.render:
        from long_sequences import CHAPTER, fill_region

        results = json.loads(RESULTS.read_text())
        fill_region(CHAPTER, "benchmarks/sequence_length/results/table1.json", render_markdown(results))
        fill_region(CHAPTER.parent / "ja" / CHAPTER.name, "benchmarks/sequence_length/results/table1.json",
                    render_markdown(results, "ja"))             # the Japanese twin quotes the same table
        draw(results)
        draw(results, FIGURE, "ja")
        print(f"wrote Table 1 into {CHAPTER} and drew {FIGURE} (and its Japanese copy)")
        return 0
    lengths = [16, 64, 256] if args.quick else [16, 32, 64, 128, 256, 512, 1024, 2048]
    load = os.getloadavg()[0]
    results = measure(lengths, repeats=1 if args.quick else 3)
    results.update(command="python benchmarks/sequence_length/table1.py" + (" --quick" if args.quick else ""),
                   date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), cpus=os.cpu_count(),
                   load_before=round(load, 2), load_after=round(os.getloadavg()[0], 2))
    for name, row in results["rows"].items():
        times = " ".join(f"{1e3 * s:8.1f}" for s in row["seconds"])
        print(f"{name:<36} ms: {times}   depth {row['graph_depth']}   layers to connect {row['layers_to_connect']}")
    if not args.quick:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
