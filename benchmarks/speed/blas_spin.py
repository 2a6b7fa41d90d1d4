"""Why splitting elementwise work over Python threads did not speed up a training step: OpenBLAS spins.

NumPy releases the GIL in its loops, so two Python threads can run elementwise work on two cores.
In a training step that work comes right after a matrix product, and OpenBLAS's worker threads
keep spinning on the other cores for a while after each product (``OPENBLAS_THREAD_TIMEOUT``:
2^n cycles, n = 28 by default), so a second Python thread finds its core taken. This script times
elementwise work on 2 × 3M float32 (four multiply + sqrt passes each) right after a GEMM, on one
thread and split over two, in a fresh process per OpenBLAS setting: two BLAS threads with the
default spin, two with a short spin (n = 4, 10, 16), and one BLAS thread.

    python benchmarks/speed/blas_spin.py          # writes benchmarks/speed/results/blas_spin.json
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # benchmarks/: common.py

from common import load_average, machine_record, median  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "blas_spin.json"
SHORT_SPINS = (4, 10, 16)   # OPENBLAS_THREAD_TIMEOUT values: spin 2^n cycles, then sleep
SETTINGS = {   # key -> (what it is, the worker's environment)
    "default_spin": ("two BLAS threads, default spin", {"OPENBLAS_NUM_THREADS": "2"}),
    **{f"timeout_{n}": (f"two BLAS threads, OPENBLAS_THREAD_TIMEOUT={n}",
                        {"OPENBLAS_NUM_THREADS": "2", "OPENBLAS_THREAD_TIMEOUT": str(n)}) for n in SHORT_SPINS},
    "one_blas_thread": ("one BLAS thread", {"OPENBLAS_NUM_THREADS": "1"}),
}


def worker(repeats: int) -> dict:
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    rng = np.random.default_rng(0)
    a, b = rng.random((1024, 256), dtype=np.float32), rng.random((256, 1024), dtype=np.float32)
    halves = [rng.random(3_000_000, dtype=np.float32) for _ in range(2)]
    pool = ThreadPoolExecutor(1)

    def work(x) -> None:
        for _ in range(4):
            np.multiply(x, 1.0001, out=x)
            np.sqrt(x, out=x)

    def timed(split: bool) -> float:
        times = []
        for _ in range(repeats):
            a @ b                                              # a GEMM just before, as in a step
            start = time.perf_counter()
            if split:
                other = pool.submit(work, halves[1])
                work(halves[0])
                other.result()
            else:
                work(halves[0])
                work(halves[1])
            times.append(time.perf_counter() - start)
        return round(median(times) * 1e3, 2)

    return {"one_thread_ms": timed(False), "two_threads_ms": timed(True)}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        print(json.dumps(worker(int(sys.argv[2]))))
        return 0
    record = {"command": "python benchmarks/speed/blas_spin.py", "machine": machine_record(), "settings": {}}
    for key, (name, settings) in SETTINGS.items():
        environment = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
        environment.update(settings, OMP_NUM_THREADS=settings["OPENBLAS_NUM_THREADS"])
        load = load_average()[0]
        output = subprocess.run([sys.executable, __file__, "--worker", "20"], env=environment, capture_output=True,
                                text=True, check=True).stdout
        figures = json.loads(output)
        figures["speedup"] = round(figures["one_thread_ms"] / figures["two_threads_ms"], 2)
        record["settings"][key] = {**figures, "what": name, "environment": settings, "load_average": load}
        print(f"{name:<46} one thread {figures['one_thread_ms']:6.1f} ms, two threads "
              f"{figures['two_threads_ms']:6.1f} ms ({figures['speedup']}x)")
    RESULTS.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
