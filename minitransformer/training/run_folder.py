"""The run folder (``--out``): what belongs to a run, who may write it, and how it is checked, reused or cleared.

A run knows exactly what it writes, and deletes nothing else:

* the names of its layout (see checkpoint.py): config.json, tokenizer.json, latest, results.json,
  attention.png, checkpoints/step-NNNNNN/ and final/, each folder holding only a checkpoint's files;
* temporaries of those names in the one form its atomic writes give them,
  ``.tmp-<name>-<pid>-<8 hex digits>`` (a ``.tmp-cache/`` of yours is not one of them);
* and never through a symbolic link: a run makes none, so a link among its names is yours.

``--overwrite`` (and a new start of a run that saved no checkpoint) deletes those and nothing
else; a folder of the run that holds anything more is refused before anything is deleted, and
so is a folder that holds some of these names but no run: its files are not ours to replace.

One process writes a run folder at a time: it holds an exclusive lock (``flock``) on
OUT/.minitransformer.lock for the life of the run, and a second ``train`` on the same folder is
refused with the first one's pid. Every option is checked before the folder is created or
touched, and the folder's state is checked again once the lock is held.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Callable, Iterator

from .. import checkpoint as ckpt
from .options import (DEFINING, SAVED_BEFORE, TrainingError, TrainOptions, check_options, check_value,
                      resolve_options, result_settings, same_setting)

try:
    import fcntl
except ImportError:                       # Windows: no flock; one writer at a time is then up to you
    fcntl = None

CONFIG_FILE, RESULTS_FILE, ATTENTION_FILE = "config.json", "results.json", "attention.png"
LOCK_FILE = ".minitransformer.lock"     # locked while a process writes the run; holds that process's pid
RUN_FILES = (CONFIG_FILE, ckpt.TOKENIZER_FILE, ckpt.LATEST_FILE, RESULTS_FILE, ATTENTION_FILE)
RUN_FOLDERS = (ckpt.CHECKPOINT_DIR, ckpt.FINAL_DIR)
CHECKPOINT_FILES = ckpt.CHECKPOINT_FILES
# the names whose temporaries an atomic write leaves at the top of a run folder when it is killed
TEMPORARY_NAMES = (CONFIG_FILE, ckpt.TOKENIZER_FILE, ckpt.LATEST_FILE, RESULTS_FILE, ckpt.FINAL_DIR)
# variables the MPI launchers set in every process they start: how many processes the run has
WORLD_SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE")


# -- what a run folder holds --------------------------------------------------------------------------------
def holds_run(out: Path) -> bool:
    """Whether ``out`` holds a run of ours (finished, interrupted, or killed after its first file)."""
    config = _read_json(out / CONFIG_FILE)
    if isinstance(config, dict) and {"model", "training"} <= set(config):
        return True
    return (out / ckpt.LATEST_FILE).is_file() or bool(ckpt.list_checkpoints(out))


def run_state(out: Path) -> str:
    """"none", "started" (a run that saved no checkpoint: nothing to resume, nothing lost by starting
    again), "interrupted" (checkpoints, no final results) or "finished"."""
    if not out.is_dir() or not holds_run(out):
        return "none"
    if finished_results(out) is not None:
        return "finished"
    return "interrupted" if ckpt.list_checkpoints(out) else "started"


def finished_results(out: Path) -> dict | None:
    """results.json of a finished run (one with a complete final model), else None."""
    results = _read_json(out / RESULTS_FILE)
    finished = (out / ckpt.FINAL_DIR / ckpt.STATE_FILE).is_file()
    return results if finished and isinstance(results, dict) else None


def foreign_run_names(out: Path) -> list[str]:
    """Names a run would write that exist in ``out`` although it holds no run."""
    if not out.is_dir() or holds_run(out):
        return []
    return [name for name in RUN_FILES + RUN_FOLDERS if (out / name).exists() or (out / name).is_symlink()]


def left_by_a_run(path: Path) -> bool:
    """Whether ``path``, a name of the run layout in a folder that holds no run, is what a run killed while it
    cleared the folder (``--overwrite``) left: a file exactly as a run writes it (write_json_atomic's form, with
    the fields a run puts there), or final/ or checkpoints/ holding only what a save writes. Versions before
    clear_run deleted config.json last could leave such files, and nothing else would ever clear them."""
    if path.is_symlink():
        return False
    if path.name in RUN_FOLDERS:
        return path.is_dir() and not _foreign_inside(path)
    if not path.is_file():
        return False
    try:
        text = path.read_text(encoding="utf-8")
        if path.name == ckpt.LATEST_FILE:
            return re.fullmatch(r"checkpoints/step-[0-9]{6,}\n", text) is not None
        data = json.loads(text)
    except (OSError, ValueError):
        return False
    fields = {RESULTS_FILE: {"out", "steps", "config", "training"}, ckpt.TOKENIZER_FILE: {"kind"}}.get(path.name)
    return (fields is not None and isinstance(data, dict) and fields <= set(data)
            and text == json.dumps(data, ensure_ascii=False, indent=1) + "\n")


def saved_settings(out: Path) -> dict:
    """The defining settings of the run in ``out`` (config.json), for ``--resume``; each checked by name."""
    path = out / CONFIG_FILE
    try:
        settings = json.loads(path.read_text(encoding="utf-8"))["training"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise TrainingError(f"--resume: cannot read {path} ({type(error).__name__}: {error})") from None
    if not isinstance(settings, dict):
        raise TrainingError(f"--resume: {path}: training is not a table of settings (got "
                            f"{type(settings).__name__} {settings!r})")
    for name in DEFINING:
        check_value(name, settings.get(name), f"--resume: {path}: training.{name}")
    return settings


NOT_RECORDED = object()     # saved_corpus of a run started before runs recorded their corpus


def saved_corpus(out: Path) -> object:
    """The fingerprint of its corpus that the run in ``out`` recorded (config.json's "corpus": None for the
    built-in corpus), or NOT_RECORDED for a run started before runs recorded one."""
    config = _read_json(out / CONFIG_FILE)
    if not isinstance(config, dict) or "corpus" not in config:
        return NOT_RECORDED
    recorded = config["corpus"]
    if recorded is not None and not (isinstance(recorded, dict) and isinstance(recorded.get("files"), dict)):
        raise TrainingError(f"--resume: {out / CONFIG_FILE}: corpus is not a fingerprint of a corpus folder "
                            f"(got {recorded!r})")
    return recorded


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


# -- --out itself ---------------------------------------------------------------------------------------
def check_out(given: str) -> Path:
    """--out as a path (a quoted ~ expanded), refusing a folder that cannot be a run folder: empty, a file,
    below a file, not writable, or the root, the home folder, the current folder or a folder above it."""
    if not str(given).strip():     # Path("") is the current folder: the run would fill it
        raise TrainingError("--out is empty; name the run folder (default runs/enja)")
    out = Path(os.path.expanduser(given))
    where = out.resolve()
    cwd = Path.cwd().resolve()
    if where == Path(where.anchor):
        what = "the root folder"
    elif where == _home():
        what = "your home folder"
    elif where == cwd or where in cwd.parents:
        what = "the current folder" + ("" if where == cwd else f" ({cwd}) or a folder above it")
    else:
        _check_not_inside_a_run(given, where)
        _check_writable_folder(out)
        return out
    raise TrainingError(f"--out {given}: is {what}; a run fills --out with config.json, checkpoints/, final/ "
                        f"and more, so give it a folder of its own, such as runs/enja")


def _check_not_inside_a_run(given: str, where: Path) -> None:
    """Refuse an --out inside another run's checkpoints/ or final/: that run's saves and --overwrite own those
    folders, and a run inside would block its --overwrite (it deletes only what a save writes there)."""
    for folder in (where, *where.parents):
        if folder.name in RUN_FOLDERS and folder.parent != folder and holds_run(folder.parent):
            raise TrainingError(f"--out {given}: is inside {folder}, the {folder.name}/ folder of the run in "
                                f"{folder.parent}, which only that run writes; choose a folder of its own, such "
                                f"as runs/enja")


def _home() -> Path | None:
    try:
        return Path.home().resolve()
    except (RuntimeError, KeyError):     # no HOME and no password entry
        return None


def _check_writable_folder(out: Path) -> None:
    """Refuse an ``--out`` that cannot become a folder (a file, or a file among its parents)."""
    existing = out
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing == out and not out.is_dir():
        raise TrainingError(f"--out {out}: is a file, not a folder")
    if not existing.is_dir():
        raise TrainingError(f"--out {out}: cannot be a folder ({existing} is a file)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise TrainingError(f"--out {out}: no permission to write in {existing}")


def check_launch(options: TrainOptions) -> None:
    """Refuse the processes of ``mpirun -n P`` without --distributed: P separate runs into one --out."""
    for name in WORLD_SIZE_VARIABLES:
        size = os.environ.get(name, "")
        if size.isdigit() and int(size) > 1 and not options.distributed:
            raise TrainingError(f"this process is one of {size} processes that mpirun started, and without "
                                f"--distributed each would train a run of its own into the same --out; add "
                                f"--distributed (one run over {size} ranks, chapter 14) or start one process")


# -- opening: checks only ---------------------------------------------------------------------------------
def open_run_folder(options: TrainOptions) -> tuple[TrainOptions, dict | None]:
    """Check ``--out`` and the options against what it holds, before any work; nothing is written.

    Returns the resolved options and, when resuming from a checkpoint, the saved settings. A run that
    saved no checkpoint is started again (``--resume`` then starts it again with its saved settings).
    A finished run comes back with ``saved`` None and ``run_state`` "finished": see ``same_finished_run``.
    """
    check_launch(options)
    check_options(options)                   # every option's own value, before the folder is even looked at
    out = check_out(options.out)
    check_not_active(out)
    foreign = foreign_run_names(out)
    leftovers = bool(foreign) and all(left_by_a_run(out / name) for name in foreign)
    if foreign and not (leftovers and options.overwrite and not options.resume):
        hint = (" They are what a run killed while --overwrite cleared the folder leaves: pass --overwrite to "
                "clear them and train there." if leftovers else "")
        raise TrainingError(f"--out {out} holds {', '.join(foreign)} but no training run, and a run would "
                            f"replace them; choose another --out.{hint}")
    state = run_state(out)
    if not options.resume:
        if options.overwrite or state == "started":
            check_clearable(out)
        return resolve_options(options, None), None
    if state == "none":
        raise TrainingError(f"--resume: {out} holds no run to resume (no config.json / latest checkpoint)")
    saved = saved_settings(out)
    opts = resolve_options(options, saved)
    if state == "started":                   # nothing saved to continue from: the same run, from step 0
        check_clearable(out)
        return opts, None
    return opts, saved


def same_finished_run(opts: TrainOptions, say: Callable[[str], None], ranks: int = 1) -> dict:
    """The results of the same run, finished, in ``--out``; any other run there is refused.
    ``ranks``: how many MPI ranks this run would use (chapter 14), part of what makes it the same run."""
    out = Path(opts.out)
    results = finished_results(out)
    if results is None:
        raise TrainingError(f"{out} already holds a training run that did not finish; pass --resume to continue "
                            f"it, --overwrite to start again there, or choose another --out")
    previous = results.get("options")
    wanted = {**result_settings(opts), "ranks": ranks}
    if isinstance(previous, dict):
        previous = {"ranks": 1, **SAVED_BEFORE, **previous}   # a run from before --distributed: one process;
        #                                                       from before --model: a Transformer
    differences = ["it was trained by an older version"] if not isinstance(previous, dict) else [
        f"{name} {previous.get(name)!r} there, {value!r} now" for name, value in wanted.items()
        if not same_setting(name, previous.get(name), value)]
    if differences:
        raise TrainingError(f"{out} already holds a training run with other settings ({'; '.join(differences)}); "
                            f"pass --resume to continue it, --overwrite to replace it, or choose another --out")
    scores = ", ".join(f"{name} {results[name]}" + (f" ({results[name + '_tokenize']} tokens)"
                                                   if name + "_tokenize" in results else "")
                       for name in ("test_bleu", "test_heldout_bleu") if name in results)
    say(f"{out} already holds this run, finished{f' ({scores})' if scores else ''}: nothing to train "
        f"(--overwrite trains it again)")
    return {**results, "already_trained": True}


# -- one writer at a time -----------------------------------------------------------------------------
def active_writer(out: Path) -> str | None:
    """The pid of another process that holds the lock of ``out`` (a run being trained there), else None.
    Looks only: creates nothing, and lets go of the lock at once if it was free."""
    if fcntl is None:
        return None
    try:                                  # O_NONBLOCK: a FIFO in its place must not hang the look
        fd = os.open(out / LOCK_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None                       # no lock file (no run ever held it), or not one to read: lock() says
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            return None if holder == str(os.getpid()) else holder
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def check_not_active(out: Path) -> None:
    """Refuse, first of all, a folder whose run another process is training now: the state of its files
    (unfinished, say) would otherwise send the user to --resume or --overwrite, which the lock then refuses."""
    holder = active_writer(out)
    if holder is not None:
        raise TrainingError(f"another training process (pid {holder}) is writing {out}: the run there is active "
                            f"now, so neither --resume nor --overwrite can have it; wait until it ends, stop it "
                            f"(kill {holder}), or choose another --out")


@contextlib.contextmanager
def lock(out: Path) -> Iterator[None]:
    """Hold the run folder's lock: create ``out`` and OUT/.minitransformer.lock, take an exclusive ``flock``
    on it, write this process's pid into it. Another process that holds it already is named in the refusal.
    The kernel lets go of the lock when the process ends, however it ends (a kill included)."""
    out.mkdir(parents=True, exist_ok=True)
    if fcntl is None:
        yield
        return
    try:                                  # O_NOFOLLOW: a link in its place is not ours to write through
        fd = os.open(out / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    except OSError as error:
        raise TrainingError(f"--out {out}: cannot open the run's lock file {out / LOCK_FILE} "
                            f"({error.strerror or error}); a run keeps it there, as a plain file") from None
    _check_plain_file(fd, out / LOCK_FILE)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:                   # held: by another process, or by this one for another run
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise TrainingError(f"another training process (pid {holder}) is writing {out}; wait until it ends, "
                                f"stop it, or choose another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)           # no pid left behind to be taken for a running process
    finally:
        os.close(fd)                      # releases the flock


def _check_plain_file(fd: int, path: Path) -> None:
    """Close ``fd`` and refuse when it is no regular file: a FIFO in the lock file's place opens, and then
    ftruncate failed with a bare "[Errno 22] Invalid argument" that named no path."""
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else \
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a plain file"
        raise TrainingError(f"the run's lock file {path} is {kind}; a run keeps a plain file there: move it away "
                            f"(it is not the run's to delete) or choose another --out")


# -- clearing: exactly what a run wrote -----------------------------------------------------------------------
def _ours_at_the_top(out: Path) -> tuple[list[Path], list[Path]]:
    """(entries of the run at the top of ``out``, entries among them that no run writes as they are)."""
    ours, problems = [], []
    for entry in sorted(out.iterdir()):
        name, stands_for = entry.name, ckpt.temporary_of(entry.name)
        if name in RUN_FILES + RUN_FOLDERS:
            ours.append(entry)
            if entry.is_symlink() or (entry.is_file() if name in RUN_FOLDERS else not entry.is_file()):
                problems.append(entry)
            elif name in RUN_FOLDERS:
                problems += _foreign_inside(entry)
        elif stands_for in TEMPORARY_NAMES and not entry.is_symlink() and \
                (entry.is_dir() if stands_for == ckpt.FINAL_DIR else entry.is_file()):
            ours.append(entry)            # left by a killed write; a folder that holds more than that stays below
    return ours, problems


def _foreign_inside(folder: Path) -> list[Path]:
    """What final/ or checkpoints/ holds that no run writes there."""
    if folder.name == ckpt.FINAL_DIR:
        return ckpt.foreign_entries(folder)
    found = []
    for entry in sorted(folder.iterdir()):
        name = entry.name if ckpt.CHECKPOINT_NAME.fullmatch(entry.name) else ckpt.temporary_of(entry.name)
        if entry.is_symlink() or not entry.is_dir() or not ckpt.CHECKPOINT_NAME.fullmatch(name or ""):
            found.append(entry)
        elif name == entry.name:          # a checkpoint; a temporary one that holds more is kept, not refused
            found += ckpt.foreign_entries(entry)
    return found


def check_clearable(out: Path) -> None:
    """Refuse clearing ``out`` when a name of the run is a link or holds what the run did not write there."""
    if not out.is_dir():
        return
    _, problems = _ours_at_the_top(out)
    if problems:
        first = problems[0]
        why = "is a symbolic link, which a run never makes" if first.is_symlink() else \
            "was not written by a training run"
        raise TrainingError(f"--out {out}: {first} {why}, so the run there is not deleted; move it away or "
                            f"choose another --out")


def clear_run(out: Path) -> None:
    """Delete the run in ``out``: its files, checkpoints and final model, and the temporaries a killed run
    left; keep everything else. Refuses, and deletes nothing, when ``check_clearable`` does."""
    if not out.is_dir():
        return
    check_clearable(out)
    ours, _ = _ours_at_the_top(out)
    # config.json last: until it goes, the folder is recognisably a run, so that a kill at any moment of
    # the clearing leaves a folder that --overwrite (or --resume, or the same command) accepts
    for entry in sorted(ours, key=lambda entry: entry.name == CONFIG_FILE):
        if entry.is_file():
            entry.unlink()
        elif entry.name == ckpt.CHECKPOINT_DIR:
            for checkpoint in entry.iterdir():
                ckpt.remove_checkpoint_folder(checkpoint)
            _remove_if_empty(entry)
        else:                             # final/, or a temporary of it
            ckpt.remove_checkpoint_folder(entry)


def remove_temporaries(out: Path) -> list[Path]:
    """Delete the temporaries a killed run of ours left in ``out`` (``.tmp-latest-*``, ``.tmp-results.json-*``,
    ``.tmp-final-*``, half-saved checkpoints in checkpoints/), and only those: a name of that form that is a
    link, or a folder that holds anything a save does not write, stays. Called by a run that resumes, with
    the lock held, so that no other process can be writing them. Returns what was deleted."""
    removed = []
    if not out.is_dir():
        return removed
    candidates = [entry for entry in out.iterdir() if ckpt.temporary_of(entry.name) in TEMPORARY_NAMES]
    checkpoints = out / ckpt.CHECKPOINT_DIR
    if checkpoints.is_dir() and not checkpoints.is_symlink():
        candidates += [entry for entry in checkpoints.iterdir()
                       if ckpt.CHECKPOINT_NAME.fullmatch(ckpt.temporary_of(entry.name) or "")]
    for entry in sorted(candidates):
        if entry.is_symlink():
            continue
        if entry.is_file() and ckpt.temporary_of(entry.name) != ckpt.FINAL_DIR and entry.parent == out:
            entry.unlink()
            removed.append(entry)
        elif entry.is_dir() and ckpt.remove_checkpoint_folder(entry):
            removed.append(entry)
    return removed


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:                       # a temporary that held a file of yours is still in it
        pass
