"""A run that says what it is (issue 48): its final model never from past its stop, its corpus fingerprinted,
its folder never blocked by its own leftovers, and messages a user can act on."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from minitransformer import checkpoint as ckpt
from minitransformer.data.run_data import load_data
from minitransformer.presets import PRESETS
from minitransformer.training import run_folder, trainer
from minitransformer.training.options import TrainOptions
from minitransformer.training.trainer import TrainingError, train


def _options(out, **settings) -> TrainOptions:
    options = dict(out=str(out), preset="toy", limit=20, steps=2, average=1, evaluate=False, quiet=True)
    options.update(settings)
    return TrainOptions(**options)


def _corpus(folder: Path, pairs_per_split: int = 20) -> Path:
    """A corpus folder of TSV files, from the built-in corpus's sentences."""
    folder.mkdir(parents=True)
    corpus = load_data(None, "en-ja", PRESETS["toy"]["corpus"], limit=pairs_per_split)
    for split in ("train", "dev", "test"):
        (folder / f"{split}.tsv").write_text("".join(f"{en}\t{ja}\n" for en, ja in corpus.pairs(split, "en-ja")),
                                             encoding="utf-8")
    return folder


def _temporaries(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob(".tmp-*"))


# -- 1. a final model never from past the stop ------------------------------------------------------------------
def test_resume_refuses_steps_below_the_step_reached_naming_both(tmp_path):
    """`--resume --steps 7` on a finished 10-step run used to exit 0 and record 7 steps for a 10-step model."""
    out = tmp_path / "run"
    train(_options(out, steps=4, save_every=2))
    before = json.loads((out / "results.json").read_text())
    with pytest.raises(TrainingError, match=r"--steps 3 is below the step this run has reached, 4 \(.*step-000004\)"):
        train(_options(out, steps=3, resume=True))
    assert json.loads((out / "results.json").read_text()) == before          # nothing rewritten


def test_the_final_model_averages_only_checkpoints_up_to_the_runs_own_step(tmp_path, monkeypatch):
    """With `latest` pointed back at step 5 (as an error message suggests), a resume to step 6 used to average
    steps 4–8 into its final model while results.json said 6 steps."""
    out = tmp_path / "run"
    train(_options(out, steps=8, save_every=1, average=5))
    (out / "latest").write_text("checkpoints/step-000005\n")
    averaged = []
    real_average = ckpt.average_checkpoints

    def recording(paths):
        paths = list(paths)
        averaged.append([p.name for p in paths])
        return real_average(paths)

    monkeypatch.setattr(trainer.ckpt, "average_checkpoints", recording)
    summary = train(_options(out, steps=6, save_every=1, average=5, resume=True))
    assert summary["steps"] == 6
    assert averaged and all(name <= "step-000006" for names in averaged for name in names), averaged
    assert summary["final_choice"]["averaged_checkpoints"] <= 3        # steps 4, 5 and 6 at most


# -- 2. the corpus, resolved and fingerprinted -----------------------------------------------------------------
def test_resume_refuses_a_corpus_whose_files_changed(tmp_path):
    corpus = _corpus(tmp_path / "corpus")
    out = tmp_path / "run"
    train(_options(out, data=str(corpus), steps=2, save_every=1, limit=None))
    recorded = json.loads((out / "config.json").read_text())["corpus"]
    assert recorded["path"] == str(corpus.resolve()) and set(recorded["files"]) == {"train.tsv", "dev.tsv", "test.tsv"}
    with open(corpus / "train.tsv", "a", encoding="utf-8") as f:
        f.write("a new cat .\tあたらしい ねこ 。\n")
    with pytest.raises(TrainingError, match=r"--resume: the corpus .*corpus is not the one this run began with: "
                                            r"train.tsv changed"):
        train(_options(out, steps=4, resume=True, limit=None))
    assert ckpt.load_checkpoint(out, prefer_final=False).step == 2


