"""Linformer's premise on our own model: how many singular values of a trained attention matrix hold its weight.

    python benchmarks/sequence_length/attention_rank.py --run runs/enja                 # writes benchmarks/sequence_length/results/attention_rank.json
    python benchmarks/sequence_length/attention_rank.py --run runs/enja --render        # chapters/figures/13-attention-rank.png

Wang et al. (2020, §3, Fig. 1) took the attention matrices P = softmax(QKᵀ/√d) of a trained model, computed
their singular values and plotted the normalised cumulative singular value, Σ_{i ≤ r} σ_i / Σ σ_i: a long
tail, most of the sum in the first few, so P is close to a matrix of low rank and k ≪ n summaries of the
keys could do. This script does the same with the encoder self-attention of a trained run, for every layer
and head, on the first ``--sentences`` test sentences (each an n × n matrix), and records two measures,
named apart because they differ:

* what Figure 1 plots, the cumulative singular values Σσ (``singular_rank``: the fewest σ that hold 90 % of
  Σσ; ``layer_curves[].singular``: the curve);
* the cumulative energy Σσ² (the Frobenius norm², the share of P a rank-r truncation keeps: ``energy_rank``,
  ``layer_curves[].energy``). Squares concentrate faster, so the energy reaches 90 % with fewer σ than the
  sum does: it flatters a low rank against the paper's measure.

Each curve is read against the index as a share of n (the figure) and averaged per layer.

Nothing is timed: the numbers follow from the run's weights, which the results file records (runs.py).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

RESULTS = Path(__file__).resolve().parent / "results" / "attention_rank.json"
FIGURE = ROOT / "chapters" / "figures" / "13-attention-rank.png"
GRID = np.linspace(0.05, 1.0, 20)          # index / n at which the cumulative energy is recorded


def energy_rank(matrix, fraction: float = 0.9) -> int:
    """The fewest singular values σ_1 ≥ σ_2 ≥ … whose squares hold ``fraction`` of Σ σ² (the Frobenius norm²)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"energy_rank: fraction must be in (0, 1], got {fraction}")
    energy = np.linalg.svd(np.asarray(matrix, dtype=np.float64), compute_uv=False) ** 2
    if energy.sum() == 0:
        return 0
    return int(np.searchsorted(np.cumsum(energy) / energy.sum(), fraction - 1e-12) + 1)


