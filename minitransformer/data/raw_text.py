"""What the two raw-text tokenizers share (raw_bpe.py, unigram.py): the visible space "▁", the pieces
a sentence is cut into, byte fallback, the exact decoding, and the vocabulary as the file writes it.

Both follow SentencePiece (Kudo & Richardson 2018): the sentence is a sequence of characters in which
the space is an ordinary symbol, written "▁" (U+2581); a "▁" is put in front (the dummy prefix); a
token never continues across a space, so each space begins a piece. The vocabulary holds the 256
bytes "<0x00>" … "<0xFF>", and a character that is not in the vocabulary (or a literal "▁", which
must not come back as a space) is written as the bytes of its UTF-8 encoding: no input is unknown.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from .tokenizer import SPECIAL_TOKENS, Tokenizer, token_ids

SPACE = "\u2581"                     # "▁", the visible space symbol
BYTE_TOKENS = tuple(f"<0x{b:02X}>" for b in range(256))
FIRST_BYTE_ID = len(SPECIAL_TOKENS)
FIRST_PIECE_ID = FIRST_BYTE_ID + len(BYTE_TOKENS)


def split_pieces(text: str) -> list[str]:
    """The units a raw-text tokenizer segments: " " + text, cut before every space (each space starts a piece).

    "I am  here" -> [" I", " am", " ", " here"];  "私は学生です。" -> [" 私は学生です。"].
    The pieces keep real spaces; a tokenizer's vocabulary spells them "▁".
    """
    marked = " " + text
    pieces, start = [], 0
    for i in range(1, len(marked)):
        if marked[i] == " ":
            pieces.append(marked[start:i])
            start = i
    pieces.append(marked[start:])
    return pieces


def byte_ids(char: str) -> list[int]:
    """Byte fallback: the ids of the byte tokens of ``char``'s UTF-8 encoding ("é" -> <0xC3> <0xA9>)."""
    return [FIRST_BYTE_ID + b for b in char.encode("utf-8")]


def character_ids(piece: str, token_to_id: Mapping[str, int]) -> list[int]:
    """A piece as ids of single characters: the space as "▁", an unknown character (or a literal "▁",
    which must not come back as a space) as the ids of its UTF-8 bytes."""
    ids = []
    for char in piece:
        token_id = token_to_id.get(SPACE) if char == " " else None if char == SPACE else token_to_id.get(char)
        if token_id is None:
            ids.extend(byte_ids(char))
        else:
            ids.append(token_id)
    return ids


def decode_ids(vocab: list[str], ids: Iterable[int]) -> str:
    """Token ids -> text, dropping the special tokens; the exact inverse of a raw-text ``encode``.

    Runs of byte tokens are read as UTF-8 (a broken sequence, which only a model can produce,
    becomes U+FFFD); "▁" becomes a space, and the dummy prefix space is dropped.
    """
    parts: list[str] = []
    pending = bytearray()
    for i in token_ids(ids, len(vocab)):
        if i < FIRST_BYTE_ID:
            continue
        if i < FIRST_PIECE_ID:
            pending.append(i - FIRST_BYTE_ID)
            continue
        if pending:
            parts.append(pending.decode("utf-8", errors="replace"))
            pending = bytearray()
        parts.append(vocab[i].replace(SPACE, " "))
    if pending:
        parts.append(pending.decode("utf-8", errors="replace"))
    text = "".join(parts)
    return text[1:] if text.startswith(" ") else text


def full_vocab(data: dict) -> list[str]:
    """The vocabulary a file holds, with the 256 byte tokens it leaves implied put back after the special tokens."""
    vocab = data["vocab"]
    return list(vocab[:len(SPECIAL_TOKENS)]) + list(BYTE_TOKENS) + list(vocab[len(SPECIAL_TOKENS):])


def file_vocab(vocab: list[str]) -> list[str]:
    """The vocabulary as a file writes it: the byte tokens are implied, not written."""
    return vocab[:len(SPECIAL_TOKENS)] + vocab[FIRST_PIECE_ID:]


def check_lists(data: dict, keys: Sequence[str]) -> None:
    """ValueError naming the first of ``keys`` that is not a list in a tokenizer file's ``data``."""
    for key in keys:
        if not isinstance(data.get(key), list):
            raise ValueError(f"missing or broken key {key!r}")


class RawTextTokenizer(Tokenizer):
    """What every raw-text tokenizer does around its one own step, the segmentation of a piece
    (``_encode_piece``): cut the text into pieces, encode, decode, show tokens.

    Ids 0-3 are the special tokens pad, bos, eos and unk (tokenizer.py; unk is never produced),
    ids 4-259 the bytes, then the text pieces. A subclass sets ``vocab`` and defines
    ``_encode_piece``, ``train`` and its file's ``fields`` and ``from_fields``.
    """

    words = None          # no word list: raw text has no words to record (see data/writing.py)
    vocab: list[str]

    def _encode_piece(self, piece: str) -> list[int]:
        raise NotImplementedError

    @property
    def characters(self) -> frozenset[str]:
        """The characters the tokenizer writes without byte fallback (the space for "▁")."""
        return frozenset(t.replace(SPACE, " ") for t in self.vocab[FIRST_PIECE_ID:] if len(t) == 1)

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Text -> token ids; never unknown: unseen characters become their UTF-8 bytes."""
        ids = [self.bos_id] if add_bos else []
        if text:
            for piece in split_pieces(text):
                ids += self._encode_piece(piece)
        if add_eos:
            ids.append(self.eos_id)
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        """Token ids -> text, dropping the special tokens; the exact inverse of ``encode`` (``decode_ids``)."""
        return decode_ids(self.vocab, ids)
