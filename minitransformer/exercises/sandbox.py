"""Run a student's code in a process of its own, under bubblewrap, and bring back plain data only.

The sandbox (``bwrap``, Debian's ``bubblewrap``) sees, read-only: the system's libraries, the Python
runtime and its installed packages, the graded package (the student edition with the student's code
put in) and the list of cases. Nothing else: not the teacher's repository, not the reference
solutions, not the expected outputs. No network, no other process, no capabilities, a small
``/tmp`` of its own; limits on CPU time, memory, file size and wall-clock time.

What comes back is a stream on one pipe, one JSON line per case (arrays as base64 ``.npy``, loaded
with ``allow_pickle=False``), at most ``Limits.output_bytes`` of it: no object of the student's ever
reaches the grader, whose process never imports the student's code.

Without bubblewrap the grader refuses, unless the teacher asks for ``unsafe=True`` (the command's
``--unsafe-no-sandbox``): then the same process runs, with the same limits, but sees the whole machine.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path


from . import bwrap
from .cases import CASE_SECONDS
from .judge import decode_record

INSIDE = Path("/sandbox")


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or does not work here; the message says what to do."""


@dataclass
class Limits:
    cpu_seconds: int = 120                 # CPU time of the whole run
    case_seconds: float = CASE_SECONDS     # wall-clock time of one case
    wall_seconds: float = 300              # wall-clock time of the whole run
    memory_bytes: int = 3 * 2 ** 30        # address space (RLIMIT_AS)
    file_bytes: int = 16 * 2 ** 20         # the largest file the student's code may write (in its own /tmp)
    tmp_bytes: int = 64 * 2 ** 20          # the size of that /tmp
    output_bytes: int = 32 * 2 ** 20       # what the grader reads back of the results stream
    log_bytes: int = 64 * 2 ** 10          # what it keeps of stdout and stderr


@dataclass
class Run:
    """What came back: per case id, its outputs or its error; plus how the process ended."""

    results: dict[str, dict] = field(default_factory=dict)   # id -> {"outputs": {name: array}, "error": {...}}
    returncode: int | None = None
    timed_out: bool = False
    output_cut: bool = False               # the stream passed Limits.output_bytes and was cut there
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)        # malformed or duplicated records (never trusted)

    def ending(self) -> str:
        """How the run ended, in words, when it did not end normally."""
        if self.timed_out:
            return "it was stopped after running past the wall-clock limit"
        if self.output_cut:
            return "it wrote more output than the grader reads"
        if self.returncode is not None and self.returncode < 0:
            signals = {9: "SIGKILL (a limit: CPU time or memory)", 24: "SIGXCPU (the CPU-time limit)",
                       11: "SIGSEGV", 6: "SIGABRT"}
            return f"it was killed by {signals.get(-self.returncode, f'signal {-self.returncode}')}"
        if self.returncode not in (0, None):
            last = [line for line in self.stderr.splitlines() if line.strip()][-1:] or [""]
            return f"it exited with code {self.returncode}" + (f" ({last[0].strip()[:200]})" if last[0] else "")
        return ""


def bubblewrap_problem() -> str | None:
    """None when bubblewrap runs here; else why not, in words."""
    return bwrap.problem()


def _limit(limits: Limits):
    def apply() -> None:
        os.setsid()
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
        resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_bytes, limits.file_bytes))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
        if os.getuid() != 0:      # counted per user: meaningful for an unprivileged grader only
            resource.setrlimit(resource.RLIMIT_NPROC, (256, 256))
    return apply


def _drain(stream, keep: int, into: list, cut: list) -> None:
    """Read ``stream`` to its end, keeping the first ``keep`` bytes."""
    total = 0
    while True:
        chunk = stream.read(65536)
        if not chunk:
            break
        if total < keep:
            into.append(chunk[:keep - total])
        elif not cut:
            cut.append(True)
        total += len(chunk)


