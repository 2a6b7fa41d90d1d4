"""Time per training step, minitransformer against PyTorch on the same model, weights and batches.

A step is: forward (encoder + decoder + tied output projection), the label-smoothed
loss (ε = 0.1, padding ignored), backward, and an Adam update (β 0.9/0.98, ε 1e-9).
The PyTorch model is benchmarks/speed/torch_reference.py: the same architecture, written
from nn.Linear / nn.LayerNorm / nn.Embedding, loaded with our weights.

1. Proof of equality (before any timing): float64, dropout 0, a tiny model; the loss
   and every parameter gradient of the two libraries must agree to a relative
   difference below 1e-8 (max |ours − torch| / max |torch| per tensor), and so must
   the parameters after one Adam update. The script stops if they do not.
2. Timing: each library in its own worker process (this script re-invoked with
   ``--worker``), same threads, same dropout (0.1), same random batches. The
   driver asks the workers in turn to run a block of steps, for ``--rounds`` rounds
   (the order alternates each round); reported: median ms/step, tokens/s (non-pad
   source + target tokens), the per-round ratio ours/PyTorch and its range, the
   peak RSS of each worker (VmHWM), and the GEMM floor: the sum over the step's
   matrix products (forward and both backward products of every Linear and of
   attention, counted for our model) of the time np.matmul takes at that shape, and
   PyTorch's floor, the same sum with torch.matmul (its own BLAS, its own process):
   each library's step over its own floor is what its code adds to the GEMMs.
3. glibc malloc: ``--malloc default`` runs both libraries with glibc's defaults,
   ``--malloc keep`` with MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ raised so
   freed blocks are reused instead of returned to the OS (``both`` runs the two).
   Each block also counts the worker's minor page faults per step (getrusage): under
   glibc's defaults every step touches freshly mapped pages again, and that count is
   what separates the two malloc settings.

    python benchmarks/speed/train_step.py                               # tiny, small-N3, medium-h8; 5 rounds; both mallocs
    python benchmarks/speed/train_step.py --configs small-N3 --rounds 9 --malloc keep
    python benchmarks/speed/train_step.py --device cuda --batch 256     # on a GPU: our engine on CuPy vs PyTorch CUDA
    python benchmarks/speed/train_step.py --baseline /tmp/mt-before     # also another checkout, in the same rounds

4. The machine: every result records the CPU, the load average before and during the rounds,
   NumPy's BLAS with the kernel it picked and torch's build and threads (benchmarks/common.py).
   Where OPENBLAS_CORETYPE or OPENBLAS_L2_SIZE is set (they make NumPy's OpenBLAS use an older
   kernel; PyTorch's MKL ignores them), ``--openblas auto`` (the default) measures with them and
   without them, each in its own workers.
5. The machine kind: ``--isa avx2`` measures, on an AVX-512 machine, what a machine with AVX2 only
   runs: NumPy's OpenBLAS on its Haswell kernel (OPENBLAS_CORETYPE=Haswell), NumPy's own loops on
   their AVX2 versions (NPY_DISABLE_CPU_FEATURES) and PyTorch capped at AVX2 as well
   (ATEN_CPU_CAPABILITY, MKL_ENABLE_INSTRUCTIONS, ONEDNN_MAX_CPU_ISA), so that neither library keeps
   wider vectors than the other. The results file records the caps and the kernels (``machine.kind``,
   and each worker's OpenBLAS kernel, NumPy's SIMD and torch's CPU capability) and gets ``_avx2`` in
   its name.

    python benchmarks/speed/train_step.py --isa avx2 --malloc default   # the AVX2 kind, on any AVX2+ machine
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # benchmarks/: common.py

from common import (CONFIGS, ISA_CAPS, PAD, BenchConfig, Worker, apply_isa, config_named,  # noqa: E402
                    describe_machine, library_record, load_average, machine_record, median, memory_mib,
                    minor_page_faults, openblas_settings, pause, random_batch, serve, setup_worker_threads,
                    worker_env)

LABEL_SMOOTHING = 0.1
LEARNING_RATE = 1e-4
N_BATCHES = 4            # distinct random batches, cycled
PROOF_TOLERANCE = 1e-8   # max relative difference, float64
PROOF_RESULTS = Path(__file__).resolve().parent / "results" / "train_step_proof.json"
PROOF_CONFIG = BenchConfig("proof", 32, 4, 64, 2, 60, 6, 9, block=1)
BASELINE = "baseline"    # the worker that imports --baseline's minitransformer


# -- our engine ---------------------------------------------------------------------------------
def build_ours(config: BenchConfig, dropout: float, dtype: str = "float32", device: str = "cpu",
               max_len: int = 512):
    import minitransformer as mt
    import minitransformer.functional as F
    from minitransformer.nn.transformer import Transformer, TransformerConfig
    try:
        from minitransformer.fast.adam import FastAdam   # what `train` runs
    except ImportError:   # a --baseline checkout from before minitransformer/fast/: its Adam was the flat one
        FastAdam = mt.optim.Adam

    if device != "cpu":
        mt.set_default_device(device)
    model = Transformer(TransformerConfig(
        src_vocab_size=config.vocab, tgt_vocab_size=config.vocab, d_model=config.d_model, n_heads=config.n_heads,
        d_ff=config.d_ff, n_layers=config.n_layers, dropout=dropout, pad_id=PAD, max_len=max_len))
    if dtype != "float32":
        model.to(dtype)
    optimizer = FastAdam(model.parameters(), lr=LEARNING_RATE, betas=(0.9, 0.98), eps=1e-9)   # as `train` runs

    def loss_of(src, tgt_in, tgt_out):
        if hasattr(model, "loss"):    # what train.batch_loss does: the projection and the loss as one Function
            return model.loss(src, tgt_in, tgt_out, label_smoothing=LABEL_SMOOTHING)
        logits = model(src, tgt_in)   # a --baseline package from before Transformer.loss: two Functions
        return F.cross_entropy(logits.reshape(-1, config.vocab), tgt_out.reshape(-1),
                               label_smoothing=LABEL_SMOOTHING, ignore_index=PAD)

    def step(src, tgt_in, tgt_out) -> float:
        loss = loss_of(src, tgt_in, tgt_out)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return model, optimizer, loss_of, step


def synchronizer(library: str, device: str):
    """A function that waits for the device to finish (a no-op on the CPU)."""
    if device == "cpu":
        return lambda: None
    if library == "torch":
        import torch

        return torch.cuda.synchronize
    import cupy

    return cupy.cuda.Device().synchronize


# -- PyTorch ---------------------------------------------------------------------------------------
def build_torch(config: BenchConfig, dropout: float, state, dtype: str = "float32", device: str = "cpu",
                explicit_attention: bool = False, max_len: int = 512):
    import torch

    from torch_reference import TorchTransformer, load_minitransformer_state, smoothed_cross_entropy

    model = TorchTransformer(config.vocab, config.d_model, config.n_heads, config.d_ff, config.n_layers,
                             dropout=dropout, pad_id=PAD, max_len=max_len, explicit_attention=explicit_attention)
    model.to(dtype=getattr(torch, dtype))
    if state is not None:
        load_minitransformer_state(model, state)
    model.to(device)
    model.train()
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE, betas=(0.9, 0.98), eps=1e-9)

    def loss_of(src, tgt_in, tgt_out):
        return smoothed_cross_entropy(model(src, tgt_in), tgt_out, LABEL_SMOOTHING, PAD)

    def step(src, tgt_in, tgt_out):
        loss = loss_of(src, tgt_in, tgt_out)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    return model, optimizer, loss_of, step


def our_initial_state(config: BenchConfig, max_len: int = 512) -> dict:
    """The initial weights of our model for ``config`` (what the torch worker loads)."""
    model, *_ = build_ours(config, dropout=0.0, max_len=max_len)
    return model.state_dict()


# -- 1. proof that both compute the same thing ---------------------------------------------------------
def relative_difference(ours, reference, floor: float = 0.0) -> float:
    """max |ours − reference| / max |reference|, the denominator at least ``floor``."""
    import numpy as np

    scale = max(float(np.abs(reference).max()), floor) or 1.0
    return float(np.abs(np.asarray(ours) - reference).max()) / scale


def prove_same_step() -> dict:
    """float64, dropout 0: loss, every gradient, and the weights after one Adam step, both libraries."""
    import numpy as np
    import torch

    from torch_reference import gradients_in_minitransformer_layout

    config = PROOF_CONFIG
    src, tgt_in, tgt_out = random_batch(config, seed=123)
    ours, our_optimizer, our_loss_of, _ = build_ours(config, dropout=0.0, dtype="float64")
    theirs, their_optimizer, their_loss_of, _ = build_torch(config, 0.0, ours.state_dict(), dtype="float64")

    our_loss = our_loss_of(src, tgt_in, tgt_out)
    our_loss.backward()
    their_loss = their_loss_of(*(torch.from_numpy(a) for a in (src, tgt_in, tgt_out)))
    their_loss.backward()

    worst = {"loss": relative_difference(our_loss.item(), np.asarray(their_loss.item()))}
    their_grads = gradients_in_minitransformer_layout(theirs)
    # The key projections' bias gets a zero gradient in exact arithmetic (adding q·b_k to every score
    # of a row leaves its softmax unchanged), so both libraries return rounding noise there: measure
    # each tensor against at least 1e-6 of the largest gradient entry of the model.
    floor = 1e-6 * max(float(np.abs(g).max()) for g in their_grads.values())
    grad_errors = {name: relative_difference(p.grad, their_grads[name], floor)
                   for name, p in ours.named_parameters()}
    worst_grad = max(grad_errors, key=grad_errors.get)
    worst["gradients"] = grad_errors[worst_grad]

    our_optimizer.step()
    their_optimizer.step()
    after = {name: value for name, value in ours.state_dict().items()}
    their_after = {n: (p.detach().numpy().T if p.ndim == 2 and n != "embedding.weight" else p.detach().numpy())
                   for n, p in theirs.named_parameters()}
    # Adam divides by √v: on those zero-in-exact-arithmetic key biases it turns the noise into ±lr
    # steps, so they are left out of this comparison (their gradients were compared above).
    worst["after Adam"] = max(relative_difference(after[n], their_after[n]) for n in after
                              if not n.endswith("attn.w_k.bias"))
    return {"worst": worst, "worst_gradient": worst_grad, "n_parameters": len(grad_errors),
            "loss": our_loss.item(), "torch_loss": their_loss.item()}


# -- 2. GEMM floor ---------------------------------------------------------------------------------------
def step_matmuls(config: BenchConfig) -> list[tuple[tuple[int, ...], int, int, int, int, str]]:
    """Every matrix product of one training step of our model: (batch dims, m, k, n, count, what).

    A Linear on N rows, y = x W: forward (N, in)(in, out), backward gX = gY Wᵀ (N, out)(out, in)
    and gW = Xᵀ gY (in, N)(N, out). Attention per (sentence, head), T queries, S keys:
    scores Q Kᵀ, output A V; backward gV = Aᵀ gO, gA = gO Vᵀ, gQ = gS K, gK = gSᵀ Q.
    """
    b, length, d, ff, layers = config.batch, config.length, config.d_model, config.d_ff, config.n_layers
    rows, bh, dk = b * length, b * config.n_heads, config.d_model // config.n_heads
    products = []

    def linear(n: int, fan_in: int, fan_out: int, count: int, what: str) -> None:
        products.append(((), n, fan_in, fan_out, count, f"{what} forward"))
        products.append(((), n, fan_out, fan_in, count, f"{what} gX"))
        products.append(((), fan_in, n, fan_out, count, f"{what} gW"))

    def attention(queries: int, keys: int, count: int, what: str) -> None:
        for m, k, n, part in ((queries, dk, keys, "QKᵀ"), (queries, keys, dk, "AV"), (keys, queries, dk, "gV"),
                              (queries, dk, keys, "gA"), (queries, keys, dk, "gQ"), (keys, queries, dk, "gK")):
            products.append(((bh,), m, k, n, count, f"{what} {part}"))

    n_attention_blocks = 3 * layers                       # encoder self, decoder self, decoder cross
    linear(rows, d, d, 4 * n_attention_blocks, "attention projections")
    linear(rows, d, ff, 2 * layers, "FFN W1")
    linear(rows, ff, d, 2 * layers, "FFN W2")
    attention(length, length, n_attention_blocks, "attention")
    linear(rows, d, config.vocab, 1, "output h Eᵀ")
    return products


def gemm_floor(config: BenchConfig, min_time: float = 0.02, library: str = "numpy") -> dict:
    """Time np.matmul (float32) at each of the step's product shapes; the sum is the floor. With
    library="torch", torch.matmul at the same shapes: PyTorch's floor, so that each library's step can be
    set against the GEMMs it cannot go below (MKL's kernel is not OpenBLAS's)."""
    import numpy as np

    matmul, wrap = np.matmul, (lambda array: array)
    if library == "torch":
        import torch

        matmul, wrap = torch.matmul, torch.from_numpy
    rng = np.random.default_rng(0)
    total, flops, rows = 0.0, 0.0, []
    for batch, m, k, n, count, what in step_matmuls(config):
        a = wrap(rng.standard_normal((*batch, m, k), dtype=np.float32))
        b = wrap(rng.standard_normal((*batch, k, n), dtype=np.float32))
        out = wrap(np.empty((*batch, m, n), dtype=np.float32))
        matmul(a, b, out=out)
        samples, spent = [], 0.0
        while len(samples) < 5 or spent < min_time:
            start = time.perf_counter()
            matmul(a, b, out=out)
            samples.append(time.perf_counter() - start)
            spent += samples[-1]
        seconds = median(samples)
        product_flops = 2.0 * m * k * n * (batch[0] if batch else 1)
        total += count * seconds
        flops += count * product_flops
        rows.append({"what": what, "shape": f"{batch or ''}({m}×{k})·({k}×{n})", "count": count,
                     "ms": seconds * 1e3, "gflops": product_flops / seconds / 1e9})
    return {"floor_ms": total * 1e3, "gflop": flops / 1e9, "products": rows}


# -- the workers -----------------------------------------------------------------------------------------
def worker(library: str, args) -> None:
    setup_worker_threads(library)
    if library == "proof":
        result = prove_same_step()
        serve({}, result)
        return
    config = CONFIGS[args.config].with_batch(args.batch) if args.batch else CONFIGS[args.config]
    if library in ("gemm", "torch-gemm"):
        serve({}, gemm_floor(config, library="torch" if library == "torch-gemm" else "numpy"))
        return
    import numpy as np

    if library == "minitransformer":
        from minitransformer import backend

        memory_at_import = memory_mib()["VmRSS"]
        model, _, _, step = build_ours(config, args.dropout, device=args.device)
        batches = [tuple(backend.to_device(a, args.device) for a in random_batch(config, seed))
                   for seed in range(N_BATCHES)]
    else:
        import torch

        memory_at_import = memory_mib()["VmRSS"]
        with np.load(args.state) as saved:
            state = dict(saved)
        model, _, _, step = build_torch(config, args.dropout, state, device=args.device,
                                        explicit_attention=args.explicit_attention)
        del state
        batches = [random_batch(config, seed) for seed in range(N_BATCHES)]
        batches = [tuple(torch.from_numpy(a).to(args.device) for a in batch) for batch in batches]
    synchronize = synchronizer(library, args.device)
    counter = {"step": 0}

    def steps(n: int) -> dict:
        times = []
        faults_before = minor_page_faults()
        for _ in range(n):
            batch = batches[counter["step"] % N_BATCHES]
            counter["step"] += 1
            start = time.perf_counter()
            step(*batch)
            synchronize()
            times.append(time.perf_counter() - start)
        return {"times": times, "faults_per_step": (minor_page_faults() - faults_before) / n}

    def memory() -> dict:
        figures = {**memory_mib(), "at_import": memory_at_import}
        if args.device != "cpu":   # what the device's memory pool handed out at most / holds now
            if library == "torch":
                figures["device_peak"] = torch.cuda.max_memory_reserved() / 2**20
            else:
                import cupy

                figures["device_peak"] = cupy.get_default_memory_pool().total_bytes() / 2**20
        return figures

    steps(2)  # warm-up: first-touch of weights, optimiser state, allocator caches
    serve({"steps": steps, "memory": memory}, {"ready": True, "record": library_record(library)})


# -- the driver ----------------------------------------------------------------------------------------------
def tokens_per_step(config: BenchConfig) -> int:
    src, tgt_in, _ = random_batch(config, 0)
    return int((src != PAD).sum() + (tgt_in != PAD).sum())


def measure(config: BenchConfig, args, malloc: str, blas: str = "as-set") -> dict:
    import numpy as np

    env = worker_env(args.threads, malloc, blas)
    script = str(Path(__file__).resolve())
    common_args = ["--config", config.name, "--dropout", str(args.dropout), "--device", args.device]
    if args.batch:
        common_args += ["--batch", str(args.batch)]
    if args.explicit_attention:
        common_args.append("--explicit-attention")
    libraries = ("minitransformer", BASELINE, "torch") if args.baseline else ("minitransformer", "torch")
    envs = {lib: env for lib in libraries}
    if args.baseline:
        envs[BASELINE] = worker_env(args.threads, malloc, blas, package_root=args.baseline)
    with tempfile.TemporaryDirectory() as folder:   # our initial weights, for the torch worker to load
        state_path = str(Path(folder) / "state.npz")
        np.savez(state_path, **our_initial_state(config))
        workers = {lib: Worker(script, lib, common_args + (["--state", state_path] if lib == "torch" else []),
                               envs[lib]) for lib in libraries}
    block_medians = {lib: [] for lib in libraries}
    block_faults = {lib: [] for lib in libraries}
    loads = [load_average()]
    try:
        for round_index in range(args.rounds):
            order = libraries if round_index % 2 == 0 else libraries[::-1]
            for lib in order:
                pause()
                block = workers[lib].call("steps", n=config.block)
                block_medians[lib].append(median(block["times"]))
                block_faults[lib].append(block["faults_per_step"])
            loads.append(load_average())
        memory = {lib: workers[lib].call("memory") for lib in libraries}
    finally:
        for w in workers.values():
            w.close()
    ratios = [o / t for o, t in zip(block_medians["minitransformer"], block_medians["torch"])]
    result = {"ms": {lib: median(v) * 1e3 for lib, v in block_medians.items()}, "ratios": ratios,
              "faults_per_step": {lib: median(v) for lib, v in block_faults.items()},
              "memory": memory, "loads": loads, "records": {lib: w.ready["record"] for lib, w in workers.items()}}
    if args.baseline:   # per round, so that both figures of a ratio come from the same stretch of load
        result["baseline_ratios"] = [b / t for b, t in zip(block_medians[BASELINE], block_medians["torch"])]
        result["after_over_before"] = [o / b for o, b in zip(block_medians["minitransformer"],
                                                             block_medians[BASELINE])]
    return result


def floor_of(config: BenchConfig, args, blas: str = "as-set") -> dict:
    worker_args = ["--config", config.name] + (["--batch", str(args.batch)] if args.batch else [])
    floors = {}
    for library in ("gemm", "torch-gemm"):    # ours (NumPy's BLAS), then PyTorch's, each in its own process
        gemm = Worker(str(Path(__file__).resolve()), library, worker_args, worker_env(args.threads, "default", blas))
        gemm.close()
        floors[library] = gemm.ready
    return {**floors["gemm"], "torch_floor_ms": floors["torch-gemm"]["floor_ms"]}


def print_proof(args, results: Path | None = None) -> bool:
    """Run the proof in a worker and print it; with ``results``, also write its differences there."""
    proof = Worker(str(Path(__file__).resolve()), "proof", [], worker_env(args.threads, "default"))
    proof.close()
    result = proof.ready
    worst = result["worst"]
    ok = all(v < PROOF_TOLERANCE for v in worst.values())
    if results is not None:
        record = {"command": "python benchmarks/speed/train_step.py --proof-only", "tolerance": PROOF_TOLERANCE,
                  "config": PROOF_CONFIG.name, "dtype": "float64", "dropout": 0.0,
                  "max_relative_difference": {"loss": worst["loss"], "gradients": worst["gradients"],
                                              "weights_after_adam": worst["after Adam"]},
                  "worst_gradient": result["worst_gradient"], "tensors": result["n_parameters"], "same": ok}
        results.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {results}")
    print(f"Proof (float64, dropout 0, config {PROOF_CONFIG.name}: d_model {PROOF_CONFIG.d_model}, "
          f"{PROOF_CONFIG.n_layers}+{PROOF_CONFIG.n_layers} layers, vocab {PROOF_CONFIG.vocab}): loss ours "
          f"{result['loss']:.12f}, torch {result['torch_loss']:.12f}")
    print(f"  max relative difference: loss {worst['loss']:.1e}, gradients {worst['gradients']:.1e} "
          f"(worst: {result['worst_gradient']}, over {result['n_parameters']} tensors), "
          f"weights after one Adam step {worst['after Adam']:.1e}  -> "
          f"{'SAME (< %.0e)' % PROOF_TOLERANCE if ok else 'DIFFERENT'}")
    return ok


def print_results(results: dict, floors: dict, args) -> None:
    for malloc, per_config in results.items():
        print(f"\nglibc malloc: {malloc}" + ("  (MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ = 1 GiB)"
                                           if malloc == "keep" else "  (glibc defaults)"))
        header = (f"{'config':<7}{'ours ms':>9}{'torch ms':>10}{'ours/torch':>11}{'  (range)':<15}"
                  f"{'ours tok/s':>11}{'torch tok/s':>12}{'floor ms':>9}{'ours/floor':>11}"
                  f"{'torch floor':>12}{'torch/floor':>12}"
                  f"{'ours RSS':>10}{'torch RSS':>10}")
        print(header)
        print("-" * len(header))
        for name, r in per_config.items():
            config = CONFIGS[name].with_batch(args.batch) if args.batch else CONFIGS[name]
            ours, theirs = r["ms"]["minitransformer"], r["ms"]["torch"]
            tokens = tokens_per_step(config)
            ratio = median(r["ratios"])
            floor = floors.get(name, {}).get("floor_ms")
            floor_cells = f"{floor:>9.1f}{ours / floor:>11.2f}" if floor else f"{'—':>9}{'—':>11}"
            torch_floor = floors.get(name, {}).get("torch_floor_ms")
            floor_cells += (f"{torch_floor:>12.1f}{theirs / torch_floor:>12.2f}" if torch_floor
                            else f"{'—':>12}{'—':>12}")
            mem = r["memory"]
            spread = "  (%.2f–%.2f)" % (min(r["ratios"]), max(r["ratios"]))
            print(f"{name:<7}{ours:>9.1f}{theirs:>10.1f}{ratio:>11.2f}{spread:<15}"
                  f"{tokens / ours * 1e3:>11,.0f}{tokens / theirs * 1e3:>12,.0f}{floor_cells}"
                  f"{mem['minitransformer']['VmHWM']:>8.0f}Mi{mem['torch']['VmHWM']:>8.0f}Mi")
            if "after_over_before" in r:
                print(f"{'':<7}baseline {r['ms'][BASELINE]:.1f} ms, baseline/torch {median(r['baseline_ratios']):.2f}; "
                      f"ours/baseline {median(r['after_over_before']):.2f} "
                      f"({min(r['after_over_before']):.2f}–{max(r['after_over_before']):.2f}, per round)")
            faults = r["faults_per_step"]
            print(f"{'':<7}page faults per step (first touches of fresh memory): ours "
                  f"{faults['minitransformer']:,.0f}, torch {faults['torch']:,.0f}"
                  + (f", baseline {faults[BASELINE]:,.0f}" if BASELINE in faults else ""))
            print(f"{'':<7}load average (1 min) during the rounds {min(l[0] for l in r['loads']):.2f}–"
                  f"{max(l[0] for l in r['loads']):.2f}")
        if args.device != "cpu":
            print("device memory: ours (CuPy pool, held at the end) " + ", ".join(
                f"{n} {r['memory']['minitransformer'].get('device_peak', float('nan')):.0f} MiB"
                for n, r in per_config.items()) + "; torch (peak reserved) " + ", ".join(
                f"{n} {r['memory']['torch'].get('device_peak', float('nan')):.0f} MiB" for n, r in per_config.items()))
        print("RSS = peak resident memory of the worker (VmHWM); after imports alone: ours "
              + ", ".join(f"{per_config[n]['memory']['minitransformer']['at_import']:.0f}" for n in per_config)
              + " MiB, torch " + ", ".join(f"{per_config[n]['memory']['torch']['at_import']:.0f}"
                                          for n in per_config) + " MiB")


def results_record(results: dict, floors: dict, args, load: float) -> dict:
    """The printed tables as JSON, for the figures the READMEs quote (tools/quoted_numbers.py)."""
    record: dict = {"command": "python benchmarks/speed/train_step.py " + " ".join(sys.argv[1:]), "threads": args.threads,
                    "rounds": args.rounds, "device": args.device, "load_average_at_start": round(load, 2)}
    for malloc, per_config in results.items():
        for name, r in per_config.items():
            config = CONFIGS[name].with_batch(args.batch) if args.batch else CONFIGS[name]
            ours, theirs, tokens = r["ms"]["minitransformer"], r["ms"]["torch"], tokens_per_step(config)
            floor = floors.get(name, {}).get("floor_ms")
            torch_floor = floors.get(name, {}).get("torch_floor_ms")
            record.setdefault(malloc, {})[name] = {
                "ours_ms": round(ours, 1), "torch_ms": round(theirs, 1), "ratio": round(median(r["ratios"]), 2),
                "ratio_min": round(min(r["ratios"]), 2), "ratio_max": round(max(r["ratios"]), 2),
                "ours_tok_s": round(tokens / ours * 1e3), "torch_tok_s": round(tokens / theirs * 1e3),
                "floor_ms": round(floor, 1) if floor else None, "ours_floor": round(ours / floor, 2) if floor else None,
                "torch_floor_ms": round(torch_floor, 1) if torch_floor else None,
                "torch_floor": round(theirs / torch_floor, 2) if torch_floor else None,
                # our GEMMs alone against PyTorch's whole step: the least ours / PyTorch can be with our BLAS
                "floor_over_torch": round(floor / theirs, 2) if floor else None,
                "ours_rss_mib": round(r["memory"]["minitransformer"]["VmHWM"]),
                "torch_rss_mib": round(r["memory"]["torch"]["VmHWM"]),
                "ours_faults_per_step": round(r["faults_per_step"]["minitransformer"]),
                "torch_faults_per_step": round(r["faults_per_step"]["torch"]),
                "load_average_per_round": r["loads"], "libraries": r["records"]}
            if "after_over_before" in r:
                record[malloc][name].update(
                    baseline_ms=round(r["ms"][BASELINE], 1), baseline_ratio=round(median(r["baseline_ratios"]), 2),
                    baseline_rss_mib=round(r["memory"][BASELINE]["VmHWM"]),
                    baseline_faults_per_step=round(r["faults_per_step"][BASELINE]),
                    after_over_before=round(median(r["after_over_before"]), 2),
                    after_over_before_min=round(min(r["after_over_before"]), 2),
                    after_over_before_max=round(max(r["after_over_before"]), 2))
    return record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default="tiny,small-N3,medium-h8", help="comma-separated: " + ", ".join(CONFIGS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2, help="BLAS/OpenMP threads per library")
    parser.add_argument("--malloc", choices=("default", "keep", "both"), default="both")
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda (our engine on CuPy vs PyTorch CUDA)")
    parser.add_argument("--batch", type=int, default=None, help="override every config's batch size")
    parser.add_argument("--explicit-attention", action="store_true",
                        help="torch attention as matmul + softmax + matmul instead of F.scaled_dot_product_attention")
    parser.add_argument("--openblas", choices=("auto", "as-set", "unset", "both"), default="auto",
                        help="OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE as set, removed, or both in turn "
                             "(auto: both where any is set)")
    parser.add_argument("--isa", choices=tuple(ISA_CAPS), default="native",
                        help="native: every library uses what the CPU has; avx2: both capped at AVX2 "
                             "(OpenBLAS's Haswell kernel, PyTorch's AVX2 kernels), the AVX2-only machine kind")
    parser.add_argument("--baseline", default=None,
                        help="a folder holding another minitransformer package, timed in the same rounds")
    parser.add_argument("--skip-proof", action="store_true")
    parser.add_argument("--proof-only", action="store_true",
                        help="run only the proof (float64, deterministic, nothing timed) and write its differences "
                             "to benchmarks/speed/results/train_step_proof.json")
    parser.add_argument("--no-floor", action="store_true", help="skip the GEMM floor")
    parser.add_argument("--results", default=None, help="JSON file for the figures the READMEs quote "
                        "(default benchmarks/speed/results/train_step_{threads}t_{malloc}.json, cpu only)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--state", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker("minitransformer" if args.worker == BASELINE else args.worker, args)
        return 0

    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    for name in names:
        try:
            config_named(name)
        except ValueError as error:
            parser.error(str(error))
    if args.isa != "native":
        if args.openblas == "unset":
            parser.error(f"--isa {args.isa} sets OPENBLAS_CORETYPE; --openblas unset would remove it again")
        apply_isa(args.isa)
        if args.openblas == "auto":   # the override is the point here: no second run without it
            args.openblas = "as-set"
    if args.proof_only:
        return 0 if print_proof(args, Path(args.results) if args.results else PROOF_RESULTS) else 1
    if not args.skip_proof and not print_proof(args):
        print("minitransformer and PyTorch disagree: not timing two different computations.")
        return 1
    machine = machine_record()
    load = machine["load_average"][0] if machine["load_average"] else float("nan")
    print(f"\n{args.threads} threads, dropout {args.dropout}, device {args.device}, {args.rounds} rounds, "
          f"load average at start {load:.2f}; vector extensions: {args.isa} ({machine['kind']}); torch attention: "
          f"{'explicit' if args.explicit_attention else 'F.scaled_dot_product_attention'}")
    settings = ("default", "keep") if args.malloc == "both" else (args.malloc,)
    for blas in openblas_settings(args.openblas):
        print(f"\n=== OpenBLAS overrides {blas} ===" if blas == "unset" or args.openblas != "as-set" else "")
        floors = {} if args.no_floor or args.device != "cpu" else {n: floor_of(CONFIGS[n], args, blas) for n in names}
        results = {malloc: {name: measure(CONFIGS[name], args, malloc, blas) for name in names} for malloc in settings}
        first = next(iter(next(iter(results.values())).values()))
        print(describe_machine(machine, first["records"]))
        print_results(results, floors, args)
        if args.results or args.device == "cpu":
            isa = "" if args.isa == "native" else f"_{args.isa}"
            default = Path(__file__).resolve().parent / "results" / f"train_step_{args.threads}t_{args.malloc}{isa}.json"
            path = Path(args.results) if args.results else default
            if blas == "unset" and args.openblas != "unset":
                path = path.with_name(path.stem + "_openblas-unset.json")
            record = results_record(results, floors, args, load)
            record.update(machine=machine, openblas_env=blas, isa=args.isa)
            path.write_text(json.dumps(record, indent=1) + "\n")
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
