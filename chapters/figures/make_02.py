"""Draw the figure of chapter 2 into chapters/figures/: broadcasting forward, unbroadcast backward.

    MPLBACKEND=Agg python chapters/figures/make_02.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))   # run from a checkout without installing

from minitransformer.ops.broadcasting import unbroadcast  # noqa: E402


def grid(ax, values, title, stretched=(), color="tab:blue"):
    """One array as a grid of numbered cells; cells that broadcasting reused are drawn pale."""
    rows, cols = values.shape
    for i in range(rows):
        for j in range(cols):
            reused = (0 in stretched and i > 0) or (1 in stretched and j > 0)
            ax.add_patch(__import__("matplotlib").patches.Rectangle(
                (j, rows - 1 - i), 1, 1, facecolor=color, alpha=0.12 if reused else 0.35, edgecolor="black"))
            ax.text(j + 0.5, rows - 0.5 - i, f"{values[i, j]:g}", ha="center", va="center", fontsize=9,
                    color="gray" if reused else "black")
    ax.set_xlim(-0.2, 4.2)
    ax.set_ylim(-0.2, 3.2)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title, fontsize=9)


def broadcast_unbroadcast() -> None:
    import matplotlib.pyplot as plt

    x = np.array([[1.0], [2.0], [3.0]])                  # (3, 1)
    b = np.array([[10.0, 20.0, 30.0, 40.0]])              # (1, 4)
    y = x + b                                             # (3, 4)
    g = np.arange(1.0, 13.0).reshape(3, 4)                # an upstream gradient of y's shape
    fig, axes = plt.subplots(2, 3, figsize=(8, 4.6))
    grid(axes[0, 0], np.broadcast_to(x, (3, 4)), "x (3, 1), stretched along axis 1", stretched=(1,))
    grid(axes[0, 1], np.broadcast_to(b, (3, 4)), "b (1, 4), stretched along axis 0", stretched=(0,))
    grid(axes[0, 2], y, "forward: y = x + b  (3, 4)")
    grid(axes[1, 0], g, "backward: g = ∂L/∂y  (3, 4)", color="tab:orange")
    grid(axes[1, 1], unbroadcast(g, (3, 1)), "unbroadcast(g, (3, 1)): row sums", color="tab:orange")
    grid(axes[1, 2], unbroadcast(g, (1, 4)), "unbroadcast(g, (1, 4)): column sums", color="tab:orange")
    fig.suptitle("Broadcasting reuses a value; its gradient sums every use", fontsize=10)
    fig.tight_layout()
    fig.savefig(HERE / "02-broadcast-unbroadcast.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    broadcast_unbroadcast()
