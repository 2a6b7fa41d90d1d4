"""How the chapter notebooks run: the few switches and drawings that are not the lesson.

Every notebook imports what it needs from here, so that its cells teach one step each
and no cell is about the machinery around it (chapter 1's notebook shows this file once):

- ``QUICK``: true when ``MT_QUICK=1``. Tests and the website run the notebooks in quick mode,
  which shrinks data and step counts; the gradient checks and assertions still run.
- ``save_figure(fig, name)``: writes ``chapters/figures/NAME`` only when ``MT_SAVE_FIGURES=1``
  (how the book's figures are regenerated); otherwise it does nothing, so running a notebook never
  changes the book. A Japanese notebook's setup cell redirects the file to ``chapters/figures/ja/``
  (``minitransformer/figure_language.py``).
- ``draw_graph(nodes, edges, title)``: the layout code for chapter 1's picture of a graph.

The number of BLAS threads (``OPENBLAS_NUM_THREADS``) is not set here: OpenBLAS reads it once, when
NumPy is loaded, and the notebook's first cell has loaded NumPy already. Start Jupyter with
``OPENBLAS_NUM_THREADS=1 jupyter lab`` to run with one thread (chapter 10 says when that is faster).
"""
from __future__ import annotations

import os
from pathlib import Path

QUICK = os.environ.get("MT_QUICK") == "1"
SAVE_FIGURES = os.environ.get("MT_SAVE_FIGURES") == "1"
FIGURES = Path(__file__).resolve().parent.parent / "chapters" / "figures"


def save_figure(fig, name: str, dpi: int = 90, **options) -> Path | None:
    """Save ``fig`` as the book's ``chapters/figures/NAME`` when ``MT_SAVE_FIGURES=1``; else do nothing."""
    if not SAVE_FIGURES:
        return None
    path = FIGURES / name
    fig.savefig(path, dpi=dpi, **{"bbox_inches": "tight", **options})
    return path


def draw_graph(nodes: list, edges: list[tuple], title: str):
    """Draw a computational graph left to right: leaves (blue circles), computed tensors (grey
    circles) and Functions (yellow boxes), an arrow from each producer to each consumer.

    ``nodes``: tensors and Functions; ``edges``: (producer, consumer) pairs. Returns the Figure.
    """
    import matplotlib.pyplot as plt

    from .tensor import Tensor

    inputs_of = {id(n): [p for p, c in edges if c is n] for n in nodes}
    consumers_of = {id(n): [c for p, c in edges if p is n] for n in nodes}
    column: dict[int, int] = {}

    def place(node):  # computed nodes: one column right of their deepest input
        if id(node) not in column:
            column[id(node)] = 1 + max((place(p) for p in inputs_of[id(node)]), default=-1)
        return column[id(node)]

    for node in nodes:
        place(node)
    for node in nodes:  # leaves: just left of their first consumer
        if not inputs_of[id(node)]:
            column[id(node)] = min(column[id(c)] for c in consumers_of[id(node)]) - 1
    position = {}
    for c in set(column.values()):
        members = [n for n in nodes if column[id(n)] == c]
        computed = [n for n in members if inputs_of[id(n)]]
        leaves = [n for n in members if not inputs_of[id(n)]]
        for r, node in enumerate(computed):  # the computation runs along the middle
            position[id(node)] = (c, (len(computed) - 1) / 2 - r)
        for k, node in enumerate(leaves):    # leaves above and below it
            side = 1 if k % 2 == 0 else -1
            position[id(node)] = (c, side * ((len(computed) + 1) / 2 + k // 2))

    fig, ax = plt.subplots(figsize=(9, 3.4))
    for parent, child in edges:
        (x0, y0), (x1, y1) = position[id(parent)], position[id(child)]
        bend = -0.4 if abs(x1 - x0) > 1 else 0.0  # long edges arc over the nodes in between
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                    arrowprops=dict(arrowstyle="-|>", color="0.35", shrinkA=17, shrinkB=17,
                                    connectionstyle=f"arc3,rad={bend}"))
    for node in nodes:
        px, py = position[id(node)]
        if isinstance(node, Tensor):
            label = node.name or f"{node.data.reshape(-1)[0]:.2f}"
            ax.add_patch(plt.Circle((px, py), 0.3, fc="#dbeafe" if node.is_leaf else "#f1f5f9", ec="#1e3a8a"))
            ax.text(px, py, label, ha="center", va="center", fontsize=9)
        else:
            ax.text(px, py, type(node).__name__, ha="center", va="center", fontsize=9,
                    bbox=dict(boxstyle="round,pad=0.35", fc="#fde68a", ec="#92400e"))
    ax.set_xlim(min(column.values()) - 0.5, max(column.values()) + 0.5)
    ax.set_ylim(-1.2, 2.6)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title(title)
    return fig
