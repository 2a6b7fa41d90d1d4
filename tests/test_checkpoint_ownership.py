"""A checkpoint holds what a save wrote, and saving deletes only that: its tokenizer is checked by hash,
``latest`` stays inside the run, and files of yours among the checkpoints survive pruning and replacing."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from minitransformer import checkpoint as ckpt
from minitransformer.checkpoint import CheckpointError
from minitransformer.training.trainer import TrainingError, train
from minitransformer.training.options import TrainOptions
from minitransformer.translator import Translator

TOKENIZER = {"format": "minitransformer-bpe", "kind": "words", "version": 1, "vocab": ["<pad>", "a", "b"],
             "merges": [], "words": []}


def _weights(scale=1.0):
    return {"w": np.full((2, 3), scale, dtype=np.float32)}


def _save(out, step, **kwargs):
    return ckpt.save_checkpoint(out, step, _weights(step), {"epoch": 0}, tokenizer=TOKENIZER, **kwargs)


# -- the tokenizer belongs to its checkpoint ----------------------------------------------------------------------
def _swap_two_words(path):
    tokenizer = json.loads(path.read_text(encoding="utf-8"))
    vocab = tokenizer["vocab"]
    vocab[10], vocab[11] = vocab[11], vocab[10]             # same size, another tokenizer
    path.write_text(json.dumps(tokenizer, ensure_ascii=False), encoding="utf-8")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ownership") / "run"
    train(TrainOptions(out=str(out), preset="toy", limit=20, steps=4, save_every=2, average=1, evaluate=False,
                       quiet=True))
    return out


def test_a_tokenizer_of_another_run_is_refused_by_translate(run, tmp_path):
    """A tokenizer of the same size from another run used to load, and turned every id into another word."""
    import shutil
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    _swap_two_words(copy / "final" / "tokenizer.json")
    with pytest.raises(CheckpointError, match=r"final/tokenizer\.json is not the tokenizer .*final/state\.json"):
        Translator.load(copy)


def test_a_tokenizer_of_another_run_is_refused_by_resume(run, tmp_path):
    import shutil
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    _swap_two_words(ckpt.resolve_checkpoint(copy, prefer_final=False) / "tokenizer.json")
    (copy / "results.json").unlink()                         # as if stopped before the end
    with pytest.raises(TrainingError, match=r"step-000004/tokenizer\.json is not the tokenizer .*state\.json"):
        train(TrainOptions(out=str(copy), resume=True, steps=6, quiet=True))


def test_the_tokenizer_hash_is_recorded_with_the_arrays(tmp_path):
    folder = _save(tmp_path, 1)
    state = json.loads((folder / "state.json").read_text())
    assert set(state["sha256"]) == {"model.npz", "tokenizer.json"}
    assert ckpt.load_checkpoint(tmp_path).tokenizer == TOKENIZER
    del state["sha256"]["tokenizer.json"]                     # a checkpoint from before the hash: still loads
    (folder / "state.json").write_text(json.dumps(state))
    assert ckpt.load_checkpoint(tmp_path).tokenizer == TOKENIZER


# -- latest points inside the run ---------------------------------------------------------------------------------
@pytest.mark.parametrize("pointer", ["../../other/checkpoints/step-000001", "/tmp/step-000001",
                                     "checkpoints/../../other/checkpoints/step-000001", "final", "checkpoints"])
def test_latest_never_leads_outside_the_runs_checkpoints(tmp_path, pointer):
    """`latest` pointing at ../../base/checkpoints/step-000040 used to resume another run and average it in."""
    other = tmp_path / "other"
    _save(other, 1)
    run = tmp_path / "a" / "run"
    _save(run, 2)
    (run / "latest").write_text(pointer + "\n")
    with pytest.raises(CheckpointError, match="latest points to .* outside .*checkpoints"):
        ckpt.load_checkpoint(run, prefer_final=False)


def test_a_checkpoint_folder_that_is_a_link_to_another_run_is_not_one_of_the_runs(tmp_path):
    other = tmp_path / "other"
    _save(other, 9)
    run = tmp_path / "run"
    _save(run, 1)
    (run / "checkpoints" / "step-000009").symlink_to(other / "checkpoints" / "step-000009")
    assert [p.name for p in ckpt.list_checkpoints(run)] == ["step-000001"]
    (run / "latest").write_text("checkpoints/step-000009\n")
    with pytest.raises(CheckpointError, match="symbolic link"):
        ckpt.load_checkpoint(run, prefer_final=False)


# -- deleting only what a save wrote -----------------------------------------------------------------------------
def test_pruning_keeps_a_checkpoint_folder_that_holds_a_file_of_yours(tmp_path):
    _save(tmp_path, 1)
    notes = tmp_path / "checkpoints" / "step-000001" / "notes.txt"
    notes.write_text("why step 1 matters")
    for step in (2, 3, 4):
        _save(tmp_path, step, keep_last=2)
    assert notes.read_text() == "why step 1 matters"
    assert not (tmp_path / "checkpoints" / "step-000002").exists()
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)][-2:] == ["step-000003", "step-000004"]


def test_a_checkpoint_that_holds_a_file_of_yours_is_not_replaced(tmp_path):
    _save(tmp_path, 1)
    notes = tmp_path / "checkpoints" / "step-000001" / "notes.txt"
    notes.write_text("mine")
    with pytest.raises(CheckpointError, match=r"step-000001 holds notes\.txt, which a save never writes"):
        _save(tmp_path, 1)
    assert notes.read_text() == "mine" and ckpt.load_checkpoint(tmp_path).step == 1
    assert not [p for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith(".tmp-")]


def test_stale_temporaries_are_removed_only_when_a_save_made_them(tmp_path):
    root = tmp_path / "checkpoints"
    _save(tmp_path, 1)
    ours = root / f".tmp-step-000002-{os.getpid()}-0123abcd"          # a save killed half-way
    ours.mkdir()
    (ours / "model.npz").write_bytes(b"half")
    (ours / f".tmp-state.json-{os.getpid()}-89abcdef").write_text("{")
    yours = [root / ".tmp-cache", root / ".tmp-step-000003", root / ".tmp-notes.txt"]
    yours[0].mkdir()
    (yours[0] / "big.bin").write_bytes(b"x")
    yours[1].mkdir()
    yours[2].write_text("mine")
    mixed = root / f".tmp-step-000004-{os.getpid()}-fedcba98"         # our name, and a file of yours inside
    mixed.mkdir()
    (mixed / "diary.txt").write_text("mine")
    _save(tmp_path, 5)
    assert not ours.exists()
    assert all(p.exists() for p in yours) and (yours[0] / "big.bin").exists()
    assert (mixed / "diary.txt").read_text() == "mine"
