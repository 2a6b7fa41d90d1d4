"""What the side-by-side benchmarks share: configurations, batches, the worker protocol, memory.

Every benchmark runs each library in its own process: the script re-invokes itself
as a worker (``--worker minitransformer`` / ``--worker torch``), and the driver
talks to the workers over stdin/stdout, one JSON line per command. The workers
take turns, so only one of them computes at a time; in a single process the idle
BLAS/OpenMP threads of one library would steal the cores of the other.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAD, BOS, EOS = 0, 1, 2
FIRST_WORD = 4  # ids below are special tokens


@dataclass(frozen=True)
class BenchConfig:
    """One model + batch shape: S = T = ``length`` tokens per sentence (before padding)."""

    name: str
    d_model: int
    n_heads: int
    d_ff: int
    n_layers: int
    vocab: int
    batch: int
    length: int
    block: int  # training steps per timed block (a block takes a few seconds)

    def with_batch(self, batch: int) -> BenchConfig:
        return BenchConfig(**{**asdict(self), "batch": batch})


def _load_presets():
    """minitransformer/presets.py, the table of named model sizes, read without importing the package
    (the driver process must not load NumPy's threads; only the workers compute)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_presets", ROOT / "minitransformer" / "presets.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MODELS = _load_presets().MODELS


def _bench(name: str, model: str, vocab: int, batch: int, length: int, block: int, **changes) -> BenchConfig:
    """The model called ``model`` in presets.py, with ``changes`` (the name says them), on one batch shape."""
    sizes = {**MODELS[model], **changes}
    return BenchConfig(name, sizes["d_model"], sizes["n_heads"], sizes["d_ff"], sizes["n_layers"], vocab, batch,
                       length, block=block)


# A name is a model of presets.py, or one with a change the name states: "small-N3" is "small" with
# N = 3 layers, "medium-h8" is "medium" with h = 8 heads (the shapes these benchmarks were first run on).
CONFIGS = {
    "tiny": _bench("tiny", "tiny", vocab=1000, batch=64, length=16, block=12),
    "small-N3": _bench("small-N3", "small", n_layers=3, vocab=4000, batch=64, length=24, block=4),
    "medium-h8": _bench("medium-h8", "medium", n_heads=8, vocab=8000, batch=32, length=32, block=3),
    # the paper's base model (N 6, d_model 512, h 8, d_ff 2048) at a GPU's batch; benchmarks/speed/gpu_check.sh
    "base-gpu": _bench("base-gpu", "base", vocab=16000, batch=64, length=32, block=10),
}
RENAMED_CONFIGS = {"small": "small-N3", "base": "medium-h8"}   # their names before presets.py


def config_named(name: str) -> BenchConfig:
    """CONFIGS[name], with a clear error for a renamed or unknown name."""
    if name in RENAMED_CONFIGS:
        raise ValueError(f"the benchmark config {name!r} is now called {RENAMED_CONFIGS[name]!r} "
                         f"(the name {name!r} belongs to another model of minitransformer/presets.py)")
    if name not in CONFIGS:
        raise ValueError(f"unknown config {name!r}; choose from {', '.join(CONFIGS)}")
    return CONFIGS[name]


def random_batch(config: BenchConfig, seed: int):
    """Random (src (B, L), tgt_in (B, L), tgt_out (B, L)) int64 NumPy arrays with some padding.

    Sentence lengths are uniform in [L/2, L]; ids ≥ FIRST_WORD; the target is bos + sentence,
    shifted by one for the output, as in training.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    batch, length = config.batch, config.length

    def sentences(width: int):
        ids = rng.integers(FIRST_WORD, config.vocab, size=(batch, width))
        lengths = rng.integers(max(1, width // 2), width + 1, size=batch)
        ids[np.arange(width)[None, :] >= lengths[:, None]] = PAD
        return ids

    src = sentences(length)
    tgt = np.concatenate([np.full((batch, 1), BOS), sentences(length)], axis=1)   # (B, L + 1)
    return src.astype(np.int64), tgt[:, :-1].astype(np.int64), tgt[:, 1:].astype(np.int64)


# -- environment ---------------------------------------------------------------------------------
MALLOC_KEEP_FREED = {"MALLOC_MMAP_THRESHOLD_": "1073741824", "MALLOC_TRIM_THRESHOLD_": "1073741824"}


# Variables some machines set that make OpenBLAS (hence NumPy, not PyTorch's MKL/oneDNN) pick an older
# kernel or cache blocking than the CPU would get: OPENBLAS_CORETYPE=Haswell on an AVX-512 CPU halves the
# width of every GEMM's inner loop. A run reports its figures with them as set and without them.
OPENBLAS_OVERRIDES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def openblas_overrides() -> dict[str, str]:
    """The OpenBLAS kernel overrides set in this environment (empty on most machines)."""
    return {name: os.environ[name] for name in OPENBLAS_OVERRIDES if name in os.environ}


def openblas_settings(choice: str) -> tuple[str, ...]:
    """Which OpenBLAS environments to run: 'as-set', 'unset', or both ('auto': both when any is set)."""
    if choice == "auto":
        return ("as-set", "unset") if openblas_overrides() else ("as-set",)
    if choice == "both":
        return ("as-set", "unset")
    if choice not in ("as-set", "unset"):
        raise ValueError(f"openblas must be 'auto', 'as-set', 'unset' or 'both', got {choice!r}")
    return (choice,)


def worker_env(threads: int, malloc: str, openblas: str = "as-set", package_root: str | None = None) -> dict[str, str]:
    """The same environment for every library: thread counts, and glibc malloc's settings.

    malloc='default' leaves glibc alone; 'keep' raises the mmap and trim thresholds so
    freed blocks stay in the heap (no fresh pages, hence no page faults, next step).
    openblas='unset' removes OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, so OpenBLAS picks its kernel by
    the CPU it finds. ``package_root`` is the folder whose minitransformer the worker imports
    (default: this checkout; another one for a before/after comparison).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    if openblas == "unset":
        for name in OPENBLAS_OVERRIDES:
            env.pop(name, None)
    elif openblas != "as-set":
        raise ValueError(f"openblas must be 'as-set' or 'unset', got {openblas!r}")
    n = str(threads)
    env.update(OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n, MKL_NUM_THREADS=n, PYTHONPATH=str(package_root or ROOT))
    env["MINITRANSFORMER_MALLOC"] = "0"  # the package must not re-tune malloc behind the benchmark's back
    if malloc == "keep":
        env.update(MALLOC_KEEP_FREED)
    elif malloc != "default":
        raise ValueError(f"malloc must be 'default' or 'keep', got {malloc!r}")
    return env


def memory_mib() -> dict[str, float]:
    """Resident set size now and its peak (VmRSS, VmHWM) of this process, in MiB."""
    figures = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                figures[key] = int(value.split()[0]) / 1024
    if not figures:  # not Linux: getrusage's peak only (KiB on Linux, bytes on macOS)
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        figures["VmHWM"] = peak / (1024 * 1024 if sys.platform == "darwin" else 1024)
    return figures


def minor_page_faults() -> int:
    """Minor page faults of this process so far: each is a first touch of a fresh 4 KiB page, which the
    kernel zero-fills (what glibc's malloc costs when it hands freed memory back and asks for it again)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


# -- the machine a result was measured on -------------------------------------------------------------
def load_average() -> list[float]:
    """The 1-, 5- and 15-minute load averages (how many processes wanted a core), or [] where unknown."""
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else []


def _cpu_model() -> dict:
    """The CPU's name, family/model, core count and caches, from /proc and /sys where Linux has them."""
    import platform

    record: dict = {"model": platform.processor() or platform.machine(), "cores": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            fields = dict(line.split(":", 1) for line in cpuinfo.read().split("\n\n")[0].splitlines() if ":" in line)
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        record["model"] = fields.get("model name", record["model"])
        record["family_model"] = f"{fields.get('cpu family', '?')}/{fields.get('model', '?')}"
        flags = set(fields.get("flags", "").split())
        record["simd"] = [f for f in ("avx2", "fma", "avx512f", "avx512_bf16", "amx_tile") if f in flags]
        record["hypervisor"] = "hypervisor" in flags
    except OSError:
        pass
    for index in ("index2", "index3"):   # L2, L3 of core 0
        try:
            size = Path(f"/sys/devices/system/cpu/cpu0/cache/{index}/size").read_text().strip()
            record["L2" if index == "index2" else "L3"] = size
        except OSError:
            pass
    return record


# -- the vector extensions a run may use ------------------------------------------------------------
# Machines of the same name differ in their widest vectors: some have AVX-512, some AVX2 only, and the
# libraries pick their kernels by what they find (OpenBLAS: SkylakeX or Haswell; PyTorch: its AVX-512 or
# AVX2 kernels, MKL's and oneDNN's code paths). ``--isa avx2`` caps every library at AVX2 on an AVX-512
# machine, so one machine measures what the AVX2 kind runs; each variable is honoured by one library.
ISA_CAPS = {
    "native": {},
    "avx2": {"OPENBLAS_CORETYPE": "Haswell",        # NumPy's OpenBLAS: the Haswell (AVX2) kernel
             "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",   # NumPy's own loops (exp, max, ...)
             "ATEN_CPU_CAPABILITY": "avx2",          # PyTorch's own kernels (softmax, layer norm, Adam, ...)
             "MKL_ENABLE_INSTRUCTIONS": "AVX2",      # PyTorch's GEMMs (MKL)
             "ONEDNN_MAX_CPU_ISA": "AVX2"},          # PyTorch's oneDNN primitives
}
ISA_VARIABLES = tuple(sorted({name for caps in ISA_CAPS.values() for name in caps}))


def isa_environment(isa: str) -> dict[str, str]:
    """The variables that cap the libraries at ``isa`` ('native': none)."""
    if isa not in ISA_CAPS:
        raise ValueError(f"isa must be one of {', '.join(ISA_CAPS)}, got {isa!r}")
    return dict(ISA_CAPS[isa])


def apply_isa(isa: str) -> dict[str, str]:
    """Set ``isa``'s caps in this process's environment (workers and commands started later inherit them);
    refuse an AVX2 cap on a CPU without AVX2. Returns what was set."""
    caps = isa_environment(isa)
    simd = _cpu_model().get("simd")
    if caps and simd is not None and "avx2" not in simd:
        raise SystemExit(f"--isa {isa}: this CPU has no AVX2 ({'+'.join(simd) or 'no AVX'}): nothing to emulate")
    os.environ.update(caps)
    return caps


def blas_kernel_of(env: dict[str, str] | None = None) -> str | None:
    """The OpenBLAS kernel NumPy picks under ``env`` (default: this environment), asked in a child process so
    that the driver itself never loads NumPy's threads; None where NumPy's BLAS is not OpenBLAS."""
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from common import openblas_kernel; "
            "print(openblas_kernel() or '')")
    try:
        answer = subprocess.run([sys.executable, "-c", code, str(Path(__file__).resolve().parent)],
                                env={**os.environ, **(env or {}), "OPENBLAS_NUM_THREADS": "1"},
                                capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return answer.stdout.strip() or None


def machine_kind(cpu: dict, kernel: str | None, caps: dict[str, str]) -> str:
    """One line for a results file: the widest vectors the CPU has, the ones the run used, the BLAS kernel."""
    simd = cpu.get("simd") or []
    widest = "AVX-512" if "avx512f" in simd else "AVX2" if "avx2" in simd else "no AVX2"
    used = f", capped at AVX2 ({', '.join(f'{k}={v}' for k, v in sorted(caps.items()))})" if caps else ""
    return f"{widest} CPU{used}; NumPy's OpenBLAS kernel {kernel or 'unknown'}"


def machine_record() -> dict:
    """What the driver knows of the machine: CPU and its vector extensions, the OpenBLAS kernel NumPy picks
    here, the ISA caps and OpenBLAS overrides in the environment, cores, load now, Python."""
    import platform

    cpu = _cpu_model()
    kernel = blas_kernel_of()
    caps = {name: os.environ[name] for name in ISA_VARIABLES if name in os.environ}
    return {"cpu": cpu, "kind": machine_kind(cpu, kernel, caps), "openblas_kernel": kernel, "isa_caps": caps,
            "load_average": load_average(), "openblas_overrides": openblas_overrides(),
            "python": platform.python_version(), "system": f"{platform.system()} {platform.release()}"}


def library_record(library: str) -> dict:
    """Inside a worker: the versions and thread/kernel settings that decide its speed.

    NumPy: its version and, through threadpoolctl, the BLAS it loaded, that BLAS's version, the
    kernel it chose ('architecture': OpenBLAS's core type, e.g. Haswell or SkylakeX) and its threads.
    PyTorch: version, threads, the CPU capability its kernels were dispatched for, its BLAS.
    """
    import numpy

    record: dict = {"numpy": numpy.__version__,
                    "env": {k: os.environ[k] for k in (*OPENBLAS_OVERRIDES, *ISA_VARIABLES, "OMP_NUM_THREADS",
                                                       "OPENBLAS_NUM_THREADS") if k in os.environ}}
    try:
        from threadpoolctl import threadpool_info

        record["blas"] = [{k: pool.get(k) for k in ("internal_api", "version", "architecture", "num_threads",
                                                    "threading_layer")}
                          for pool in threadpool_info() if pool.get("user_api") == "blas"]
    except ImportError:
        record["blas"] = "threadpoolctl not installed (pip install -r benchmarks/requirements.txt)"
    record["openblas_kernel"] = openblas_kernel()
    record["numpy_simd"] = numpy_simd()
    if library == "torch":
        import torch

        config = torch.__config__.show()
        blas = next((part.split("=", 1)[1] for line in config.splitlines() for part in line.replace(",", " ").split()
                     if part.startswith("BLAS_INFO=")), None)
        record["torch"] = {"version": torch.__version__, "threads": torch.get_num_threads(),
                           "interop_threads": torch.get_num_interop_threads(),
                           "cpu_capability": torch.backends.cpu.get_cpu_capability(), "blas": blas,
                           "mkldnn": torch.backends.mkldnn.is_available()}
    elif library == "minitransformer":
        import minitransformer

        record["package"] = str(Path(minitransformer.__file__).resolve().parent.parent)
    return record


def numpy_simd() -> list[str] | None:
    """The vector extensions NumPy's own loops (exp, maximum, sums; not its BLAS) dispatch to here, e.g.
    ['X86_V3'] for AVX2 only; None where this NumPy does not say."""
    import numpy

    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:
        return None
    return [name for name in __cpu_dispatch__ if __cpu_features__.get(name)]


def openblas_kernel() -> str | None:
    """The kernel (core type) of the OpenBLAS that NumPy loaded, e.g. "SkylakeX", asked of the library itself
    (without threadpoolctl); None where NumPy uses another BLAS or the library does not say."""
    import ctypes

    import numpy  # noqa: F401 - loads the BLAS

    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for name in ("openblas_get_corename", "openblas_get_corename64_", "scipy_openblas_get_corename64_",
                     "scipy_openblas_get_corename"):
            function = getattr(library, name, None)
            if function is not None:
                function.restype = ctypes.c_char_p
                return function().decode()
    return None


def reset_peak_memory() -> bool:
    """Start this process's peak resident set (VmHWM) again from the resident set now (Linux: clear_refs 5),
    so that the next peak is that of the work that follows; False where the system cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        return True
    except OSError:
        return False


def describe_machine(machine: dict, libraries: dict[str, dict]) -> str:
    """Two or three lines for the top of a benchmark's output."""
    cpu = machine["cpu"]
    lines = [f"machine: {cpu.get('model')} ({cpu.get('cores')} cores, L2 {cpu.get('L2', '?')}, "
             f"{'+'.join(cpu.get('simd', []))}), load average {machine['load_average']}, "
             f"OpenBLAS overrides in the environment: {machine['openblas_overrides'] or 'none'}"]
    if machine.get("kind"):
        lines.append(f"  kind: {machine['kind']}")
    for name, record in libraries.items():
        blas = record.get("blas")
        kernels = ", ".join(f"{b['internal_api']} {b['version']} kernel {b['architecture']} × {b['num_threads']}"
                            for b in blas) if isinstance(blas, list) else blas
        torch_part = ""
        if "torch" in record:
            t = record["torch"]
            torch_part = (f"; torch {t['version']} ({t['blas']}, {t['cpu_capability']}, {t['threads']} threads)")
        lines.append(f"  {name}: NumPy {record['numpy']} ({kernels}){torch_part}; env {record['env']}")
    return "\n".join(lines)


def setup_worker_threads(library: str) -> None:
    if library == "torch":
        import torch

        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1)))


