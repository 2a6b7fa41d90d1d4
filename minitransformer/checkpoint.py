"""Saving and loading training state: NumPy .npz for arrays, JSON for the rest, never pickle.

A run directory looks like this::

    OUT/
      .minitransformer.lock       locked (flock) by the process that trains in OUT, which writes its pid there
      config.json                 model configuration and training options (for people; copied in state.json),
                                  and the corpus read: its resolved folder, each file's size and SHA-256
      tokenizer.json              the BPE vocabulary and merges
      latest                      one line: "checkpoints/step-000600" (never a path outside checkpoints/)
      final/                      the model to use after training (e.g. the average of the last
                                  checkpoints, §6.1): model.npz, tokenizer.json, state.json
      checkpoints/step-000600/
        model.npz                 the weights, one array per parameter name
        optimizer.npz             Adam's moments ('exp_avg.3', ...), its step and learning rate
        tokenizer.json            a copy, so that a checkpoint folder stands on its own
        state.json                format tag, step, config, schedule, epoch position, RNG state,
                                  and the SHA-256 of every array file and of tokenizer.json

Every file is written atomically: into a temporary name in the same folder,
flushed and fsync'ed, then renamed over the final name with ``os.replace``
(an atomic operation on POSIX and Windows). A checkpoint folder is assembled
under a temporary name and renamed into place as a whole, and only then does
``latest`` move to it. A process killed at any moment during a save leaves the
previous ``latest`` checkpoint intact and loadable; the half-written folder is
a temporary ``.tmp-<name>-<pid>-<8 hex digits>`` that the next save removes. Saving
deletes nothing else: pruning and replacing remove a checkpoint folder only when it
holds nothing but a checkpoint's files, and any other ``.tmp-*`` name is not ours.

Loading checks what it reads and refuses, with the path and the reason, a file
that is truncated or corrupt (checksum, zip structure), a folder that is not a
minitransformer checkpoint, and weights whose names or shapes do not fit the
model at hand (a checkpoint of another configuration).
"""
from __future__ import annotations

import json
import os
import re
import secrets
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from .data.digest import sha256_file

FORMAT = "minitransformer-checkpoint"
VERSION = 1
STATE_FILE, MODEL_FILE, OPTIMIZER_FILE, TOKENIZER_FILE = "state.json", "model.npz", "optimizer.npz", "tokenizer.json"
LATEST_FILE, CHECKPOINT_DIR, FINAL_DIR = "latest", "checkpoints", "final"
CHECKPOINT_FILES = (MODEL_FILE, OPTIMIZER_FILE, TOKENIZER_FILE, STATE_FILE)   # all a checkpoint folder holds
# The one form of every temporary name a save makes: .tmp-<the name it stands in for>-<pid>-<8 hex digits>
TEMPORARY = re.compile(r"\.tmp-(?P<name>.+)-(?P<pid>[0-9]+)-(?P<token>[0-9a-f]{8})")


class CheckpointError(Exception):
    """A checkpoint cannot be used; the message names the path and the reason."""


@dataclass
class Checkpoint:
    """What ``load_checkpoint`` returns."""

    path: Path                                   # the checkpoint folder
    weights: dict[str, np.ndarray]               # parameter name -> array
    state: dict[str, Any]                        # the content of state.json
    optimizer: dict[str, np.ndarray] | None = None
    tokenizer: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def step(self) -> int:
        return int(self.state.get("step", 0))

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.state.get("config", {}))


# -- atomic writes ------------------------------------------------------------------------------
def _fsync_dir(directory: Path) -> None:
    """Make a rename inside ``directory`` durable (no-op where folders cannot be opened, e.g. Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _temporary_name(directory: Path, name: str) -> Path:
    return directory / f".tmp-{name}-{os.getpid()}-{secrets.token_hex(4)}"


def temporary_of(entry_name: str) -> str | None:
    """The name that a temporary of ours stands in for (".tmp-state.json-812-0a1b2c3d" -> "state.json"),
    or None for any other name: a ".tmp-cache" of yours is not one of ours."""
    match = TEMPORARY.fullmatch(entry_name)
    return match.group("name") if match else None


def foreign_entries(folder: Path) -> list[Path]:
    """What ``folder`` (a checkpoint folder, final/, or one being assembled) holds that no save writes there:
    anything but the checkpoint's files and temporaries of them, and anything that is not a plain file."""
    return sorted(entry for entry in folder.iterdir()
                  if entry.is_symlink() or not entry.is_file()
                  or (entry.name if entry.name in CHECKPOINT_FILES else temporary_of(entry.name)) not in CHECKPOINT_FILES)


