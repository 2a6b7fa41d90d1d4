"""The two raw-text subword models side by side on Tatoeba jpn-eng: the raw-text BPE (data/raw_bpe.py)
and the unigram language model (data/unigram.py), each learned on both sides of the training pairs
with the same vocabulary size; learning time (wall and CPU), tokens per sentence on each side, the
exact round trip, and a few Japanese sentences as each model cuts them.

    python benchmarks/quality/unigram_vs_bpe.py [--vocab-size 8000] [--data ../shared/data/tatoeba_manythings/jpn-eng]

Writes benchmarks/quality/results/unigram_vs_bpe.json (with the load average: the timings depend on it).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from raw_bpe_speed import DATA, read_tsv  # noqa: E402  (this folder: the Tatoeba reader)

from minitransformer.data.raw_bpe import RawBPETokenizer  # noqa: E402
from minitransformer.data.unigram import UnigramTokenizer  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "unigram_vs_bpe.json"


def measure(learner, pairs: list[tuple[str, str]], vocab_size: int) -> tuple[dict, object]:
    texts = [s for pair in pairs for s in pair]
    load = os.getloadavg()[0]
    start, cpu = time.perf_counter(), time.process_time()
    tokenizer = learner.train(texts, vocab_size=vocab_size)
    learn, learn_cpu = time.perf_counter() - start, time.process_time() - cpu
    start = time.perf_counter()
    english = tokenizer.encode_batch([en for en, _ in pairs])
    japanese = tokenizer.encode_batch([ja for _, ja in pairs])
    encode = time.perf_counter() - start
    exact = sum(tokenizer.decode(ids) == text for ids, text in zip(english + japanese, [e for e, _ in pairs]
                                                                     + [j for _, j in pairs]))
    return {"vocab_size": tokenizer.vocab_size, "learn_seconds": round(learn, 1),
            "learn_cpu_seconds": round(learn_cpu, 1), "load_average": round(load, 1),
            "encode_seconds": round(encode, 1),
            "tokens_per_sentence_en": round(sum(map(len, english)) / len(pairs), 2),
            "tokens_per_sentence_ja": round(sum(map(len, japanese)) / len(pairs), 2),
            "exact_round_trips": exact, "sentences": len(texts)}, tokenizer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DATA))
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--out", default=str(RESULTS), help="the results file (default: %(default)s)")
    args = parser.parse_args()
    path = Path(args.data) / "train.tsv.gz"
    if not path.is_file():
        print(f"{path}: not found (pass --data)", file=sys.stderr)
        return 2
    pairs = read_tsv(path)
    print(f"{len(pairs):,} pairs; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    results = {"source": f"python benchmarks/quality/unigram_vs_bpe.py --vocab-size {args.vocab_size}, run of "
                         f"{date.today().isoformat()} on {os.cpu_count()} cores shared with other jobs; "
                         "the next run of the command overwrites this file",
               "command": "python benchmarks/quality/unigram_vs_bpe.py", "pairs": len(pairs)}
    examples = [ja for _, ja in pairs if 12 <= len(ja) <= 20][::5000][:4]     # a few mid-length sentences
    for name, learner in (("bpe", RawBPETokenizer), ("unigram", UnigramTokenizer)):
        figures, tokenizer = measure(learner, pairs, args.vocab_size)
        figures["examples"] = {sentence: " ".join(tokenizer.tokens(sentence)) for sentence in examples}
        results[name] = figures
        print(f"{name:8s} " + ", ".join(f"{k} {v}" for k, v in figures.items() if k != "examples"))
        for sentence, tokens in figures["examples"].items():
            print(f"    {sentence} -> {tokens}")
    Path(args.out).write_text(json.dumps(results, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