def test_spellings_of_one_corpus_folder_are_one_folder(tmp_path, monkeypatch):
    """`corpus/`, `./corpus` and the absolute path were refused as "other settings" of one run."""
    corpus = _corpus(tmp_path / "corpus")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    train(_options(out, data="corpus", steps=2, save_every=1, limit=None))
    assert json.loads((out / "config.json").read_text())["training"]["data"] == str(corpus.resolve())
    train(_options(out, data="./corpus/", steps=3, save_every=1, limit=None, resume=True))
    summary = train(_options(out, data=str(corpus), steps=3, save_every=1, limit=None))
    assert summary["already_trained"] and summary["steps"] == 3


def test_a_resume_from_another_folder_trains_on_the_runs_own_corpus(tmp_path, monkeypatch):
    """A relative --data was kept as typed, and --resume from another folder trained on that folder's corpus."""
    corpus = _corpus(tmp_path / "here" / "corpus")
    _corpus(tmp_path / "elsewhere" / "corpus", pairs_per_split=30)         # another corpus of the same name
    out = tmp_path / "run"
    monkeypatch.chdir(corpus.parent)
    train(_options(out, data="corpus", steps=2, save_every=1, limit=None))
    monkeypatch.chdir(tmp_path / "elsewhere")
    lines = []
    train(_options(out, steps=3, resume=True, limit=None, quiet=False), log=lines.append)
    assert any("corpus corpus en-ja: 20 training pairs" in line for line in lines), lines


def test_a_run_from_before_fingerprints_still_resumes_and_says_so_once(tmp_path):
    corpus = _corpus(tmp_path / "corpus")
    out = tmp_path / "run"
    train(_options(out, data=str(corpus), steps=2, save_every=1, limit=None))
    config = json.loads((out / "config.json").read_text())
    del config["corpus"]
    (out / "config.json").write_text(json.dumps(config))
    lines = []
    summary = train(_options(out, steps=3, resume=True, limit=None, quiet=False), log=lines.append)
    assert summary["steps"] == 3
    notes = [line for line in lines if "before runs recorded their corpus's fingerprint" in line]
    assert len(notes) == 1, lines


# -- 8. a kill while --overwrite clears the folder -------------------------------------------------------------
class _Killed(BaseException):
    """Stands for the kill: nothing of the process's own clean-up that catches Exception runs."""


@pytest.mark.slow
def test_a_kill_at_any_deletion_of_overwrite_leaves_a_folder_that_overwrite_takes(tmp_path, monkeypatch):
    """A kill between deleting the old run and writing the new one could leave results.json and tokenizer.json,
    which every later command refused."""
    reference = train(_options(tmp_path / "reference", steps=2, save_every=1, average=2, seed=3))
    deletions = 0
    real_unlink, real_rmdir = os.unlink, os.rmdir

    def counting(real):
        def call(*args, **kwargs):
            nonlocal deletions
            deletions += 1
            if deletions == kill_at:
                raise _Killed()
            return real(*args, **kwargs)
        return call

    kill_at, total = 0, None
    while total is None or kill_at < total:
        kill_at += 1
        out = tmp_path / f"run{kill_at}"
        train(_options(out, steps=2, save_every=1, average=2))
        (out / "notes.txt").write_text("mine")                        # a file of the user's, kept throughout
        deletions = 0
        monkeypatch.setattr(os, "unlink", counting(real_unlink))
        monkeypatch.setattr(os, "rmdir", counting(real_rmdir))
        try:
            train(_options(out, steps=2, save_every=1, average=2, seed=3, overwrite=True))
            total = kill_at                                            # no kill: every deletion was passed
        except _Killed:
            pass
        finally:
            monkeypatch.undo()
        summary = train(_options(out, steps=2, save_every=1, average=2, seed=3, overwrite=True))
        assert summary["config"] == reference["config"] and summary["losses"] == reference["losses"], kill_at
        assert (out / "notes.txt").read_text() == "mine" and not _temporaries(out)
    assert total > 10                          # the old run's files, checkpoints and final model, one by one


