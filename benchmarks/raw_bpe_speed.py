"""Time the raw-text BPE (data/raw_bpe.py) on Tatoeba jpn-eng: learning on both sides of the
training pairs, encoding them, and the exact round trip.

    python benchmarks/raw_bpe_speed.py [--vocab-size 8000] [--data ../shared/data/tatoeba_manythings/jpn-eng]

For comparison it also times the word-level BPE (data/bpe.py) on the same text (--no-words skips it).
"""
from __future__ import annotations

import argparse
import gzip
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from minitransformer.data.bpe import BPETokenizer  # noqa: E402
from minitransformer.data.raw_bpe import RawBPETokenizer  # noqa: E402

SHARED = next((p / "shared" for p in (ROOT.parent, ROOT.parent.parent) if (p / "shared" / "data").is_dir()),
              ROOT.parent / "shared")
DATA = SHARED / "data" / "tatoeba_manythings" / "jpn-eng"


def read_tsv(path: Path) -> list[tuple[str, str]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [tuple(line.rstrip("\n").split("\t")[:2]) for line in f]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--no-words", action="store_true", help="do not time the word-level BPE")
    args = parser.parse_args()
    path = Path(args.data) / "train.tsv.gz"
    if not path.is_file():
        print(f"{path}: not found (pass --data)", file=sys.stderr)
        return 2
    pairs = read_tsv(path)
    texts = [s for pair in pairs for s in pair]
    print(f"{len(pairs):,} pairs, {sum(map(len, texts)):,} characters; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    start, cpu = time.perf_counter(), time.process_time()
    tokenizer = RawBPETokenizer.train(texts, vocab_size=args.vocab_size)
    learn, learn_cpu = time.perf_counter() - start, time.process_time() - cpu
    start = time.perf_counter()
    ids = tokenizer.encode_batch(texts)
    encode = time.perf_counter() - start
    exact = sum(tokenizer.decode(i) == t for i, t in zip(ids, texts))
    tokens = sum(map(len, ids))
    print(f"raw-text BPE: learned {len(tokenizer.merges):,} merges (vocabulary {tokenizer.vocab_size:,}) in "
          f"{learn:.1f} s ({learn_cpu:.1f} s of CPU); encoded in {encode:.1f} s, {tokens / len(texts):.1f} tokens per sentence; "
          f"exact round trip {exact:,}/{len(texts):,}")
    ja = [b for _, b in pairs[:3]]
    for sentence in ja:
        print("   ", sentence, "->", " ".join(tokenizer.tokens(sentence)))
    if not args.no_words:
        start, cpu = time.perf_counter(), time.process_time()
        words = BPETokenizer.train(texts, vocab_size=args.vocab_size)
        print(f"word-level BPE on the same text: {time.perf_counter() - start:.1f} s "
              f"({time.process_time() - cpu:.1f} s of CPU) "
              f"(vocabulary {words.vocab_size:,})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
