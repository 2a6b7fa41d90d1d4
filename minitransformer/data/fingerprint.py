"""What a run's corpus was: the folder's resolved path and the size and SHA-256 of each file read.

A run records it (config.json, every checkpoint, the final model) so that ``--resume`` can refuse a
corpus that changed since the run began, and ``evaluate`` can say when it scores the run's corpus as
it is now and not as it was trained on. The path is resolved, so that ``corpus/``, ``./corpus`` and
``/home/you/corpus`` are one folder, and a run evaluated from another folder still finds its corpus.
The built-in corpus is made by code from a seed: it has no files, and no fingerprint (None).
"""
from __future__ import annotations

import os
from pathlib import Path

from .corpus import Corpus
from .digest import sha256_file

SPLITS = ("train", "dev", "test")


def resolved(data: str) -> str:
    """The corpus folder ``data`` as an absolute path with links and ``..`` resolved (~ expanded)."""
    return str(Path(os.path.expanduser(data)).resolve())


def corpus_files(folder: Path, corpus: Corpus) -> list[Path]:
    """The files of ``folder`` that loading ``corpus`` read (data/loaders.py's two layouts, plain or .gz)."""
    tsv = any((folder / name).is_file() for name in ("train.tsv", "train.tsv.gz"))
    stems = [f"{split}.tsv" for split in SPLITS] if tsv else \
        [f"{split}.{language}" for split in SPLITS for language in corpus.languages]
    return [folder / name for stem in stems for name in (stem, stem + ".gz") if (folder / name).is_file()]


def fingerprint(data: str | None, corpus: Corpus) -> dict | None:
    """{"path": the resolved folder, "files": {name: {"size": bytes, "sha256": hex}}}; None for the built-in
    corpus (``data`` None)."""
    if data is None:
        return None
    folder = Path(resolved(data))
    return {"path": str(folder),
            "files": {path.name: {"size": path.stat().st_size, "sha256": sha256_file(path)}
                      for path in corpus_files(folder, corpus)}}


def differences(saved: dict, now: dict) -> list[str]:
    """What differs between the files of a recorded fingerprint and those of the corpus now, in words."""
    found = []
    before, after = saved.get("files") or {}, now.get("files") or {}
    for name in sorted(set(before) | set(after)):
        if name not in after:
            found.append(f"{name} was read then and is gone")
        elif name not in before:
            found.append(f"{name} is new")
        elif before[name] != after[name]:
            then, now = before[name], after[name]
            found.append(f"{name} changed ({then.get('size')} bytes then, {now['size']} now; "
                         f"SHA-256 {str(then.get('sha256'))[:12]}… then, {now['sha256'][:12]}… now)")
    return found