def test_the_leftovers_of_an_older_killed_overwrite_are_cleared_by_overwrite_and_yours_are_kept(tmp_path):
    """What the earlier order of deletion left (results.json and tokenizer.json, no config.json)."""
    out = tmp_path / "run"
    train(_options(out, steps=2))
    for entry in out.iterdir():
        if entry.name not in ("results.json", "tokenizer.json", run_folder.LOCK_FILE):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    with pytest.raises(TrainingError, match="pass --overwrite to clear them"):
        train(_options(out, steps=2))
    summary = train(_options(out, steps=2, overwrite=True))
    assert summary["steps"] == 2 and run_folder.run_state(out) == "finished"

    yours = tmp_path / "yours"
    yours.mkdir()
    from minitransformer.data.tokenizer import TOKENIZERS
    TOKENIZERS["words"].train(["a cat .", "a dog ."], 20).save(yours / "tokenizer.json")   # saved by you
    (yours / "results.json").write_text('{"my": "results"}\n')
    for overwrite in (False, True):
        with pytest.raises(TrainingError, match="but no training run"):
            train(_options(yours, steps=2, overwrite=overwrite))
    assert (yours / "results.json").read_text() == '{"my": "results"}\n' and (yours / "tokenizer.json").is_file()


# -- 9. a name that is not UTF-8 ------------------------------------------------------------------------------
@pytest.mark.skipif(sys.platform == "darwin", reason="macOS file names must be UTF-8")
def test_an_out_that_is_not_utf8_is_refused_before_training(tmp_path):
    """It used to train to the end and fail writing results.json, and every --resume the same way."""
    out = os.fsdecode(os.fsencode(tmp_path) + b"/run-\xff")
    lines = []
    with pytest.raises(TrainingError, match=r"--out .*run-\\udcff: the name is not valid UTF-8"):
        train(_options(out, steps=1), log=lines.append)
    assert lines == [] and not os.path.lexists(out)


# -- 11. a resumed run removes its own temporaries, and only those -----------------------------------------------
def test_a_resumed_run_removes_the_temporaries_a_kill_left_and_only_those(tmp_path):
    out = tmp_path / "run"
    train(_options(out, steps=2, save_every=1, average=2))
    ours = [out / ".tmp-latest-4242-0123abcd", out / ".tmp-results.json-4242-89abcdef"]
    for path in ours:
        path.write_text("half")
    staging = out / ".tmp-final-4242-deadbeef"                       # a final model half-saved
    staging.mkdir()
    (staging / "model.npz").write_bytes(b"half")
    retired = out / "checkpoints" / ".tmp-step-000002-4242-00c0ffee"  # a checkpoint half-replaced
    retired.mkdir()
    (retired / "state.json").write_text("{")
    yours = [out / ".tmp-latest-mine", out / ".tmp-final-4242-cafebabe" / "notes.txt"]
    yours[1].parent.mkdir()
    for path in yours:
        path.write_text("mine")
    train(_options(out, steps=3, save_every=1, average=2, resume=True))
    assert not any(path.exists() for path in [*ours, staging, retired])
    assert all(path.read_text() == "mine" for path in yours)
    assert _temporaries(out) == [".tmp-final-4242-cafebabe", ".tmp-latest-mine"]


