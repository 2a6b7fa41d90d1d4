"""Memory and time of one attention call against the sequence length n (chapter 13).

For each function (eq. 1 as ``scaled_dot_product_attention``, ``flash_attention``,
``local_attention`` with w = 128, ``linear_attention``) and each n, a fresh process
builds q, k, v of shape (B, h, n, d_k) = (1, 4, n, 64) in float32, runs forward +
backward once to measure memory, then again to time it. Reported per process:

* added memory: the peak resident set (VmHWM) minus the resident set just before the
  call (inputs built, libraries imported), i.e. what the call itself needed;
* time: the best of a few forward + backward runs.

Eq. 1 keeps the (B, h, n, n) weights for backward, and its backward needs two more
arrays of that size; where the predicted 3·B·h·n²·4 bytes exceed ``--sdpa-limit-gib``
the run is skipped and the reason recorded. The machine's load average is recorded
with every figure (other jobs share the cores).

    python benchmarks/sequence_length/long_sequences.py                 # CPU, writes results/long_sequences.json
    python benchmarks/sequence_length/long_sequences.py --quick         # n ≤ 1,024 only, to try it out (writes nothing)
    python benchmarks/sequence_length/long_sequences.py --gpu           # CuPy: flash vs eq. 1 up to n = 32,768,
                                                                        # writes results/long_sequences_gpu.json;
                                                                        # says so and exits 0 where CuPy sees no GPU
    python benchmarks/sequence_length/long_sequences.py --render        # chapter 13's tables and figure from the JSON
    python benchmarks/sequence_length/long_sequences.py --functions flash,sparse   # only some of the seven kinds (default: all)
    python benchmarks/sequence_length/long_sequences.py --cache         # decoding: the linear state against the softmax cache,
                                                                        # writes results/long_sequences_cache.json
    python benchmarks/sequence_length/long_sequences.py --error --run runs/enja   # each approximation against eq. 1 on the
                                                                                  # trained run's own q, k, v: attention_error.json

The other kinds: "sparse" is BigBird's layout (blocks of 64, one global and one random block) through
flash's tiles; "linformer" projects to k = 256 summaries with fixed Gaussian E, F; "lsh" is one round
of shared-QK LSH attention (chunks of 64, n/64 buckets, at least 2). A results file shows the columns of
the functions it measured.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # benchmarks/: common.py

from common import ROOT, memory_mib, worker_env  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "long_sequences.json"
GPU_RESULTS = Path(__file__).resolve().parent / "results" / "long_sequences_gpu.json"
CHAPTER = ROOT / "chapters" / "13-long-sequences.md"
FIGURE = ROOT / "chapters" / "figures" / "13-memory-time.png"

BATCH, HEADS, D_K = 1, 4, 64
FUNCTIONS = ("sdpa", "flash", "local", "linear")                       # the first four kinds of the chapter
OTHER_FUNCTIONS = ("sparse", "linformer", "lsh")
LABELS = {"sdpa": "eq. 1 (SDPA)", "flash": "flash", "local": "local, w = 128", "linear": "linear",
          "sparse": "BigBird blocks", "linformer": "Linformer, k = 256", "lsh": "LSH, 1 round"}
LINFORMER_K, LSH_CHUNK = 256, 64
CACHE_LENGTHS = (1024, 2048, 4096, 8192, 16384)
LENGTHS = (64, 256, 1024, 2048, 4096, 8192, 16384)
MEMORY_LENGTHS = (256, 1024, 4096, 16384)
GPU_LENGTHS = (1024, 4096, 16384, 32768)


def sdpa_bytes(n: int, itemsize: int = 4) -> int:
    """Eq. 1's three (B, h, n, n) arrays at the peak of its backward: A, gA → gS, and a temporary."""
    return 3 * BATCH * HEADS * n * n * itemsize


