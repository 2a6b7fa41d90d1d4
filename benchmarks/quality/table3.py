"""Table 3 of the paper at small scale: vary one thing at a time, against a base row.

    python benchmarks/quality/table3.py                      # the full table (about an hour on 2 quiet cores)
    python benchmarks/quality/table3.py --quick              # seconds: the toy model, a few steps (the test suite)
    python benchmarks/quality/table3.py --rows A,E --seeds 5 # some rows only
    python benchmarks/quality/table3.py --compare FILE       # the comparisons again, from FILE's recorded runs

The paper's Table 3 trains variations of its base model for 100,000 steps on
English–German and reports dev perplexity per word piece, dev BLEU and the
number of parameters. Here every row is a variation of the "tiny" model
(N=2, d_model=64, h=4, d_ff=256, P_drop=0.1, ε_ls=0.1) trained on the built-in
English→Japanese corpus for a SHORT, fixed budget of steps (400 by default): a
model that has not converged is where the choices show. The default recipe
trains 1,400 steps and reaches 96 test BLEU on this regular corpus; near that
ceiling we expect the rows to differ by little more than the noise of the
seeds. With a short budget they come apart, but what they then measure is
"how fast does this model learn", not "how good can it get".

Rows (as in the paper, one change each):
  (A) h = 1, 2, 8, 16 heads at constant compute: d_k = d_v = d_model / h
  (B) smaller keys: d_k = 8 or 4 with h = 4 (only W^Q and W^K narrow; d_v stays 16)
  (C) N = 1 or 3 layers; d_model 32 or 128 (h = 4); d_ff 128 or 1024
  (D) P_drop = 0 or 0.3; ε_ls = 0 (no label smoothing)
  (E) learned positional embeddings instead of sinusoids

Every row runs with several seeds (the seed sets the weights, the batch order
and dropout); the JSON keeps each run and the mean ± sample standard deviation
per row. Dev perplexity is per target subword with no smoothing (eval mode);
BLEU is greedy on the first dev sentences (the paper used beam 4). Training
FLOPs are counted by formula (minitransformer/flops.py) and divided by the
training seconds, to compare with this machine's GEMM rate, measured first.
Run it with OPENBLAS_NUM_THREADS=1 on a busy machine: two BLAS threads
waiting for a core another process holds made steps several times slower.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from minitransformer import backend  # noqa: E402
from minitransformer.data.batching import iterate_batches  # noqa: E402
from minitransformer.data.bpe import BPETokenizer  # noqa: E402
from minitransformer.data.grammar import make_builtin_corpus  # noqa: E402
from minitransformer.flops import training_flops  # noqa: E402
from minitransformer.nn import init  # noqa: E402
from minitransformer.nn.attention import MultiHeadAttention  # noqa: E402
from minitransformer.nn.linear import Linear  # noqa: E402
from minitransformer.nn.transformer import Transformer, TransformerConfig  # noqa: E402
from minitransformer.fast.adam import FastAdam  # noqa: E402
from minitransformer.optim import NoamSchedule, clip_grad_norm  # noqa: E402
from minitransformer.presets import MODELS  # noqa: E402
from minitransformer.training.trainer import batch_loss, encode_pairs, evaluate_loss  # noqa: E402
from minitransformer.translator import Translator  # noqa: E402

BASE = dict(MODELS["tiny"], label_smoothing=0.1, positional="sinusoidal", d_k=None)

# (row, what changes); each row is the base with these changes. They run in this order, the most
# telling first, so that a table cut short by the clock still has whole rows to show.
ROWS: list[tuple[str, dict]] = [
    ("base", {}),
    ("A", dict(n_heads=1)), ("A", dict(n_heads=16)),
    ("E", dict(positional="learned")),
    ("D", dict(label_smoothing=0.0)), ("D", dict(dropout=0.0)),
    ("B", dict(d_k=4)),
    ("C", dict(n_layers=1)), ("C", dict(d_model=32)),
    ("A", dict(n_heads=2)), ("A", dict(n_heads=8)), ("B", dict(d_k=8)),
    ("C", dict(n_layers=3)), ("C", dict(d_model=128)), ("C", dict(d_ff=128)), ("C", dict(d_ff=1024)),
    ("D", dict(dropout=0.3)),
]
QUICK_ROWS = [ROWS[0], ROWS[1], ROWS[3], ROWS[5], ROWS[6], ROWS[12]]   # base and one of each letter


@dataclass(frozen=True)
class Setting:
    """The data and the budget every row shares."""

    n_train: int = 20000
    n_dev: int = 500
    vocab_size: int = 1000
    steps: int = 400
    max_tokens: int = 500
    warmup: int = 60
    factor: float = 0.5
    bleu_sentences: int = 100
    corpus_seed: int = 0


FULL = Setting()
QUICK = Setting(n_train=300, n_dev=20, vocab_size=200, steps=3, max_tokens=300, warmup=2, bleu_sentences=5)


def describe(changes: dict) -> str:
    """The row's label in the paper's symbols."""
    symbols = {"n_heads": "h", "d_k": "d_k", "n_layers": "N", "d_model": "d_model", "d_ff": "d_ff",
               "dropout": "P_drop", "label_smoothing": "ε_ls", "positional": "positions"}
    return ", ".join(f"{symbols[k]}={v}" for k, v in changes.items()) or "base"


def prepare_data(setting: Setting) -> dict:
    """The corpus, the BPE vocabulary and the encoded pairs, made once for all rows."""
    corpus = make_builtin_corpus(setting.corpus_seed, n_train=setting.n_train, n_dev=setting.n_dev,
                                 n_test=0, n_heldout=0)
    train_pairs, dev_pairs = corpus.pairs("train"), corpus.pairs("dev")
    tokenizer = BPETokenizer.train([s for pair in train_pairs for s in pair], setting.vocab_size)
    return {"tokenizer": tokenizer, "train": encode_pairs(tokenizer, train_pairs, 64),
            "dev": encode_pairs(tokenizer, dev_pairs, 64), "dev_pairs": dev_pairs}


def narrow_keys(model: Transformer, d_k: int) -> None:
    """Row (B): queries and keys of d_k features per head; values keep d_model / h (W^Q, W^K narrow)."""
    for layer in model.modules():
        if isinstance(layer, MultiHeadAttention):
            layer.w_q = Linear(layer.d_model, layer.n_heads * d_k)
            layer.w_k = Linear(layer.d_model, layer.n_heads * d_k)
            layer.d_k = d_k


def build_model(sizes: dict, vocab: int, pad_id: int, seed: int) -> Transformer:
    config = TransformerConfig(src_vocab_size=vocab, tgt_vocab_size=vocab, tie_embeddings=True, pad_id=pad_id,
                               max_len=64, seed=seed, positional=sizes["positional"],
                               **{k: sizes[k] for k in ("n_layers", "d_model", "n_heads", "d_ff", "dropout")})
    model = Transformer(config)
    if sizes["d_k"] is not None:
        init.set_seed(10_000 + seed)
        narrow_keys(model, sizes["d_k"])
    return model


def gemm_rate(size: int = 256, repeats: int = 20) -> float:
    """This machine's float32 GEMM rate (FLOP/s) on square matrices of ``size``, best of ``repeats``
    (with the BLAS threads the run was started with): the ceiling the engine's rate is compared to."""
    import numpy as np  # noqa: PLC0415

    a = np.random.default_rng(0).standard_normal((size, size)).astype(np.float32)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - started)
    return 2 * size ** 3 / best