def run_cases(package: Path, specs: list[dict], *, unsafe: bool = False, secrets: list[Path] = (),
              limits: Limits | None = None) -> Run:
    """Run ``specs`` on the package folder ``package`` (a ``minitransformer/``) in a sandbox; decode what came back."""
    limits = limits or Limits()
    if not unsafe:
        problem = bubblewrap_problem()
        if problem:
            raise SandboxUnavailable(problem)
    package = Path(package).resolve()
    run = Run()
    with tempfile.TemporaryDirectory(prefix="mt-sandbox-") as scratch:
        spec_file = Path(scratch) / "specs.json"
        spec_file.write_text(json.dumps({"case_seconds": limits.case_seconds, "specs": specs}), encoding="utf-8")
        if unsafe:
            root, command = package.parent, []
            spec_path = str(spec_file)
        else:
            root, spec_path = INSIDE / "package", str(INSIDE / "specs.json")
            command = bwrap.arguments(read_only=[(package, INSIDE / "package" / "minitransformer"),
                                                 (spec_file, spec_path)], secrets=secrets,
                                      environment=_environment(root), tmp_bytes=limits.tmp_bytes)
        records = _run_worker(run, command, spec_path, root, unsafe, limits)
    _decode_records(run, records)
    return run


def _run_worker(run: Run, command: list[str], spec_path: str, root: Path, unsafe: bool, limits: Limits) -> bytes:
    """Start the case runner (``command`` is the sandbox's, empty when ``unsafe``), read its records, stdout
    and stderr within their limits, and stop it at the wall-clock limit. Fills ``run``'s return code, time,
    output and cut flags; returns the records' bytes."""
    read_end, write_end = os.pipe()
    command = command + [bwrap.python(), "-S", "-s", "-B", "-m", "minitransformer.exercises.cases", spec_path,
                         "--fd", str(write_end)]
    started = time.monotonic()
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               pass_fds=(write_end,), preexec_fn=_limit(limits),
                               env=_environment(root) if unsafe else {"PATH": "/usr/bin:/bin"})
    os.close(write_end)
    stream = os.fdopen(read_end, "rb")
    parts: dict[str, list] = {"records": [], "stdout": [], "stderr": []}
    cut: dict[str, list] = {name: [] for name in parts}
    threads = [threading.Thread(target=_drain, args=(source, keep, parts[name], cut[name]), daemon=True)
               for name, source, keep in (("records", stream, limits.output_bytes),
                                          ("stdout", process.stdout, limits.log_bytes),
                                          ("stderr", process.stderr, limits.log_bytes))]
    for thread in threads:
        thread.start()
    try:
        run.returncode = process.wait(timeout=limits.wall_seconds)
    except subprocess.TimeoutExpired:
        run.timed_out = True
        _kill(process)
        run.returncode = process.wait()
    for thread in threads:
        thread.join(timeout=10)
    stream.close()
    run.seconds = time.monotonic() - started
    run.output_cut = bool(cut["records"])
    run.stdout = b"".join(parts["stdout"]).decode("utf-8", "replace")
    run.stderr = b"".join(parts["stderr"]).decode("utf-8", "replace")
    return b"".join(parts["records"])


def _decode_records(run: Run, data: bytes) -> None:
    """One result per case into ``run.results``; a record that does not decode, or a second one for a case,
    is a problem noted in ``run.problems`` and never trusted."""
    lines = data.split(b"\n")
    if run.output_cut:
        lines = lines[:-1]          # the last line may be cut short
    seen: set[str] = set()
    for line in lines:
        if not line.strip():
            continue
        try:
            case_id, result = decode_record(line)
        except Exception as error:            # never trusted: a record that does not decode counts for nothing
            run.problems.append(f"a record that does not decode ({type(error).__name__}: {str(error)[:120]})")
            continue
        if case_id in seen:                   # a second record for a case: someone else wrote one
            run.problems.append(f"two records for case {case_id}")
            run.results[case_id] = {"outputs": {}, "seconds": None, "error": {
                "type": "GradingError", "message": "two results were written for this case (only the grader writes "
                "them)", "exercise": None, "frames": []}}
            continue
        seen.add(case_id)
        run.results[case_id] = result


def _environment(root: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(root), *bwrap.site_directories()]), "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg", "HOME": "/tmp",
            "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"}


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, 9)
    except ProcessLookupError:
        pass