def remove_checkpoint_folder(folder: Path) -> bool:
    """Delete a checkpoint folder that holds only what a save wrote; keep it (and return False) otherwise."""
    if folder.is_symlink() or not folder.is_dir() or foreign_entries(folder):
        return False
    for entry in folder.iterdir():
        entry.unlink()
    folder.rmdir()
    return True


def _make_temporary_folder(directory: Path, name: str) -> Path:
    """A new, empty folder ``.tmp-NAME-...`` in ``directory``, with the permissions the umask gives.

    (``tempfile.mkdtemp`` would make it private, 0700, and a run folder shared by a group unreadable.)
    """
    while True:
        folder = _temporary_name(directory, name)
        try:
            folder.mkdir(mode=0o777)
            return folder
        except FileExistsError:
            continue


def _atomic_write(path: Path, write) -> None:
    """Call ``write(binary_file)`` on a temporary file next to ``path``, fsync it, rename it over ``path``.

    The file is created with mode 0666 less the umask, like any file a program opens for writing
    (``tempfile.mkstemp`` would make it 0600, readable by its owner only).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp_name = _temporary_name(path.parent, path.name)
        try:
            fd = os.open(tmp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """Write ``obj`` as UTF-8 JSON, atomically."""
    data = (json.dumps(obj, ensure_ascii=False, indent=1) + "\n").encode("utf-8")
    _atomic_write(Path(path), lambda f: f.write(data))


def write_text_atomic(path: str | Path, text: str) -> None:
    _atomic_write(Path(path), lambda f: f.write(text.encode("utf-8")))


def _write_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> str:
    """Write arrays into a new .npz file (fsync'ed) and return its SHA-256."""
    for name, array in arrays.items():
        if not isinstance(array, np.ndarray) or array.dtype.kind not in "biuf":   # what read_npz accepts
            kind = f"{type(array).__name__} of {array.dtype}" if isinstance(array, np.ndarray) else type(array).__name__
            raise TypeError(f"checkpoint entry {name!r} must be a NumPy array of numbers, got {kind}")
    with open(path, "wb") as f:
        np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())
    return sha256_file(path)


CHECKPOINT_NAME = re.compile(r"step-[0-9]{6,}")


def checkpoint_name(step: int) -> str:
    if step < 0:        # "step--00001" would sort before every real checkpoint
        raise ValueError(f"a checkpoint's step must be >= 0, got {step}")
    return f"step-{step:06d}"


def save_checkpoint(out_dir: str | Path, step: int, weights: Mapping[str, np.ndarray], state: Mapping[str, Any],
                    optimizer: Mapping[str, np.ndarray] | None = None, tokenizer: Mapping[str, Any] | None = None,
                    keep_last: int | None = None) -> Path:
    """Save one checkpoint as OUT/checkpoints/step-NNNNNN and point OUT/latest at it.

    ``weights`` and ``optimizer`` are flat dicts of host NumPy arrays
    (``model.state_dict()``, ``optimizer.state_dict()``); ``state`` is anything
    JSON can hold (config, epoch position, RNG state, ...). ``keep_last`` prunes
    older checkpoints, keeping that many. Returns the checkpoint folder.
    """
    out_dir = Path(out_dir)
    root = out_dir / CHECKPOINT_DIR
    root.mkdir(parents=True, exist_ok=True)
    for entry in root.iterdir():        # checkpoint folders that a killed save left half-assembled
        if CHECKPOINT_NAME.fullmatch(temporary_of(entry.name) or ""):
            remove_checkpoint_folder(entry)

    final = root / checkpoint_name(step)
    staging = _make_temporary_folder(root, final.name)
    try:
        hashes = {MODEL_FILE: _write_npz(staging / MODEL_FILE, dict(weights))}
        if optimizer is not None:
            hashes[OPTIMIZER_FILE] = _write_npz(staging / OPTIMIZER_FILE, dict(optimizer))
        if tokenizer is not None:
            hashes[TOKENIZER_FILE] = _write_tokenizer(staging, tokenizer)
        full_state = {"format": FORMAT, "version": VERSION, **dict(state), "step": int(step), "sha256": hashes}
        write_json_atomic(staging / STATE_FILE, full_state)  # written last: its presence means complete
        _fsync_dir(staging)
        _publish_folder(staging, final)  # saving the same step again (e.g. after a resume) swaps folders
    except BaseException:
        remove_checkpoint_folder(staging)       # ours, just made: what a save writes and nothing else
        raise
    write_text_atomic(out_dir / LATEST_FILE, f"{CHECKPOINT_DIR}/{final.name}\n")
    if keep_last is not None:
        prune_checkpoints(out_dir, keep_last)
    return final


