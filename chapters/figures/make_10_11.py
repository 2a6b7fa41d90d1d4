"""Draw the figures of chapters 10 and 11.

    python chapters/figures/make_10_11.py [RUN_DIR] [HEADS_JSON] [OUT_DIR]

10-noam-schedule.png: eq. 3 for several d_model and warm-ups (needs nothing).
11-dev-curve.png: the dev BLEU history of the run heads.json records (benchmarks/quality/heads.py).
11-attention.png: that run's cross-attention for one sentence; RUN_DIR (default runs/enja) must hold
that run's final weights (benchmarks/runs.py checks their digest).
"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
sys.path.insert(0, str(HERE.parents[1] / "tools"))
sys.path.insert(0, str(HERE.parents[1] / "benchmarks"))     # runs.py

from quoted_numbers import load_results  # noqa: E402

from minitransformer.optim import SGD, NoamSchedule  # noqa: E402
from minitransformer.plot import attention_heatmap, learning_rate_curves, loss_curves  # noqa: E402
from minitransformer.tensor import Tensor  # noqa: E402


def noam_figure(out: Path = HERE) -> None:
    curves = []
    for d_model, warmup in [(512, 4000), (512, 8000), (256, 4000), (1024, 4000)]:
        schedule = NoamSchedule(SGD([Tensor([0.0], requires_grad=True)]), d_model, warmup)
        curves.append((f"d_model={d_model}, warmup={warmup}", [schedule.step() for _ in range(20000)]))
    fig = learning_rate_curves(curves, title="eq. (3): linear warm-up, then 1/sqrt(step)")
    fig.savefig(out / "10-noam-schedule.png", dpi=80)


def dev_curve_figure(record: dict, out: Path = HERE) -> None:
    history = record["history"]
    steps = [h["step"] for h in history]
    fig = loss_curves([("dev BLEU (greedy, 200 sentences)", steps, [h["dev_bleu_greedy"] for h in history])],
                      title="dev BLEU after each epoch", ylabel="BLEU")
    fig.savefig(out / "11-dev-curve.png", dpi=80)


def run_figures(run_dir: Path, heads: Path | None = None, out: Path = HERE) -> None:
    import json  # noqa: PLC0415

    from minitransformer.translator import Translator  # noqa: PLC0415
    from runs import require_run  # noqa: PLC0415

    record = (json.loads(heads.read_text(encoding="utf-8")) if heads else load_results("heads.json"))["run"]
    require_run(run_dir, record, heads.name if heads else "heads.json")
    dev_curve_figure(record, out)
    translator = Translator.load(run_dir)
    source = "the teacher that was reading the dictionary did not see the small cat ."
    weights, src, tgt, src_ids, tgt_ids = translator.cross_attention(source)
    fig = attention_heatmap(weights, src, tgt, title=source, src_ids=src_ids, tgt_ids=tgt_ids)
    fig.savefig(out / "11-attention.png", dpi=110)      # kanji need the pixels: at 80 dpi they blur


if __name__ == "__main__":
    run = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parents[1] / "runs" / "enja"
    heads_json = Path(sys.argv[2]) if len(sys.argv) > 2 else None
    out_dir = Path(sys.argv[3]) if len(sys.argv) > 3 else HERE
    noam_figure(out_dir)
    if (run / "results.json").is_file():
        run_figures(run, heads_json, out_dir)
    else:
        print(f"{run}: no finished run, skipped the chapter 11 figures")
