"""Pictures: attention heat maps, learning-rate schedules, loss curves (chapters 10–12).

matplotlib is imported inside each function, never when the package is
imported, and figures are built with ``matplotlib.figure.Figure`` (no pyplot,
no GUI backend): they save to PNG anywhere and display inline in notebooks.

Japanese labels need a font with CJK glyphs. The package depends on
matplotlib-fontja, which ships the IPAex Gothic font: ``fonts.cjk_font()`` registers
that file with matplotlib (without changing any global setting) and then looks
for a font that really covers the characters (IPAexGothic, Noto Sans CJK, ...).
Where none can be found (matplotlib-fontja removed, no system font), kana are
written in romaji (Hepburn) and tokens with kanji are labelled by their
vocabulary id, so the picture still reads and nothing crashes.

Every figure function takes ``language`` ("en", the default, or "ja"): its own labels (axes, legends,
default titles) are then written in that language (minitransformer/figure_language.py); token labels and
a title you pass stay as given.
"""
from __future__ import annotations

import unicodedata
from pathlib import Path
from typing import Sequence

import numpy as np

from .figure_language import localize
from .fonts import cjk_font

_HIRAGANA = {
    "あ": "a", "い": "i", "う": "u", "え": "e", "お": "o", "か": "ka", "き": "ki", "く": "ku", "け": "ke", "こ": "ko",
    "が": "ga", "ぎ": "gi", "ぐ": "gu", "げ": "ge", "ご": "go", "さ": "sa", "し": "shi", "す": "su", "せ": "se",
    "そ": "so", "ざ": "za", "じ": "ji", "ず": "zu", "ぜ": "ze", "ぞ": "zo", "た": "ta", "ち": "chi", "つ": "tsu",
    "て": "te", "と": "to", "だ": "da", "ぢ": "ji", "づ": "zu", "で": "de", "ど": "do", "な": "na", "に": "ni",
    "ぬ": "nu", "ね": "ne", "の": "no", "は": "ha", "ひ": "hi", "ふ": "fu", "へ": "he", "ほ": "ho", "ば": "ba",
    "び": "bi", "ぶ": "bu", "べ": "be", "ぼ": "bo", "ぱ": "pa", "ぴ": "pi", "ぷ": "pu", "ぺ": "pe", "ぽ": "po",
    "ま": "ma", "み": "mi", "む": "mu", "め": "me", "も": "mo", "や": "ya", "ゆ": "yu", "よ": "yo", "ら": "ra",
    "り": "ri", "る": "ru", "れ": "re", "ろ": "ro", "わ": "wa", "を": "o", "ん": "n", "ゃ": "ya", "ゅ": "yu",
    "ょ": "yo", "ぁ": "a", "ぃ": "i", "ぅ": "u", "ぇ": "e", "ぉ": "o", "ゔ": "vu",
}
_PARTICLES = {"は": "wa", "へ": "e", "を": "o"}  # as separate words these read differently


def _kana_to_hiragana(char: str) -> str:
    code = ord(char)
    return chr(code - 0x60) if 0x30A1 <= code <= 0x30F6 else char  # katakana block sits 0x60 above


def romanize(text: str) -> str | None:
    """Hepburn romaji of a kana string ("ねこ" -> "neko", "キャット" -> "kyatto"); None if it has other CJK."""
    if text in _PARTICLES:
        return _PARTICLES[text]
    out: list[str] = []
    double_next = False
    for char in text:
        if char == "ー":
            if out and out[-1]:
                out.append(out[-1][-1])  # long vowel: repeat the last vowel
            continue
        kana = _kana_to_hiragana(char)
        if kana == "っ":
            double_next = True
            continue
        if kana in _HIRAGANA:
            syllable = _HIRAGANA[kana]
            if kana in "ゃゅょ" and out and out[-1].endswith("i"):   # き + ゃ -> kya, し + ゃ -> sha
                previous = out.pop()[:-1]
                syllable = previous + (syllable[1:] if previous.endswith(("sh", "ch", "j")) else syllable)
            if double_next:
                syllable = ("t" if syllable.startswith("ch") else syllable[0]) + syllable
                double_next = False
            out.append(syllable)
        elif unicodedata.east_asian_width(char) in "WF":
            return None  # kanji or another wide character: cannot romanize without a dictionary
        else:
            out.append(char)
    return "".join(out)


def drawable_labels(labels: Sequence[str], ids: Sequence[int] | None = None) -> tuple[list[str], str | None]:
    """Labels a plot can draw, and the CJK font to use (None when the labels were romanized)."""
    text = "".join(labels)
    if all(unicodedata.east_asian_width(c) not in "WF" for c in text):
        return list(labels), None
    font = cjk_font(text)
    if font is not None:
        return list(labels), font
    readable = []
    for i, label in enumerate(labels):
        roman = romanize(label)
        readable.append(roman if roman is not None else (f"#{ids[i]}" if ids is not None else "#?"))
    return readable, None


def _finish(fig, path: str | Path | None, language: str):
    """The figure's own labels in ``language`` (texts the table does not know, tokens and a caller's title, stay),
    laid out, and saved to ``path`` when given (its folder made); returns ``fig``."""
    if language != "en":
        localize(fig, language)
    fig.tight_layout()
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path)
    return fig


