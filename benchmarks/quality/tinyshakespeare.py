"""nanoGPT's character-level Shakespeare on our engine, beside a PyTorch twin (chapter 15).

The text: tinyshakespeare (karpathy/char-rnn), 1,115,394 characters, 65 distinct, read from
../shared/data/tinyshakespeare/input.txt.gz (or the path given), or downloaded from its public source
with its sha256 checked. Split as nanoGPT splits it: the first 90 % to train on, the last 10 % held out.

The recipe: nanoGPT's CPU recipe (its README) — 4 layers, 4 heads, width 128, context 64, batch 12,
2,000 iterations, no dropout; learning rate 1e-3 with 100 warm-up steps and a cosine down to 1e-4,
Adam β = (0.9, 0.99), gradient clipping at 1. nanoGPT adds weight decay 0.1 (AdamW) and GELU; our model is
chapter 15's (ReLU FFN of width 4·d, biases, embeddings × √d_model, learned positions, pre-LN, tied output),
and so is the twin: the PyTorch model here is OUR architecture written in torch (benchmarks only), started
from the same initial weights and fed the same batches, so that the two runs differ only in the library.

Each library trains in its own process (``--worker``), one after the other; each reports its validation
loss (nats per character, the mean over ``--eval-batches`` random batches of the held-out tail, the same
batches for both) and its time per iteration (the median over the iterations, evaluations excluded).

    python benchmarks/quality/tinyshakespeare.py                       # the full recipe: minutes per library
    python benchmarks/quality/tinyshakespeare.py --iters 20 --eval-batches 4 --results /tmp/ts.json  # a smoke run
    python benchmarks/quality/tinyshakespeare.py --positionals sinusoidal,rope   # also RoPE and §3.5's sinusoid
    python benchmarks/quality/tinyshakespeare.py --isa avx2      # the AVX2-only kind, emulated on an AVX-512 CPU

Writes benchmarks/quality/results/tinyshakespeare.json (tinyshakespeare_avx2.json with --isa avx2, or
--results) with the machine it ran on. ``--isa avx2`` caps both libraries at AVX2 as
benchmarks/speed/train_step.py does (common.py's ISA_CAPS: OpenBLAS's Haswell kernel and NumPy's own loops
for us, MKL, oneDNN and ATen at AVX2 for PyTorch), so that one machine measures both kinds of CPU.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))          # common.py
from common import ISA_CAPS, apply_isa  # noqa: E402
DEFAULT_TEXT = ROOT.parent / "shared" / "data" / "tinyshakespeare" / "input.txt.gz"
URL = "https://raw.githubusercontent.com/karpathy/char-rnn/6f9487a6fe5b420b7ca9afb0d7c078e37c1d1b4e/data/tinyshakespeare/input.txt"
SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
RECIPE = dict(n_layers=4, n_heads=4, d_model=128, context=64, batch=12, iters=2000, lr=1e-3, min_lr=1e-4,
              warmup=100, beta2=0.99, clip=1.0)
NANOGPT_CPU_VAL_LOSS = 1.88     # nanoGPT's README, its CPU recipe ("about 1.88"); see ATTRIBUTION.md of the data


def read_text(path: str | None) -> str:
    """The text from ``path`` (.txt or .txt.gz), else ../shared, else downloaded; its sha256 checked."""
    source = Path(path) if path else DEFAULT_TEXT
    if source.is_file():
        raw = source.read_bytes()
        raw = gzip.decompress(raw) if source.suffix == ".gz" else raw
    elif path:
        raise SystemExit(f"{path}: no such file")
    else:
        print(f"{source} not found; downloading {URL}", file=sys.stderr)
        with urllib.request.urlopen(URL, timeout=60) as response:
            raw = response.read()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != SHA256:
        raise SystemExit(f"the text's sha256 is {digest}, not tinyshakespeare's {SHA256}")
    return raw.decode("utf-8")


def encoded(text: str) -> tuple[np.ndarray, np.ndarray, int]:
    """Character ids (in the order of the sorted characters), cut 90 % / 10 % in order, and the vocabulary size."""
    chars = sorted(set(text))
    table = {c: i for i, c in enumerate(chars)}
    ids = np.fromiter((table[c] for c in text), dtype=np.int64, count=len(text))
    cut = int(0.9 * len(ids))
    return ids[:cut], ids[cut:], len(chars)


def batches(ids: np.ndarray, count: int, seed: int, batch: int, context: int):
    """``count`` batches of random windows (inputs, targets), the same for both libraries."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        starts = rng.integers(0, len(ids) - context, size=batch)
        windows = np.stack([ids[s:s + context + 1] for s in starts])
        yield windows[:, :-1], windows[:, 1:]


