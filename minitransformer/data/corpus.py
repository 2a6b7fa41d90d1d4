"""Parallel corpora: sentence pairs in train/dev/test splits (``Corpus``).

A corpus is read from files (loaders.py) or generated: the built-in
English <-> Japanese corpus comes from the grammar in data/grammar/
(``grammar.make_builtin_corpus``).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Corpus:
    """Sentence pairs in splits, stored as (english, foreign) strings.

    ``pairs(split, direction)`` returns (source, target) pairs: "en-ja" keeps
    the stored order, "ja-en" swaps it. ``test_heldout`` (built-in corpus only)
    holds sentences with word combinations never seen together in training.
    """

    train: list[tuple[str, str]]
    dev: list[tuple[str, str]]
    test: list[tuple[str, str]]
    test_heldout: list[tuple[str, str]] = field(default_factory=list)
    languages: tuple[str, str] = ("en", "ja")
    direction: str = "en-ja"  # the default direction of pairs()
    name: str = "builtin"

    SPLITS = ("train", "dev", "test", "test_heldout")

    def __post_init__(self) -> None:
        self.direction = self._check_direction(self.direction)

    @property
    def directions(self) -> tuple[str, str]:
        english, foreign = self.languages
        return f"{english}-{foreign}", f"{foreign}-{english}"

    def _check_direction(self, direction: str) -> str:
        if direction not in self.directions:
            raise ValueError(f"unknown direction {direction!r} for corpus {self.name!r}; "
                             f"expected one of {self.directions}")
        return direction

    def split(self, split: str) -> list[tuple[str, str]]:
        """The stored (english, foreign) pairs of one split."""
        if split not in self.SPLITS:
            raise ValueError(f"unknown split {split!r}; expected one of {self.SPLITS}")
        return getattr(self, split)

    def pairs(self, split: str, direction: str | None = None) -> list[tuple[str, str]]:
        """(source, target) pairs of ``split`` in ``direction`` (default: ``self.direction``)."""
        direction = self._check_direction(direction or self.direction)
        pairs = self.split(split)
        if direction == self.directions[0]:
            return list(pairs)
        return [(foreign, english) for english, foreign in pairs]

    def sizes(self) -> dict[str, int]:
        return {split: len(self.split(split)) for split in self.SPLITS}

