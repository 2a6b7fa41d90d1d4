"""Checkpoints: round trip, atomic saves, refusal of corrupt, foreign and mismatched files, averaging."""
from __future__ import annotations

import json
import os
import stat

import numpy as np
import pytest

from minitransformer import checkpoint as ckpt
from minitransformer.checkpoint import CheckpointError


def _weights(rng, scale=1.0):
    return {"encoder.w": (scale * rng.standard_normal((3, 4))).astype(np.float32),
            "decoder.b": (scale * rng.standard_normal(4)).astype(np.float32)}


def _save(out, step, weights, **kwargs):
    state = {"config": {"d_model": 4, "n_layers": 1}, "epoch": 2, "position": 7,
             "rng": {"seed": 3, "state": [1, 2, 3]}}
    return ckpt.save_checkpoint(out, step, weights, state, **kwargs)


def test_round_trip_restores_everything(tmp_path, rng):
    weights = _weights(rng)
    optimizer = {"step": np.asarray(5), "lr": np.asarray(1e-3), "exp_avg.0": rng.standard_normal((3, 4))}
    tokenizer = {"type": "bpe", "merges": [["a", "b"]], "vocab": ["<pad>", "ab", "日本"]}
    folder = _save(tmp_path, 123, weights, optimizer=optimizer, tokenizer=tokenizer)
    assert folder == tmp_path / "checkpoints" / "step-000123"
    assert (tmp_path / "latest").read_text().strip() == "checkpoints/step-000123"

    for where in (tmp_path, folder, folder / "model.npz"):
        loaded = ckpt.load_checkpoint(where)
        assert loaded.step == 123 and loaded.path == folder
        assert loaded.state["epoch"] == 2 and loaded.state["rng"] == {"seed": 3, "state": [1, 2, 3]}
        assert loaded.config == {"d_model": 4, "n_layers": 1}
        assert loaded.tokenizer == tokenizer
        assert set(loaded.weights) == set(weights)
        for name in weights:
            np.testing.assert_array_equal(loaded.weights[name], weights[name])
            assert loaded.weights[name].dtype == np.float32
        np.testing.assert_array_equal(loaded.optimizer["exp_avg.0"], optimizer["exp_avg.0"])


def test_latest_follows_the_newest_save_and_pruning_keeps_the_last(tmp_path, rng):
    for step in (10, 20, 30, 40):
        _save(tmp_path, step, _weights(rng), keep_last=2)
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)] == ["step-000030", "step-000040"]
    assert ckpt.load_checkpoint(tmp_path).step == 40


def test_saving_the_same_step_again_replaces_it(tmp_path, rng):
    _save(tmp_path, 5, _weights(rng))
    newer = _weights(rng, scale=2.0)
    _save(tmp_path, 5, newer)
    np.testing.assert_array_equal(ckpt.load_checkpoint(tmp_path).weights["encoder.w"], newer["encoder.w"])
    assert not list((tmp_path / "checkpoints").glob(".tmp-*"))


@pytest.mark.parametrize("crash_in", ["weights", "state", "pointer"])
def test_a_crash_during_save_leaves_the_previous_checkpoint_loadable(tmp_path, rng, monkeypatch, crash_in):
    first = _weights(rng)
    _save(tmp_path, 1, first)

    class Killed(Exception):
        pass

    if crash_in == "weights":  # die half-way through writing model.npz
        real_savez = np.savez

        def dying_savez(f, **arrays):
            real_savez(f, **arrays)
            f.truncate(40)
            raise Killed()
        monkeypatch.setattr(ckpt.np, "savez", dying_savez)
    elif crash_in == "state":
        real_write = ckpt.write_json_atomic

        def dying_write(path, obj):
            if str(path).endswith("state.json"):
                raise Killed()
            real_write(path, obj)
        monkeypatch.setattr(ckpt, "write_json_atomic", dying_write)
    else:  # the new folder is in place but the pointer update dies
        monkeypatch.setattr(ckpt, "write_text_atomic", lambda path, text: (_ for _ in ()).throw(Killed()))

    with pytest.raises(Killed):
        _save(tmp_path, 2, _weights(rng, scale=5.0))
    monkeypatch.undo()

    loaded = ckpt.load_checkpoint(tmp_path)
    assert loaded.step == 1
    np.testing.assert_array_equal(loaded.weights["encoder.w"], first["encoder.w"])
    # the next save cleans up and succeeds
    _save(tmp_path, 3, _weights(rng))
    assert ckpt.load_checkpoint(tmp_path).step == 3
    assert not list((tmp_path / "checkpoints").glob(".tmp-*"))


def test_atomic_json_write_keeps_the_old_file_when_interrupted(tmp_path, monkeypatch):
    target = tmp_path / "config.json"
    ckpt.write_json_atomic(target, {"a": 1})

    def exploding_fsync(fd):
        raise OSError("disk gone")
    monkeypatch.setattr(ckpt.os, "fsync", exploding_fsync)
    with pytest.raises(OSError, match="disk gone"):
        ckpt.write_json_atomic(target, {"a": 2})
    monkeypatch.undo()
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]


