"""Time the raw-text BPE (data/raw_bpe.py) on Tatoeba jpn-eng: learning on both sides of the
training pairs, encoding them, and the exact round trip.

    python benchmarks/quality/raw_bpe_speed.py [--vocab-size 8000] [--data ../shared/data/tatoeba_manythings/jpn-eng]

For comparison it also times the word-level BPE (data/bpe.py) on the same text (--no-words skips it).
The figures go to benchmarks/quality/results/raw_bpe_speed.json (--results PATH to write elsewhere). Wall
times depend on what else the machine runs; the CPU times much less.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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
    parser.add_argument("--results", default=str(Path(__file__).resolve().parent / "results" / "raw_bpe_speed.json"))
    args = parser.parse_args()
    path = Path(args.data) / "train.tsv.gz"
    if not path.is_file():
        print(f"{path}: not found (pass --data)", file=sys.stderr)
        return 2
    pairs = read_tsv(path)
    texts = [s for pair in pairs for s in pair]
    load = os.getloadavg()[0]
    print(f"{len(pairs):,} pairs, {sum(map(len, texts)):,} characters; load average {load:.1f} "
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
    result = {"command": "python benchmarks/quality/raw_bpe_speed.py" + "".join(f" {a}" for a in sys.argv[1:]),
              "pairs": len(pairs), "sentences": len(texts), "characters": sum(map(len, texts)),
              "vocab_size": tokenizer.vocab_size, "merges": len(tokenizer.merges),
              "learn_seconds": round(learn, 1), "learn_cpu_seconds": round(learn_cpu, 1),
              "encode_seconds": round(encode, 1), "tokens_per_sentence": round(tokens / len(texts), 1),
              "exact_round_trip": exact, "load_average_at_start": round(load, 1), "cores": os.cpu_count()}
    ja = [b for _, b in pairs[:3]]
    for sentence in ja:
        print("   ", sentence, "->", " ".join(tokenizer.tokens(sentence)))
    if not args.no_words:
        start, cpu = time.perf_counter(), time.process_time()
        words = BPETokenizer.train(texts, vocab_size=args.vocab_size)
        result["words_learn_seconds"] = round(time.perf_counter() - start, 1)
        result["words_learn_cpu_seconds"] = round(time.process_time() - cpu, 1)
        print(f"word-level BPE on the same text: {result['words_learn_seconds']:.1f} s "
              f"({result['words_learn_cpu_seconds']:.1f} s of CPU) "
              f"(vocabulary {words.vocab_size:,})")
    result["load_average_at_end"] = round(os.getloadavg()[0], 1)
    Path(args.results).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
