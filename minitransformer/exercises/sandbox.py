"""Run a student's code in a process of its own, under bubblewrap, and bring back plain data only.

Each case runs in a sandbox of its own (``bwrap``, Debian's ``bubblewrap``), which sees, read-only: the
system's libraries, the Python runtime's standard library, NumPy (and no other installed package), the
graded package (the student edition with the student's code put in) and the case. Nothing else: not the
teacher's repository, not the reference solutions, not the expected outputs, not the other cases. No
network, no other process and no way to start one (seccomp), no capabilities, a small ``/tmp`` of its
own; limits on CPU time, memory, file size, and wall-clock time: the grader kills a case's process from
outside when it runs past its limit, whatever the student's code catches, and stops grading an exercise
after two such cases in a row or after ``Limits.wall_seconds``.

What comes back is a stream on one pipe, one JSON line for the case (arrays as base64 ``.npy``, loaded
with ``allow_pickle=False``), at most ``Limits.output_bytes`` of it: no object of the student's ever
reaches the grader, whose process never imports the student's code.

Without bubblewrap the grader refuses, unless the teacher asks for ``unsafe=True`` (the command's
``--unsafe-no-sandbox``): then the same process runs, with the same limits, but sees the whole machine.
"""
from __future__ import annotations

import functools
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
from .cases import CASE_SECONDS, STOP_AFTER_TIMEOUTS
from .judge import decode_record

INSIDE = Path("/sandbox")


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or does not work here; the message says what to do."""


@dataclass
class Limits:
    cpu_seconds: int = 60                  # CPU time of one case's process
    case_seconds: float = CASE_SECONDS     # wall-clock time of one case (its process is killed from outside)
    wall_seconds: float = 60               # wall-clock time of the whole exercise: the cases after it are not run
    memory_bytes: int = 3 * 2 ** 30        # address space (RLIMIT_AS) of a case's one process
    file_bytes: int = 16 * 2 ** 20         # the largest file the student's code may write (in its own /tmp)
    tmp_bytes: int = 64 * 2 ** 20          # the size of that /tmp
    output_bytes: int = 32 * 2 ** 20       # what the grader reads back of a case's results stream
    log_bytes: int = 64 * 2 ** 10          # what it keeps of stdout and stderr


STARTUP_SECONDS = 3.0      # a case's process also starts the sandbox and imports the package: allowed on top


@dataclass
class Run:
    """What came back: per case id, its outputs or its error (every case has one); plus how the processes ended."""

    results: dict[str, dict] = field(default_factory=dict)   # id -> {"outputs": {name: array}, "error": {...}}
    returncode: int | None = None          # of the last case's process that did not end normally (else 0)
    timed_out: list[str] = field(default_factory=list)       # the cases stopped at their limit, from outside
    output_cut: bool = False               # a case's stream passed Limits.output_bytes and was cut there
    stdout: str = ""
    stderr: str = ""                       # of the first case's process that ended without a result
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)        # malformed or duplicated records (never trusted)
    records: int = 0                       # the records the cases' processes wrote (0: the code never ran)

    def ending(self) -> str:
        """How the first process that gave no result ended, in words ("" when every case gave one)."""
        return self._ending or ""

    _ending: str | None = None


def ending_of(returncode: int | None, timed_out: bool, output_cut: bool, stderr: str) -> str:
    """How a case's process ended, in words, when it did not end normally ("" when it did)."""
    if timed_out:
        return "it was stopped after running past its time limit"
    if output_cut:
        return "it wrote more output than the grader reads"
    if returncode is not None and returncode < 0:
        signals = {9: "SIGKILL (a limit: CPU time or memory)", 24: "SIGXCPU (the CPU-time limit)",
                   11: "SIGSEGV", 6: "SIGABRT", 31: "SIGSYS (a system call the sandbox refuses)"}
        return f"it was killed by {signals.get(-returncode, f'signal {-returncode}')}"
    if returncode not in (0, None):
        last = [line for line in stderr.splitlines() if line.strip()][-1:] or [""]
        return f"it exited with code {returncode}" + (f" ({last[0].strip()[:200]})" if last[0] else "")
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


def _error(kind: str, message: str) -> dict:
    return {"outputs": {}, "seconds": None, "error": {"type": kind, "message": message, "exercise": None,
                                                      "frames": []}}