def test_truncated_weights_are_refused_with_the_path(tmp_path, rng):
    folder = _save(tmp_path, 1, _weights(rng))
    model = folder / "model.npz"
    model.write_bytes(model.read_bytes()[: model.stat().st_size // 2])
    with pytest.raises(CheckpointError, match=r"model\.npz.*(truncated|corrupt)"):
        ckpt.load_checkpoint(tmp_path)


def test_truncated_npz_without_checksum_is_refused(tmp_path, rng):
    path = tmp_path / "w.npz"
    np.savez(path, **_weights(rng))
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(CheckpointError, match=r"w\.npz: cannot read the arrays.*truncated or corrupt"):
        ckpt.read_npz(path)


def test_pickled_arrays_are_refused(tmp_path):
    path = tmp_path / "evil.npz"
    np.savez(path, payload=np.array([{"a": 1}], dtype=object))
    with pytest.raises(CheckpointError, match="evil.npz"):
        ckpt.read_npz(path)


def test_truncated_state_json_is_refused(tmp_path, rng):
    folder = _save(tmp_path, 1, _weights(rng))
    state = folder / "state.json"
    state.write_text(state.read_text()[:20])
    with pytest.raises(CheckpointError, match=r"state\.json: not valid JSON"):
        ckpt.load_checkpoint(folder)


def test_foreign_files_and_folders_are_refused(tmp_path):
    with pytest.raises(CheckpointError, match="no such file"):
        ckpt.load_checkpoint(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CheckpointError, match="no checkpoint here"):
        ckpt.load_checkpoint(empty)
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    with pytest.raises(CheckpointError, match="not a checkpoint"):
        ckpt.load_checkpoint(text)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "state.json").write_text(json.dumps({"step": 3}))
    np.savez(foreign / "model.npz", w=np.zeros(2))
    with pytest.raises(CheckpointError, match="not a minitransformer checkpoint"):
        ckpt.load_checkpoint(foreign)


def test_a_dangling_latest_pointer_is_refused(tmp_path, rng):
    _save(tmp_path, 1, _weights(rng))
    (tmp_path / "latest").write_text("checkpoints/step-000999\n")
    with pytest.raises(CheckpointError, match="step-000999.*not a complete checkpoint"):
        ckpt.load_checkpoint(tmp_path)


def test_weights_of_another_configuration_are_refused_naming_key_and_shapes(rng):
    weights = _weights(rng)
    expected = {"encoder.w": np.zeros((3, 8)), "decoder.b": np.zeros(4)}
    with pytest.raises(CheckpointError, match=r"another model configuration.*'encoder\.w'.*\(3, 4\).*\(3, 8\)"):
        ckpt.check_weights_match(weights, expected)
    with pytest.raises(CheckpointError, match=r"missing 1 weight.*extra\.w"):
        ckpt.check_weights_match(weights, {**weights, "extra.w": np.zeros(1)})
    ckpt.check_weights_match(weights, {k: v.shape for k, v in weights.items()})  # shapes also accepted


def test_config_differences_name_the_fields():
    diff = ckpt.config_differences({"d_model": 128, "n_layers": 2}, {"d_model": 256, "n_layers": 2, "x": 1})
    assert diff == ["d_model: 128 in the checkpoint, 256 requested"]


def test_averaging_the_last_checkpoints(tmp_path, rng):
    saved = [_weights(rng) for _ in range(3)]
    folders = [_save(tmp_path, step, w) for step, w in zip((1, 2, 3), saved)]
    average = ckpt.average_checkpoints(folders)
    for name in saved[0]:
        expected = np.mean([w[name].astype(np.float64) for w in saved], axis=0)
        np.testing.assert_allclose(average[name], expected, rtol=1e-6)
        assert average[name].dtype == np.float32

    other = tmp_path / "other"
    _save(other, 1, {"encoder.w": np.zeros((2, 2), np.float32), "decoder.b": np.zeros(4, np.float32)})
    with pytest.raises(CheckpointError, match="encoder.w"):
        ckpt.average_checkpoints([folders[0], other])


@pytest.mark.parametrize("umask", [0o022, 0o002], ids=["umask-022", "umask-002"])
def test_saved_files_and_folders_respect_the_umask(tmp_path, rng, umask):
    """A run folder shared by a group must be readable by it: no file private to its owner."""
    old = os.umask(umask)
    try:
        _save(tmp_path, 1, _weights(rng), optimizer={"step": np.asarray(1)}, tokenizer={"type": "bpe"})
        ckpt.save_final(tmp_path, _weights(rng), {"step": 1}, tokenizer={"type": "bpe"})
        ckpt.write_json_atomic(tmp_path / "config.json", {"a": 1})
    finally:
        os.umask(old)
    for path in tmp_path.rglob("*"):
        expected = (0o777 if path.is_dir() else 0o666) & ~umask
        assert stat.S_IMODE(path.stat().st_mode) == expected, path


def test_weights_that_are_not_numbers_are_refused_naming_the_file(tmp_path, rng):
    folder = _save(tmp_path, 1, _weights(rng))
    with open(folder / "model.npz", "wb") as f:
        np.savez(f, **{"encoder.w": np.array([["a", "b"]]), "decoder.b": np.zeros(4, np.float32)})
    state = json.loads((folder / "state.json").read_text())
    del state["sha256"]["model.npz"]                           # a hand-made file: no checksum to catch it
    (folder / "state.json").write_text(json.dumps(state))
    with pytest.raises(CheckpointError, match=r"model\.npz: array 'encoder.w' holds <U1 values, not numbers"):
        ckpt.load_checkpoint(tmp_path)


def test_an_incomplete_final_model_is_refused_not_replaced(tmp_path, rng):
    _save(tmp_path, 1, _weights(rng))
    ckpt.save_final(tmp_path, _weights(rng), {"step": 1})
    assert ckpt.resolve_checkpoint(tmp_path) == tmp_path / "final"
    (tmp_path / "final" / "state.json").unlink()
    with pytest.raises(CheckpointError, match=r"final: the final model is incomplete \(no state.json\)"):
        ckpt.resolve_checkpoint(tmp_path)
    assert ckpt.resolve_checkpoint(tmp_path, prefer_final=False).name == "step-000001"   # resuming still works
