"""The language model against its PyTorch twin (benchmarks/quality/tinyshakespeare.py): the same initial
weights and batches give the same losses, step after step, through Adam and clipping (an external check of
the whole forward and backward pass)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import minitransformer.nn as nn

pytest.importorskip("torch", reason="could not import 'torch'")
SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "quality" / "tinyshakespeare.py"


def benchmark():
    spec = importlib.util.spec_from_file_location("tinyshakespeare", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ours_and_the_torch_twin_take_the_same_steps(tmp_path):
    bench = benchmark()
    recipe = {**bench.RECIPE, "n_layers": 2, "n_heads": 2, "d_model": 16, "context": 8, "batch": 3, "iters": 6,
              "warmup": 2, "lr": 3e-3}
    vocab = 13
    config = nn.LanguageModelConfig(vocab_size=vocab, d_model=16, n_heads=2, d_ff=64, n_layers=2, context=8)
    weights = tmp_path / "initial.npz"
    np.savez(weights, **nn.LanguageModel(config).state_dict())
    text = np.random.default_rng(0).integers(0, vocab, size=400)
    runs = {name: make(recipe, vocab, str(weights)) for name, make in (("ours", bench.ours), ("torch", bench.twin))}
    for step, (inputs, targets) in enumerate(bench.batches(text, recipe["iters"], 1, recipe["batch"], 8)):
        lr = bench.learning_rate(step, recipe)
        ours, theirs = (runs[name][0](inputs, targets, lr) for name in ("ours", "torch"))
        assert ours == pytest.approx(theirs, rel=1e-4), f"step {step}"
    x, y = next(bench.batches(text, 1, 2, 4, 8))
    assert runs["ours"][1](x, y) == pytest.approx(runs["torch"][1](x, y), rel=1e-4)