def run_cases(package: Path, specs: list[dict], *, unsafe: bool = False, secrets: list[Path] = (),
              limits: Limits | None = None) -> Run:
    """Run ``specs`` on the package folder ``package`` (a ``minitransformer/``), each case in a sandbox of its own.

    Each case's process is killed from outside when it runs past ``limits.case_seconds`` (whatever the
    student's code catches), and after STOP_AFTER_TIMEOUTS such cases in a row, or once the exercise's
    ``limits.wall_seconds`` are spent, the other cases are not run. A staged case (cases.STAGED) runs its
    probe here, in the grader's process, and each call of the student's function in a fresh sandbox: it
    sees that call's inputs and nothing of the calls before it (the staged cases' calls go in rounds, the
    k-th call of every case in one sandbox).
    """
    from .cases import STAGED

    limits = limits or Limits()
    if not unsafe:
        problem = bubblewrap_problem()
        if problem:
            raise SandboxUnavailable(problem)
    run = Run()
    clock = _Clock(limits)
    with tempfile.TemporaryDirectory(prefix="mt-sandbox-") as scratch:
        batch = functools.partial(_batch, run, Path(package).resolve(), scratch, unsafe, secrets, limits)
        for spec in [s for s in specs if s["probe"] not in STAGED]:
            stopped = clock.stopped()
            if stopped:
                run.results[spec["id"]] = stopped
                continue
            found, timed_out = batch([spec], clock.case_seconds())
            clock.count(timed_out)
            run.results[spec["id"]] = found[spec["id"]]
            if timed_out:
                run.timed_out.append(spec["id"])
        _run_staged(run, [s for s in specs if s["probe"] in STAGED], batch, clock)
    run.seconds = time.monotonic() - clock.started
    return run


class _Clock:
    """The time limits of an exercise's grading: a case's, the exercise's, and no more after timeouts in a row."""

    def __init__(self, limits: Limits) -> None:
        self.limits, self.started, self.in_a_row = limits, time.monotonic(), 0

    def left(self) -> float:
        return self.limits.wall_seconds - (time.monotonic() - self.started)

    def case_seconds(self) -> float:
        return min(self.limits.case_seconds, self.left())

    def stopped(self) -> dict | None:
        """The result of a case that is not run any more (None while cases still run)."""
        if self.in_a_row >= STOP_AFTER_TIMEOUTS:
            return _error("CaseTimeout", f"not run: the {self.in_a_row} cases before it ran past their time limit")
        if self.left() <= 0:
            return _error("CaseTimeout", "not run: the exercise's grading reached its wall-clock limit of "
                          f"{self.limits.wall_seconds:g} s")
        return None

    def count(self, timed_out: bool) -> None:
        self.in_a_row = self.in_a_row + 1 if timed_out else 0


def _run_staged(run: Run, specs: list[dict], batch, clock: _Clock) -> None:
    """The staged cases: their probes here, their calls in rounds of fresh sandboxes (one call per case a round)."""
    import numpy as np

    from .cases import STAGED, plain_outputs

    probes, pending = {}, {}

    def advance(case_id: str, sent) -> None:
        try:
            pending[case_id] = probes[case_id].send(sent)
        except StopIteration as finished:
            try:
                run.results[case_id] = {"outputs": plain_outputs(finished.value), "seconds": None, "error": None}
            except Exception as error:
                run.results[case_id] = _error(type(error).__name__, str(error)[:300])
        except Exception as error:              # what the student's call returned does not fit the next one
            run.results[case_id] = _error(type(error).__name__, "what your function returned could not be used: "
                                          f"{str(error)[:300]}")

    for spec in specs:
        probes[spec["id"]] = STAGED[spec["probe"]](np.random.default_rng(spec["seed"]), **spec["params"])
        advance(spec["id"], None)
    step = 0
    while pending:
        step += 1
        stopped = clock.stopped()
        if stopped:
            run.results.update({case_id: stopped for case_id in pending})
            return
        calls = [{"id": case_id, "probe": "call", "seed": 0,
                  "params": {"module": module, "function": function, "arguments": [_plain(a) for a in arguments]}}
                 for case_id, (module, function, arguments) in pending.items()]
        found, timed_out = batch(calls, clock.case_seconds())
        clock.count(timed_out)
        current, pending = pending, {}
        for case_id in current:
            result = found[case_id]
            if result.get("error"):
                if result["error"]["type"] == "CaseTimeout" and not result["error"]["message"].startswith("not run"):
                    run.timed_out.append(f"{case_id} (call {step})")
                run.results[case_id] = result
                continue
            outputs = result["outputs"]
            advance(case_id, tuple(outputs.get(f"result {i}") for i in range(len(outputs))))


def _plain(value):
    """An argument of a staged call as JSON (a NumPy array as nested lists; ±∞ and NaN as JSON allows them)."""
    import numpy as np

    return np.asarray(value, dtype=float).tolist()


