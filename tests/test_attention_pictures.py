"""Pictures of attention for every kind of self-attention (chapter 13), and runs that finish without them."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import minitransformer as mt
import minitransformer.functional as F
from minitransformer.functional.attention_kinds import attention_weights, attend
from minitransformer.attention_maps import attention_maps
from minitransformer.training.trainer import train
from minitransformer.training.options import TrainOptions
from minitransformer.translator import Translator

SENTENCE = "the cat ate the fish ."


def _run(out: Path, **settings) -> dict:
    options = dict(out=str(out), preset="toy", limit=20, steps=2, average=1, quiet=True)
    options.update(settings)
    return train(TrainOptions(**options))


@pytest.mark.parametrize("kind, window", [("softmax", None), ("flash", None), ("local", 2), ("linear", None)])
@pytest.mark.parametrize("masks", ["none", "causal", "padding"])
def test_the_weights_of_each_kind_mix_the_values_into_its_output(kind, window, masks):
    """out = weights @ v: the weights drawn are the ones the attention used, for every kind and mask."""
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 2, 6, 4)) for _ in range(3))
    mask = {"none": None, "causal": F.causal_mask(6),
            "padding": np.array([True] * 6 + [True] * 4 + [False] * 2).reshape(2, 1, 1, 6)}[masks]
    out = attend(kind, mt.Tensor(q), mt.Tensor(k), mt.Tensor(v), mask=mask, window=window)
    weights = attention_weights(kind, q, k, mask=mask, window=window)
    assert weights.shape == (2, 2, 6, 6)
    np.testing.assert_allclose(weights @ v, out.data, atol=1e-10)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-12)
    if kind == "local":
        offset = np.arange(6)[None, :] - np.arange(6)[:, None]
        assert np.all(weights[..., np.abs(offset) > window] == 0)     # nothing outside the band


@pytest.mark.parametrize("kind, window", [("flash", None), ("local", 2), ("linear", None)])
def test_a_run_of_every_attention_kind_finishes_with_its_picture(tmp_path, kind, window):
    """These runs used to fail after training and evaluation: 'attention 'linear' keeps no weights to show'."""
    summary = _run(tmp_path / "run", attention=kind, attention_window=window)
    assert "test_bleu" in summary and Path(summary["attention_png"]).is_file()
    assert json.loads((tmp_path / "run" / "results.json").read_text())["steps"] == 2
    maps = attention_maps(Translator.load(tmp_path / "run"), SENTENCE)
    for name, weights in maps.weights.items():
        np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-5, err_msg=name)


def test_a_picture_that_cannot_be_drawn_does_not_stop_the_run(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError("no space left on device")

    monkeypatch.setattr("minitransformer.plot.attention_heatmap", broken)
    lines = []
    summary = train(TrainOptions(out=str(tmp_path / "run"), preset="toy", limit=20, steps=2, average=1),
                    log=lines.append)
    assert "attention_png" not in summary and "test_bleu" in summary
    assert (tmp_path / "run" / "results.json").is_file()
    assert any(line.startswith("no attention picture (OSError: no space left on device)") for line in lines)


@pytest.mark.gpu
@pytest.mark.parametrize("kind, window", [("flash", None), ("local", 2), ("linear", None)])
def test_the_weights_are_computed_on_the_device_of_the_attention(kind, window):
    from minitransformer import backend

    rng = np.random.default_rng(2)
    q, k, v = (backend.to_device(rng.standard_normal((1, 2, 5, 4)), "cuda") for _ in range(3))
    mask = backend.to_device(np.array([True] * 4 + [False]).reshape(1, 1, 1, 5), "cuda")
    weights = attention_weights(kind, q, k, mask=mask, window=window)
    assert backend.get_device(weights) == "cuda"
    out = attend(kind, mt.Tensor(q), mt.Tensor(k), mt.Tensor(v), mask=mask, window=window)
    np.testing.assert_allclose(backend.asnumpy(weights @ v), backend.asnumpy(out.data), atol=1e-10)
