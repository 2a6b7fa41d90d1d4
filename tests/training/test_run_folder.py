"""The run folder (--out): one writer at a time, checks before anything is written, and deletion of exactly what
the run wrote. The property test at the end drives random options through folders full of files of yours."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from minitransformer import checkpoint as ckpt
from minitransformer.checkpoint import CheckpointError
from minitransformer.training.trainer import TrainingError, train
from minitransformer.training import run_folder
from minitransformer.training.options import TrainOptions

ROOT = Path(__file__).resolve().parents[2]


def _options(out, **settings) -> TrainOptions:
    options = dict(out=str(out), preset="toy", limit=20, steps=2, average=1, evaluate=False, quiet=True)
    options.update(settings)
    return TrainOptions(**options)


def _tree(folder: Path) -> dict[str, str]:
    """Every entry below ``folder`` (links not followed) with what it is: the file's text, 'dir', or 'link->X'."""
    found = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if path.is_symlink():
            found[name] = f"link->{os.readlink(path)}"
        elif path.is_dir():
            found[name] = "dir"
        else:
            found[name] = path.read_bytes().decode("latin-1")
    return found


# -- what --overwrite deletes -------------------------------------------------------------------------------------
@pytest.mark.parametrize("holds_a_run", [False, True])
def test_overwrite_leaves_every_tmp_entry_of_yours(tmp_path, holds_a_run):
    """A user's .tmp-cache/ and .tmp-notes.txt used to be deleted (folders recursively) by train --overwrite."""
    out = tmp_path / "run"
    if holds_a_run:
        train(_options(out))
    else:
        out.mkdir()
    (out / ".tmp-cache").mkdir()
    (out / ".tmp-cache" / "downloaded.bin").write_text("a day of downloading")
    (out / ".tmp-notes.txt").write_text("mine")
    (out / ".tmp-config.json").write_text("mine too")                     # the name of a run file, after .tmp-
    train(_options(out, overwrite=True))
    assert (out / ".tmp-cache" / "downloaded.bin").read_text() == "a day of downloading"
    assert (out / ".tmp-notes.txt").read_text() == "mine" and (out / ".tmp-config.json").read_text() == "mine too"


def test_overwrite_removes_the_temporaries_a_killed_run_left(tmp_path):
    out = tmp_path / "run"
    train(_options(out))
    pid = 4242
    (out / f".tmp-config.json-{pid}-0123abcd").write_text("{")               # killed while writing config.json
    staging = out / f".tmp-final-{pid}-89abcdef"                             # killed while saving final/
    staging.mkdir()
    (staging / "model.npz").write_bytes(b"half")
    train(_options(out, overwrite=True))
    assert not (out / f".tmp-config.json-{pid}-0123abcd").exists() and not staging.exists()


@pytest.mark.parametrize("name", ["checkpoints", "final", "config.json"])
def test_overwrite_never_follows_a_link_of_yours(tmp_path, name):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years")
    out = tmp_path / "run"
    train(_options(out))
    target = out / name
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    target.symlink_to(precious)
    before = _tree(out)
    with pytest.raises(TrainingError, match=rf"{name} is a symbolic link"):
        train(_options(out, overwrite=True))
    assert _tree(out) == before and (precious / "thesis.tex").read_text() == "years"


# -- folders that must not be the run folder --------------------------------------------------------------------
def test_the_root_the_home_and_the_current_folder_are_refused(tmp_path, monkeypatch):
    """--out / used to be accepted: in a chroot it wrote config.json into / and deleted /.tmp-userdata/."""
    home = tmp_path / "home"
    work = home / "projects" / "mt"
    work.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    for out, what in (("/", "the root folder"), (str(home), "your home folder"), ("~", "your home folder"),
                      (".", "the current folder"), ("", "empty"), ("..", "the current folder"),
                      (str(home / "projects"), "the current folder")):
        lines = []
        with pytest.raises(TrainingError, match=f"--out {out!s}.*{what}" if out else "--out is empty"):
            train(_options(out, overwrite=True), log=lines.append)
        assert lines == []
    assert sorted(p.name for p in home.rglob("*")) == ["mt", "projects"]


