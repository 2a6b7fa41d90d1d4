"""Data-parallel training over MPI (chapter 14): p processes, one model, gradients of one big batch.

Every process (a *rank*) holds the whole model. Each step, rank r takes its own batch
B_r of n_r target tokens, runs forward and backward, and gets g_r, the gradient of its
mean loss. The gradient of the mean loss over all the ranks' tokens together is

    g = Σ_r n_r · g_r / Σ_r n_r          (the gradient of a sum is the sum of the gradients)

so one all-reduce (every rank sends its numbers, every rank receives the sums) of the
vector [n_r · g_r, n_r, n_r · loss_r] gives every rank the same g, and the same Adam
step then keeps the copies of the model equal. The gradients of all the parameters
travel in ONE flat buffer: one call per step, not one per parameter, because every call
pays a latency however few numbers it carries.

The rest of a run follows from wanting the copies equal and the data different:
rank 0's initial weights are broadcast to all; each step's batches are dealt out by
rank (``shard``); dropout draws a different stream on each rank (``seed_dropout``);
rank 0's clock travels in the same buffer, so that ``--minutes`` stops every rank at
the same step; and a rank that fails stops them all (``abort``), instead of leaving
the others waiting for it in the next all-reduce forever.

MPI comes from mpi4py, an optional dependency like CuPy (``pip install mpi4py mpich``,
or the ``mpi`` extra), and is imported only by ``init_world``. CuPy arrays are copied
to the host for MPI, unless MINITRANSFORMER_CUDA_AWARE_MPI=1 says that the MPI library
reads GPU memory itself (a CUDA-aware build; MPI has no portable way to ask).
"""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

import numpy

from .. import backend
from ..tensor import Tensor
from .options import TrainingError

MPI_HINT = "pip install mpi4py mpich (or the extra: pip install -e '.[mpi]'), then start with mpirun -n 2 ..."
CUDA_AWARE_VARIABLE = "MINITRANSFORMER_CUDA_AWARE_MPI"
# variables the MPI launchers set in every process they start: how many ranks share this machine
LOCAL_SIZE_VARIABLES = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCAL_NRANKS")


@dataclass(frozen=True)
class World:
    """This process's place among the ranks of a run. ``World()`` is a single process (no MPI)."""

    rank: int = 0
    size: int = 1
    comm: Any = None              # mpi4py's COMM_WORLD; None for a single process

    @property
    def is_root(self) -> bool:
        """Rank 0 prints, writes the run folder and checkpoints, and evaluates."""
        return self.rank == 0

    # -- the three collectives a run needs -----------------------------------------------------
    def all_reduce_sum(self, buffer) -> None:
        """Replace ``buffer`` (1-d, NumPy or CuPy) by its element-wise sum over the ranks, on every rank."""
        if self.comm is None:
            return
        from mpi4py import MPI  # noqa: PLC0415 - only under MPI

        if backend.get_device(buffer) == "cpu" or cuda_aware():
            _synchronize(buffer)
            self.comm.Allreduce(MPI.IN_PLACE, buffer, op=MPI.SUM)
            return
        host = backend.asnumpy(buffer)                        # a copy to the host and back
        self.comm.Allreduce(MPI.IN_PLACE, host, op=MPI.SUM)
        buffer[...] = backend.to_device(host, backend.get_device(buffer))

    def broadcast(self, buffer) -> None:
        """Overwrite ``buffer`` on every rank with rank 0's."""
        if self.comm is None:
            return
        if backend.get_device(buffer) == "cpu" or cuda_aware():
            _synchronize(buffer)
            self.comm.Bcast(buffer, root=0)
            return
        host = backend.asnumpy(buffer)
        self.comm.Bcast(host, root=0)
        buffer[...] = backend.to_device(host, backend.get_device(buffer))

    def broadcast_json(self, value: Any = None) -> Any:
        """Rank 0's ``value`` (JSON-ready data: a tokenizer, settings) on every rank, sent as UTF-8 text."""
        if self.comm is None:
            return value
        text = json.dumps(value).encode("utf-8") if self.is_root else b""
        length = numpy.array([len(text)], dtype=numpy.int64)
        self.comm.Bcast(length, root=0)
        data = numpy.frombuffer(text, dtype=numpy.uint8).copy() if self.is_root else \
            numpy.empty(int(length[0]), dtype=numpy.uint8)
        self.comm.Bcast(data, root=0)
        return json.loads(data.tobytes().decode("utf-8"))

    def gather_json(self, value: Any) -> list[Any] | None:
        """Every rank's ``value`` (JSON-ready), in rank order, on rank 0; None on the other ranks."""
        if self.comm is None:
            return [value]
        texts = self.comm.gather(json.dumps(value), root=0)      # strings between our own processes
        return [json.loads(text) for text in texts] if self.is_root else None

    def barrier(self) -> None:
        """Wait until every rank has come here."""
        if self.comm is not None:
            self.comm.Barrier()

    def wait_for_root(self) -> None:
        """Sleep until rank 0 calls ``release_others`` (after its evaluation). MPI's own waits spin on a
        core, and rank 0 may evaluate for minutes: this one polls twenty times a second instead."""
        if self.comm is not None:
            request = self.comm.Ibarrier()
            while not request.Test():
                time.sleep(0.05)

    def release_others(self) -> None:
        """Rank 0 has finished: the ranks in ``wait_for_root`` may exit."""
        if self.comm is not None:
            self.comm.Ibarrier().Wait()

    def abort(self, code: int) -> None:
        """Stop every rank of the run now (MPI_Abort); a single process just returns."""
        if self.comm is not None:
            sys.stdout.flush()
            sys.stderr.flush()
            self.comm.Abort(code)
            os._exit(code)      # MPI_Abort can return while another rank aborts too: this rank ends anyway


