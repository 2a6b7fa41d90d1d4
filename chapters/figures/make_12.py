"""Draw the figures of chapter 12.

    python chapters/figures/make_12.py [RUN_DIR] [HEADS_JSON] [OUT_DIR]

12-cross-heads.png, 12-encoder-heads.png: every head of the run heads.json records (RUN_DIR, default
runs/enja, must hold its final weights: benchmarks/runs.py checks their digest) for one sentence, drawn
by `python -m minitransformer attention`'s code.
12-alignment-over-training.png: alignment accuracy of each cross-attention head over training, from
benchmarks/quality/heads.py's results (heads.json, or HEADS_JSON).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from quoted_numbers import results_path  # noqa: E402
from runs import require_run  # noqa: E402

from minitransformer.attention_maps import attention_maps, draw_attention_maps  # noqa: E402
from minitransformer.plot import loss_curves  # noqa: E402
from minitransformer.translator import Translator  # noqa: E402

SENTENCE = "the dog that the boy found ate the cake in the park ."


def main() -> None:
    run = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "runs" / "enja"
    heads = Path(sys.argv[2]) if len(sys.argv) > 2 else results_path("heads.json")
    out = Path(sys.argv[3]) if len(sys.argv) > 3 else HERE
    results = json.loads(heads.read_text(encoding="utf-8"))
    require_run(run, results["run"], heads.name)
    maps = attention_maps(Translator.load(run), SENTENCE)
    print("output:", " ".join(maps.output))
    draw_attention_maps(maps, str(out / "12-cross-heads.png"), kinds=["cross"], sentence=SENTENCE)
    draw_attention_maps(maps, str(out / "12-encoder-heads.png"), kinds=["encoder"], sentence=SENTENCE)
    curve = results.get("history", {}).get("curve") or []
    if not curve:
        print(f"{heads}: no history of checkpoints, so no alignment-over-training figure")
        return
    steps = [point["step"] for point in curve]
    lines = []
    for i, head in enumerate(curve[0]["heads"]):
        lines.append((f"layer {head['layer']} head {head['head']}", steps, [p["heads"][i]["accuracy"] for p in curve]))
    # the score of the heads' averaged matrix, which is not the mean of the heads' scores
    lines.append((f"the {len(curve[0]['heads'])} heads' averaged matrix", steps, [p["all_heads_average"] for p in curve]))
    fig = loss_curves(lines, title=f"alignment accuracy over training ({results['history']['sentences']} test pairs)",
                      ylabel="alignment accuracy")
    fig.savefig(out / "12-alignment-over-training.png", dpi=80)


if __name__ == "__main__":
    main()