def test_a_tilde_in_out_is_the_home_folder_not_a_folder_named_tilde(tmp_path, monkeypatch):
    """--out '~/runs/x' in quotes used to create a folder literally named ~ in the current folder."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    summary = train(_options("~/runs/x"))
    assert (home / "runs" / "x" / "config.json").is_file() and not (tmp_path / "~").exists()
    assert summary["out"] == str(home / "runs" / "x")


# -- one writer at a time -------------------------------------------------------------------------------------
def _cli(*args) -> subprocess.Popen:
    """``python -m minitransformer train ARGS``, which stops on SIGINT as from Ctrl-C in a terminal."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENBLAS_NUM_THREADS="1")
    return subprocess.Popen([sys.executable, "-m", "minitransformer", "train", *map(str, args)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_sigint_as_usual)


def _sigint_as_usual() -> None:
    """In the child, before Python starts: SIGINT at its default. A process inherits an ignored SIGINT, and
    a shell that is not interactive ignores it in what it starts in the background (``pytest ... &``); Python
    then keeps ignoring it, as a program should, and the run would train on through the test's SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_a_second_train_on_the_same_out_is_refused_while_the_first_runs(tmp_path):
    """Two processes on one --out used to crash each other and leave one's config with the other's checkpoints."""
    out = tmp_path / "run"
    first = _cli("--out", out, "--preset", "toy", "--limit", "20", "--steps", "100000", "--save-every", "100000",
                 "--seed", "1", "--no-eval")
    try:
        lock = out / run_folder.LOCK_FILE
        deadline = time.monotonic() + 120
        while not (lock.is_file() and lock.read_text().strip() == str(first.pid)):   # the first holds the lock
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.05)
        second = _cli("--out", out, "--preset", "toy", "--limit", "20", "--steps", "2", "--seed", "2", "--overwrite")
        stdout, stderr = second.communicate(timeout=120)
        assert second.returncode == 2, stdout + stderr
        assert f"another training process (pid {first.pid}) is writing {out}" in stderr and "Traceback" not in stderr
        while not (out / "config.json").is_file():                       # the first run is well under way
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        assert json.loads((out / "config.json").read_text())["training"]["seed"] == 1   # the second wrote nothing
    finally:
        first.send_signal(signal.SIGINT)
        try:
            first.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            first.kill()
            _, stderr = first.communicate()
            pytest.fail(f"the first run went on for 120 s after SIGINT; its stderr ends:\n{stderr[-2000:]}")
    assert first.returncode == 130
    resumed = train(_options(out, resume=True, steps=None, seed=None, evaluate=False, limit=None, preset=None))
    assert resumed["training"]["seed"] == 1                              # the first run, whole, resumes


def test_the_lock_names_the_process_that_holds_it(tmp_path):
    out = tmp_path / "run"
    with run_folder.lock(out):
        with pytest.raises(TrainingError, match=rf"another training process \(pid {os.getpid()}\) is writing"):
            train(_options(out))
        assert not (out / "config.json").exists()
    train(_options(out))                                                # released: the run goes ahead


@pytest.mark.parametrize("kind", ["link", "folder"])
def test_a_lock_file_that_is_not_a_plain_file_is_refused_not_written_through(tmp_path, kind):
    out, yours = tmp_path / "run", tmp_path / "yours.txt"
    out.mkdir()
    yours.write_text("mine")
    if kind == "link":
        (out / run_folder.LOCK_FILE).symlink_to(yours)
    else:
        (out / run_folder.LOCK_FILE).mkdir()
    with pytest.raises(TrainingError, match="cannot open the run's lock file"):
        train(_options(out))
    assert yours.read_text() == "mine" and not (out / "config.json").exists()


def test_a_lock_file_that_is_a_fifo_is_refused_naming_its_path(tmp_path):
    """A FIFO opens like a file, and then ftruncate said only "[Errno 22] Invalid argument"."""
    out = tmp_path / "run"
    out.mkdir()
    os.mkfifo(out / run_folder.LOCK_FILE)
    with pytest.raises(TrainingError, match=rf"lock file {out / run_folder.LOCK_FILE} is a FIFO \(named pipe\)"):
        train(_options(out))
    assert (out / run_folder.LOCK_FILE).is_fifo() and not (out / "config.json").exists()


def test_ranks_of_mpirun_without_distributed_are_refused(tmp_path, monkeypatch):
    """mpirun -n 2 ... train without --distributed: two separate runs into one --out."""
    monkeypatch.setenv("PMI_SIZE", "2")
    with pytest.raises(TrainingError, match="one of 2 processes that mpirun started.*--distributed"):
        train(_options(tmp_path / "run"))
    assert not (tmp_path / "run").exists()


def test_mpirun_without_distributed_really_refuses(tmp_path):
    from test_distributed import mpi_env, require_mpi

    command = [require_mpi(), "-n", "2", sys.executable, "-m", "minitransformer", "train", "--out", tmp_path / "run",
               "--preset", "toy", "--limit", "20", "--steps", "2", "--no-eval"]
    result = subprocess.run(list(map(str, command)), cwd=ROOT, env=mpi_env(), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "--distributed" in result.stderr and not (tmp_path / "run").exists()


# -- checks before anything is written ------------------------------------------------------------------------
@pytest.mark.parametrize("settings, message", [
    ({"seed": -1}, "--seed must be an integer >= 0, got -1"),
    ({"minutes": float("inf")}, "--minutes must be a positive finite number"),
    ({"attention": "local"}, "--attention local needs --attention-window"),
    ({"attention_window": 3}, "--attention-window 3 applies to --attention local only"),
    ({"attention": "linear", "attention_window": 3}, "--attention-window 3 applies to --attention local only"),
    ({"overwrite": True, "resume": True}, "--resume and --overwrite contradict each other"),
    ({"max_tokens": 2.5}, "--max-tokens must be a positive integer, got 2.5"),
    ({"preset": "huge"}, "unknown preset 'huge'"),
])
def test_every_option_is_checked_before_the_folder_is_touched(tmp_path, settings, message):
    for holds_a_run in (False, True):
        out = tmp_path / f"run-{holds_a_run}"
        if holds_a_run:
            train(_options(out))
        before = _tree(out) if out.exists() else None
        lines = []
        with pytest.raises(TrainingError, match=message.replace("(", r"\(").replace(")", r"\)")):
            train(_options(out, **settings), log=lines.append)
        assert lines == []                                               # no tokenizer learned, nothing said
        assert (_tree(out) if out.exists() else None) == before


def test_a_run_that_saved_no_checkpoint_starts_again_without_overwrite(tmp_path, monkeypatch):
    """Killed during the first save (or a full disk there): plain train said 'did not finish; pass --resume',
    and --resume said 'no checkpoint here'."""
    out = tmp_path / "run"

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(ckpt, "save_checkpoint", full_disk)
        with pytest.raises(OSError, match="No space left"):
            train(_options(out, seed=3))
    assert (out / "config.json").is_file() and not ckpt.list_checkpoints(out)
    lines = []
    summary = train(_options(out, seed=4), log=lines.append)            # other settings: nothing was kept
    assert summary["steps"] == 2 and summary["training"]["seed"] == 4
    assert any("saved no checkpoint" in line and "starting again" in line for line in lines)

    with monkeypatch.context() as patch:
        patch.setattr(ckpt, "save_checkpoint", full_disk)
        with pytest.raises(OSError):
            train(_options(tmp_path / "again", seed=5))
    resumed = train(_options(tmp_path / "again", resume=True, seed=None, preset=None, limit=None))
    assert resumed["steps"] == 2 and resumed["training"]["seed"] == 5   # the saved settings, from step 0


def test_saved_settings_that_are_not_a_table_are_refused_by_name(tmp_path):
    out = tmp_path / "run"
    train(_options(out, steps=2))
    (out / "results.json").unlink()
    config = json.loads((out / "config.json").read_text())
    for training, message in (([1, 2], "training is not a table"),
                              ({**config["training"], "seed": "zero"}, "training.seed must be an integer >= 0"),
                              ({**config["training"], "max_tokens": -4}, "training.max_tokens must be positive, got -4")):
        (out / "config.json").write_text(json.dumps({**config, "training": training}))
        with pytest.raises(TrainingError, match=rf"config\.json.*{message}"):
            train(_options(out, resume=True, steps=4, preset=None, limit=None))


@pytest.mark.parametrize("field", ["rng", "schedule", "epoch", "position"])
def test_a_checkpoint_without_a_field_of_its_state_is_refused_by_name(tmp_path, field):
    out = tmp_path / "run"
    train(_options(out, steps=2))
    (out / "results.json").unlink()
    latest = ckpt.resolve_checkpoint(out, prefer_final=False)
    state = json.loads((latest / "state.json").read_text())
    del state[field]
    (latest / "state.json").write_text(json.dumps(state))
    with pytest.raises(TrainingError, match=rf"state\.json.* has no {field!r}"):
        train(_options(out, resume=True, steps=4, preset=None, limit=None))


def test_resume_refuses_a_latest_pointer_into_another_run(tmp_path):
    base, out = tmp_path / "base", tmp_path / "runs" / "mine"
    train(_options(base, steps=4, save_every=2))
    train(_options(out, steps=2))
    (out / "results.json").unlink()
    (out / "latest").write_text("../../base/checkpoints/step-000004\n")
    with pytest.raises(TrainingError, match="latest points to .* outside"):
        train(_options(out, resume=True, steps=6, preset=None, limit=None))


# -- options that used to be ignored in silence -------------------------------------------------------------
def test_a_vocabulary_size_that_cannot_be_had_is_said(tmp_path):
    lines = []
    train(_options(tmp_path / "run", vocab_size=1, quiet=False), log=lines.append)
    said = [line for line in lines if "--vocab-size 1" in line]
    assert said and "tokens" in said[0] and "every character" in said[0]


def test_distributed_without_mpirun_says_it_trains_alone(tmp_path):
    pytest.importorskip("mpi4py")
    # in a process of its own: a rank that fails calls MPI_Abort, which would take the test's worker with it
    result = subprocess.run([sys.executable, "-m", "minitransformer", "train", "--out", str(tmp_path / "run"),
                             "--preset", "toy", "--limit", "20", "--epochs", "1", "--no-eval", "--average", "1",
                             "--no-plot", "--distributed"], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert result.returncode == 0, (result.stderr.strip().splitlines() or [""])[-1] + "\n" + result.stderr
    assert "--distributed: this process is the only rank" in result.stdout + result.stderr


# -- the property: whatever the options and whatever the folder holds, nothing of yours is deleted ---------------
NAME_CHARACTERS = "abcxyz019._-~ é"
names = st.builds(lambda prefix, body: prefix + body,
                  st.sampled_from(["", ".tmp-", ".tmp-step-", "step-", ".tmp-final-", ".tmp-config.json-", "."]),
                  st.text(NAME_CHARACTERS, min_size=1, max_size=10))


def _the_runs_own(place: str, name: str) -> bool:
    """Names that are the run's where they stand: a user who makes one makes a file of the run."""
    if name in (".", "..") or "/" in name or ckpt.temporary_of(name) is not None:
        return True
    if place == "top":
        return name in run_folder.RUN_FILES + run_folder.RUN_FOLDERS + (run_folder.LOCK_FILE,)
    if place in ("final", "checkpoint"):
        return name in ckpt.CHECKPOINT_FILES
    return place == "checkpoints" and ckpt.CHECKPOINT_NAME.fullmatch(name) is not None


yours = st.lists(st.tuples(st.sampled_from(["top", "nested", "checkpoints", "checkpoint", "final"]),
                           st.sampled_from(["file", "folder", "link to a file", "link to a folder"]), names),
                 max_size=5)
option_sets = st.fixed_dictionaries({}, optional={
    "overwrite": st.booleans(), "resume": st.booleans(), "seed": st.sampled_from([0, 1, -1]),
    "steps": st.integers(1, 3), "save_every": st.integers(1, 2), "average": st.integers(1, 3),
    "vocab_size": st.sampled_from([1, 120, 300]), "preset": st.sampled_from(["toy", None]),
    "attention": st.sampled_from(["local", "linear", None]), "attention_window": st.sampled_from([2, None]),
    "limit": st.sampled_from([12, 20, None])})


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    """Run folders to start from: finished, interrupted, started (no checkpoint), killed (temporaries left)."""
    root = tmp_path_factory.mktemp("templates")
    finished = root / "finished"
    train(_options(finished, steps=3, save_every=1, average=2))
    interrupted = root / "interrupted"
    shutil.copytree(finished, interrupted)
    (interrupted / "results.json").unlink()
    shutil.rmtree(interrupted / "final")
    started = root / "started"
    started.mkdir()
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(finished / name, started / name)
    killed = root / "killed"
    shutil.copytree(interrupted, killed)
    (killed / f".tmp-results.json-77-{'0' * 8}").write_text("{")
    (killed / "checkpoints" / f".tmp-step-000004-77-{'a' * 8}").mkdir()
    return {"finished": finished, "interrupted": interrupted, "started": started, "killed": killed}


def _make(kind: str, path: Path, content: str, outside: Path) -> None:
    if kind == "file":
        path.write_text(content)
    elif kind == "folder":
        path.mkdir()
        (path / "inside.txt").write_text(content)
    else:
        target = outside / f"target-{content}"
        if kind == "link to a file":
            target.write_text(content)
        else:
            target.mkdir()
            (target / "inside.txt").write_text(content)
        path.symlink_to(target)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(start=st.sampled_from(["missing", "empty", "finished", "interrupted", "started", "killed"]),
       entries=yours, options=option_sets)
@example(start="finished", entries=[("top", "folder", "cache"), ("top", "file", "notes.txt")],
         options={"overwrite": True})                       # the .tmp- prefix is added below, as a user's name
@example(start="killed", entries=[("checkpoints", "link to a folder", "step-000009")], options={"resume": True})
@example(start="started", entries=[("checkpoint", "file", "notes")], options={})
def test_no_file_the_run_did_not_write_is_ever_deleted(tmp_path, templates, start, entries, options):
    """Random options through hand-made run folders holding files, folders and links of yours (.tmp-* names
    among them): whether the run trains, resumes, starts again or is refused, all of them are still there."""
    case = Path(tempfile.mkdtemp(dir=tmp_path))
    out, outside = case / "run", case / "outside"
    outside.mkdir()
    if start in templates:
        shutil.copytree(templates[start], out, symlinks=True)
    elif start == "empty" or entries:
        out.mkdir()
    if entries:
        (out / "my-notes").mkdir()
    places = {"top": out, "nested": out / "my-notes", "checkpoints": out / "checkpoints",
              "checkpoint": out / "checkpoints" / "step-000003", "final": out / "final"}
    mine = ["my-notes"] if entries else []
    for number, (place, kind, name) in enumerate(entries):
        name = f".tmp-{name}" if start == "finished" and place == "top" and number < 2 else name
        path = places[place] / name
        if not places[place].is_dir() or _the_runs_own(place, name) or path.exists() or path.is_symlink():
            continue
        _make(kind, path, f"yours-{number}", outside)
        mine.append(str(path.relative_to(out)))
    before, outside_before = _tree(out) if out.exists() else {}, _tree(outside)
    yours_before = {name: what for name, what in before.items()
                    if any(name == path or name.startswith(path + os.sep) for path in mine)}

    try:
        train(_options(out, **{"steps": 2, **options}))
    except (TrainingError, CheckpointError):
        pass                                   # a refusal: fine, as long as it deleted nothing of yours

    after = _tree(out) if out.exists() else {}
    lost = {name: what for name, what in yours_before.items() if after.get(name) != what}
    assert not lost, f"deleted or changed: {lost}"
    assert _tree(outside) == outside_before
