"""The decoder alone on Japanese: nanoGPT's CPU recipe on a text written without spaces (chapter 15).

The text: the Japanese side of small_parallel_enja (train.ja.gz: 50,000 sentences of the Tanaka Corpus,
segmented into words by KyTea), read from ../shared/data/small_parallel_enja (or the folder or file given).
The segmentation spaces are taken out, so that each sentence reads as Japanese is written. The project
cannot ship the corpus: without it the script says so and stops, writing nothing.

The sentences are joined by one space, which stands for the line break between them: a sentence holds no
space any more, so the raw-text BPE of chapter 11 (data/raw_bpe.py), which starts a piece at every space,
sees each sentence as one piece beginning with its "▁", exactly as it learns them (one sentence a line).
Split as nanoGPT splits its text: the first 90 % of the sentences to train on, the last 10 % held out. The
BPE is learned on the training sentences alone, so that nothing of the held-out text shapes the tokens.

The model and its training are tinyshakespeare.py's (nanoGPT's CPU recipe: 4 layers, 4 heads, width 128,
context 64, batch 12, learning rate 1e-3 with 100 warm-up steps and a cosine to 1e-4, Adam β₂ = 0.99,
clipping at 1, 2,000 iterations), on our engine alone. The BPE's output layer is larger than Shakespeare's
65 characters, and still the whole run stays under 10 minutes on 2 cores with one BLAS thread (about 0.11 s
an iteration on an AMD EPYC with AVX-512).

It reports the held-out loss in nats per token (every window of the held-out tail), in bits per character
(nats/token × tokens/character ÷ ln 2; the separators count as characters, as line breaks would), and a
few seeded samples at temperature 0.8, one unprompted (from a sentence start) and some prompted. A sample
is shown one sentence a line, its last, unfinished sentence left out (the whole of it is kept as well).

    OPENBLAS_NUM_THREADS=1 python benchmarks/quality/japanese_lm.py   # the full run: about 5 minutes
    python benchmarks/quality/japanese_lm.py --quick --results /tmp/ja.json    # seconds: a smoke run
    python benchmarks/quality/japanese_lm.py path/to/small_parallel_enja       # another copy of the corpus

Writes benchmarks/quality/results/japanese_lm.json (or --results) with the settings and the machine.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))          # common.py
sys.path.insert(0, str(Path(__file__).resolve().parent))   # tinyshakespeare.py: the recipe
sys.path.insert(0, str(ROOT))                         # this checkout's package
from tinyshakespeare import RECIPE as SHAKESPEARE, batches, learning_rate  # noqa: E402

DEFAULT_CORPUS = ROOT.parent / "shared" / "data" / "small_parallel_enja"
SEPARATOR = " "                     # between sentences: a line break, which the BPE reads as a piece's start
ITERS = SHAKESPEARE["iters"]        # nanoGPT's 2,000: the run fits 10 minutes on 2 cores
RECIPE = dict(SHAKESPEARE)
BPE_VOCAB = 4000                    # ~1,940 characters + 260 special and byte tokens, the rest merges
TRAIN_FRACTION = 0.9
PROMPTS = ("", "私は", "彼女は")      # "": unprompted, from a sentence start
TEMPERATURE = 0.8
SAMPLE_TOKENS = 60
QUICK = {"sentences": 2000, "bpe_vocab": 1500, "iters": 10, "eval_windows": 8, "sample_tokens": 20}


def corpus_file(path: str | None) -> Path | None:
    """The Japanese text: FOLDER/train.ja.gz for a folder, the file itself for a file; None when absent."""
    source = Path(path) if path else DEFAULT_CORPUS
    if source.is_dir():
        source = source / "train.ja.gz"
    return source if source.is_file() else None


def read_sentences(file: Path, limit: int | None = None) -> list[str]:
    """One sentence a line, its segmentation spaces taken out ("私 は 学生 で す 。" -> "私は学生です。")."""
    opener = gzip.open if file.suffix == ".gz" else open
    with opener(file, "rt", encoding="utf-8") as lines:
        sentences = ["".join(line.split()) for line in lines]
    sentences = [s for s in sentences if s][:limit]
    if len(sentences) < 10:
        raise SystemExit(f"{file}: {len(sentences)} sentences; a language model needs more text than that")
    return sentences


def prepare(sentences: list[str], bpe_vocab: int):
    """The BPE learned on the first 90 % of the sentences; both parts as ids; the held-out part's characters."""
    from minitransformer.data.raw_bpe import RawBPETokenizer

    cut = int(TRAIN_FRACTION * len(sentences))
    train_text, val_text = SEPARATOR.join(sentences[:cut]), SEPARATOR.join(sentences[cut:])
    started = time.perf_counter()
    tokenizer = RawBPETokenizer.train(sentences[:cut], bpe_vocab)
    bpe_seconds = time.perf_counter() - started
    train = np.asarray(tokenizer.encode(train_text), dtype=np.int64)
    val = np.asarray(tokenizer.encode(val_text), dtype=np.int64)
    facts = {"sentences": {"train": cut, "held_out": len(sentences) - cut},
             "characters": {"train": len(train_text), "held_out": len(val_text)},
             "tokens": {"train": int(len(train)), "held_out": int(len(val))},
             "tokens_per_character": round(len(val) / len(val_text), 4),
             "bpe_vocab_requested": bpe_vocab, "bpe_vocab": len(tokenizer.vocab),
             "bpe_merges": len(tokenizer.merges), "bpe_train_seconds": round(bpe_seconds, 2)}
    return tokenizer, train, val, facts


