"""The SHA-256 of a file, read in blocks of 1 MiB: the one definition that a corpus's fingerprint
(data/fingerprint.py) and a checkpoint's hashes (checkpoint.py) share.

It lives in data/ because data/ imports nothing of the package outside data/ (tests/house/test_layers.py),
while checkpoint.py may import from data/; it imports only the standard library.
"""
from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_file(path: str | Path) -> str:
    """The hex SHA-256 of the bytes of the file at ``path``."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