def _write_tokenizer(folder: Path, tokenizer: Mapping[str, Any]) -> str:
    """folder/tokenizer.json, and its SHA-256: state.json records it, so that a tokenizer of another run
    (the same size, other words) cannot pass for this model's."""
    write_json_atomic(folder / TOKENIZER_FILE, tokenizer)
    return sha256_file(folder / TOKENIZER_FILE)


def _publish_folder(staging: Path, final: Path) -> None:
    """Move a complete folder into place with renames only; an older ``final`` is swapped out, then removed.
    An older one that holds anything a save does not write is left as it is, and the save refused."""
    if final.is_symlink() or final.exists():
        foreign = [final] if final.is_symlink() or not final.is_dir() else foreign_entries(final)
        if foreign:
            what = "is not a folder a save made" if foreign[0] == final else \
                f"holds {foreign[0].name}, which a save never writes"
            raise CheckpointError(f"{final} {what}, so it is not replaced; move that away and save again")
        retired = _temporary_name(final.parent, final.name)
        os.replace(final, retired)
        os.replace(staging, final)
        remove_checkpoint_folder(retired)
    else:
        os.replace(staging, final)
    _fsync_dir(final.parent)


def save_final(out_dir: str | Path, weights: Mapping[str, np.ndarray], state: Mapping[str, Any],
               tokenizer: Mapping[str, Any] | None = None) -> Path:
    """Save the model to use after training as OUT/final (atomically replacing an older one)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    final = out_dir / FINAL_DIR
    staging = _make_temporary_folder(out_dir, FINAL_DIR)
    try:
        hashes = {MODEL_FILE: _write_npz(staging / MODEL_FILE, dict(weights))}
        if tokenizer is not None:
            hashes[TOKENIZER_FILE] = _write_tokenizer(staging, tokenizer)
        write_json_atomic(staging / STATE_FILE, {"format": FORMAT, "version": VERSION, **dict(state),
                                                 "sha256": hashes})
        _fsync_dir(staging)
        _publish_folder(staging, final)
    except BaseException:
        remove_checkpoint_folder(staging)       # ours, just made: what a save writes and nothing else
        raise
    return final


def prune_checkpoints(out_dir: str | Path, keep_last: int) -> None:
    """Delete all but the newest ``keep_last`` checkpoints (never the one ``latest`` names)."""
    if keep_last < 1:
        raise ValueError(f"keep_last must be >= 1, got {keep_last}")
    latest = _read_latest(Path(out_dir))
    for path in list_checkpoints(out_dir)[:-keep_last]:
        if latest is None or path.resolve() != latest.resolve():
            remove_checkpoint_folder(path)      # one that holds a file of yours stays, with the file


# -- finding checkpoints -------------------------------------------------------------------------
def list_checkpoints(out_dir: str | Path) -> list[Path]:
    """Complete checkpoint folders under OUT/checkpoints, oldest first."""
    root = Path(out_dir) / CHECKPOINT_DIR
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if CHECKPOINT_NAME.fullmatch(p.name) and not p.is_symlink()
             and (p / STATE_FILE).is_file()]   # a link is not a checkpoint of this run (a save never makes one)
    return sorted(found, key=lambda p: p.name)


def _read_latest(out_dir: Path) -> Path | None:
    """The checkpoint folder OUT/latest names: always one of OUT/checkpoints/, never a path that leaves it."""
    pointer = out_dir / LATEST_FILE
    if not pointer.is_file():
        return None
    target = pointer.read_text(encoding="utf-8").strip()
    if not target:
        raise CheckpointError(f"{pointer}: the pointer file is empty")
    parts = target.split("/")
    if len(parts) != 2 or parts[0] != CHECKPOINT_DIR or parts[1] in ("", ".", "..") or "\\" in target:
        raise CheckpointError(f"{pointer}: latest points to {target!r}, outside {out_dir / CHECKPOINT_DIR}; a run "
                              f"resumes only from a checkpoint of its own (write e.g. {CHECKPOINT_DIR}/step-000100)")
    folder = out_dir / target
    if folder.is_symlink():
        raise CheckpointError(f"{pointer}: latest points to {folder}, a symbolic link, which a save never makes "
                              f"(it may lead to another run's checkpoint)")
    return folder


def resolve_checkpoint(path: str | Path, prefer_final: bool = True) -> Path:
    """The checkpoint folder meant by ``path``: a checkpoint folder, its model.npz, or a run folder.

    In a run folder, ``final/`` is taken when it exists and ``prefer_final``
    (translating), otherwise the checkpoint ``latest`` names (resuming training,
    or a run that has not finished). An incomplete ``final/`` is refused rather
    than replaced by another model.
    """
    if isinstance(path, str) and not path.strip():     # Path("") would be the current folder
        raise CheckpointError("the checkpoint path is empty; name a run folder or a checkpoint folder")
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path}: no such file or directory")
    if path.is_file():
        if path.name in (MODEL_FILE, STATE_FILE, OPTIMIZER_FILE):
            return path.parent
        raise CheckpointError(f"{path}: not a checkpoint; expected a run folder (with a '{LATEST_FILE}' file) "
                              f"or a checkpoint folder (with {STATE_FILE} and {MODEL_FILE})")
    if (path / STATE_FILE).is_file():
        return path
    if prefer_final and (path / FINAL_DIR).exists():
        if not (path / FINAL_DIR / STATE_FILE).is_file():  # never fall back silently to another model
            raise CheckpointError(f"{path / FINAL_DIR}: the final model is incomplete (no {STATE_FILE}); "
                                  f"name a checkpoint folder ({path / CHECKPOINT_DIR}/step-*) to use one of those")
        return path / FINAL_DIR
    latest = _read_latest(path)
    if latest is not None:
        if not (latest / STATE_FILE).is_file():
            raise CheckpointError(f"{path / LATEST_FILE} points to {latest}, which is not a complete checkpoint")
        return latest
    found = list_checkpoints(path)
    if found:
        return found[-1]
    raise CheckpointError(f"{path}: no checkpoint here (no {STATE_FILE}, no '{LATEST_FILE}' file, "
                          f"no {CHECKPOINT_DIR}/step-*/ folders)")


# -- reading -------------------------------------------------------------------------------------
def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path}: file missing") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{path}: not valid JSON, the file is truncated or corrupt ({error})") from None


def read_npz(path: str | Path, sha256: str | None = None) -> dict[str, np.ndarray]:
    """All arrays of an .npz file, read eagerly, without pickle; corrupt files raise CheckpointError."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: file missing")
    if sha256 is not None and sha256_file(path) != sha256:
        raise CheckpointError(f"{path}: checksum mismatch, the file was truncated or changed after it was saved")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (zipfile.BadZipFile, ValueError, KeyError, OSError, EOFError) as error:
        raise CheckpointError(f"{path}: cannot read the arrays, the file is truncated or corrupt "
                              f"({type(error).__name__}: {error})") from None
    for name, array in arrays.items():
        if array.dtype.kind not in "biuf":
            raise CheckpointError(f"{path}: array {name!r} holds {array.dtype} values, not numbers")
    return arrays


