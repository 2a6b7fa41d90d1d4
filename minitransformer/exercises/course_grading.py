"""nbgrader's side of an nbgrader course: kernels in bubblewrap, and a judge that scores outside them.

The course generator (nbgrader.py) copies this file, with judge.py and bwrap.py, into the course as
the package ``mt_grading/`` (this file becomes its ``__init__.py``), and its ``nbgrader_config.py``
uses it, so that grading needs no copy of the teacher's package:

* ``SandboxedKernelManager``: every kernel ``nbgrader autograde`` starts runs in bubblewrap. It sees
  the Python runtime and the submission's own folder (read-only), talks to nbgrader over Unix sockets
  in a folder of its own, and nothing else: not ``source/``, not the gradebook, not the expected
  outputs in ``grading/``, not the network. The seccomp filter of ``grade`` (bwrap.seccomp_program)
  refuses it any other process, so its memory limit is the whole submission's.
* ``SandboxedExecute``: a case cell may run ``case_seconds`` (10 s) and a notebook ``wall_seconds``
  (120 s), kernel start included; past either, nbgrader's process stops waiting and kills the kernel
  from outside, whatever the student's code catches or ignores, and the cells not run score 0.
* ``JudgeCases``: after the notebook ran, each graded cell's output must hold the one record (plain
  JSON and ``.npy``) its case wrote; the judge compares it with the reference's outputs in
  ``grading/<exercise>/`` in nbgrader's own process and rewrites the cell's output to a pass or to an
  error with the reason. nbgrader then scores the cells as usual. A cheat inside the kernel (a patched
  helper, an object equal to everything) cannot change what nbgrader's process concludes.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

try:
    import nbgrader  # noqa: F401 - the classroom extra; checked first so that its absence is named plainly
except ModuleNotFoundError as error:
    raise ModuleNotFoundError(f"{__name__} is nbgrader's side of a course and needs the classroom extra "
                              f"(pip install -e '.[classroom]'): {error}", name="nbgrader") from None
import zmq
from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbconvert.preprocessors import ClearMetadataPreprocessor
from nbformat.v4 import new_output
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, Execute, IgnorePattern, LimitOutput,
                                    NbGraderPreprocessor, SaveAutoGrades)
from traitlets import Bool, Enum, Float, Integer, Unicode

from . import bwrap
from .judge import decode_result, judge_case

MIME = "application/vnd.minitransformer.case+json"
CELL = re.compile(r"^ex_(?P<exercise>\d+_\d+)-(?P<case>(?:public|hidden)-\d+)$")
NOTEBOOK_CELL = "<your cell>"


class SandboxedKernelManager(AsyncKernelManager):
    """A kernel in bubblewrap: read-only runtime and notebook folder, its sockets in a folder of its own."""

    unsafe = Bool(False, config=True, help="run kernels without bubblewrap (they then see this machine)")
    cpu_seconds = Integer(300, config=True, help="CPU time of one kernel")
    memory_mb = Integer(3072, config=True, help="memory of one kernel")

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._own = tempfile.mkdtemp(prefix="mt-kernel-")
        self.transport = "ipc"                                  # Unix sockets: the kernel has no network at all
        self.connection_file = os.path.join(self._own, "kernel.json")
        self.ip = os.path.join(self._own, "kernel-ipc")

    async def _async_launch_kernel(self, kernel_cmd, **kw):
        folder = os.path.realpath(kw.get("cwd") or os.getcwd())
        seccomp_fd = None
        command = bwrap.limited(kernel_cmd, self.cpu_seconds, self.memory_mb * 2 ** 20, 64 * 2 ** 20)
        if not self.unsafe:
            problem = bwrap.problem()
            if problem:
                raise RuntimeError(f"{problem}. The course's kernels run only inside bubblewrap; to run them with "
                                   "no sandbox (they then see this machine), set c.SandboxedKernelManager.unsafe = True")
            environment = {"HOME": "/tmp", "IPYTHONDIR": "/tmp/.ipython", "MPLCONFIGDIR": "/tmp", "LANG": "C.UTF-8",
                           "PATH": "/usr/bin:/bin", "OPENBLAS_NUM_THREADS": "1", "PYTHONNOUSERSITE": "1",
                           "NBGRADER_EXECUTION": os.environ.get("NBGRADER_EXECUTION", ""),
                           **{k: v for k, v in (kw.get("env") or {}).items() if k.startswith("JPY_")}}
            seccomp_fd = bwrap.seccomp_file()          # no fork: one process, whose limits are the submission's
            command = bwrap.arguments(read_only=[(folder, folder)], writable=[(self._own, self._own)],
                                      environment=environment, chdir=folder, seccomp_fd=seccomp_fd) + command
            if seccomp_fd is not None:
                kw["pass_fds"] = (*kw.get("pass_fds", ()), seccomp_fd)
        try:
            await super()._async_launch_kernel(command, **kw)
        finally:
            if seccomp_fd is not None:
                os.close(seccomp_fd)

    async def cleanup_resources(self, restart: bool = False) -> None:
        await super().cleanup_resources(restart)
        if not restart:
            shutil.rmtree(self._own, ignore_errors=True)


class SandboxedExecute(Execute):
    """nbgrader's Execute preprocessor with the kernel in bubblewrap.

    A kernel that dies (killed at its CPU or memory limit, or ended by the student's code) or stops
    answering leaves the cells it did not run without a result: they score 0, and the others count.
    A case cell that runs past ``case_seconds`` (another cell past ``Execute.timeout``), or any cell once the
    notebook has run ``wall_seconds``, ends the notebook there: nbgrader's process stops waiting and kills
    the kernel (bubblewrap and all it holds) from outside, whatever the student's code catches or ignores;
    the cells not run score 0. (``grade`` gives every case a fresh process; a notebook has one kernel.)
    """

    def __init__(self, *args, **kwargs):
        kwargs["kernel_manager_class"] = SandboxedKernelManager    # Execute would set its own otherwise
        super().__init__(*args, **kwargs)

    send_seconds = Integer(10, config=True, help="how long a request to the kernel may wait to be sent")
    # nbgrader's default sends the kernel's process group SIGINT at a time-out and goes on with the next cell (the
    # student's code may catch or ignore it; here it reaches bwrap, whose end happened to end the kernel): a time-out
    # here ends the notebook, and the kernel is killed, on purpose
    interrupt_on_timeout = Bool(False, config=True, help="interrupt the kernel at a time-out and go on (unsafe)")
    shutdown_kernel = Enum(["graceful", "immediate"], default_value="immediate", config=True,
                           help="how the kernel ends after the notebook: killed at once by default")
    case_seconds = Float(10, config=True, help="wall-clock time of one case cell (as grade's --case-seconds)")
    wall_seconds = Float(120, config=True, help="wall-clock time of one notebook, its kernel's start included")

    def _get_timeout(self, cell):
        """A case cell's limit, or the cell's (Execute.timeout), never past the notebook's wall limit."""
        timeout = super()._get_timeout(cell)
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "") if cell else ""
        if CELL.match(grade_id):
            timeout = min(timeout or self.case_seconds, self.case_seconds)
        started = getattr(self, "_started", None)
        if started is None:
            return timeout
        left = self.wall_seconds - (time.monotonic() - started)
        if left <= 0:
            raise CellTimeoutError.error_from_timeout_and_cell(
                f"the notebook ran past its wall-clock limit of {self.wall_seconds:g} s", self.wall_seconds, cell)
        return max(1, min(timeout or left, left))

    async def async_start_new_kernel_client(self):
        client = await super().async_start_new_kernel_client()
        # Over Unix sockets, a request to a kernel that has died waits for a peer forever: time it out, so that
        # a dead kernel ends the notebook (its unrun cells score 0) instead of hanging the autograde
        client.shell_channel.socket.setsockopt(zmq.SNDTIMEO, self.send_seconds * 1000)
        return client

    def preprocess_cell(self, cell, resources, index):
        if self.km is not None and not run_sync(self.km.is_alive)():
            raise DeadKernelError("the kernel is no longer running")
        return super().preprocess_cell(cell, resources, index)

    def preprocess(self, nb, resources=None, km=None):
        self._started = time.monotonic()
        try:
            return super().preprocess(nb, resources, km)
        except Exception as error:                  # the notebook keeps the outputs of the cells that ran
            self.log.warning("the kernel stopped before the end of the notebook (%s: %s); the cells it did not "
                             "run score 0", type(error).__name__, str(error)[:200])
            return nb, resources