# -- figures --------------------------------------------------------------------------------------------
def attention_heatmap(weights, src_labels: Sequence[str], tgt_labels: Sequence[str],
                      path: str | Path | None = None, title: str | None = None,
                      src_ids: Sequence[int] | None = None, tgt_ids: Sequence[int] | None = None,
                      language: str = "en"):
    """Draw a (T, S) attention matrix: rows = target tokens (queries), columns = source tokens (keys).

    Saves a PNG when ``path`` is given; returns the matplotlib Figure.
    """
    from matplotlib.figure import Figure  # noqa: PLC0415 - lazy by design

    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (len(tgt_labels), len(src_labels)):
        raise ValueError(f"attention_heatmap: weights have shape {weights.shape} but there are "
                         f"{len(tgt_labels)} target and {len(src_labels)} source labels")
    xs, x_font = drawable_labels(src_labels, src_ids)
    ys, y_font = drawable_labels(tgt_labels, tgt_ids)
    romanized = (xs != list(src_labels)) or (ys != list(tgt_labels))

    height = 1.2 + 0.32 * len(ys)
    width = 1.8 + 0.34 * len(xs)
    fig = Figure(figsize=(max(width, 4.0), max(height, 3.0)), dpi=90)
    ax = fig.add_subplot()
    image = ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=max(float(weights.max()), 1e-9), aspect="auto")
    ax.set_xticks(range(len(xs)))
    ax.set_yticks(range(len(ys)))
    ax.set_xticklabels(xs, rotation=60, ha="right", fontsize=9, **({"fontfamily": x_font} if x_font else {}))
    ax.set_yticklabels(ys, fontsize=9, **({"fontfamily": y_font} if y_font else {}))
    ax.set_xlabel("source (keys)")
    ax.set_ylabel("output (queries)")
    note = "\n(no CJK font: kana romanized, kanji tokens as #id)" if romanized else ""
    ax.set_title((title or "encoder–decoder attention") + note, fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    return _finish(fig, path, language)


def attention_grid(weights, src_labels: Sequence[str], tgt_labels: Sequence[str],
                   path: str | Path | None = None, title: str | None = None,
                   src_ids: Sequence[int] | None = None, tgt_ids: Sequence[int] | None = None,
                   language: str = "en"):
    """Draw every head of every layer: ``weights`` (layers, heads, T, S) as a grid, one row per layer.

    Rows of each small map are the queries (``tgt_labels``), columns the keys (``src_labels``);
    labels are written on the left column and the bottom row. Returns the matplotlib Figure.
    """
    from matplotlib.figure import Figure  # noqa: PLC0415 - lazy by design

    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim != 4 or weights.shape[2:] != (len(tgt_labels), len(src_labels)):
        raise ValueError(f"attention_grid: weights must be (layers, heads, {len(tgt_labels)}, {len(src_labels)}) "
                         f"for the labels given, got shape {weights.shape}")
    n_layers, n_heads = weights.shape[:2]
    xs, x_font = drawable_labels(src_labels, src_ids)
    ys, y_font = drawable_labels(tgt_labels, tgt_ids)
    romanized = (xs != list(src_labels)) or (ys != list(tgt_labels))
    cell_w, cell_h = 0.9 + 0.2 * len(xs), 0.9 + 0.2 * len(ys)
    fig = Figure(figsize=(0.8 + cell_w * n_heads, 0.8 + cell_h * n_layers), dpi=90)
    axes = fig.subplots(n_layers, n_heads, squeeze=False)
    for layer in range(n_layers):
        for head in range(n_heads):
            ax = axes[layer][head]
            ax.imshow(weights[layer, head], cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
            ax.set_xticks(range(len(xs)))
            ax.set_yticks(range(len(ys)))
            if layer == n_layers - 1:
                ax.set_xticklabels(xs, rotation=70, ha="right", fontsize=7, **({"fontfamily": x_font} if x_font else {}))
            else:
                ax.set_xticklabels([])
            if head == 0:
                ax.set_yticklabels(ys, fontsize=7, **({"fontfamily": y_font} if y_font else {}))
                ax.set_ylabel(f"layer {layer + 1}", fontsize=8)
            else:
                ax.set_yticklabels([])
            if layer == 0:
                ax.set_title(f"head {head + 1}", fontsize=8)
    note = " (no CJK font: kana romanized, kanji tokens as #id)" if romanized else ""
    fig.suptitle((title or "attention") + note, fontsize=9, **({"fontfamily": x_font or y_font}
                                                                if (x_font or y_font) else {}))
    return _finish(fig, path, language)


def learning_rate_curves(schedules: Sequence[tuple[str, Sequence[float]]], path: str | Path | None = None,
                         title: str = "learning rate, eq. (3)", language: str = "en"):
    """Plot several learning-rate sequences (label, values per step)."""
    curves = [(label, np.arange(1, len(values) + 1), values) for label, values in schedules]
    return loss_curves(curves, path, title=title, ylabel="learning rate", language=language)


def loss_curves(curves: Sequence[tuple[str, Sequence[float], Sequence[float]]], path: str | Path | None = None,
                title: str = "loss", ylabel: str = "loss", language: str = "en"):
    """Plot curves given as (label, x values, y values)."""
    from matplotlib.figure import Figure  # noqa: PLC0415

    fig = Figure(figsize=(6.0, 3.4), dpi=90)
    ax = fig.add_subplot()
    for label, x, y in curves:
        ax.plot(x, y, label=label)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _finish(fig, path, language)