SINGLE = World()


def init_world() -> World:
    """Join the ranks started by ``mpirun``/``mpiexec`` (MPI_Init happens at mpi4py's import)."""
    try:
        from mpi4py import MPI  # noqa: PLC0415 - optional, like CuPy
    except ImportError as error:
        raise TrainingError(f"--distributed needs mpi4py and an MPI library ({error}): {MPI_HINT}") from None
    except RuntimeError as error:   # mpi4py is there, but no MPI library it can load
        raise TrainingError(f"--distributed: mpi4py cannot load an MPI library ({error}): {MPI_HINT}") from None
    comm = MPI.COMM_WORLD
    return World(comm.Get_rank(), comm.Get_size(), comm)


def cuda_aware() -> bool:
    """Whether to hand CuPy arrays to MPI directly (the user says the MPI build reads GPU memory)."""
    return os.environ.get(CUDA_AWARE_VARIABLE) == "1"


def _synchronize(buffer) -> None:
    """MPI reads the memory at once: the GPU must have finished writing it (a no-op for NumPy)."""
    if backend.get_device(buffer) != "cpu":
        backend.xp_of(buffer).cuda.get_current_stream().synchronize()


def local_ranks() -> int:
    """How many ranks the launcher started on this machine (1 outside MPI): they share its cores."""
    for name in LOCAL_SIZE_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    return 1


# -- the parameters ---------------------------------------------------------------------------------
def flatten(arrays: Sequence, dtype=None):
    """One contiguous 1-d buffer holding ``arrays`` one after the other (on their device)."""
    xp = backend.xp_of(*arrays)
    return xp.concatenate([xp.ravel(a).astype(dtype or a.dtype, copy=False) for a in arrays])


def broadcast_parameters(world: World, params: Iterable[Tensor]) -> None:
    """Give every rank rank 0's weights: one broadcast of one flat buffer."""
    params = list(params)
    if world.size == 1:
        return
    buffer = flatten([p.data for p in params])
    world.broadcast(buffer)
    offset = 0
    for p in params:
        p.data[...] = buffer[offset:offset + p.data.size].reshape(p.data.shape)
        offset += p.data.size


@dataclass
class StepTotals:
    """What the all-reduce of a step gives every rank."""

    loss: float        # the mean loss over every rank's target tokens
    tokens: int        # the target tokens of the step, all ranks together
    seconds: float     # rank 0's clock: every rank decides --minutes on the same number


def average_gradients(world: World, params: Sequence[Tensor], loss: float, tokens: int,
                      seconds: float = 0.0) -> StepTotals:
    """Replace each ``p.grad`` by the gradient of the mean loss over all ranks' tokens: ONE all-reduce.

    ``loss`` and the gradients are this rank's: the mean over its ``tokens`` target tokens (0 tokens
    and no gradients for a rank without a batch this step). The buffer is

        [ n_r·g_r of every parameter, flattened | n_r | n_r·loss_r | seconds (rank 0 only) ]

    and after its sum over the ranks, g = Σ n_r·g_r / Σ n_r exactly as for one batch of all the tokens.
    A parameter without a gradient here counts as a zero gradient; after the call every one has one.
    """
    xp = backend.xp_of(params[0].data)
    dtype = params[0].data.dtype
    weighted = [p.grad * tokens if p.grad is not None else xp.zeros(p.data.shape, dtype) for p in params]
    tail = xp.asarray([tokens, loss * tokens, seconds if world.is_root else 0.0], dtype=dtype)
    buffer = flatten(weighted + [tail], dtype=dtype)                # (Σ parameter sizes + 3,)
    world.all_reduce_sum(buffer)
    total_tokens, total_loss, root_seconds = (float(x) for x in backend.asnumpy(buffer[-3:]))
    if total_tokens <= 0:
        raise TrainingError("the all-reduce saw no target tokens on any rank")
    offset = 0
    for p in params:
        p.grad = (buffer[offset:offset + p.data.size] / total_tokens).reshape(p.data.shape)
        offset += p.data.size
    return StepTotals(total_loss / total_tokens, int(round(total_tokens)), root_seconds)


# -- the data and the dropout streams -----------------------------------------------------------------
def shard(stream: Iterable[tuple[int, int, Any]], world: World) -> Iterator[tuple[int, int, Any | None]]:
    """Deal a stream of (epoch, position, batch) out to the ranks: ``world.size`` batches per step.

    Yields (epoch, position of the step's last batch, this rank's batch) once per step: rank r gets the
    r-th batch of each group of ``size`` consecutive batches of an epoch, and a resumed run goes on after
    the position. The last group of an epoch may be short; a rank left without a batch gets None (it adds
    nothing to the sums, and no batch is lost).
    """
    group: list[tuple[int, int, Any]] = []
    for item in stream:
        if group and item[0] != group[0][0]:           # the epoch ended with a short group
            yield _deal(group, world)
            group = []
        group.append(item)
        if len(group) == world.size:
            yield _deal(group, world)
            group = []
    if group:
        yield _deal(group, world)


def _deal(group: list[tuple[int, int, Any]], world: World) -> tuple[int, int, Any | None]:
    epoch, last_position = group[0][0], group[-1][1]
    mine = group[world.rank][2] if world.rank < len(group) else None
    return epoch, last_position, mine


def seed_dropout(model, world: World) -> None:
    """A dropout stream of its own on each rank: rank 0 keeps the single-process seeds, so that one
    rank trains exactly as one process; rank r > 0 mixes r into each seed."""
    if world.rank == 0:
        return
    for _, generator in model.named_generators():
        generator.seed(int(numpy.random.SeedSequence([generator.initial_seed, world.rank]).generate_state(1)[0]))
