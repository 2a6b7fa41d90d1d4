"""The kill sweep (issue 48): a run killed (SIGKILL) just before and just after each of its file-system operations,
then resumed, or, for a kill during --overwrite, overwritten again, ends bit-exact with a run that was never
killed, and leaves no temporary behind.

Each killed run is a fork of the test process (no interpreter to start, no imports to repeat), with the
operations that change the file system counted through hooks on ``os`` and ``open``: creating or opening a
file for writing, renaming, deleting, making and removing a folder, and the lock's truncate and write. The
recovery runs in the test process itself. ``test_the_kill_sweep_in_full`` kills at every operation (minutes,
``pytest -m later``); ``test_a_kill_sweep_sample`` at an evenly spread sample of them.
"""
from __future__ import annotations

import builtins
import io
import os
import shutil
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

from minitransformer import checkpoint as ckpt
from minitransformer.training import run_folder
from minitransformer.training.options import TrainOptions
from minitransformer.training.trainer import train

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin",
                                reason="the sweep forks its killed runs (POSIX; macOS forks badly after NumPy)")

SETTINGS = dict(preset="toy", limit=20, steps=3, save_every=1, average=2, evaluate=False, quiet=True)
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT


def _options(out: Path, **settings) -> TrainOptions:
    return TrainOptions(out=str(out), **{**SETTINGS, **settings})


def _is_write(name: str, args: tuple, kwargs: dict) -> bool:
    """Whether a call changes the file system (an open for reading does not)."""
    if name == "os.open":
        flags = args[1] if len(args) > 1 else kwargs.get("flags", 0)
        return bool(flags & WRITE_FLAGS)
    if name == "open":
        mode = args[1] if len(args) > 1 else kwargs.get("mode", "r")
        return any(letter in mode for letter in "wax+")
    return True


def _hook_file_system(kill_at: int | None, when: str) -> list[int]:
    """Count the file-system operations of this process; SIGKILL it just ``when`` ("before" or "after")
    operation number ``kill_at`` (None: count only). Returns the counter, a one-element list."""
    counter = [0]
    targets = [(os, name, f"os.{name}") for name in ("open", "replace", "rename", "unlink", "remove", "rmdir",
                                                      "mkdir", "ftruncate", "pwrite")]
    targets += [(builtins, "open", "open"), (io, "open", "open")]
    for module, name, label in targets:
        real = getattr(module, name)

        def hooked(*args, _real=real, _label=label, **kwargs):
            if not _is_write(_label, args, kwargs):
                return _real(*args, **kwargs)
            counter[0] += 1
            if counter[0] == kill_at and when == "before":
                os.kill(os.getpid(), signal.SIGKILL)
            number = counter[0]
            try:
                return _real(*args, **kwargs)
            finally:                                   # after it, whether it succeeded or raised
                if number == kill_at and when == "after":
                    os.kill(os.getpid(), signal.SIGKILL)

        setattr(module, name, hooked)
    return counter


def _in_a_fork(options: TrainOptions, kill_at: int | None, when: str = "before") -> tuple[str, int]:
    """Train ``options`` in a forked child killed at operation ``kill_at``: ("killed", 0), or, when it ran to
    the end, ("finished", the number of operations it made)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                                           # the child: never returns into pytest
        status = 3
        try:
            os.close(read)
            counter = _hook_file_system(kill_at, when)
            train(options)
            os.write(write, str(counter[0]).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read) as pipe:
        report = pipe.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        return "killed", 0
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"the run failed (status {status})"
    return "finished", int(report)


def _same_run(out: Path, reference: Path, where: str) -> None:
    """The run in ``out`` is bit-exact the reference: final model, last checkpoint, Adam; no temporary anywhere."""
    assert not sorted(str(p.relative_to(out)) for p in out.rglob(".tmp-*")), where
    for prefer_final in (True, False):
        a = ckpt.load_checkpoint(reference, prefer_final=prefer_final)
        b = ckpt.load_checkpoint(out, prefer_final=prefer_final)
        assert a.step == b.step and a.state.get("model") == b.state.get("model"), where
        for name in a.weights:
            np.testing.assert_array_equal(a.weights[name], b.weights[name], err_msg=where)
        for name in a.optimizer or {}:
            np.testing.assert_array_equal(a.optimizer[name], b.optimizer[name], err_msg=where)
    assert run_folder.run_state(out) == "finished", where


def _recover(out: Path, overwrite: bool) -> None:
    """What a user does next: the --overwrite that was killed, again; else --resume, or, where the kill
    came before the run's first file, the same command."""
    if overwrite:
        train(_options(out, overwrite=True))
    else:
        train(_options(out, resume=run_folder.run_state(out) != "none"))


def _sweep(tmp_path: Path, every: int) -> int:
    reference = tmp_path / "reference"
    train(_options(reference))
    old_run = tmp_path / "old"                              # what --overwrite replaces: another run, finished
    train(_options(old_run, seed=7, steps=4))
    kills = 0
    for overwrite in (False, True):
        probe = tmp_path / "probe"
        if overwrite:
            shutil.copytree(old_run, probe)
        outcome, operations = _in_a_fork(_options(probe, overwrite=overwrite), kill_at=None)
        assert outcome == "finished" and operations > 20
        _same_run(probe, reference, "uninterrupted, in a fork")
        shutil.rmtree(probe)
        for kill_at in range(1, operations + 1, every):
            for when in ("before", "after"):
                out = tmp_path / f"{'overwrite' if overwrite else 'new'}-{kill_at}-{when}"
                if overwrite:
                    shutil.copytree(old_run, out)
                outcome, _ = _in_a_fork(_options(out, overwrite=overwrite), kill_at, when)
                assert outcome == "killed"
                what = "--overwrite" if overwrite else "new run"
                where = f"killed {when} operation {kill_at} of {operations} ({what})"
                _recover(out, overwrite)
                _same_run(out, reference, where)
                shutil.rmtree(out)
                kills += 1
    return kills


@pytest.mark.slow
def test_a_kill_sweep_sample(tmp_path):
    assert _sweep(tmp_path, every=21) >= 16


@pytest.mark.slow
@pytest.mark.later
def test_the_kill_sweep_in_full(tmp_path):
    assert _sweep(tmp_path, every=1) > 100