# -- 13. messages ---------------------------------------------------------------------------------------------
def test_a_second_train_on_an_active_run_says_at_once_that_it_is_active_with_its_pid(tmp_path):
    """An unfinished run being trained used to send the second command to --resume or --overwrite, which the lock
    then refused in turn."""
    out = tmp_path / "run"
    train(_options(out, steps=2, save_every=1, average=2))
    (out / "results.json").unlink()                                   # unfinished, as while it trains
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, sys
        fd = os.open({str(out / run_folder.LOCK_FILE)!r}, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.pwrite(fd, f"{{os.getpid()}}\\n".encode(), 0)
        print("locked", flush=True)
        sys.stdin.read()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        for settings in ({}, {"resume": True}, {"overwrite": True}):
            with pytest.raises(TrainingError, match=rf"another training process \(pid {holder.pid}\) is writing "
                                                    rf".*: the run there is active"):
                train(_options(out, steps=4, save_every=1, average=2, **settings))
    finally:
        holder.communicate("", timeout=30)


def test_ctrl_c_says_the_step_and_the_resume_command_after_the_bar_is_closed(tmp_path, monkeypatch, capsys):
    out = tmp_path / "my runs" / "first"
    real_step = trainer.train_step

    def step(run, batch, cooldown=1.0):
        if run.state.step == 3:
            raise KeyboardInterrupt
        return real_step(run, batch, cooldown)

    monkeypatch.setattr(trainer, "train_step", step)
    with pytest.raises(KeyboardInterrupt):
        train(_options(out, steps=6, save_every=2, average=2, quiet=False))
    err = capsys.readouterr().err
    notice = err.rstrip("\n").split("\n")[-1]                       # the last line: no bar drawn after it
    assert notice.startswith("interrupted at step 3; the last checkpoint is step-000002, where this continues: ")
    command = notice.split("continues: ")[1]
    assert shlex.quote(str(out)) in command and "'" in command         # the space is quoted for the shell
    words = shlex.split(command)
    assert words[:4] == ["python", "-m", "minitransformer", "train"] and "--resume" in words
    assert words[words.index("--steps") + 1] == "6"                     # not saved with the run: said again
    monkeypatch.undo()
    from minitransformer.__main__ import main
    monkeypatch.setenv("MINITRANSFORMER_MALLOC", "0")
    assert main(words[3:] + ["--quiet"]) == 0
    assert ckpt.load_checkpoint(out).state["step"] == 6


def test_ctrl_c_while_the_final_model_is_scored_says_how_to_resume_too(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"

    def interrupted(run):
        raise KeyboardInterrupt

    monkeypatch.setattr(trainer, "choose_final_weights", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train(_options(out, steps=2, save_every=1, average=2))
    notice = capsys.readouterr().err.strip().split("\n")[-1]
    assert notice.startswith("interrupted at step 2; the last checkpoint is step-000002, where this continues: ")
    monkeypatch.undo()
    assert train(_options(out, steps=2, save_every=1, average=2, resume=True))["steps"] == 2


def test_the_closing_hint_quotes_a_path_with_spaces(tmp_path):
    out = tmp_path / "my run"
    lines = []
    train(_options(out, steps=1, quiet=False), log=lines.append)
    assert lines[-1].endswith(f'try: python -m minitransformer translate --checkpoint {shlex.quote(str(out))} "..."')


@pytest.mark.parametrize("inside", ["checkpoints/mine", "checkpoints", "final/x"])
def test_an_out_inside_another_runs_checkpoints_is_refused(tmp_path, inside):
    """It was accepted, and blocked that run's --overwrite."""
    out = tmp_path / "run"
    train(_options(out, steps=1))
    with pytest.raises(TrainingError, match=r"--out .* is inside .*run/(checkpoints|final), the .*/ folder of the "
                                            r"run in"):
        train(_options(out / inside, steps=1))
    assert train(_options(out, steps=1, overwrite=True))["steps"] == 1


def test_a_resumed_run_ends_bit_exact_with_the_same_final_model(tmp_path):
    """The fingerprint, the step check and the clean-up change nothing in what a resumed run computes."""
    straight = train(_options(tmp_path / "straight", steps=4, save_every=1, average=3))
    train(_options(tmp_path / "resumed", steps=2, save_every=1, average=3))
    resumed = train(_options(tmp_path / "resumed", steps=4, save_every=1, average=3, resume=True))
    a, b = (ckpt.load_checkpoint(tmp_path / name) for name in ("straight", "resumed"))
    for name in a.weights:
        np.testing.assert_array_equal(a.weights[name], b.weights[name])
    assert straight["final_model"] == resumed["final_model"]