# -- the worker protocol ----------------------------------------------------------------------------
class Worker:
    """A library's worker process: ``call(command, **args)`` sends one JSON line, returns the reply."""

    def __init__(self, script: str, library: str, args: list[str], env: dict[str, str]) -> None:
        self.library = library
        self.process = subprocess.Popen([sys.executable, script, "--worker", library, *args], env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.ready = self._read()

    def _read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait()
            raise RuntimeError(f"the {self.library} worker exited (code {code}) without answering; "
                               "see its error output above")
        return json.loads(line)

    def call(self, command: str, **args) -> dict:
        self.process.stdin.write(json.dumps({"command": command, **args}) + "\n")
        return self._read()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.write(json.dumps({"command": "quit"}) + "\n")
            self.process.stdin.close()
            self.process.wait(timeout=60)


def serve(handlers: dict, ready: dict) -> None:
    """The worker's loop: answer each JSON command line from stdin with ``handlers[command](**args)``."""
    out = sys.stdout
    sys.stdout = sys.stderr  # anything a library prints must not corrupt the protocol
    out.write(json.dumps(ready) + "\n")
    out.flush()
    for line in sys.stdin:
        message = json.loads(line)
        command = message.pop("command")
        if command == "quit":
            break
        out.write(json.dumps(handlers[command](**message)) + "\n")
        out.flush()


def pause() -> None:
    """Let the last worker's spinning BLAS/OpenMP threads go to sleep before the next one starts."""
    time.sleep(0.2)


def median(values) -> float:
    import statistics

    return statistics.median(values)


def write_results(record: dict, results: str | None, default: Path) -> Path:
    """Write a benchmark's ``record`` as indented JSON to ``results`` (its --results option) or, when that is
    None, to ``default`` (its file under results/), making the folder; say where, and return the path."""
    out = Path(results) if results else default
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {out}")
    return out
