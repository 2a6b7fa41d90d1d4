"""Every head of a trained model, read from the layers and drawn as grids of layers × heads."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from minitransformer.attention_maps import KINDS, attention_maps, draw_attention_maps
from minitransformer.training.trainer import train
from minitransformer.training.options import TrainOptions
from minitransformer.translator import Translator

ROOT = Path(__file__).resolve().parents[1]
SENTENCE = "the cat ate the fish ."


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("maps") / "run"
    train(TrainOptions(out=str(out), preset="toy", limit=30, steps=2, average=1, evaluate=False, quiet=True))
    return out


def test_maps_have_one_matrix_per_layer_and_head_of_each_kind(run):
    translator = Translator.load(run)
    config = translator.model.config
    maps = attention_maps(translator, SENTENCE, output_ids=[5, 6, 7])
    s, t = len(maps.source), len(maps.output)
    assert maps.decoder_input_ids[0] == translator.tokenizer.bos_id and maps.output_ids[-1] == translator.tokenizer.eos_id
    expected = {"encoder": (s, s), "decoder": (t, t), "cross": (t, s)}
    for kind in KINDS:
        weights = maps.weights[kind]
        assert weights.shape == (config.n_layers, config.n_heads, *expected[kind])
        np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-5)      # each row a distribution
    assert np.all(np.triu(maps.weights["decoder"][0, 0], k=1) == 0)           # the causal mask
    assert all(layer.attention_weights is None or not layer.keep_weights
               for layer in translator.model.modules() if hasattr(layer, "keep_weights"))


def test_every_kind_is_drawn_as_a_grid_of_layers_by_heads(run, tmp_path):
    pytest.importorskip("matplotlib")
    from minitransformer.plot import attention_grid
    translator = Translator.load(run)
    config = translator.model.config
    maps = attention_maps(translator, SENTENCE)
    paths = draw_attention_maps(maps, str(tmp_path / "maps.png"), sentence=SENTENCE)
    assert [Path(p).name for p in paths] == ["maps-encoder.png", "maps-decoder.png", "maps-cross.png"]
    assert all(Path(p).stat().st_size > 1000 for p in paths)
    for kind in KINDS:
        queries, keys, query_ids, key_ids = maps.labels(kind)
        figure = attention_grid(maps.weights[kind], keys, queries, src_ids=key_ids, tgt_ids=query_ids)
        assert len(figure.axes) == config.n_layers * config.n_heads
        bottom_left = figure.axes[(config.n_layers - 1) * config.n_heads]
        assert len(bottom_left.get_xticklabels()) == len(keys) and len(bottom_left.get_yticklabels()) == len(queries)
    with pytest.raises(ValueError, match="attention_grid: weights must be"):
        attention_grid(maps.weights["cross"][0], keys, queries)
    with pytest.raises(ValueError, match="unknown attention kind"):
        maps.labels("sideways")


def test_japanese_labels_are_drawn_with_the_bundled_font():
    pytest.importorskip("matplotlib_fontja")
    from minitransformer.fonts import bundled_font
    from minitransformer.plot import drawable_labels
    assert bundled_font() is not None
    labels, font = drawable_labels(["猫", "が", "魚", "を"])
    assert labels == ["猫", "が", "魚", "を"] and font is not None


def test_the_attention_command_writes_one_png_per_kind(run, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), MPLBACKEND="Agg")
    command = [sys.executable, "-m", "minitransformer", "attention", "--checkpoint", str(run), SENTENCE]
    result = subprocess.run([*command, "--out", str(tmp_path / "m.png")], capture_output=True, text=True,
                            env=env, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert {Path(p).name for p in result.stdout.split() if p.endswith(".png")} == \
        {"m-encoder.png", "m-decoder.png", "m-cross.png"}
    one = subprocess.run([*command, "--kind", "cross", "--out", str(tmp_path / "x.png")], capture_output=True,
                         text=True, env=env, cwd=ROOT, timeout=120)
    assert one.returncode == 0 and (tmp_path / "x.png").is_file(), one.stderr
    empty = subprocess.run([*command[:-1], "   ", "--out", str(tmp_path / "e.png")], capture_output=True,
                           text=True, env=env, cwd=ROOT, timeout=120)
    assert empty.returncode != 0 and "empty" in empty.stderr and "Traceback" not in empty.stderr
