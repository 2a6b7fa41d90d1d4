"""Attention heat maps and the label fallback for machines without a Japanese font."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from minitransformer import plot

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("kana,roman", [("ねこ", "neko"), ("キャット", "kyatto"), ("しゃしん", "shashin"),
                                        ("がっこう", "gakkou"), ("コーヒー", "koohii"), ("は", "wa"), ("を", "o"),
                                        ("ちょっと", "chotto"), ("ます", "masu")])
def test_romanize_kana(kana, roman):
    assert plot.romanize(kana) == roman


def test_romanize_gives_up_on_kanji():
    assert plot.romanize("食べ") is None
    assert plot.romanize("</s>") == "</s>"


def test_labels_fall_back_to_romaji_and_ids_without_a_cjk_font(monkeypatch):
    monkeypatch.setattr(plot, "cjk_font", lambda sample="": None)
    labels, font = plot.drawable_labels(["猫", "は", "the", "ねこ-"], ids=[57, 9, 4, 80])
    assert font is None and labels == ["#57", "wa", "the", "neko-"]
    ascii_only, font = plot.drawable_labels(["the", "cat"])
    assert ascii_only == ["the", "cat"] and font is None


def test_attention_heatmap_writes_a_png(tmp_path):
    weights = np.random.default_rng(0).dirichlet(np.ones(4), size=3)          # (T=3, S=4), rows sum to 1
    path = tmp_path / "attention.png"
    fig = plot.attention_heatmap(weights, ["the", "cat", "ate", "."], ["猫", "は", "</s>"], path,
                                 tgt_ids=[10, 11, 2])
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(fig.axes[0].get_yticklabels()) == 3


def test_attention_heatmap_names_a_shape_mismatch():
    with pytest.raises(ValueError, match=r"shape \(2, 2\).*3 target and 2 source"):
        plot.attention_heatmap(np.ones((2, 2)), ["a", "b"], ["x", "y", "z"])


def test_importing_the_package_does_not_import_matplotlib():
    code = "import sys, minitransformer, minitransformer.training.trainer, minitransformer.plot; print('matplotlib' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.stdout.strip() == "False", result.stderr
