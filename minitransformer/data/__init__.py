"""Data: the built-in corpus, readers for real corpora, BPE and batching (host-side, NumPy only)."""

from .batching import Batch, causal_mask, epoch_batches, iterate_batches, make_batches, pad_sequences, padding_mask
from .bpe import BPETokenizer
from .corpus import (CONSTRUCTION_WEIGHTS, BuiltinCorpus, Corpus, GrammarError, make_builtin_corpus,
                     reserved_combinations)
from .loaders import CorpusError, load_corpus, read_lines, read_parallel, read_tsv

__all__ = [
    "Batch", "causal_mask", "epoch_batches", "iterate_batches", "make_batches", "pad_sequences", "padding_mask",
    "BPETokenizer", "CONSTRUCTION_WEIGHTS", "BuiltinCorpus", "Corpus", "GrammarError", "make_builtin_corpus",
    "reserved_combinations", "CorpusError", "load_corpus", "read_lines", "read_parallel", "read_tsv",
]
