"""A trained model with its tokenizer: text in, text out (chapter 11).

    translator = Translator.load("runs/enja")          # a run folder or a checkpoint folder
    translator.translate(["the cat ate the fish ."])   # beam search, beam 4, α = 0.6 (§6.1)
    translator.bleu(pairs)                             # corpus BLEU against references

Inputs are brought into the form of the training corpus on the way in (its
case, its punctuation spacing: data/writing.py), so "Did the dog drink the
milk?" reads as the corpus's "did the dog drink the milk ?". Words and
characters the model never saw are named in a warning (characters become
<unk>); an empty sentence translates to an empty string, and a sentence longer
than the model's positional table is cut to fit (with a warning).

Warnings go to ``translator.warn``: by default ``warnings.warn`` with a
``TranslationWarning``, which a program can filter, record or turn into errors;
the command line prints them on stderr.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from . import backend, models
from .bleu import BLEUScore, corpus_bleu_score, tokenization_for
from .checkpoint import Checkpoint, CheckpointError, check_weights_match, load_checkpoint
from .data.bpe import END_OF_WORD
from .data.raw_text import RawTextTokenizer
from .data.tokenizer import SPECIAL_TOKENS, Tokenizer
from .data.writing import CorpusWriting, describe_unseen
from .decode import DEFAULT_ALPHA, check_alpha, decode_sentences, searching
from .nn.attention import record_attention
from .nn.seq2seq import Seq2Seq, Seq2SeqConfig
from .nn.transformer import Transformer, TransformerConfig


def tokenizer_to_dict(tokenizer: Tokenizer) -> dict:
    """The tokenizer as JSON-ready data (``to_dict``; its "kind" says which tokenizer wrote it)."""
    return tokenizer.to_dict()


def tokenizer_from_dict(data: dict, where: str = "tokenizer") -> Tokenizer:
    """``Tokenizer.from_dict``: the tokenizer of the data's kind ("words", "raw", "unigram"), refusing a
    broken one as a CheckpointError that names ``where``."""
    try:
        return Tokenizer.from_dict(data)
    except ValueError as error:
        raise CheckpointError(f"{where}: {error}") from None


def config_from_dict(data: dict, where: str = "config") -> TransformerConfig | Seq2SeqConfig:
    """The model configuration a dict describes (its "model" field names the kind; models.py), refusing
    unknown or missing fields by name."""
    if not isinstance(data, dict):
        raise CheckpointError(f"{where}: the model configuration is missing")
    try:
        return models.config_from_dict(data)
    except ValueError as error:
        raise CheckpointError(f"{where}: invalid model configuration ({error})") from None


def model_from_checkpoint(checkpoint: Checkpoint, device: str = "cpu") -> Transformer | Seq2Seq:
    """Build the model described by the checkpoint's config and load its weights (shapes checked)."""
    config = config_from_dict(checkpoint.state.get("config"), str(checkpoint.path))
    model = models.build_model(config)
    check_weights_match(checkpoint.weights, model.state_dict(), where=str(checkpoint.path))
    model.load_state_dict(checkpoint.weights)
    if device != "cpu":
        model.to(device)
    model.eval()
    return model


def saved_alpha(checkpoint: Checkpoint) -> float:
    """The length penalty α a training run chose on its dev set for this model (``train --choose-alpha``),
    saved with the final model; §6.1's 0.6 for a checkpoint that saved none."""
    alpha = checkpoint.state.get("alpha", DEFAULT_ALPHA)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
        raise CheckpointError(f"{checkpoint.path}: the saved length penalty alpha is {alpha!r}, not a finite number")
    try:
        return check_alpha(alpha, "the saved length penalty alpha")
    except ValueError as error:
        raise CheckpointError(f"{checkpoint.path}: {error}") from None


class TranslationWarning(UserWarning):
    """An input the translation cannot vouch for: words never seen in training, a truncated sentence."""