def load_checkpoint(path: str | Path, with_optimizer: bool = True, prefer_final: bool = True) -> Checkpoint:
    """Load a checkpoint (run folder, checkpoint folder or its model.npz); see ``resolve_checkpoint``."""
    folder = resolve_checkpoint(path, prefer_final)
    state = _read_json(folder / STATE_FILE)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"{folder / STATE_FILE}: not a minitransformer checkpoint (no format tag {FORMAT!r})")
    try:
        version = int(state.get("version", -1))
    except (TypeError, ValueError):
        raise CheckpointError(f"{folder / STATE_FILE}: format version {state['version']!r} is not a number") from None
    if version > VERSION:
        raise CheckpointError(f"{folder}: checkpoint format version {version} is newer than this "
                              f"code understands ({VERSION}); upgrade minitransformer")
    hashes = state.get("sha256", {})
    if not isinstance(hashes, dict):
        raise CheckpointError(f"{folder / STATE_FILE}: the checksums are not a table of file names ({hashes!r})")
    weights = read_npz(folder / MODEL_FILE, hashes.get(MODEL_FILE))
    optimizer = None
    if with_optimizer and (folder / OPTIMIZER_FILE).is_file():
        optimizer = read_npz(folder / OPTIMIZER_FILE, hashes.get(OPTIMIZER_FILE))
    tokenizer = None
    if (folder / TOKENIZER_FILE).is_file() or TOKENIZER_FILE in hashes:
        if TOKENIZER_FILE in hashes and (not (folder / TOKENIZER_FILE).is_file()
                                         or sha256_file(folder / TOKENIZER_FILE) != hashes[TOKENIZER_FILE]):
            raise CheckpointError(f"{folder / TOKENIZER_FILE} is not the tokenizer this model was saved with "
                                  f"({folder / STATE_FILE} records its SHA-256, and the file is missing or differs); "
                                  f"a tokenizer of another run would turn the model's ids into other words")
        tokenizer = _read_json(folder / TOKENIZER_FILE)
    return Checkpoint(path=folder, weights=weights, state=state, optimizer=optimizer, tokenizer=tokenizer)


