"""What every tokenizer shares: the special tokens, the file it is saved in, and the table of kinds.

Three tokenizers turn text into ids: the word-level BPE (bpe.py), the raw-text BPE (raw_bpe.py) and
the unigram language model (unigram.py; the last two share raw_text.py). Each is a ``Tokenizer``:
its own ``encode``, ``decode`` and ``train``, and from here whole batches, the token strings of a
text for display, and the file.

Every vocabulary starts with the four special tokens, so their ids are the same in every tokenizer:

    0 <pad>   padding         1 <s>   begin of sentence (bos)
    2 </s>    end (eos)       3 <unk> a character never seen (word-level BPE only)

One file format holds every kind: JSON with ``"format"`` (``FORMAT``), ``"version"`` (``FILE_VERSION``),
``"kind"`` (which tokenizer wrote it) and that tokenizer's own fields. A tokenizer class declares its
kind with ``@register``; ``TOKENIZERS`` maps each kind to its class, and ``load_tokenizer(path)`` (or
``Tokenizer.from_dict(data)``) gives back the tokenizer of whatever kind the file holds. Importing
``minitransformer.data`` imports the three tokenizer modules, so all three kinds are registered.
"""
from __future__ import annotations

import json
import numbers
from pathlib import Path
from typing import Iterable

SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>")
PAD_ID, BOS_ID, EOS_ID, UNK_ID = range(len(SPECIAL_TOKENS))

FORMAT = "minitransformer-bpe"   # the "format" of every tokenizer file (its name from when BPE was the only kind)
FILE_VERSION = 1                 # the "version" of the tokenizer files this code writes and reads (every kind)
LEGACY_KIND = "words"            # the kind of a file written before the "kind" field existed

TOKENIZERS: dict[str, type[Tokenizer]] = {}   # kind -> tokenizer class, filled by @register


def register(cls: type[Tokenizer]) -> type[Tokenizer]:
    """Class decorator: ``cls.kind`` names files that ``cls`` reads and writes (``TOKENIZERS[cls.kind]``)."""
    kind = cls.__dict__.get("kind")
    if not isinstance(kind, str) or not kind:
        raise TypeError(f"@register: {cls.__name__} must set its own kind, a non-empty string")
    taken = TOKENIZERS.get(kind)
    # the same class defined again (its module run once more, as a reload or an exercise's trial does) takes
    # its kind back; another class may not
    if taken is not None and (taken.__module__, taken.__qualname__) != (cls.__module__, cls.__qualname__):
        raise ValueError(f"tokenizer kind {kind!r} is taken by {taken.__module__}.{taken.__qualname__}")
    TOKENIZERS[kind] = cls
    return cls


def check_training_texts(texts, vocab_size) -> list[str]:
    """The texts a ``train`` learns from, as a list, refused when there is nothing to learn or no size to reach.

    A string is iterable too: ``train("the cat sat")`` would learn from the texts "t", "h", "e", ...; an
    empty list would give a vocabulary of the special tokens alone, which can spell nothing.
    """
    if isinstance(texts, str):
        raise TypeError("train() takes a list of texts, not one string; write train([text], ...)")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, numbers.Integral) or vocab_size < 1:
        raise ValueError(f"train(): vocab_size must be a positive number of tokens, got {vocab_size!r}")
    texts = list(texts)
    if not any(texts):
        raise ValueError(f"train(): no text to learn from ({len(texts)} texts, "
                         f"{'all empty' if texts else 'none at all'})")
    return texts


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


def file_kind(data, expected: str | None = None) -> str:
    """The kind of a tokenizer file's data, after checking its format and version; ValueError naming what is
    wrong otherwise. ``expected``: the one kind the caller reads (None: any registered kind)."""
    wanted = f" of kind {expected!r}" if expected else ""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} tokenizer{wanted}")
    check_file_version(data)
    kind = data.get("kind", LEGACY_KIND)
    if expected is not None and kind != expected:
        raise ValueError(f"not a {FORMAT} tokenizer{wanted} (its kind is {kind!r})")
    if not isinstance(kind, str) or kind not in TOKENIZERS:
        raise ValueError(f"unknown tokenizer kind {kind!r}; expected one of {', '.join(map(repr, TOKENIZERS))}")
    return kind


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
    """The base of every tokenizer. A kind sets ``vocab`` and defines ``encode``, ``decode``, ``train``,
    ``fields`` (its part of the file) and ``from_fields`` (the tokenizer from those fields)."""

    pad_id, bos_id, eos_id, unk_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID
    kind: str                          # the "kind" field of its files (set by each registered class)
    vocab: list[str]

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        raise NotImplementedError

    def decode(self, ids: Iterable[int]) -> str:
        raise NotImplementedError

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def __len__(self) -> int:
        return len(self.vocab)

    def encode_batch(self, texts: Iterable[str], add_bos: bool = False, add_eos: bool = False) -> list[list[int]]:
        return [self.encode(text, add_bos, add_eos) for text in texts]

    def decode_batch(self, batch: Iterable[Iterable[int]]) -> list[str]:
        return [self.decode(ids) for ids in batch]

    def tokens(self, text: str) -> list[str]:
        """The token strings of ``text``, for display (a raw-text tokenizer writes a space as "▁")."""
        return [self.vocab[i] for i in self.encode(text)]

    # --- the file ------------------------------------------------------------------------------------
    def fields(self) -> dict:
        """This tokenizer's own fields of the file (its vocabulary, merges, scores ...), JSON-ready."""
        raise NotImplementedError

    @classmethod
    def from_fields(cls, data: dict) -> Tokenizer:
        """The tokenizer from the fields of a file whose format, version and kind are already checked."""
        raise NotImplementedError

    def to_dict(self) -> dict:
        """The tokenizer as JSON-ready data: format, kind, version, then its own ``fields``."""
        return {"format": FORMAT, "kind": self.kind, "version": FILE_VERSION, **self.fields()}

    @classmethod
    def from_dict(cls, data: dict) -> Tokenizer:
        """The tokenizer ``to_dict`` wrote; ValueError naming what is wrong otherwise.

        ``Tokenizer.from_dict`` reads every registered kind and returns the tokenizer of the data's kind;
        a kind's own class (``RawBPETokenizer.from_dict``) reads only its kind. A file of a version this
        code does not read is refused (``check_file_version``).
        """
        kind = file_kind(data, None if cls is Tokenizer else cls.kind)
        return TOKENIZERS[kind].from_fields(data)

    def save(self, path: str | Path) -> None:
        """Write the tokenizer as JSON (``to_dict``)."""
        Path(path).write_text(json.dumps(self.to_dict(), ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> Tokenizer:
        """The tokenizer ``save`` wrote (``from_dict`` of the file); FileNotFoundError or ValueError naming
        the path otherwise."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: tokenizer file not found")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"{path}: not a JSON tokenizer file ({error})") from None
        try:
            return cls.from_dict(data)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None


def load_tokenizer(path: str | Path) -> Tokenizer:
    """The tokenizer saved in ``path``, of whatever kind the file holds."""
    return Tokenizer.load(path)