# -- the worker: one function, one length, one process ------------------------------------------------------
def attention_call(name: str, window: int, block: int, n: int | None = None, xp=None, dtype="float32"):
    """The call of one function on q, k, v; the other kinds are built for one length n (and device xp)."""
    import numpy as np

    import minitransformer as mt
    import minitransformer.functional as F

    calls = {"sdpa": lambda q, k, v: F.scaled_dot_product_attention(q, k, v),
             "flash": lambda q, k, v: F.flash_attention(q, k, v, block_size=block),
             "local": lambda q, k, v: F.local_attention(q, k, v, window),
             "linear": lambda q, k, v: F.linear_attention(q, k, v)}
    if name in calls:
        return calls[name]
    if name not in OTHER_FUNCTIONS:
        raise ValueError(f"unknown function {name!r}; one of {', '.join(FUNCTIONS + OTHER_FUNCTIONS)}")
    if n is None:
        raise ValueError(f"attention_call: {name!r} is built for one length n")
    if name == "sparse":
        layout = F.bigbird_layout(-(-n // block), 1, 1, seed=0)
        return lambda q, k, v: F.flash_attention(q, k, v, block_size=block, block_mask=layout)
    if name == "linformer":                   # fixed Gaussian E, F: the random projection of Linformer's Theorem 1
        rows, xp = min(LINFORMER_K, n), xp or np
        e, f = (mt.Tensor(xp.asarray((np.random.default_rng(seed).standard_normal((rows, n)) / rows ** 0.5)
                                     .astype(dtype))) for seed in (1, 2))
        return lambda q, k, v: F.linformer_attention(q, k, v, e, f)
    chunk = min(LSH_CHUNK, n)
    return lambda q, k, v: F.lsh_attention(q, v, n_buckets=max(2, 2 * (n // (2 * chunk))), chunk=chunk, seed=0)


def worker(name: str, n: int, repeats: int, window: int, block: int, device: str) -> dict:
    import numpy as np

    import minitransformer as mt

    xp = mt.backend.xp_for(device)
    rng = np.random.default_rng(0)
    q, k, v = (mt.Tensor(xp.asarray(rng.standard_normal((BATCH, HEADS, n, D_K)).astype(np.float32)),
                         requires_grad=True) for _ in range(3))
    upstream = xp.asarray(rng.standard_normal((BATCH, HEADS, n, D_K)).astype(np.float32))
    call = attention_call(name, window, block, n, xp)
    synchronize, peak = (lambda: None), None
    if device == "cuda":
        synchronize, peak = _gpu_peak_tracker(xp)

    def forward_backward():
        for x in (q, k, v):
            x.grad = None
        call(q, k, v).backward(upstream)
        synchronize()

    before = memory_mib()["VmRSS"] if device == "cpu" else peak.reset()
    forward_backward()
    added = memory_mib()["VmHWM"] - before if device == "cpu" else peak.peak_mib() - before
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        forward_backward()
        runs.append(time.perf_counter() - start)
    return {"added_mib": round(added, 1), "seconds": min(runs), "runs": [round(r, 4) for r in runs]}


def _gpu_peak_tracker(cupy):
    """Peak bytes held in CuPy's memory pool, tracked at every allocation."""
    pool = cupy.get_default_memory_pool()

    class Peak:
        most = 0

        def reset(self) -> float:
            self.most = pool.used_bytes()
            return self.most / 2 ** 20

        def peak_mib(self) -> float:
            return self.most / 2 ** 20

    peak = Peak()

    def malloc(size):
        memory = pool.malloc(size)
        peak.most = max(peak.most, pool.used_bytes())
        return memory

    cupy.cuda.set_allocator(malloc)
    return (lambda: cupy.cuda.Device().synchronize()), peak


# -- the driver -------------------------------------------------------------------------------------------
def measure(name: str, n: int, args, device: str) -> dict:
    repeats = 1 if n >= 8192 and name in ("sdpa", "flash") else 3     # the slow ones once at the largest n
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--n", str(n), "--repeats",
               str(repeats), "--window", str(args.window), "--block", str(args.block if device == "cpu" else
                                                                          args.gpu_block), "--device", device]
    load = os.getloadavg()[0]
    started = time.perf_counter()
    result = subprocess.run(command, env=worker_env(args.threads, "default"), capture_output=True, text=True)
    if result.returncode != 0:
        return {"function": name, "n": n, "failed": result.stderr.strip().splitlines()[-1][:300]}
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    return {"function": name, "n": n, **figures, "load_before": round(load, 2),
            "load_after": round(os.getloadavg()[0], 2), "wall_s": round(time.perf_counter() - started, 1)}


def machine(threads: int) -> dict:
    import numpy as np

    memory = None
    try:
        with open("/proc/meminfo") as info:
            memory = round(int(info.readline().split()[1]) / 2 ** 20, 1)
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "memory_gib": memory, "threads_per_worker": threads,
            "python": platform.python_version(), "numpy": np.__version__, "platform": platform.platform()}


def run(args, device: str) -> dict:
    lengths = args.lengths or (GPU_LENGTHS if device == "cuda" else LENGTHS)
    lengths = [n for n in lengths if not args.quick or n <= 1024]
    limit = args.sdpa_limit_gib * 2 ** 30
    records = []
    for n in lengths:
        for name in args.functions:
            if name == "sdpa" and sdpa_bytes(n) > limit:
                record = {"function": name, "n": n, "skipped": (
                    f"eq. 1 would hold three (B·h·n²) float32 arrays, {sdpa_bytes(n) / 2 ** 30:.1f} GiB, over the "
                    f"{args.sdpa_limit_gib:g} GiB allowed here (--sdpa-limit-gib)")}
            else:
                record = measure(name, n, args, device)
            records.append(record)
            print(json.dumps(record), flush=True)
    return {"command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "device": device,
            "machine": machine(args.threads),
            "settings": {"batch": BATCH, "heads": HEADS, "d_k": D_K, "dtype": "float32", "window": args.window,
                         "block_size": args.block if device == "cpu" else args.gpu_block,
                         "sdpa_limit_gib": args.sdpa_limit_gib},
            "records": records}


def gpu_available() -> str | None:
    """None when CuPy sees a GPU, else the reason it does not."""
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "CuPy sees no GPU"
    except Exception as error:  # not installed, or no driver
        return f"no CuPy GPU here ({type(error).__name__}: {error})"
    return None


# -- what the chapter quotes -------------------------------------------------------------------------------
def table(results: dict) -> dict:
    """(function, n) -> record."""
    return {(r["function"], r["n"]): r for r in results["records"]}


def measured_functions(results: dict) -> list[str]:
    """The functions a results file measured, in the order of the tables."""
    found = {r["function"] for r in results["records"]}
    return [f for f in FUNCTIONS + OTHER_FUNCTIONS if f in found]


LABELS_JA = {"sdpa": "式 (1)（SDPA）", "flash": "flash", "local": "局所、w = 128", "linear": "線形",
             "sparse": "BigBird のブロック", "linformer": "Linformer、k = 256", "lsh": "LSH、1 ラウンド"}


def render_markdown(results: dict, language: str = "en") -> str:
    """The chapter's tables, from the results file only; ``ja`` writes the Japanese chapter's twin of them."""
    ja = language == "ja"
    labels = LABELS_JA if ja else LABELS
    by = table(results)
    functions = measured_functions(results)
    lengths = sorted({r["n"] for r in results["records"]})
    memory_lengths = [n for n in MEMORY_LENGTHS if n in lengths]

    def cell(name, n, key, fmt):
        record = by.get((name, n))
        if record is None:
            return "—"
        if "skipped" in record:
            return "省略¹" if ja else "skipped¹"
        if "failed" in record:
            return "失敗" if ja else "failed"
        return fmt(record[key])

    def table_lines(key, fmt, rows):
        head = ["| n | " + " | ".join(labels[f] for f in functions) + " |", "|---" * (len(functions) + 1) + "|"]
        return head + [f"| {n:,} | " + " | ".join(cell(f, n, key, fmt) for f in functions) + " |" for n in rows]

    lines = [(f"1 回の順伝播 + 逆伝播が追加したメモリは次のとおりです（MiB。B = {BATCH}、h = {HEADS}、d_k = {D_K}、float32）。"
              if ja else f"Memory added by one forward + backward (MiB; B = {BATCH}, h = {HEADS}, d_k = {D_K}, float32):"),
             "", *table_lines("added_mib", lambda x: f"{x:,.0f}", memory_lengths), "",
             ("1 回の順伝播 + 逆伝播にかかった時間は次のとおりです（秒。複数回の実行のうち最良の値）。" if ja
              else "Time of one forward + backward (seconds, best of the runs):"),
             "", *table_lines("seconds", lambda x: f"{x:.3g}", lengths)]
    notes = table_notes(results, lengths, ja)
    if ja:                                 # a Japanese paragraph is one line: no break between Japanese sentences
        notes = [notes[0], "".join(notes[1:])]
    return "\n".join(lines + notes)


def table_notes(results: dict, lengths: list[int], ja: bool) -> list[str]:
    """The lines under the tables: why eq. 1 was skipped, what flash and linear attention gained, the machine."""
    skipped = [r for r in results["records"] if "skipped" in r]
    loads = [r[key] for r in results["records"] for key in ("load_before", "load_after") if key in r]
    notes = [""]
    if skipped:
        sizes = re.search(r"([\d.]+) GiB, over the ([\d.]+) GiB", skipped[0]["skipped"])
        notes.append(f"¹ 式 (1) は (B·h·n²) 個の float32 からなる配列を 3 つ保持することになります。その {sizes[1]} GiB は、"
                     f"ここで許される {sizes[2]} GiB を超えます（--sdpa-limit-gib）。" if ja and sizes
                     else f"¹ {skipped[0]['skipped']}.")
    summary = summarize(results)
    if summary.get("flash_over_sdpa_memory_4096") is not None:
        memory, time_ = summary["flash_over_sdpa_memory_4096"], summary["flash_over_sdpa_time_1024"]
        notes.append(f"n = 4,096 で flash が必要としたメモリは、式 (1) が追加したメモリの {memory:.3f} 倍でした。"
                     f"n = 1,024 では、式 (1) の {time_:.2f} 倍の時間がかかりました。" if ja else
                     f"At n = 4,096 flash needed {memory:.3f} of eq. 1's added memory; at n = 1,024 it took "
                     f"{time_:.2f}× eq. 1's time.")
    if summary.get("linear_faster_from") is not None:
        first = summary["linear_faster_from"]
        shortest = first == lengths[0]
        notes.append(f"線形アテンションは n = {first:,} 以上で式 (1) より高速でした" + ("（測った中で最も短い長さ）。" if shortest
                                                                             else "。") if ja else
                     f"Linear attention was faster than eq. 1 from n = {first:,} on"
                     + (" (the shortest length measured)." if shortest else "."))
    machine_ = results["machine"]
    shared = max(loads) > 1.5           # more than this run's own process: other jobs shared the cores
    if ja:
        notes.append(f"測定：{results['date']}、{machine_['cpus']} CPU コア（{machine_['memory_gib']} GiB）、プロセスあたり "
                     f"BLAS スレッド {machine_['threads_per_worker']}、NumPy {machine_['numpy']}。実行中の 1 分間の"
                     f"ロードアベレージは {min(loads):.1f}–{max(loads):.1f} でした"
                     + ("（コアは他のジョブと共有しています）。" if shared else "。")
                     + f"コマンド：`{results['command']}`。")
    else:
        notes.append(f"Measured {results['date']} on {machine_['cpus']} CPU cores ({machine_['memory_gib']} GiB), "
                     f"{machine_['threads_per_worker']} BLAS thread per process, NumPy {machine_['numpy']}; the 1-minute "
                     f"load average was {min(loads):.1f}–{max(loads):.1f} during the runs"
                     + (" (the cores are shared with other jobs). " if shared else ". ")
                     + f"Command: `{results['command']}`.")
    return notes


def summarize(results: dict) -> dict:
    by = table(results)

    def value(name, n, key):
        record = by.get((name, n), {})
        return record.get(key)

    out = {}
    flash_m, sdpa_m = value("flash", 4096, "added_mib"), value("sdpa", 4096, "added_mib")
    out["flash_over_sdpa_memory_4096"] = flash_m / sdpa_m if flash_m is not None and sdpa_m else None
    flash_t, sdpa_t = value("flash", 1024, "seconds"), value("sdpa", 1024, "seconds")
    out["flash_over_sdpa_time_1024"] = flash_t / sdpa_t if flash_t and sdpa_t else None
    faster = [n for n in sorted({r["n"] for r in results["records"]})
              if value("linear", n, "seconds") is not None and value("sdpa", n, "seconds") is not None
              and value("linear", n, "seconds") < value("sdpa", n, "seconds")]
    out["linear_faster_from"] = faster[0] if faster else None
    return out


def markers(results_file: str) -> tuple[str, str]:
    return f"<!-- begin: {results_file} -->", f"<!-- end: {results_file} -->"


def region(text: str, results_file: str) -> str:
    """The generated text between a results file's markers in a chapter."""
    begin, end = markers(results_file)
    if begin not in text or end not in text:
        raise ValueError(f"no {begin} ... {end} region in the chapter")
    return text.split(begin, 1)[1].split(end, 1)[0].strip("\n")


def fill_region(chapter: Path, results_file: str, body: str) -> None:
    """Replace what lies between the markers with ``body`` (generated, never typed by hand)."""
    text = chapter.read_text(encoding="utf-8")
    region(text, results_file)
    begin, end = markers(results_file)
    head, rest = text.split(begin, 1)
    tail = rest.split(end, 1)[1]
    chapter.write_text(head + begin + "\n" + body + "\n" + end + tail, encoding="utf-8")


def render(results: dict, chapter: Path = CHAPTER, figure: Path = FIGURE) -> None:
    """Write the tables into the chapter between the markers, and draw the figure."""
    fill_region(chapter, "benchmarks/sequence_length/results/long_sequences.json", render_markdown(results))
    twin = chapter.parent / "ja" / chapter.name      # the Japanese chapter quotes the same generated tables
    if chapter == CHAPTER and twin.is_file() and markers("benchmarks/sequence_length/results/long_sequences.json")[0] in \
            twin.read_text(encoding="utf-8"):
        fill_region(twin, "benchmarks/sequence_length/results/long_sequences.json", render_markdown(results, "ja"))
    draw(results, figure)
    if figure == FIGURE:                       # the Japanese edition's copy, chapters/figures/ja/
        draw(results, figure, "ja")


def draw(results: dict, path: Path, language: str = "en") -> None:
    """The figure; in another ``language`` (``ja``) it goes to chapters/figures/LANGUAGE/ with its labels translated."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by = table(results)
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for name, marker in zip(measured_functions(results), "osd^v<>"):
        points = sorted((n, r) for (f, n), r in by.items() if f == name and "seconds" in r)
        ns = [n for n, _ in points]
        axes[0].loglog(ns, [max(r["added_mib"], 0.1) for _, r in points], marker + "-", label=LABELS[name])
        axes[1].loglog(ns, [r["seconds"] for _, r in points], marker + "-", label=LABELS[name])
    axes[0].set_ylabel("memory added by forward + backward, MiB")
    axes[1].set_ylabel("forward + backward, s")
    for ax in axes:
        ax.set_xlabel("sequence length n")
        ax.legend(fontsize=8)
    fig.suptitle(f"one attention call, B = {BATCH}, h = {HEADS}, d_k = {D_K}, float32, NumPy", fontsize=10)
    fig.tight_layout()
    from minitransformer.figure_language import save_chapter_figure  # noqa: PLC0415

    save_chapter_figure(fig, path, language, dpi=90, bbox_inches="tight")
    plt.close(fig)


# -- decoding: the linear state against the softmax cache ---------------------------------------------------
def cache_worker(kind: str, n: int) -> dict:
    """Decode n positions with a one-layer decoder of the medium preset's width; the cache's bytes and the peak memory."""
    import numpy as np

    import minitransformer as mt

    config = mt.nn.TransformerConfig(src_vocab_size=64, tgt_vocab_size=64, d_model=256, n_heads=4, d_ff=1024,
                                     n_layers=1, dropout=0.0, max_len=n + 1, attention=kind)
    model = mt.nn.Transformer(config)
    memory, src_mask = model.encode(np.array([[4, 5, 6, 7]]))
    cache, ids = model.init_cache(), np.random.default_rng(0).integers(3, 64, n)
    before = memory_mib()["VmRSS"]
    with mt.no_grad():
        for t in range(n):
            model.decode_step(ids[t:t + 1], memory, src_mask, cache)
    return {"cache_bytes": sum(layer.self_attn.nbytes for layer in cache.layers),
            "added_mib": round(memory_mib()["VmHWM"] - before, 1)}


def run_cache(args) -> dict:
    records = []
    for n in args.lengths or CACHE_LENGTHS:
        for kind in ("softmax", "linear"):
            command = [sys.executable, str(Path(__file__).resolve()), "--cache-worker", kind, "--n", str(n)]
            load = os.getloadavg()[0]
            result = subprocess.run(command, env=worker_env(args.threads, "default"), capture_output=True, text=True)
            record = ({"kind": kind, "n": n, "failed": result.stderr.strip().splitlines()[-1][:300]} if result.returncode
                      else {"kind": kind, "n": n, **json.loads(result.stdout.strip().splitlines()[-1]),
                            "load_before": round(load, 2), "load_after": round(os.getloadavg()[0], 2)})
            records.append(record)
            print(json.dumps(record), flush=True)
    return {"command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(args.threads),
            "model": "one decoder layer, d_model 256, 4 heads, float32", "records": records}


# -- approximation error on a trained run's own queries, keys and values -------------------------------------
def own_qkv(run: Path, sentences: int):
    """(q, k, v) of every encoder self-attention call (B = 1, h, n, d_k) of a trained run, float64, per sentence."""
    import numpy as np

    import minitransformer.nn.attention as attention_module
    from minitransformer.translator import Translator

    translator = Translator.load(run)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from runs import corpus_of  # noqa: PLC0415

    from minitransformer import backend

    seen, real = [], attention_module.attend

    def recording(kind, q, k, v, *args, **kwargs):
        seen.append(tuple(backend.asnumpy(x.data).astype(np.float64) for x in (q, k, v)))
        return real(kind, q, k, v, *args, **kwargs)

    attention_module.attend = recording
    alike = attention_module.MultiHeadAttention._projections_alike
    attention_module.MultiHeadAttention._projections_alike = lambda self: False   # the unpacked path calls attend
    try:
        for english, _ in corpus_of(run).pairs("test")[:sentences]:
            ids = translator.encode_sources([english])[0]
            translator.model.encode(np.asarray([ids], dtype=np.int64))
    finally:
        attention_module.attend = real
        attention_module.MultiHeadAttention._projections_alike = alike
    return seen


APPROXIMATIONS = ("local, w = 2", "BigBird, b = 4", "strided, l = 4", "linear", "Linformer, k = n/2", "LSH, 1 round")
APPROXIMATION_KEYS = dict(zip(APPROXIMATIONS, ("local_w2", "bigbird_b4", "strided_l4", "linear", "linformer_half",
                                               "lsh_1_round")))     # the names a figure marker can quote


def approximation_errors(triples) -> dict:
    """Relative error ‖o − o_eq.1‖ / ‖o_eq.1‖ of each approximation, averaged over the calls, and the n seen."""
    import numpy as np

    import minitransformer as mt
    import minitransformer.functional as F

    errors = {name: [] for name in APPROXIMATIONS}
    for q, k, v in triples:
        n = q.shape[-2]
        q_, k_, v_ = (mt.Tensor(x) for x in (q, k, v))
        exact = F.scaled_dot_product_attention(q_, k_, v_).data
        rows = max(1, n // 2)
        e, f = (mt.Tensor(np.random.default_rng(s).standard_normal((rows, n)) / rows ** 0.5) for s in (1, 2))
        blocks = F.expand_layout(F.bigbird_layout(-(-n // 4), 1, 1, seed=0), 4, n, device="cpu")
        keep = n - n % 4 if n >= 4 else n                     # LSH needs whole chunks: the first 4·⌊n/4⌋ positions
        strided = np.logical_or(*F.strided_pattern(n, 4, device="cpu"))   # both heads, and both directions (an encoder)
        outputs = {
            "local, w = 2": F.local_attention(q_, k_, v_, 2).data,
            "BigBird, b = 4": F.sparse_attention(q_, k_, v_, blocks, block_size=4).data,
            "strided, l = 4": F.sparse_attention(q_, k_, v_, strided | strided.T, block_size=4).data,
            "linear": F.linear_attention(q_, k_, v_).data,
            "Linformer, k = n/2": F.linformer_attention(q_, k_, v_, e, f).data,
        }
        for name, out in outputs.items():
            errors[name].append(float(np.linalg.norm(out - exact) / np.linalg.norm(exact)))
        lsh_q = mt.Tensor(q[..., :keep, :])
        lsh = F.lsh_attention(lsh_q, mt.Tensor(v[..., :keep, :]), n_buckets=4, chunk=min(4, keep), seed=0).data
        shared = F.scaled_dot_product_attention(lsh_q, lsh_q / ((lsh_q * lsh_q).sum(axis=-1, keepdims=True) ** 0.5),
                                                mt.Tensor(v[..., :keep, :])).data   # LSH's own exact: shared QK
        errors["LSH, 1 round"].append(float(np.linalg.norm(lsh - shared) / np.linalg.norm(shared)))
    return {"calls": len(triples), "lengths": sorted({int(q.shape[-2]) for q, _, _ in triples}),
            "relative_error": {name: round(float(np.mean(found)), 4) for name, found in errors.items()},
            "by": {APPROXIMATION_KEYS[name]: round(float(np.mean(found)), 4) for name, found in errors.items()}}


def write(path: Path, results: dict) -> None:
    """The results file, atomically (a half-written file never replaces a whole one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)
    print(f"wrote {path}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="n ≤ 1,024 only; writes no results file")
    parser.add_argument("--gpu", action="store_true", help="on CuPy (skips cleanly without a GPU)")
    parser.add_argument("--render", action="store_true", help="fill chapter 13's tables and figure from the JSON")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--window", type=int, default=128)
    parser.add_argument("--block", type=int, default=64, help="flash block size on the CPU")
    parser.add_argument("--gpu-block", type=int, default=256, help="flash block size on the GPU")
    parser.add_argument("--sdpa-limit-gib", type=float, default=6.0)
    parser.add_argument("--functions", default=",".join(FUNCTIONS + OTHER_FUNCTIONS),
                        help=f"which functions, of {', '.join(FUNCTIONS + OTHER_FUNCTIONS)} (default: all of them)")
    parser.add_argument("--lengths", default=None, help="comma-separated lengths instead of the default ones")
    parser.add_argument("--cache", action="store_true", help="decoding: linear state against softmax cache")
    parser.add_argument("--error", action="store_true", help="each approximation against eq. 1 on --run's q, k, v")
    parser.add_argument("--run", default="runs/enja", help="the trained run for --error (default runs/enja)")
    parser.add_argument("--sentences", type=int, default=100, help="test sentences for --error (default 100)")
    parser.add_argument("--cache-worker", help=argparse.SUPPRESS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=3, help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cpu", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.functions = [name.strip() for name in args.functions.split(",") if name.strip()]
    unknown = [name for name in args.functions if name not in FUNCTIONS + OTHER_FUNCTIONS]
    if unknown:
        parser.error(f"unknown function(s) {', '.join(unknown)}; choose from {', '.join(FUNCTIONS + OTHER_FUNCTIONS)}")
    args.lengths = [int(n) for n in args.lengths.split(",")] if args.lengths else None
    if args.cache_worker:
        print(json.dumps(cache_worker(args.cache_worker, args.n)))
        return 0
    if args.cache:
        results = run_cache(args)
        if not args.quick:
            write(Path(__file__).resolve().parent / "results" / "long_sequences_cache.json", results)
        return 0
    if args.error:
        run_folder = Path(args.run)
        if not (run_folder / "results.json").is_file():
            parser.error(f"{run_folder}: no results.json; --error needs a finished training run")
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from runs import run_record  # noqa: PLC0415
        results = {"command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
                   "run": run_record(run_folder), **approximation_errors(own_qkv(run_folder, args.sentences))}
        print(json.dumps(results["relative_error"], indent=1))
        if not args.quick:
            write(Path(__file__).resolve().parent / "results" / "attention_error.json", results)
        return 0
    if args.worker:
        print(json.dumps(worker(args.worker, args.n, args.repeats, args.window, args.block, args.device)))
        return 0
    if args.render:
        render(json.loads(RESULTS.read_text(encoding="utf-8")))
        print(f"wrote the tables into {CHAPTER} and the figure to {FIGURE}")
        return 0
    if args.gpu:
        reason = gpu_available()
        if reason is not None:
            print(f"skipping the GPU benchmark: {reason}")
            return 0
        if args.sdpa_limit_gib == 6.0:
            args.sdpa_limit_gib = 100.0
    results = run(args, "cuda" if args.gpu else "cpu")
    if not args.quick:
        path = GPU_RESULTS if args.gpu else RESULTS
        write(path, results)
    print(render_markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