# -- compatibility -----------------------------------------------------------------------------
def check_weights_match(weights: Mapping[str, np.ndarray], expected: Mapping[str, Any], where: str = "") -> None:
    """Raise CheckpointError unless ``weights`` has exactly the names and shapes of ``expected``.

    ``expected`` maps names to arrays (``model.state_dict()``) or to shapes.
    """
    prefix = f"{where}: " if where else ""
    missing = [k for k in expected if k not in weights]
    unexpected = [k for k in weights if k not in expected]
    problems = []
    if missing:
        problems.append(f"missing {len(missing)} weight(s) the model needs, e.g. {missing[:3]}")
    if unexpected:
        problems.append(f"{len(unexpected)} weight(s) the model does not have, e.g. {unexpected[:3]}")
    for name, value in expected.items():
        shape = tuple(value.shape) if hasattr(value, "shape") else tuple(value)
        if name in weights and tuple(weights[name].shape) != shape:
            problems.append(f"weight {name!r} has shape {tuple(weights[name].shape)} in the checkpoint "
                            f"but {shape} in the model")
            break
    if problems:
        raise CheckpointError(prefix + "the checkpoint was saved from another model configuration: "
                              + "; ".join(problems))


def config_differences(saved: Mapping[str, Any], requested: Mapping[str, Any]) -> list[str]:
    """Human-readable differences between two configuration dicts (keys present in both)."""
    return [f"{key}: {saved[key]!r} in the checkpoint, {requested[key]!r} requested"
            for key in sorted(set(saved) & set(requested)) if saved[key] != requested[key]]


# -- averaging (§6.1) ----------------------------------------------------------------------------
def average_checkpoints(paths: Iterable[str | Path]) -> dict[str, np.ndarray]:
    """The element-wise mean of the weights of several checkpoints.

    §6.1: "For the base models, we used a single model obtained by averaging the
    last 5 checkpoints, which were written at 10-minute intervals." The mean is
    taken in float64 and cast back to each weight's dtype.
    """
    paths = [Path(p) for p in paths]
    if not paths:
        raise ValueError("average_checkpoints needs at least one checkpoint")
    first = load_checkpoint(paths[0], with_optimizer=False).weights
    total = {name: array.astype(np.float64) for name, array in first.items()}
    for path in paths[1:]:
        weights = load_checkpoint(path, with_optimizer=False).weights
        check_weights_match(weights, first, where=str(path))
        for name, array in weights.items():
            total[name] += array
    return {name: (total[name] / len(paths)).astype(first[name].dtype) for name in first}
