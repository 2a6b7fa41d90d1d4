"""What every tokenizer offers on top of its own ``encode`` and ``decode``: whole batches, and the token
strings of a text for display. The word-level BPE (bpe.py) and the raw-text tokenizers (raw_text.py) share it."""
from __future__ import annotations

from typing import Iterable

FILE_VERSION = 1       # the "version" of the tokenizer files this code writes and reads (every kind)


def check_training_texts(texts) -> None:
    """A string is iterable too: ``train("the cat sat")`` would learn from the texts "t", "h", "e", ..."""
    if isinstance(texts, str):
        raise TypeError("train() takes a list of texts, not one string; write train([text], ...)")


def check_file_version(data: dict) -> None:
    """ValueError unless the file's "version" is one this code reads (none is read as 1, the only one so far).

    A file of another version may lay out its fields differently; read as this version it would give a
    tokenizer that encodes and decodes wrongly without a word, so it is refused instead.
    """
    version = data.get("version", FILE_VERSION)
    if type(version) is int and version > FILE_VERSION:
        raise ValueError(f"tokenizer format version {version} is newer than this code reads "
                         f"(version {FILE_VERSION}); upgrade minitransformer")
    if type(version) is not int or version != FILE_VERSION:        # 0, "1", 1.0, true: no writer made those
        raise ValueError(f"tokenizer format version {version!r} is not one this code reads "
                         f"(it reads version {FILE_VERSION})")


def token_ids(ids: Iterable[int], vocab_size: int) -> list[int]:
    """The ids given to ``decode`` as Python ints, each checked to be an integer inside the vocabulary.

    A Python int or an integer NumPy/CuPy scalar passes; a float such as 4.7 (which ``int`` would
    quietly truncate to 4) or a bool is refused, as the model refuses ids of any dtype but an integer one.
    """
    checked = []
    for value in ids:
        if isinstance(value, bool) or not isinstance(value, int):
            dtype = getattr(value, "dtype", None)               # a NumPy or CuPy scalar has one
            if dtype is None or dtype.kind not in "iu" or getattr(value, "ndim", 0) != 0:
                raise TypeError(f"token ids must be integers, got {value!r} ({type(value).__name__})")
        i = int(value)
        if not 0 <= i < vocab_size:
            raise ValueError(f"token id {i} is outside the vocabulary of size {vocab_size}")
        checked.append(i)
    return checked


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