def _batch(run: Run, package: Path, scratch: str, unsafe: bool, secrets, limits: Limits, specs: list[dict],
           seconds: float) -> tuple[dict[str, dict], bool]:
    """``specs`` (one case, or a round of staged calls) in one fresh sandbox, killed after ``seconds``: a result
    for each, and whether it was killed at the limit."""
    spec_file = Path(scratch) / "specs.json"
    spec_file.write_text(json.dumps({"case_seconds": 0, "specs": specs}), encoding="utf-8")
    seccomp_fd = None
    if unsafe:
        root, command, spec_path = package.parent, [], str(spec_file)
    else:
        root, spec_path = INSIDE / "package", str(INSIDE / "specs.json")
        seccomp_fd = bwrap.seccomp_file()
        command = bwrap.arguments(read_only=[(package, INSIDE / "package" / "minitransformer"),
                                             (spec_file, spec_path)], secrets=secrets,
                                  environment=_environment(root, sandboxed=True), tmp_bytes=limits.tmp_bytes,
                                  packages=bwrap.GRADING_PACKAGES, seccomp_fd=seccomp_fd)
    try:
        records, returncode, timed_out, cut, stdout, stderr = _run_worker(command, spec_path, root, unsafe, limits,
                                                                            seconds + STARTUP_SECONDS, seccomp_fd)
    finally:
        if seccomp_fd is not None:
            os.close(seccomp_fd)
    if stdout and not run.stdout:
        run.stdout = stdout
    found: dict[str, dict] = {}
    _decode_records(run, records, cut, found)
    found = {s["id"]: found[s["id"]] for s in specs if s["id"] in found}
    run.records += len(found)
    missing = [s["id"] for s in specs if s["id"] not in found]
    if missing and not timed_out and run._ending is None:
        run._ending, run.stderr, run.returncode = ending_of(returncode, False, cut, stderr), stderr, returncode
        run.output_cut = run.output_cut or cut
    for n, case_id in enumerate(missing):
        if timed_out:
            found[case_id] = _error("CaseTimeout", f"it ran past the case's time limit of {seconds:g} s and was "
                                    "stopped" if n == 0 else "not run: the call before it in the same sandbox ran "
                                    "past the time limit")
        else:
            ending = ending_of(returncode, False, cut, stderr)
            found[case_id] = _error("Stopped", "the case's process ended without a result" +
                                    (f": {ending}" if ending else ""))
    return found, timed_out


def _run_worker(command: list[str], spec_path: str, root: Path, unsafe: bool, limits: Limits,
                seconds: float, seccomp_fd: int | None = None) -> tuple[bytes, int, bool, bool, str, str]:
    """Start the case runner (``command`` is the sandbox's, empty when ``unsafe``), read its records, stdout
    and stderr within their limits, and kill its whole process group after ``seconds``. Returns (the records'
    bytes, the return code, whether it was killed at the limit, whether the records were cut, stdout, stderr)."""
    read_end, write_end = os.pipe()
    command = command + [bwrap.python(), "-S", "-s", "-B", "-m", "minitransformer.exercises.cases", spec_path,
                         "--fd", str(write_end)]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               pass_fds=(write_end,) + ((seccomp_fd,) if seccomp_fd is not None else ()),
                               preexec_fn=_limit(limits),
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
    timed_out = False
    try:
        returncode = process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        timed_out = True
    _kill(process)                 # the whole group, always: nothing the case started outlives it
    if timed_out:
        returncode = process.wait()
    for thread in threads:
        thread.join(timeout=10)
    stream.close()
    return (b"".join(parts["records"]), returncode, timed_out, bool(cut["records"]),
            b"".join(parts["stdout"]).decode("utf-8", "replace"), b"".join(parts["stderr"]).decode("utf-8", "replace"))


def _decode_records(run: Run, data: bytes, cut: bool, found: dict[str, dict]) -> None:
    """One result per case into ``found``; a record that does not decode, or a second one for a case, is a
    problem noted in ``run.problems`` and never trusted."""
    lines = data.split(b"\n")
    if cut:
        lines = lines[:-1]          # the last line may be cut short
    for line in lines:
        if not line.strip():
            continue
        try:
            case_id, result = decode_record(line)
        except Exception as error:            # never trusted: a record that does not decode counts for nothing
            run.problems.append(f"a record that does not decode ({type(error).__name__}: {str(error)[:120]})")
            continue
        if case_id in found:                  # a second record for a case: someone else wrote one
            run.problems.append(f"two records for case {case_id}")
            found[case_id] = _error("GradingError", "two results were written for this case (only the grader "
                                    "writes them)")
            continue
        found[case_id] = result


def _environment(root: Path, sandboxed: bool = False) -> dict[str, str]:
    """The case runner's environment; in the sandbox only the graded package and GRADING_PACKAGES are importable."""
    packages = [bwrap.PACKAGES_INSIDE] if sandboxed else bwrap.site_directories()
    return {"PYTHONPATH": os.pathsep.join([str(root), *packages]), "PYTHONNOUSERSITE": "1",
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg", "HOME": "/tmp",
            "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"}


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, 9)
    except ProcessLookupError:
        pass
