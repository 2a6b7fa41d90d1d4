"""The run folder (``--out``): what belongs to a run, and how a folder is checked, reused or cleared.

A run writes only the names below (see checkpoint.py for the layout). ``--overwrite``
deletes exactly these and nothing else, so that a reused folder never hands back
a checkpoint or a final model of the earlier run, and a file of yours that lies
beside them stays. A folder that holds some of these names but no run is refused:
its files are not ours to replace.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Callable

from .. import checkpoint as ckpt
from .options import TrainingError, TrainOptions, resolve_options, result_settings

CONFIG_FILE, RESULTS_FILE, ATTENTION_FILE = "config.json", "results.json", "attention.png"
RUN_FILES = (CONFIG_FILE, ckpt.TOKENIZER_FILE, ckpt.LATEST_FILE, RESULTS_FILE, ATTENTION_FILE)
RUN_FOLDERS = (ckpt.CHECKPOINT_DIR, ckpt.FINAL_DIR)
CHECKPOINT_FILES = (ckpt.MODEL_FILE, ckpt.OPTIMIZER_FILE, ckpt.TOKENIZER_FILE, ckpt.STATE_FILE)
TEMPORARY = ".tmp-"                      # atomic writes in progress, or left by a killed process


def open_run_folder(options: TrainOptions) -> tuple[TrainOptions, dict | None]:
    """Check ``--out`` before any work; return the resolved options and, when resuming, the saved settings."""
    if not str(options.out).strip():     # Path("") is the current folder: the run would fill it
        raise TrainingError("--out is empty; name the run folder (default runs/enja; '.' for this folder)")
    out = Path(options.out)
    check_writable_folder(out)
    foreign = foreign_run_names(out)
    if foreign:
        raise TrainingError(f"--out {out} holds {', '.join(foreign)} but no training run, and a run would "
                            f"replace them; choose another --out")
    if not options.resume:
        if options.overwrite:
            check_clearable(out)
        return resolve_options(options, None), None
    if not holds_run(out):
        raise TrainingError(f"--resume: {out} holds no run to resume (no config.json / latest checkpoint)")
    saved = saved_settings(out)
    return resolve_options(options, saved), saved


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
        previous = {"ranks": 1, **previous}     # a run from before --distributed: one process
    differences = ["it was trained by an older version"] if not isinstance(previous, dict) else [
        f"{name} {previous.get(name)!r} there, {value!r} now" for name, value in wanted.items()
        if previous.get(name) != value]
    if differences:
        raise TrainingError(f"{out} already holds a training run with other settings ({'; '.join(differences)}); "
                            f"pass --resume to continue it, --overwrite to replace it, or choose another --out")
    scores = ", ".join(f"{name} {results[name]}" + (f" ({results[name + '_tokenize']} tokens)"
                                                   if name + "_tokenize" in results else "")
                       for name in ("test_bleu", "test_heldout_bleu") if name in results)
    say(f"{out} already holds this run, finished{f' ({scores})' if scores else ''}: nothing to train "
        f"(--overwrite trains it again)")
    return {**results, "already_trained": True}


def check_writable_folder(out: Path) -> None:
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


def _read_json(path: Path) -> object:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def holds_run(out: Path) -> bool:
    """Whether ``out`` holds a run of ours (finished, interrupted, or killed after its first file)."""
    config = _read_json(out / CONFIG_FILE)
    if isinstance(config, dict) and {"model", "training"} <= set(config):
        return True
    return (out / ckpt.LATEST_FILE).is_file() or bool(ckpt.list_checkpoints(out))


def foreign_run_names(out: Path) -> list[str]:
    """Names a run would write that exist in ``out`` although it holds no run."""
    if not out.is_dir() or holds_run(out):
        return []
    return [name for name in RUN_FILES + RUN_FOLDERS if (out / name).exists()]


def saved_settings(out: Path) -> dict:
    """The defining settings of the run in ``out`` (config.json), for ``--resume``."""
    path = out / CONFIG_FILE
    try:
        return json.loads(path.read_text(encoding="utf-8"))["training"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise TrainingError(f"--resume: cannot read {path} ({type(error).__name__}: {error})") from None


def finished_results(out: Path) -> dict | None:
    """results.json of a finished run (one with a complete final model), else None."""
    results = _read_json(out / RESULTS_FILE)
    finished = (out / ckpt.FINAL_DIR / ckpt.STATE_FILE).is_file()
    return results if finished and isinstance(results, dict) else None


def _unexpected_entries(out: Path) -> list[Path]:
    """Entries inside the run's own folders (final/, checkpoints/) that the run did not write."""
    found = []
    final = out / ckpt.FINAL_DIR
    if final.exists():
        found += [p for p in final.iterdir() if p.name not in CHECKPOINT_FILES and not p.name.startswith(TEMPORARY)]
    root = out / ckpt.CHECKPOINT_DIR
    if root.exists():
        for entry in root.iterdir():
            if entry.name.startswith(TEMPORARY):
                continue
            if not (entry.is_dir() and entry.name.startswith("step-")):
                found.append(entry)
                continue
            found += [p for p in entry.iterdir()
                      if p.name not in CHECKPOINT_FILES and not p.name.startswith(TEMPORARY)]
    return found


def check_clearable(out: Path) -> None:
    """Refuse ``--overwrite`` when final/ or checkpoints/ hold files the run did not write."""
    unexpected = _unexpected_entries(out) if out.is_dir() else []
    if unexpected:
        raise TrainingError(f"--overwrite: {unexpected[0]} was not written by a training run, so "
                            f"{unexpected[0].parent} is not deleted; move it away or choose another --out")


def clear_run(out: Path) -> None:
    """Delete the run in ``out``: its files, checkpoints and final model; keep everything else.

    Refuses (and deletes nothing) when final/ or checkpoints/ hold files the run did not write.
    """
    if not out.is_dir():
        return
    check_clearable(out)
    for entry in out.iterdir():
        if entry.name in RUN_FOLDERS + RUN_FILES or entry.name.startswith(TEMPORARY):
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()
