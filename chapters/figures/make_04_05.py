"""Draw the figures of chapters 4 and 5 into chapters/figures/ (small PNGs).

    MPLBACKEND=Agg python chapters/figures/make_04_05.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))   # run from a checkout without installing

import minitransformer as mt  # noqa: E402
import minitransformer.functional as F  # noqa: E402
import minitransformer.nn as nn  # noqa: E402


def softmax_temperature() -> None:
    import matplotlib.pyplot as plt

    scores = np.array([2.0, 1.0, 0.5, -0.5, -1.0, 3.0, 0.0, 1.5])
    fig, axes = plt.subplots(1, 3, figsize=(8, 2.2), sharey=True)
    for ax, t in zip(axes, [0.25, 1.0, 4.0]):
        ax.bar(range(len(scores)), F.softmax(mt.Tensor(scores / t)).numpy(), color="tab:blue")
        ax.set_title(f"softmax(scores / {t:g})", fontsize=9)
        ax.set_xticks([])
    axes[0].set_ylabel("probability")
    fig.tight_layout()
    fig.savefig(HERE / "04-softmax-temperature.png", dpi=80)
    plt.close(fig)


def xavier_activations() -> None:
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(0)
    nn.init.set_seed(0)
    fig, ax = plt.subplots(figsize=(5, 2.8))
    for name, init_fn in [("Xavier uniform", nn.init.xavier_uniform),
                          ("N(0, 1)", lambda p: nn.init.normal(p, std=1.0)),
                          ("N(0, 0.01²)", lambda p: nn.init.normal(p, std=0.01))]:
        h = mt.Tensor(rng.standard_normal((64, 256)))
        stds = []
        for _ in range(10):
            layer = nn.Linear(256, 256).to(np.float64)
            init_fn(layer.weight)
            h = layer(h)
            stds.append(h.numpy().std())
        ax.semilogy(range(1, 11), stds, marker="o", label=name)
    ax.set_xlabel("layer")
    ax.set_ylabel("std of activations")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(HERE / "05-xavier-activations.png", dpi=80)
    plt.close(fig)


if __name__ == "__main__":
    softmax_temperature()
    xavier_activations()
    for png in sorted(HERE.glob("0[45]-*.png")):
        print(f"{png.relative_to(HERE.parents[1])}: {png.stat().st_size // 1024} KB")