def run_one(sizes: dict, seed: int, data: dict, setting: Setting) -> dict:
    """Train one model for the setting's steps; dev perplexity, greedy dev BLEU, parameters, FLOPs."""
    tokenizer = data["tokenizer"]
    model = build_model(sizes, tokenizer.vocab_size, BPETokenizer.pad_id, seed)
    optimizer = FastAdam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9)   # §5.3, as `train` runs
    schedule = NoamSchedule(optimizer, sizes["d_model"], warmup=setting.warmup, factor=setting.factor)
    stream = iterate_batches(data["train"], setting.max_tokens, BPETokenizer.pad_id, seed, 0, 0,
                             tokenizer.bos_id, tokenizer.eos_id)
    started = time.monotonic()
    model.train()
    src_tokens = tgt_tokens = 0
    losses = []
    for step, (_, _, batch) in enumerate(stream):
        if step == setting.steps:
            break
        loss = batch_loss(model, batch, label_smoothing=sizes["label_smoothing"])
        optimizer.zero_grad()
        loss.backward()
        clip_grad_norm(optimizer.params, 1.0)
        schedule.step()
        optimizer.step()
        losses.append(float(loss.item()))
        tgt_tokens += batch.n_tgt_tokens
        src_tokens += int((backend.asnumpy(batch.src) != BPETokenizer.pad_id).sum())
    train_seconds = time.monotonic() - started
    dev_loss = evaluate_loss(model, data["dev"], setting.max_tokens, tokenizer)
    bleu, _ = Translator(model, tokenizer).bleu(data["dev_pairs"][:setting.bleu_sentences], beam_size=1)
    source_len = sum(len(s) for s, _ in data["train"]) / len(data["train"])
    target_len = sum(len(t) + 1 for _, t in data["train"]) / len(data["train"])
    flops = training_flops(model.config, src_tokens, tgt_tokens, source_len, target_len)
    return {"seed": seed, "parameters": model.num_parameters(), "dev_ppl": math.exp(min(dev_loss, 50.0)),
            "dev_loss": dev_loss, "bleu": bleu.score, "final_train_loss": sum(losses[-20:]) / len(losses[-20:]),
            "train_seconds": round(train_seconds, 2), "seconds": round(time.monotonic() - started, 2),
            "source_tokens": src_tokens, "target_tokens": tgt_tokens,
            "train_flops": flops, "flops_per_second": flops / max(train_seconds, 1e-9)}