def shown(text: str) -> str:
    """A sample one sentence a line, the last (unfinished) sentence left out when a finished one precedes it
    (and an empty one, where the model wrote two separators in a row)."""
    parts = text.lstrip(SEPARATOR).split(SEPARATOR)
    finished = [part for part in parts[:-1] if part]
    return "\n".join(finished or parts[-1:])


def sample(model, tokenizer, prompt: str, tokens: int, seed: int) -> dict:
    from minitransformer.data.raw_text import SPACE
    from minitransformer.generate import generate

    start = tokenizer.encode(prompt) if prompt else [tokenizer.token_to_id[SPACE]]   # "▁": a sentence's start
    text = tokenizer.decode(start + generate(model, start, tokens, temperature=TEMPERATURE, seed=seed))
    return {"prompt": prompt, "seed": seed, "temperature": TEMPERATURE, "tokens": tokens, "generated": text,
            "text": shown(text)}


def train_and_sample(recipe: dict, tokenizer, train: np.ndarray, val: np.ndarray, seed: int, eval_windows: int,
                     sample_tokens: int) -> dict:
    import minitransformer.nn as nn
    import minitransformer.optim as optim
    from minitransformer.training.lm import evaluate

    config = nn.LanguageModelConfig(vocab_size=len(tokenizer.vocab), d_model=recipe["d_model"],
                                    n_heads=recipe["n_heads"], d_ff=4 * recipe["d_model"],
                                    n_layers=recipe["n_layers"], context=recipe["context"], seed=seed)
    model = nn.LanguageModel(config)
    optimizer = optim.Adam(model.parameters(), lr=recipe["lr"], betas=(0.9, recipe["beta2"]), eps=1e-8)
    seconds, losses = [], []
    for i, (inputs, targets) in enumerate(batches(train, recipe["iters"], seed + 1, recipe["batch"],
                                                  recipe["context"])):
        started = time.perf_counter()
        optimizer.lr = learning_rate(i, recipe)
        optimizer.zero_grad()
        loss = model.loss(inputs, targets)
        loss.backward()
        optim.clip_grad_norm(model.parameters(), recipe["clip"])
        optimizer.step()
        losses.append(loss.item())
        seconds.append(time.perf_counter() - started)
        if (i + 1) % 250 == 0:
            print(f"iteration {i + 1}: train loss {np.mean(losses[-250:]):.3f} nats/token, "
                  f"{np.sum(seconds):.0f} s", flush=True)
    started = time.perf_counter()
    val_loss = evaluate(model, val, recipe["context"], eval_windows)
    windows = min(eval_windows, (len(val) - 1) // recipe["context"])
    samples = [sample(model, tokenizer, prompt, sample_tokens, seed) for prompt in PROMPTS]
    return {"val_loss": val_loss, "val_windows": windows,
            "train_loss_last_100": round(float(np.mean(losses[-100:])), 4),
            "seconds_per_iter": round(float(np.median(seconds)), 5), "total_train_seconds": round(float(np.sum(seconds)), 2),
            "eval_and_sample_seconds": round(time.perf_counter() - started, 2), "samples": samples}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", nargs="?", default=None,
                        help=f"small_parallel_enja's folder or a Japanese text file, .txt or .gz (default {DEFAULT_CORPUS})")
    parser.add_argument("--iters", type=int, default=None, help=f"training iterations (default {ITERS})")
    parser.add_argument("--bpe-vocab", type=int, default=None, help=f"BPE vocabulary size (default {BPE_VOCAB})")
    parser.add_argument("--eval-windows", type=int, default=None, help="held-out windows (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a smoke run: the first 2,000 sentences, 10 "
                                                             "iterations (needs --results)")
    parser.add_argument("--results", default=None, help="JSON file (default benchmarks/quality/results/japanese_lm.json)")
    args = parser.parse_args(argv)
    if args.quick and not args.results:
        parser.error("--quick needs --results: a smoke run must not replace the book's results file")
    from common import machine_record

    file = corpus_file(args.corpus)
    if file is None:
        print(f"japanese_lm: skipped: no corpus at {args.corpus or DEFAULT_CORPUS} (the Japanese side of "
              f"small_parallel_enja, train.ja.gz; the project cannot ship it: see ../shared/data/README.md); "
              f"nothing written")
        return 0
    quick = QUICK if args.quick else {}
    recipe = {**RECIPE, "iters": args.iters or quick.get("iters", ITERS)}
    bpe_vocab = args.bpe_vocab or quick.get("bpe_vocab", BPE_VOCAB)
    eval_windows = args.eval_windows or quick.get("eval_windows", 10 ** 9)
    sample_tokens = quick.get("sample_tokens", SAMPLE_TOKENS)
    started = time.perf_counter()
    sentences = read_sentences(file, quick.get("sentences"))
    tokenizer, train, val, facts = prepare(sentences, bpe_vocab)
    print(f"{file}: {len(sentences):,} sentences, spaces removed; BPE of {facts['bpe_vocab']:,} tokens "
          f"({facts['bpe_train_seconds']} s); {len(train):,} training tokens, {len(val):,} held out "
          f"({facts['tokens_per_character']} tokens per character)", flush=True)
    figures = train_and_sample(recipe, tokenizer, train, val, args.seed, eval_windows, sample_tokens)
    val_loss = figures.pop("val_loss")
    try:
        corpus = str(file.resolve().relative_to(ROOT.parent))
    except ValueError:
        corpus = str(file)
    record = {"corpus": corpus, "text_sha256": hashlib.sha256(SEPARATOR.join(sentences).encode("utf-8")).hexdigest(),
              "quick": args.quick, "recipe": recipe, "seed": args.seed, **facts,
              "val_loss": round(val_loss, 4),
              "val_bpc": round(val_loss * facts["tokens"]["held_out"] / facts["characters"]["held_out"] / math.log(2), 4),
              "val_perplexity": round(math.exp(val_loss), 2), **figures,
              "wall_seconds": round(time.perf_counter() - started, 1),
              "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "unset"), "machine": machine_record()}
    out = Path(args.results) if args.results else Path(__file__).parent / "results" / "japanese_lm.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"held-out: {record['val_loss']} nats/token, {record['val_bpc']} bits/character; "
          f"{record['seconds_per_iter']} s/iteration")
    for s in record["samples"]:
        print(f"--- prompt {s['prompt']!r}, seed {s['seed']}:\n{s['text']}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
