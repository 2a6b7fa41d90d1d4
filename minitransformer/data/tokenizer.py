"""What every tokenizer offers on top of its own ``encode`` and ``decode``: whole batches, and the token
strings of a text for display. The word-level BPE (bpe.py) and the raw-text tokenizers (raw_text.py) share it."""
from __future__ import annotations

from typing import Iterable


def check_training_texts(texts) -> None:
    """A string is iterable too: ``train("the cat sat")`` would learn from the texts "t", "h", "e", ..."""
    if isinstance(texts, str):
        raise TypeError("train() takes a list of texts, not one string; write train([text], ...)")


class Tokenizer:
    vocab: list[str]

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        raise NotImplementedError

    def decode(self, ids: Iterable[int]) -> str:
        raise NotImplementedError

    def encode_batch(self, texts: Iterable[str], add_bos: bool = False, add_eos: bool = False) -> list[list[int]]:
        return [self.encode(text, add_bos, add_eos) for text in texts]

    def decode_batch(self, batch: Iterable[Iterable[int]]) -> list[str]:
        return [self.decode(ids) for ids in batch]

    def tokens(self, text: str) -> list[str]:
        """The token strings of ``text``, for display (a raw-text tokenizer writes a space as "▁")."""
        return [self.vocab[i] for i in self.encode(text)]