def singular_rank(matrix, fraction: float = 0.9) -> int:
    """The fewest singular values σ_1 ≥ σ_2 ≥ … that hold ``fraction`` of Σ σ (Linformer's Figure 1 measure)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"singular_rank: fraction must be in (0, 1], got {fraction}")
    sigma = np.linalg.svd(np.asarray(matrix, dtype=np.float64), compute_uv=False)
    if sigma.sum() == 0:
        return 0
    return int(np.searchsorted(np.cumsum(sigma) / sigma.sum(), fraction - 1e-12) + 1)


def cumulative_share(matrix, power: int = 2) -> np.ndarray:
    """Σ_{i ≤ r} σ_i^power / Σ σ^power read at r = ⌈g·n⌉ for each g of GRID (power 2: the energy; 1: Figure 1's)."""
    values = np.linalg.svd(np.asarray(matrix, dtype=np.float64), compute_uv=False) ** power
    share = np.cumsum(values) / values.sum()
    return share[np.maximum(np.ceil(GRID * len(share)).astype(int), 1) - 1]


def cumulative_energy(matrix) -> np.ndarray:
    """Σ_{i ≤ r} σ_i² / Σ σ² read at r = ⌈g·n⌉ for each g of GRID."""
    return cumulative_share(matrix, 2)


def spectra(translator, sentences, fraction: float = 0.9) -> dict:
    """Per (layer, head): both 90 % ranks and n of each sentence's encoder self-attention; per layer both mean curves."""
    from minitransformer.attention_maps import attention_maps  # noqa: PLC0415

    config = translator.model.config
    ranks = {(l, h): [] for l in range(config.n_layers) for h in range(config.n_heads)}
    sigma_ranks = {key: [] for key in ranks}
    curves = {l: [] for l in range(config.n_layers)}
    sigma_curves = {l: [] for l in range(config.n_layers)}
    lengths = []
    for sentence in sentences:
        encoder = attention_maps(translator, sentence, output_ids=[]).weights["encoder"]   # (layers, heads, n, n)
        lengths.append(int(encoder.shape[-1]))
        for (layer, head), found in ranks.items():
            found.append(energy_rank(encoder[layer, head], fraction))
            sigma_ranks[(layer, head)].append(singular_rank(encoder[layer, head], fraction))
            curves[layer].append(cumulative_share(encoder[layer, head], 2))
            sigma_curves[layer].append(cumulative_share(encoder[layer, head], 1))
    n = np.array(lengths)
    heads = [{"layer": l + 1, "head": h + 1, "mean_rank": float(np.mean(r)), "mean_n": float(n.mean()),
              "mean_rank_over_n": float(np.mean(np.array(r) / n)), "ranks": r,
              "mean_singular_rank": float(np.mean(sigma_ranks[(l, h)])),
              "mean_singular_rank_over_n": float(np.mean(np.array(sigma_ranks[(l, h)]) / n)),
              "singular_ranks": sigma_ranks[(l, h)]}
             for (l, h), r in ranks.items()]
    return {"fraction": fraction, "sentences": len(lengths), "lengths": lengths, "heads": heads,
            "grid": GRID.round(4).tolist(),
            "layer_curves": [{"layer": l + 1, "energy": np.mean(c, axis=0).round(6).tolist(),
                              "singular": np.mean(sigma_curves[l], axis=0).round(6).tolist()} for l, c in curves.items()],
            "mean_rank_over_n": float(np.mean([h["mean_rank_over_n"] for h in heads])),
            "mean_singular_rank_over_n": float(np.mean([h["mean_singular_rank_over_n"] for h in heads]))}


def render(results: dict, path: Path = FIGURE, language: str = "en") -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for index, curve in enumerate(results["layer_curves"]):
        colour = f"C{index}"
        if "singular" in curve:      # Linformer's Figure 1 measure (results files written before it have none)
            ax.plot(results["grid"], curve["singular"], "o-", markersize=3, color=colour,
                    label=f"layer {curve['layer']}, Σσ (Linformer's Fig. 1)")
        ax.plot(results["grid"], curve["energy"], "s:" if "singular" in curve else "o-", markersize=3, color=colour,
                label=f"layer {curve['layer']}, energy Σσ²")
    ax.axhline(results["fraction"], color="gray", linewidth=0.8, linestyle="--")
    ax.set_xlabel("singular values kept, as a share of n")
    ax.set_ylabel("cumulative share")
    ax.set_title("Encoder self-attention of the trained run", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    from minitransformer.figure_language import save_chapter_figure  # noqa: PLC0415

    save_chapter_figure(fig, path, language, dpi=90, bbox_inches="tight")
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", default="runs/enja", help="a trained run folder (default runs/enja)")
    parser.add_argument("--sentences", type=int, default=200, help="test sentences (default 200)")
    parser.add_argument("--fraction", type=float, default=0.9, help="share of the energy (default 0.9)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--render", action="store_true", help="draw the figure from --results")
    parser.add_argument("--figure", type=Path, default=FIGURE)
    args = parser.parse_args(argv)
    if args.render:
        render(json.loads(args.results.read_text(encoding="utf-8")), args.figure)   # the run's digest is in the file
        return 0
    from runs import corpus_of, run_record  # noqa: PLC0415

    from minitransformer.translator import Translator  # noqa: PLC0415

    run = Path(args.run)
    if not (run / "results.json").is_file():
        parser.error(f"{run}: no results.json; give a finished training run (python -m minitransformer train --out RUN)")
    sentences = [english for english, _ in corpus_of(run).pairs("test")[:args.sentences]]
    results = {"command": " ".join(["python benchmarks/sequence_length/attention_rank.py", *(argv if argv is not None else sys.argv[1:])]),
               "run": run_record(run), **spectra(Translator.load(run), sentences, args.fraction)}
    args.results.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.results.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(args.results)
    for head in results["heads"]:
        print(f"layer {head['layer']} head {head['head']}: {args.fraction:.0%} of Σσ in {head['mean_singular_rank']:.1f}, "
              f"of the energy Σσ² in {head['mean_rank']:.1f}, of n = {head['mean_n']:.1f} singular values on average")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