class JudgeCases(NbGraderPreprocessor):
    """Score each case cell from the record it wrote, against grading/<exercise>/ (outside the kernel)."""

    grading_dir = Unicode("grading", config=True, help="the folder of the course's expected outputs")

    def preprocess(self, nb, resources):
        self._books = {}
        return super().preprocess(nb, resources)

    def _book(self, exercise: str) -> tuple[dict, dict, dict]:
        """(specs, expected, mistakes) of an exercise: case id -> spec, -> the reference's result, -> {mistake}."""
        if exercise not in self._books:
            folder = Path(self.grading_dir) / exercise
            meta = json.loads((folder / "cases.json").read_text(encoding="utf-8"))
            expected, mistakes = {}, {}
            for line in (folder / "expected.jsonl").read_text(encoding="utf-8").splitlines():
                if line.strip():
                    case_id, outcome = decode_result(json.loads(line)["record"])
                    expected[case_id] = outcome
            for line in (folder / "mistakes.jsonl").read_text(encoding="utf-8").splitlines():
                if line.strip():
                    entry = json.loads(line)
                    case_id, outcome = decode_result(entry["record"])
                    mistakes.setdefault(case_id, {})[entry["mistake"]] = (meta["verdicts"][entry["mistake"]], outcome)
            self._books[exercise] = ({s["id"]: s for s in meta["specs"]}, expected, mistakes)
        return self._books[exercise]

    def preprocess_cell(self, cell, resources, index):
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        found = CELL.match(grade_id)
        if cell.cell_type != "code" or not found or not cell.metadata["nbgrader"].get("grade"):
            return cell, resources
        exercise, case_id = found["exercise"].replace("_", "."), found["case"]
        specs, expected, mistakes = self._book(exercise)
        records = [o["data"][MIME] for o in cell.get("outputs", [])
                   if o.get("output_type") in ("display_data", "execute_result") and MIME in o.get("data", {})]
        if len(records) != 1 or not isinstance(records[0], dict) or records[0].get("id") != case_id:
            passed = False
            why = "no result came back from this case (did the cells above it run?)" if not records else \
                "this cell wrote more than one result, or one for another case"
        else:
            try:
                _, got = decode_result(records[0])
                verdict = judge_case(specs[case_id], expected[case_id], got, exercise, mistakes.get(case_id, {}),
                                     own={NOTEBOOK_CELL: (1, 10 ** 9)}, hidden=case_id.startswith("hidden"))
                passed, why = verdict.passed, verdict.why
            except Exception as error:          # a record that does not decode counts for nothing
                passed, why = False, f"the result of this case could not be read ({type(error).__name__})"
        if passed:
            cell.outputs = [new_output("stream", name="stdout", text=f"✓ {case_id}\n")]
        else:
            cell.outputs = [new_output("error", ename="WrongResult", evalue=why.splitlines()[0],
                                       traceback=[f"✗ {case_id}", *why.splitlines()])]
        return cell, resources


# nbgrader's autograde steps, with the kernel in bubblewrap and the judge right after the notebook ran
AUTOGRADE = [SandboxedExecute, JudgeCases, IgnorePattern, ClearMetadataPreprocessor, LimitOutput, SaveAutoGrades,
             AssignLatePenalties, CheckCellMetadata]