def warn_translation(message: str) -> None:
    warnings.warn(message, TranslationWarning, stacklevel=3)


@dataclass
class Translator:
    model: Transformer | Seq2Seq
    tokenizer: Tokenizer
    warn: Callable[[str], None] = warn_translation
    alpha: float = DEFAULT_ALPHA        # the length penalty unless told: §6.1's, or the one chosen on dev for this model

    def __post_init__(self) -> None:
        if isinstance(self.tokenizer, RawTextTokenizer):   # raw text: no words to recall, only characters
            self.writing = CorpusWriting(None, self.tokenizer.characters)
        else:
            self.writing = CorpusWriting.of_tokenizer(self.tokenizer)   # how the training text is written

    @classmethod
    def load(cls, path, device: str = "cpu") -> Translator:
        """From a run folder (its final model, else its latest checkpoint) or a checkpoint folder."""
        checkpoint = load_checkpoint(path, with_optimizer=False)
        if checkpoint.tokenizer is None:
            raise CheckpointError(f"{checkpoint.path}: no tokenizer.json beside the weights")
        tokenizer = tokenizer_from_dict(checkpoint.tokenizer, str(checkpoint.path / "tokenizer.json"))
        model = model_from_checkpoint(checkpoint, device)
        if tokenizer.vocab_size != model.config.src_vocab_size:
            raise CheckpointError(f"{checkpoint.path}: tokenizer has {tokenizer.vocab_size} tokens but the model "
                                  f"expects {model.config.src_vocab_size}")
        return cls(model, tokenizer, alpha=saved_alpha(checkpoint))

    @property
    def max_source_length(self) -> int:
        return self.model.config.max_len

    def encode_sources(self, sentences: Sequence[str], warn_unseen: bool = False) -> list[list[int]]:
        """Token ids of each sentence, written as the corpus writes (``CorpusWriting.normalize``) and cut
        to the positional table's length (with a warning); ``warn_unseen`` also names what the model
        never saw."""
        if isinstance(sentences, str):   # a string is iterable: each character would be a sentence
            raise TypeError("expected a list of sentences, not one string; write translate([sentence])")
        encoded = []
        for number, sentence in enumerate(sentences, start=1):
            if not isinstance(sentence, str):
                raise TypeError(f"sentence {number} is {type(sentence).__name__}, not a string")
            text = self.writing.normalize(sentence)
            if warn_unseen:
                words, characters = self.writing.unseen(text)
                if words or characters:
                    read_as = "its UTF-8 bytes" if isinstance(self.tokenizer, RawTextTokenizer) else "<unk>"
                    self.warn(f"sentence {number}: {describe_unseen(words, characters, read_as)}")
            ids = self.tokenizer.encode(text)
            if len(ids) > self.max_source_length:
                self.warn(f"sentence {number} has {len(ids)} tokens; the model reads at most "
                          f"{self.max_source_length}, so it was truncated")
                ids = ids[:self.max_source_length]
            encoded.append(ids)
        return encoded

    def translate(self, sentences: Sequence[str], beam_size: int = 4, alpha: float | None = None,
                  max_tokens: int = 4000, warn_unseen: bool = True) -> list[str]:
        """Translate each sentence (in eval mode, whatever mode the model is in); ``beam_size=1`` is
        greedy search; ``alpha`` the length penalty (None: ``self.alpha``). ``warn_unseen`` names, per
        sentence, the words and characters never seen in training."""
        alpha = self.alpha if alpha is None else alpha
        sources = self.encode_sources(sentences, warn_unseen)
        tok = self.tokenizer
        outputs = decode_sentences(self.model, sources, tok.bos_id, tok.eos_id, beam_size=beam_size, alpha=alpha,
                                   max_tokens=max_tokens)
        return [tok.decode(ids) for ids in outputs]

    def bleu(self, pairs: Sequence[tuple[str, str]], beam_size: int = 4, alpha: float | None = None,
             tokenize: str | None = None) -> tuple[BLEUScore, list[str]]:
        """Corpus BLEU of the translations of the sources against the references; also the translations.

        ``tokenize`` is BLEU's tokenization (bleu.TOKENIZATIONS); None: "char" for references written
        without spaces, else "13a". Test sets are corpus text, in which unseen words are expected: they
        are not warned about.
        """
        pairs = list(pairs)
        for number, pair in enumerate(pairs, start=1):
            if isinstance(pair, str) or len(pair) != 2:
                raise TypeError(f"pair {number} is {pair!r}; bleu() takes (source, reference) pairs")
        hypotheses = self.translate([src for src, _ in pairs], beam_size=beam_size, alpha=alpha, warn_unseen=False)
        references = [ref for _, ref in pairs]
        tokenize = tokenize or tokenization_for(None, references)
        return corpus_bleu_score(hypotheses, references, tokenize=tokenize), hypotheses

    def cross_attention(self, source: str, output_ids: Sequence[int] | None = None, layer: int = -1):
        """The encoder–decoder attention of one sentence, averaged over heads (an LSTM has one attention,
        layer -1 or 0).

        Returns (weights (T, S), source tokens, output tokens, source ids, output ids); the
        output is ``output_ids`` or the greedy translation, followed by eos.
        """
        tok = self.tokenizer
        n_layers = 1 if isinstance(self.model, Seq2Seq) else len(self.model.decoder.layers)   # one attention
        if not -n_layers <= layer < n_layers:
            raise ValueError(f"cross_attention: layer {layer} does not exist; the decoder has {n_layers} layers")
        src_ids = self.encode_sources([source])[0]
        if not src_ids:
            raise ValueError("cross_attention: the source sentence is empty")
        if output_ids is None:
            output_ids = decode_sentences(self.model, [src_ids], tok.bos_id, tok.eos_id, beam_size=1)[0]
        output_ids = list(output_ids)[:self.model.config.max_len - 1]
        target = output_ids + [tok.eos_id]
        tgt_in = np.asarray([[tok.bos_id] + output_ids], dtype=np.int64)
        source = np.asarray([src_ids], dtype=np.int64)
        if isinstance(self.model, Seq2Seq):
            with searching(self.model):
                matrix = backend.asnumpy(self.model.attention_weights(source, tgt_in))[0]   # (T, S)
            return matrix, self.display_tokens(src_ids), self.display_tokens(target), src_ids, target
        with searching(self.model), record_attention(self.model):
            memory, src_mask = self.model.encode(source)
            self.model.decode(tgt_in, memory, src_mask)
        weights = self.model.decoder.layers[layer].cross_attn.attention_weights     # (1, h, T, S)
        matrix = backend.asnumpy(weights.data)[0].mean(axis=0)  # (T, S), averaged over the heads
        return matrix, self.display_tokens(src_ids), self.display_tokens(target), src_ids, target

    def display_tokens(self, ids: Sequence[int]) -> list[str]:
        """Subwords for pictures: a word's last piece as is, earlier pieces with a trailing '-'."""
        labels = []
        raw = isinstance(self.tokenizer, RawTextTokenizer)     # its tokens show their spaces as "▁"
        for i in ids:
            if not 0 <= i < len(self.tokenizer.vocab):     # a negative id would index from the end
                raise ValueError(f"token id {i} is outside the vocabulary of size {len(self.tokenizer.vocab)}")
            token = self.tokenizer.vocab[i]
            labels.append(token if raw else token[:-len(END_OF_WORD)] if token.endswith(END_OF_WORD) else
                          token if i < len(SPECIAL_TOKENS) else token + "-")
        return labels


__all__ = ["Translator", "TranslationWarning", "warn_translation", "tokenizer_to_dict", "tokenizer_from_dict", "config_from_dict", "model_from_checkpoint"]
