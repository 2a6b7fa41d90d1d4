"""The data of a run: the sentence pairs it trains and is scored on, from the built-in corpus or a folder.

Training and the ``evaluate`` command both call ``load_data`` with the settings a
run recorded, so that a model is always scored on the corpus it was trained on.
"""
from __future__ import annotations

from typing import Mapping

from .corpus import Corpus
from .grammar import make_builtin_corpus
from .loaders import CorpusError, load_corpus

BUILTIN_DIRECTIONS = ("en-ja", "ja-en")


def load_data(data: str | None, direction: str, sizes: Mapping[str, int] | None = None,
              limit: int | None = None) -> Corpus:
    """The built-in corpus (``sizes``: n_train, n_dev, n_test, n_heldout) when ``data`` is None,
    else the corpus folder ``data``; at most ``limit`` pairs per split. Raises CorpusError."""
    if data is not None:
        return load_corpus(data, direction, limit=limit)
    if direction not in BUILTIN_DIRECTIONS:
        raise CorpusError(f"the built-in corpus is English–Japanese: --direction must be en-ja or ja-en, "
                          f"got {direction!r}")
    sizes = dict(sizes or {})
    if limit is not None:
        sizes = {name: min(count, limit) for name, count in sizes.items()}
    return make_builtin_corpus(seed=0, **sizes)