def learning_rate(step: int, recipe: dict) -> float:
    """Linear warm-up, then a cosine to min_lr at the last iteration (nanoGPT's get_lr)."""
    if step < recipe["warmup"]:
        return recipe["lr"] * (step + 1) / (recipe["warmup"] + 1)
    progress = min(1.0, (step - recipe["warmup"]) / max(1, recipe["iters"] - recipe["warmup"]))
    return recipe["min_lr"] + 0.5 * (1 + math.cos(math.pi * progress)) * (recipe["lr"] - recipe["min_lr"])


# -- the two workers ------------------------------------------------------------------------------------
def ours(recipe: dict, vocab: int, weights: str, positional: str = "learned"):
    import minitransformer.nn as nn
    import minitransformer.optim as optim
    from minitransformer.tensor import no_grad

    config = nn.LanguageModelConfig(vocab_size=vocab, d_model=recipe["d_model"], n_heads=recipe["n_heads"],
                                    d_ff=4 * recipe["d_model"], n_layers=recipe["n_layers"],
                                    context=recipe["context"], positional=positional)
    model = nn.LanguageModel(config)
    with np.load(weights) as saved:      # another position encoding: the same weights but the learned table
        model.load_state_dict({k: v for k, v in saved.items() if positional == "learned" or k != "positional.weight"})
    optimizer = optim.Adam(model.parameters(), lr=recipe["lr"], betas=(0.9, recipe["beta2"]), eps=1e-8)

    def step(inputs, targets, lr: float) -> float:
        optimizer.lr = lr
        optimizer.zero_grad()
        loss = model.loss(inputs, targets)
        loss.backward()
        optim.clip_grad_norm(model.parameters(), recipe["clip"])
        optimizer.step()
        return loss.item()

    def evaluate(inputs, targets) -> float:
        with no_grad():
            return model.loss(inputs, targets).item()

    return step, evaluate