def summarize(runs: list[dict]) -> dict:
    """Mean and sample standard deviation of each measure over the seeds."""
    out = {"parameters": runs[0]["parameters"], "seeds": [r["seed"] for r in runs]}
    for key in ("dev_ppl", "bleu", "final_train_loss", "seconds", "train_flops", "flops_per_second"):
        values = [r[key] for r in runs]
        out[key] = {"mean": statistics.fmean(values),
                    "sd": statistics.stdev(values) if len(values) > 1 else 0.0}
    return out


def compare(results: dict) -> dict:
    """What chapter 12 reads off the table, computed from the recorded runs only (nothing is trained):
    each row's dev perplexity against the base row's, and the rates in GFLOP/s against the GEMM's."""
    rows = {row["label"]: row["summary"] for row in results["rows"]}
    base = rows["base"]
    gemm = results.get("machine", {}).get("gemm_flops_per_second_256")
    out = {"dev_ppl_minus_base": {label: round(s["dev_ppl"]["mean"] - base["dev_ppl"]["mean"], 2)
                                  for label, s in rows.items() if label != "base"},
           "gflops_per_second": {label: round(s["flops_per_second"]["mean"] / 1e9, 1) for label, s in rows.items()
                                 if "flops_per_second" in s},
           "gemm_gflops_per_second_256": round(gemm / 1e9) if gemm else None,
           "gemm_gflops_per_second_1024": (round(results["machine"]["gemm_flops_per_second_1024"] / 1e9)
                                           if gemm else None)}
    if gemm:
        out["base_share_of_gemm_256"] = round(base["flops_per_second"]["mean"] / gemm, 2)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the toy model, a few steps: seconds")
    parser.add_argument("--rows", default=None, help="letters of the rows to run, e.g. A,E (base always runs)")
    parser.add_argument("--labels", default=None, help="only the rows with these labels, e.g. 'h=1;positions=learned' "
                                                       "(base always runs)")
    parser.add_argument("--seeds", type=int, default=None, help="seeds per row (default 3; 1 with --quick)")
    parser.add_argument("--steps", type=int, default=None, help="training steps per run (default 400)")
    parser.add_argument("--out", default=None, help="results JSON (default benchmarks/quality/results/table3.json, "
                                                    "table3-quick.json with --quick)")
    parser.add_argument("--compare", default=None, metavar="FILE",
                        help="rewrite FILE's comparisons from its recorded runs, training nothing")
    args = parser.parse_args(argv)
    if args.compare:
        path = Path(args.compare)
        results = json.loads(path.read_text(encoding="utf-8"))
        results["comparisons"] = compare(results)
        path.write_text(json.dumps(results, indent=1, ensure_ascii=False), encoding="utf-8")
        print(f"rewrote the comparisons in {path}")
        return 0
    setting = QUICK if args.quick else FULL
    if args.steps is not None:
        if args.steps <= 0:
            parser.error(f"--steps must be positive, got {args.steps}")
        setting = Setting(**{**setting.__dict__, "steps": args.steps})
    seeds = args.seeds or (1 if args.quick else 3)
    if seeds <= 0:
        parser.error(f"--seeds must be positive, got {seeds}")
    rows = QUICK_ROWS if args.quick else ROWS
    if args.rows:
        letters = {letter.strip().upper() for letter in args.rows.split(",")}
        unknown = letters - {row for row, _ in ROWS}
        if unknown:
            parser.error(f"--rows: unknown rows {sorted(unknown)}; choose from A, B, C, D, E")
        rows = [r for r in rows if r[0] == "base" or r[0] in letters]
    if args.labels:
        wanted = {label.strip() for label in args.labels.split(";")}
        unknown = wanted - {describe(changes) for _, changes in ROWS}
        if unknown:
            parser.error(f"--labels: unknown labels {sorted(unknown)}; e.g. 'h=1', 'N=3', 'positions=learned'")
        rows = [r for r in rows if r[0] == "base" or describe(r[1]) in wanted]
    base_sizes = dict(BASE, **(dict(MODELS["toy"]) if args.quick else {}))
    out = Path(args.out) if args.out else Path(__file__).resolve().parent / "results" / (
        "table3-quick.json" if args.quick else "table3.json")

    started = time.monotonic()
    data = prepare_data(setting)
    print(f"table 3 at small scale: {len(rows)} rows × {seeds} seeds, {setting.steps} steps of ≤ "
          f"{setting.max_tokens} tokens, {len(data['train'])} training pairs, vocabulary {data['tokenizer'].vocab_size}")
    results = {"setting": setting.__dict__, "base": base_sizes, "seeds_per_row": seeds, "quick": args.quick,
               "machine": {"python": platform.python_version(), "processor": platform.processor() or platform.machine(),
                           "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
                           "gemm_flops_per_second_256": gemm_rate(256), "gemm_flops_per_second_1024": gemm_rate(1024, 3)},
               "flops_note": "training FLOPs by formula (minitransformer/flops.py); row (B) counted as if "
                             "d_k = d_model / h, an upper bound",
               "rows": []}
    for letter, changes in rows:
        sizes = {**base_sizes, **changes}
        runs = []
        for seed in range(seeds):
            runs.append(run_one(sizes, seed, data, setting))
            r = runs[-1]
            print(f"  ({letter}) {describe(changes):<22} seed {seed}: dev ppl {r['dev_ppl']:7.2f}  "
                  f"BLEU {r['bleu']:5.1f}  {r['parameters']:>9,} params  {r['seconds']:6.1f} s", flush=True)
        results["rows"].append({"row": letter, "label": describe(changes), "changes": changes,
                                "runs": runs, "summary": summarize(runs)})
        results["wall_seconds"] = round(time.monotonic() - started, 1)
        if any(r["label"] == "base" for r in results["rows"]):
            results["comparisons"] = compare(results)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(results, indent=1, ensure_ascii=False))
        tmp.replace(out)                                   # a finished row is never lost
    print_table(results)
    print(f"wall time {results['wall_seconds']:.0f} s; results: {out}")
    return 0


def print_table(results: dict) -> None:
    print(f"\n{'row':<5} {'change':<22} {'params':>9} {'dev ppl':>15} {'BLEU':>13}")
    for row in sorted(results["rows"], key=lambda r: "0" if r["row"] == "base" else r["row"]):
        s = row["summary"]
        print(f"({row['row']})".ljust(5) + f" {row['label']:<22} {s['parameters']:>9,} "
              f"{s['dev_ppl']['mean']:7.2f} ± {s['dev_ppl']['sd']:5.2f} {s['bleu']['mean']:5.1f} ± {s['bleu']['sd']:4.1f}")


if __name__ == "__main__":
    sys.exit(main())
