"""Data: the built-in corpus, readers for real corpora, tokenizers and batching (host-side, NumPy only).

Importing this package imports the three tokenizer modules, so every kind of tokenizer file is registered
(data/tokenizer.py) before any can be read.
"""

from .batching import Batch, epoch_batches, iterate_batches, make_batches, pad_sequences
from .bpe import BPETokenizer
from .corpus import Corpus
from .grammar import CONSTRUCTION_WEIGHTS, BuiltinCorpus, GrammarError, make_builtin_corpus, reserved_combinations
from .loaders import CorpusError, load_corpus, read_lines, read_parallel, read_tsv
from .raw_bpe import RawBPETokenizer
from .tokenizer import TOKENIZERS, Tokenizer, load_tokenizer
from .unigram import UnigramTokenizer

__all__ = [
    "Batch", "epoch_batches", "iterate_batches", "make_batches", "pad_sequences",
    "BPETokenizer", "RawBPETokenizer", "UnigramTokenizer", "Tokenizer", "TOKENIZERS", "load_tokenizer",
    "CONSTRUCTION_WEIGHTS", "BuiltinCorpus", "Corpus", "GrammarError", "make_builtin_corpus",
    "reserved_combinations", "CorpusError", "load_corpus", "read_lines", "read_parallel", "read_tsv",
]