def twin(recipe: dict, vocab: int, weights: str):
    """Chapter 15's model in PyTorch, loaded from our initial weights (our Linear weights are (in, out))."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    d, h = recipe["d_model"], recipe["n_heads"]

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w_q, self.w_k, self.w_v, self.w_o = (nn.Linear(d, d) for _ in range(4))
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.linear1, self.linear2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            batch, length, _ = x.shape
            a = self.norm1(x)
            q, k, v = (w(a).view(batch, length, h, d // h).transpose(1, 2) for w in (self.w_q, self.w_k, self.w_v))
            attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.w_o(attended.transpose(1, 2).reshape(batch, length, d))
            return x + self.linear2(F.relu(self.linear1(self.norm2(x))))

    class Twin(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = nn.Embedding(vocab, d)
            self.positional = nn.Parameter(torch.zeros(recipe["context"], d))
            self.blocks = nn.ModuleList(Block() for _ in range(recipe["n_layers"]))
            self.norm = nn.LayerNorm(d)

        def forward(self, ids, targets):
            x = self.embedding(ids) * math.sqrt(d) + self.positional[:ids.shape[1]]
            for block in self.blocks:
                x = block(x)
            logits = self.norm(x) @ self.embedding.weight.T
            return F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))

    model = Twin()
    with np.load(weights) as saved:
        state = {}
        for name, value in saved.items():
            name = name.replace("positional.weight", "positional").replace("self_attn.", "") \
                .replace("feed_forward.", "")
            tensor = torch.from_numpy(value.copy())
            state[name] = tensor.T.contiguous() if tensor.ndim == 2 and "embedding" not in name and \
                name != "positional" else tensor
        model.load_state_dict(state, strict=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=recipe["lr"], betas=(0.9, recipe["beta2"]), eps=1e-8)

    def step(inputs, targets, lr: float) -> float:
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        loss = model(torch.from_numpy(inputs), torch.from_numpy(targets))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), recipe["clip"])
        optimizer.step()
        return loss.item()

    def evaluate(inputs, targets) -> float:
        with torch.no_grad():
            return model(torch.from_numpy(inputs), torch.from_numpy(targets)).item()

    return step, evaluate


def worker(args) -> None:
    """Train one library on the recipe; print one JSON line with its figures."""
    if args.worker == "pytorch":
        import torch
        torch.set_num_threads(args.threads)
    recipe = {**RECIPE, "iters": args.iters}
    train, val, vocab = encoded(read_text(args.text))
    if args.worker == "minitransformer":
        step, evaluate = ours(recipe, vocab, args.weights, args.positional)
    else:
        step, evaluate = twin(recipe, vocab, args.weights)
    seconds, losses = [], []
    for i, (inputs, targets) in enumerate(batches(train, recipe["iters"], 1, recipe["batch"], recipe["context"])):
        start = time.perf_counter()
        losses.append(step(inputs, targets, learning_rate(i, recipe)))
        seconds.append(time.perf_counter() - start)
    val_batches = batches(val, args.eval_batches, 2, recipe["batch"], recipe["context"])
    val_loss = float(np.mean([evaluate(x, y) for x, y in val_batches]))
    print(json.dumps({"val_loss": round(val_loss, 4), "train_loss_last_100": round(float(np.mean(losses[-100:])), 4),
                      "seconds_per_iter": round(float(np.median(seconds)), 5),
                      "total_train_seconds": round(float(np.sum(seconds)), 2), "iters": recipe["iters"]}))


def run_worker(args, library: str, positional: str, weights: str, env: dict) -> dict:
    """One training run in a process of its own: its figures."""
    command = [sys.executable, __file__, "--worker", library, "--weights", weights, "--iters", str(args.iters),
               "--eval-batches", str(args.eval_batches), "--threads", str(args.threads), "--positional", positional]
    command += [args.text] if args.text else []
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{library} ({positional} positions) failed:\n{done.stderr}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{library:>16} ({positional}): {figures}")
    return figures


def initial_weights(vocab: int, path: str) -> None:
    import minitransformer.nn as nn

    config = nn.LanguageModelConfig(vocab_size=vocab, d_model=RECIPE["d_model"], n_heads=RECIPE["n_heads"],
                                    d_ff=4 * RECIPE["d_model"], n_layers=RECIPE["n_layers"],
                                    context=RECIPE["context"])
    np.savez(path, **nn.LanguageModel(config).state_dict())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("text", nargs="?", default=None, help=f"the text (default {DEFAULT_TEXT}, else downloaded)")
    parser.add_argument("--iters", type=int, default=RECIPE["iters"])
    parser.add_argument("--eval-batches", type=int, default=200, help="held-out batches of 12 (default 200)")
    parser.add_argument("--threads", type=int, default=1, help="BLAS / torch threads per library (default 1)")
    parser.add_argument("--libraries", default="minitransformer,pytorch")
    parser.add_argument("--positionals", default="", help="also train our engine with these position encodings "
                        "(e.g. sinusoidal,rope; chapter 15.6), recorded under 'positional' beside 'learned'")
    parser.add_argument("--isa", choices=tuple(ISA_CAPS), default="native",
                        help="cap both libraries' vector extensions (avx2: the AVX2-only kind; default native)")
    parser.add_argument("--positional", default="learned", help=argparse.SUPPRESS)
    parser.add_argument("--results", default=None, help="JSON file (default benchmarks/quality/results/"
                                                        "tinyshakespeare.json)")
    parser.add_argument("--worker", choices=("minitransformer", "pytorch"), help=argparse.SUPPRESS)
    parser.add_argument("--weights", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return 0
    from common import machine_record, write_results

    if args.isa != "native":             # the caps go into this process's environment: the workers inherit them
        apply_isa(args.isa)
        args.results = args.results or str(Path(__file__).parent / "results" / f"tinyshakespeare_{args.isa}.json")
    _, val, vocab = encoded(read_text(args.text))
    record = {"recipe": {**RECIPE, "iters": args.iters}, "eval_batches": args.eval_batches, "threads": args.threads,
              "isa": args.isa,
              "nanogpt_cpu_val_loss": NANOGPT_CPU_VAL_LOSS, "machine": machine_record(), "libraries": {}}
    with tempfile.TemporaryDirectory() as folder:
        weights = os.path.join(folder, "initial.npz")
        initial_weights(vocab, weights)
        env = {**os.environ, "OPENBLAS_NUM_THREADS": str(args.threads), "OMP_NUM_THREADS": str(args.threads),
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        for library in args.libraries.split(","):
            record["libraries"][library] = run_worker(args, library, "learned", weights, env)
        if args.positionals:
            record["positional"] = {"learned": record["libraries"].get("minitransformer")}
            for kind in args.positionals.split(","):
                record["positional"][kind] = run_worker(args, "minitransformer", kind, weights, env)
    write_results(record, args.results, Path(__file__).parent / "results" / "tinyshakespeare.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
