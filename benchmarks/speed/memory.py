"""Peak memory (RSS) of a training step and of decoding, ours vs PyTorch, each in a fresh process.

A training step stores, for backward, every layer's activations; attention adds the
O(n²) term: one (B, h, T, S) weight array per attention sub-layer (3N of them: encoder
self, decoder self, decoder cross). So the peak is measured at source = target lengths
64, 256 and 1,024 (the ``small-N3`` model, batch 4), plus greedy and beam-4 decoding of 64
sentences to 50 tokens (with the cache).

Every figure comes from its own new process (this script re-invoked with ``--worker``),
so no allocation of one measurement lingers in the next. Reported per process: the
peak resident set (VmHWM, /proc/self/status), and that peak minus the resident set just
before the measured work (libraries imported, model and batch built), i.e. what the
step or the search itself added. PyTorch's attention is ``F.scaled_dot_product_attention``
(its fused CPU kernel never stores the (T, S) weights) unless ``--explicit-attention``.

    python benchmarks/speed/memory.py
    python benchmarks/speed/memory.py --lengths 64,256 --malloc keep
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # benchmarks/: common.py

from common import BOS, CONFIGS, memory_mib, random_batch, setup_worker_threads, worker_env  # noqa: E402

BATCH = 4


def worker(library: str, what: str, length: int, args) -> dict:
    import numpy as np

    from train_step import build_ours, build_torch

    setup_worker_threads(library)
    base = CONFIGS["small-N3"]
    config = base.with_batch(BATCH if what == "train" else 64)
    if what == "train":
        config = type(config)(**{**config.__dict__, "length": length})
    max_len = max(512, length + 1)
    batch = random_batch(config, seed=0)
    if library == "minitransformer":
        model, _, _, step = build_ours(config, dropout=0.1, max_len=max_len)
        from minitransformer.decode import beam_search, greedy_decode

        searches = {"greedy": lambda: greedy_decode(model, batch[0], BOS, -1, max_len=50),
                    "beam": lambda: beam_search(model, batch[0], BOS, -1, beam_size=4, max_len=50)}
    else:
        import torch

        from torch_reference import beam, greedy

        with np.load(args.state) as saved:
            model, _, _, step = build_torch(config, 0.1, dict(saved), max_len=max_len,
                                            explicit_attention=args.explicit_attention)
        batch = tuple(torch.from_numpy(a) for a in batch)
        searches = {"greedy": lambda: greedy(model, batch[0], BOS, 50),
                    "beam": lambda: beam(model, batch[0], BOS, 50, 4)}
    before = memory_mib()["VmRSS"]
    if what == "train":
        for _ in range(2):          # the second step also holds the optimiser's moments
            step(*batch)
    else:
        model.eval()
        searches[what]()
    peak = memory_mib()["VmHWM"]
    return {"peak": peak, "added": peak - before}


def measure(library: str, what: str, length: int, args, state_path: str) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", library, "--what", what,
               "--length", str(length), "--state", state_path]
    if args.explicit_attention:
        command.append("--explicit-attention")
    result = subprocess.run(command, env=worker_env(args.threads, args.malloc), capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{library} {what} {length} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> int:
    import numpy as np

    from train_step import our_initial_state

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", default="64,256,1024")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--malloc", choices=("default", "keep"), default="default")
    parser.add_argument("--explicit-attention", action="store_true")
    parser.add_argument("--no-decode", action="store_true")
    parser.add_argument("--results", default=None, help="JSON file for the figures the READMEs quote "
                        "(default benchmarks/speed/results/memory_sdpa.json, or memory_explicit.json)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--what", help=argparse.SUPPRESS)
    parser.add_argument("--length", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--state", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.what, args.length, args)))
        return 0

    lengths = [int(n) for n in args.lengths.split(",")]
    jobs = [("train", n) for n in lengths] + ([] if args.no_decode else [("greedy", 0), ("beam", 0)])
    config = CONFIGS["small-N3"]
    print(f"model 'small-N3' (d_model {config.d_model}, {config.n_layers}+{config.n_layers} layers, vocab "
          f"{config.vocab}), training batch {BATCH}, decoding 64 sentences to 50 tokens; glibc malloc: "
          f"{args.malloc}; torch attention: {'explicit' if args.explicit_attention else 'SDPA'}")
    header = (f"{'measurement':<24}{'ours peak':>11}{'torch peak':>12}{'ours added':>12}{'torch added':>13}"
              f"{'added ours/torch':>18}")
    print(header + "\n" + "-" * len(header))
    record: dict = {"command": "python benchmarks/speed/memory.py " + " ".join(sys.argv[1:]), "malloc": args.malloc,
                    "torch_attention": "explicit" if args.explicit_attention else "sdpa"}
    with tempfile.TemporaryDirectory() as folder:
        state_path = str(Path(folder) / "state.npz")
        np.savez(state_path, **our_initial_state(config, max_len=max(512, max(lengths) + 1)))
        for what, length in jobs:
            ours = measure("minitransformer", what, length, args, state_path)
            theirs = measure("torch", what, length, args, state_path)
            label = f"train step, T = S = {length}" if what == "train" else f"decode, {what}"
            print(f"{label:<24}{ours['peak']:>8.0f}MiB{theirs['peak']:>9.0f}MiB{ours['added']:>9.0f}MiB"
                  f"{theirs['added']:>10.0f}MiB{ours['added'] / max(theirs['added'], 1):>18.2f}", flush=True)
            record[f"train_{length}" if what == "train" else what] = {
                "ours_peak_mib": round(ours["peak"]), "torch_peak_mib": round(theirs["peak"]),
                "ours_added_mib": round(ours["added"]), "torch_added_mib": round(theirs["added"])}
    print("peak = VmHWM of the process; added = peak − resident set just before the measured work")
    path = Path(args.results or Path(__file__).resolve().parent / "results"
                / f"memory_{'explicit' if args.explicit_attention else 'sdpa'}.json")
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
