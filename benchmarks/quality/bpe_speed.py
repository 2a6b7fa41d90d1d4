"""Time BPE training on small_parallel_enja (50,000 pairs, English + Japanese) and encoding it.

    .venv/bin/python benchmarks/quality/bpe_speed.py [--vocab-size 8000]
"""

import argparse
import gzip
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from minitransformer.data.bpe import BPETokenizer  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "small_parallel_enja"


def read(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--vocab-size", type=int, default=8000)
    args = parser.parse_args()
    if not (DATA / "train.en.gz").is_file():
        print(f"skipped: {DATA} not found")
        return
    texts = read(DATA / "train.en.gz") + read(DATA / "train.ja.gz")
    start = time.perf_counter()
    tokenizer = BPETokenizer.train(texts, vocab_size=args.vocab_size)
    train_seconds = time.perf_counter() - start
    start = time.perf_counter()
    ids = tokenizer.encode_batch(texts)
    encode_seconds = time.perf_counter() - start
    tokens = sum(map(len, ids))
    roundtrip = all(tokenizer.decode(i) == " ".join(t.split()) for i, t in zip(ids, texts))
    print(f"train: {train_seconds:.2f} s for {len(texts)} sentences -> vocab size {tokenizer.vocab_size}")
    print(f"encode: {encode_seconds:.2f} s, {tokens} tokens ({tokens / len(texts):.2f} per sentence)")
    print(f"exact round trip: {roundtrip}")


if __name__ == "__main__":
    main()
