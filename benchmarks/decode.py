"""Decoding speed: greedy and beam-4 search, with and without the attention cache, ours vs PyTorch.

64 random source sentences (the ``small-N3`` benchmark model: d_model 128, 3 + 3 layers,
vocabulary 4,000, sources of up to 24 tokens) are decoded to exactly 50 tokens: the
end-of-sentence id is one the model can never produce, so no hypothesis stops early.

* with the cache: each step runs the decoder on ONE new position per row; self-attention
  keys/values are appended to a cache, cross-attention keys/values of the memory are
  projected once (minitransformer's ``model.decode_step``; the same in
  benchmarks/torch_reference.py for PyTorch);
* without: each step re-runs the decoder over the whole prefix (t positions at step t).

Ours is ``minitransformer.decode.greedy_decode`` / ``beam_search`` (which also keep the
Python bookkeeping of finished sentences, length penalties and n-best lists); PyTorch's
is the plain loops ``greedy`` / ``beam`` of torch_reference.py. Each library runs in its
own worker process, the two take turns, ``--rounds`` rounds, medians reported. The
greedy outputs of the two libraries are compared as a sanity check (same weights, so
the same tokens up to float32 near-ties).

    python benchmarks/decode.py                  # small-N3 model, 3 rounds, glibc's default malloc
    python benchmarks/decode.py --rounds 5 --malloc keep --config tiny
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BOS, CONFIGS, Worker, median, memory_mib, pause, random_batch, serve, setup_worker_threads, \
    worker_env  # noqa: E402

SENTENCES = 64
LENGTH = 50
BEAM = 4
NEVER = -1          # an eos id no argmax can return: every search runs the full LENGTH steps
MODES = ("greedy, cache", "greedy, no cache", "beam 4, cache", "beam 4, no cache")


def sources(config_name: str):
    config = CONFIGS[config_name].with_batch(SENTENCES)
    return config, random_batch(config, seed=7)[0]                   # (64, L) with padding


def worker(library: str, args) -> None:
    import numpy as np

    from train_step import build_ours, build_torch

    setup_worker_threads(library)
    config, src = sources(args.config)
    if library == "minitransformer":
        from minitransformer.decode import beam_search, greedy_decode

        model, *_ = build_ours(config, dropout=0.1)
        model.eval()
        runs = {
            "greedy": lambda cache: greedy_decode(model, src, BOS, NEVER, max_len=LENGTH, use_cache=cache),
            "beam": lambda cache: [h[0].tokens for h in beam_search(model, src, BOS, NEVER, beam_size=BEAM,
                                                                    max_len=LENGTH, use_cache=cache)],
        }
    else:
        import torch

        from torch_reference import beam, greedy

        with np.load(args.state) as saved:
            model, *_ = build_torch(config, 0.1, dict(saved))
        model.eval()
        src_t = torch.from_numpy(src)
        runs = {
            "greedy": lambda cache: greedy(model, src_t, BOS, LENGTH, use_cache=cache).tolist(),
            "beam": lambda cache: beam(model, src_t, BOS, LENGTH, BEAM, use_cache=cache).tolist(),
        }

    def run(mode: str) -> dict:
        search, cache = mode.split(",")[0].split()[0], mode.endswith(", cache")
        start = time.perf_counter()
        tokens = runs[search](cache)
        seconds = time.perf_counter() - start
        if any(len(t) != LENGTH for t in tokens):
            raise RuntimeError(f"{library} {mode}: expected {LENGTH} tokens per sentence")
        return {"seconds": seconds, "tokens": tokens if mode == "greedy, cache" else None}

    run("greedy, cache")  # warm-up
    serve({"run": run, "memory": memory_mib}, {"ready": True})


def main() -> int:
    import numpy as np

    from train_step import our_initial_state

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="small-N3", choices=list(CONFIGS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--malloc", choices=("default", "keep", "both"), default="default")
    parser.add_argument("--modes", default=",".join(m.replace(", ", "+") for m in MODES),
                        help="which of: " + ", ".join(m.replace(", ", "+") for m in MODES))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--state", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args)
        return 0
    modes = [m.replace("+", ", ") for m in args.modes.split(",")]
    config, _ = sources(args.config)
    script = str(Path(__file__).resolve())
    print(f"{SENTENCES} sentences decoded to {LENGTH} tokens, model '{args.config}' (d_model {config.d_model}, "
          f"{config.n_layers}+{config.n_layers} layers, vocab {config.vocab}), {args.threads} threads, "
          f"{args.rounds} rounds")
    settings = ("default", "keep") if args.malloc == "both" else (args.malloc,)
    for malloc in settings:
        env = worker_env(args.threads, malloc)
        with tempfile.TemporaryDirectory() as folder:
            state_path = str(Path(folder) / "state.npz")
            np.savez(state_path, **our_initial_state(config))
            workers = {"minitransformer": Worker(script, "minitransformer", ["--config", args.config], env),
                       "torch": Worker(script, "torch", ["--config", args.config, "--state", state_path], env)}
        seconds = {(lib, m): [] for lib in workers for m in modes}
        tokens = {}
        try:
            for round_index in range(args.rounds):
                for mode in modes:
                    order = list(workers) if round_index % 2 == 0 else list(workers)[::-1]
                    for lib in order:
                        pause()
                        reply = workers[lib].call("run", mode=mode)
                        seconds[lib, mode].append(reply["seconds"])
                        if reply["tokens"] is not None:
                            tokens[lib] = reply["tokens"]
            memory = {lib: w.call("memory") for lib, w in workers.items()}
        finally:
            for w in workers.values():
                w.close()
        print(f"\nglibc malloc: {malloc}")
        header = f"{'search':<18}{'ours s':>9}{'torch s':>9}{'ours/torch':>11}{'ours ms/token-step':>20}"
        print(header + "\n" + "-" * len(header))
        for mode in modes:
            ours, theirs = median(seconds["minitransformer", mode]), median(seconds["torch", mode])
            print(f"{mode:<18}{ours:>9.2f}{theirs:>9.2f}{ours / theirs:>11.2f}{ours / LENGTH * 1e3:>20.1f}")
        for search in ("greedy", "beam 4"):
            cached, uncached = f"{search}, cache", f"{search}, no cache"
            if cached in modes and uncached in modes:
                speedups = [f"{median(seconds[lib, uncached]) / median(seconds[lib, cached]):.1f}×"
                            for lib in workers]
                print(f"cache speed-up, {search}: ours {speedups[0]}, torch {speedups[1]}")
        if len(tokens) == 2:
            same = sum(a == b for a, b in zip(tokens["minitransformer"], tokens["torch"]))
            print(f"greedy outputs identical in both libraries: {same}/{SENTENCES} sentences")
        print("peak RSS of the decoding workers: ours %.0f MiB, torch %.0f MiB"
              % (memory["minitransformer"]["VmHWM"], memory["torch"]["VmHWM"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
