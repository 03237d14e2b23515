"""The ranks of a training run and the few collectives the trainer needs, in one object.

A run on N processes (``rlperf train --nproc N`` or ``torchrun``) builds one :class:`Ranks` from
the environment variables torch.distributed's launcher sets (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT``) and hands it to the trainer. A single process
gets :data:`SINGLE`, whose collectives do nothing, so the trainer never branches on the world
size. What the trainer asks of it, and why each is collective:

- :meth:`Ranks.broadcast_module`: every rank starts from rank 0's initial weights.
- :attr:`Ranks.grad_allreduce`: averages the flat gradient of each minibatch in place (one sum,
  before clipping: through shared memory between gloo ranks of one machine (``shm_sum.py``),
  by one send and one receive each between two gloo ranks on two machines, an all-reduce
  otherwise; the same sum in each case); None for a single process, so its update path is
  unchanged.
- :meth:`Ranks.mean`: the iteration's loss statistics averaged over ranks. Every rank then logs
  the same figures and takes the same non-finite-loss decision (NaN propagates through the sum),
  so no rank stops while the others wait in the next all-reduce.
- :meth:`Ranks.gather` / :meth:`Ranks.broadcast_object`: per-rank checkpoint parts to rank 0,
  the resumed checkpoint from rank 0 (over a gloo group, whatever the training backend).

The process group's timeout is ours (``--dist-timeout-s``, 60 s by default), not the 10-minute
default: a rank that hangs stops the run within it.
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from rlperf.distributed.shm_sum import ShmSum

BACKENDS = ("auto", "gloo", "nccl")
GLOO_IO_PRIORITIES = ("idle", "normal")
# auto: gloo ranks of one machine sum the gradient in shared memory (ShmSum), two gloo ranks
# on two machines by send and receive (PeerSum), others all-reduce (open_grad_sum).
GRAD_EXCHANGES = ("auto", "shm", "sendrecv", "allreduce")
# The name gloo's TCP transport gives the thread that runs its epoll loop (one per device).
GLOO_IO_THREAD = "gloo_tcp_loop"
DEFAULT_TIMEOUT_S = 60.0
# Rank r seeds its environments, sampling and shuffling with seed + r * RANK_SEED_STRIDE: far
# enough apart that runs with neighbouring seeds do not share a rank's streams.
RANK_SEED_STRIDE = 100_003


class CollectiveError(RuntimeError):
    """A collective failed: a peer died, closed its connection or did not arrive in time. On a
    rank that did not fail first this is a consequence of another rank's failure, not its cause
    (gloo raises a plain RuntimeError for it, hence this type)."""


class AllreduceClock:
    """When this rank called each gradient all-reduce and when it returned, for the last
    ``capacity`` calls (``time.monotonic_ns``: one clock for every process of a machine, so the
    ranks' arrivals can be compared afterwards; ``profiling/rank_spread.py`` splits
    ``update/allreduce`` into waiting for the last rank and the exchange itself).

    Two preallocated int64 rings: recording is two stores a minibatch, nothing grows.
    """

    def __init__(self, capacity: int = 8192) -> None:
        self.arrive_ns = np.zeros(capacity, dtype=np.int64)
        self.done_ns = np.zeros(capacity, dtype=np.int64)
        self.calls = 0

    def record(self, arrive_ns: int, done_ns: int) -> None:
        i = self.calls % len(self.arrive_ns)
        self.arrive_ns[i], self.done_ns[i] = arrive_ns, done_ns
        self.calls += 1

    def window(self) -> dict[str, Any]:
        """The recorded calls in call order: ``{"first_call", "arrive_ns", "done_ns"}`` (lists;
        ``first_call`` is the index of the window's first call since the start)."""
        n = len(self.arrive_ns)
        order = np.arange(max(self.calls - n, 0), self.calls) % n
        return {"first_call": max(self.calls - n, 0), "arrive_ns": self.arrive_ns[order].tolist(),
                "done_ns": self.done_ns[order].tolist()}  # fmt: skip


class GlooIoThreads:
    """This process's gloo I/O threads (``gloo_tcp_loop``, one per process group) under
    ``SCHED_IDLE``, put back to the normal policy if that starves them.

    Why idle: gloo's event loop spins while another of the rank's threads holds a connection's
    lock (its handler try-locks, returns, and the level-triggered epoll fires again at once).
    When the ranks fill the cores, two such spinners can hold both while the peer's loop thread,
    which would end the wait, sits in the run queue until the scheduler's next tick: a
    9,220-float all-reduce then takes ~4 ms instead of ~0.4 ms, one call in ten on the 2-core
    development machine (``perf sched``; docs/distributed.md). Under ``SCHED_IDLE`` any woken
    thread preempts a spinning loop thread at once.

    Why the guard: on a machine whose cores are all busy with *other* work an idle-class thread
    waits for a free core, and each exchange takes tens of milliseconds. :meth:`check` looks at
    the last :attr:`WINDOW` all-reduces every :attr:`WINDOW` calls; if a quarter of them took
    longer than :meth:`starved_ns` from call to return it restores the normal policy and says
    so once. (The quarter rather than the median: a rank that arrives first also counts its
    wait for the others, so only its faster calls are the exchange alone. A rank that always
    arrives more than that ahead of the others is taken for starved too, and says it may be
    that; the normal policy costs it only the tail this class removes.)
    """

    WINDOW = 64
    STARVED_NS = 5_000_000
    # A large gradient takes its own time: 2.3 ns a float with both ranks idle on the 2-core
    # machine at 1M and 4M floats (docs/distributed.md); twice that, so only starving counts.
    STARVED_NS_PER_FLOAT = 5.0

    # gloo starts its loop thread with the group, and the thread names itself once it runs: on a
    # busy machine a listing made right after the group was created can still see it unnamed.
    FIND_TIMEOUT_S = 1.0

    def __init__(self, tids: list[int]) -> None:
        self.tids = tids
        self.idle = False

    @classmethod
    def find(cls, at_least: int = 1) -> GlooIoThreads:
        """This process's gloo I/O threads, waiting up to :attr:`FIND_TIMEOUT_S` for
        ``at_least`` of them to carry their name (none off Linux)."""
        if not os.path.isdir("/proc/self/task"):
            return cls([])
        deadline = time.monotonic() + cls.FIND_TIMEOUT_S
        while len(tids := cls._named()) < at_least and time.monotonic() < deadline:
            time.sleep(0.005)
        return cls(tids)

    @staticmethod
    def _named() -> list[int]:
        tids = []
        for tid in os.listdir("/proc/self/task"):
            with contextlib.suppress(FileNotFoundError):  # a thread that just ended
                with open(f"/proc/self/task/{tid}/comm") as f:
                    if f.read().strip() == GLOO_IO_THREAD:
                        tids.append(int(tid))
        return tids

    def make_idle(self) -> GlooIoThreads:
        """Move the threads to ``SCHED_IDLE`` (a no-op without it); returns self."""
        if hasattr(os, "SCHED_IDLE") and self.tids:
            self._set(os.SCHED_IDLE)
            self.idle = True
        return self

    @classmethod
    def starved_ns(cls, numel: int) -> float:
        """How long an all-reduce of ``numel`` floats may take before it counts as starved."""
        return cls.STARVED_NS + cls.STARVED_NS_PER_FLOAT * numel

    def check(self, clock: AllreduceClock, numel: int = 0) -> bool:
        """Every :attr:`WINDOW` calls of ``clock``: restore the normal policy if the threads
        starve (see the class docstring). Returns whether it did so now."""
        if not self.idle or clock.calls % self.WINDOW or clock.calls == 0:
            return False
        n = len(clock.arrive_ns)
        last = np.arange(clock.calls - self.WINDOW, clock.calls) % n
        took_ns = clock.done_ns[last] - clock.arrive_ns[last]
        limit_ns = self.starved_ns(numel)
        if np.percentile(took_ns, 25) <= limit_ns:
            return False
        self.idle = False
        try:
            self._set(os.SCHED_OTHER)
            done = "back to the normal policy"
        except PermissionError:  # leaving SCHED_IDLE needs CAP_SYS_NICE or RLIMIT_NICE
            done = "this process may not restore the normal policy"
        print(
            f"rlperf: gloo's I/O threads look starved under SCHED_IDLE (a quarter of the last "
            f"{self.WINDOW} all-reduces took over {limit_ns / 1e6:.3g} ms from call to return; "
            f"a rank that always waits for a slower one looks the same): {done}; on a machine "
            "busy with other work give --gloo-io normal",
            file=sys.stderr, flush=True,
        )  # fmt: skip
        return True

    def _set(self, policy: int) -> None:
        for tid in self.tids:
            with contextlib.suppress(ProcessLookupError):  # the group was destroyed
                os.sched_setscheduler(tid, policy, os.sched_param(0))


class PeerSum:
    """The sum of a tensor over exactly two gloo ranks, in place: send it to the other rank,
    receive the other's into a buffer kept between calls, add.

    The same sum as ``all_reduce`` (and on both ranks bit for bit: IEEE addition commutes), in
    one message each way. gloo's ring all-reduce passes the tensor between the calling thread, a
    gloo worker and the event loop several times a call; the exchange after both ranks arrived
    took a median 0.22-0.32 ms this way against 0.54-0.60 ms as an all-reduce on the 2-core
    development machine (docs/distributed.md). :func:`open_grad_sum` takes it for two ranks that
    cannot share memory (two machines); ranks of one machine sum through :class:`ShmSum`.
    """

    name = "sendrecv"

    def __init__(self, group: Any, rank: int) -> None:
        self.group, self.peer = group, 1 - rank
        self._buffer: torch.Tensor | None = None

    def __call__(self, tensor: torch.Tensor) -> None:
        if self._buffer is None or self._buffer.shape != tensor.shape:
            self._buffer = torch.empty_like(tensor)
        works = [
            self.group.send([tensor], self.peer, 0),
            self.group.recv([self._buffer], self.peer, 0),
        ]
        for work in works:
            work.wait()
        tensor.add_(self._buffer)

    def close(self) -> None:
        """Nothing to release: the process group's connections go with the group."""


GradSum = ShmSum | PeerSum


def grad_exchange_problem(exchange: str, backend: str, world_size: int) -> str | None:
    """Why ``--grad-exchange exchange`` cannot be for ``world_size`` ranks on ``backend``
    (one line), or None. The launcher asks before any rank starts; :func:`open_grad_sum`
    asks again for ranks that torchrun started."""
    if exchange in ("shm", "sendrecv") and backend != "gloo":
        return f"--grad-exchange {exchange} is for gloo ranks; nccl all-reduces"
    if exchange == "sendrecv" and world_size != 2:
        return f"--grad-exchange sendrecv needs exactly 2 ranks, got {world_size}"
    return None


def open_grad_sum(exchange: str, store: Any, group: Any, rank: int, world_size: int,
                  timeout_s: float) -> GradSum | None:  # fmt: skip
    """How gloo ranks sum the flat gradient (``--grad-exchange``); None: ``all_reduce``.

    Every rank calls it together. ``auto`` takes shared memory where every rank can map the
    same block (:meth:`ShmSum.open`), else one send and one receive for exactly two ranks, else
    the all-reduce; ``shm`` and ``sendrecv`` insist on theirs (ValueError where it cannot be).
    """
    if exchange in ("auto", "shm"):
        shm = ShmSum.open(store, rank, world_size, timeout_s)
        if shm is not None:
            return shm
        if exchange == "shm":
            raise ValueError("--grad-exchange shm: the ranks cannot map one block of shared "
                             "memory (several machines, or no /dev/shm on x86-64)")  # fmt: skip
    problem = grad_exchange_problem(exchange, "gloo", world_size)
    if problem:
        raise ValueError(problem)
    if exchange in ("auto", "sendrecv") and world_size == 2:
        return PeerSum(group, rank)
    return None


@contextlib.contextmanager
def _collective() -> Iterator[None]:
    try:
        yield
    except RuntimeError as e:  # DistError is one; gloo's transport errors are plain ones
        raise CollectiveError(str(e)) from e


def launched_rank() -> bool:
    """Whether this process is a rank started by torch.distributed's launcher (torchrun,
    ``rlperf train --nproc``): the launcher sets ``WORLD_SIZE`` and ``RANK``."""
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def resolve_backend(backend: str, device: str) -> str:
    """gloo on the CPU, nccl on CUDA for ``auto``; the given backend otherwise."""
    if backend == "auto":
        return "nccl" if device.startswith("cuda") else "gloo"
    return backend


@dataclass
class Ranks:
    """This process's place in the run and its collectives (see the module docstring).

    Attributes:
        rank: global rank, 0 .. world_size - 1 (rank 0 writes the run directory).
        world_size: number of processes training together.
        local_rank: rank on this machine (its CUDA device with nccl).
        backend: ``gloo`` or ``nccl`` (``none`` for a single process).
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str = "none"
    _objects: Any = None  # a gloo process group for Python objects (checkpoint parts)
    clock: AllreduceClock = field(default_factory=lambda: AllreduceClock(capacity=1))
    io_threads: GlooIoThreads | None = None
    grad_sum: GradSum | None = None  # gloo: the gradient's sum when not all_reduce (join)

    @property
    def is_main(self) -> bool:
        """Rank 0: writes the run directory, the progress line and the checkpoints."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def gloo_io(self) -> str | None:
        """This rank's gloo I/O threads now: ``idle``, ``normal`` (as gloo made them, or put
        back by the starvation guard: ``normal (restored)``); None for a single process."""
        if not self.distributed:
            return None
        if self.io_threads is None or not self.io_threads.tids:
            return "normal"
        return "idle" if self.io_threads.idle else "normal (restored)"

    @property
    def grad_exchange(self) -> str | None:
        """How the gradient's sum travels: ``shm`` (:class:`ShmSum`), ``sendrecv``
        (:class:`PeerSum`) or ``allreduce``; None for a single process."""
        if not self.distributed:
            return None
        return self.grad_sum.name if self.grad_sum is not None else "allreduce"

    def seed(self, seed: int) -> int:
        """This rank's seed for the run's ``seed`` (rank 0 keeps it)."""
        return seed + RANK_SEED_STRIDE * self.rank

    # -- the collectives -----------------------------------------------------------------
    def broadcast_module(self, module: torch.nn.Module) -> None:
        """Overwrite ``module``'s parameters and buffers with rank 0's (in place)."""
        if not self.distributed:
            return
        with torch.no_grad():
            for t in itertools.chain(module.parameters(), module.buffers()):
                with _collective():
                    dist.broadcast(t.data, src=0)

    @property
    def grad_allreduce(self) -> Callable[[torch.Tensor], None] | None:
        """Average a flat gradient over the ranks in place; None for a single process."""
        return self._average_ if self.distributed else None

    def _average_(self, grad: torch.Tensor) -> None:
        # SUM then one scale: gloo has no AVG op; the scale is one fused kernel.
        arrive_ns = time.monotonic_ns()
        with _collective():
            if self.grad_sum is not None:
                self.grad_sum(grad)
            else:
                dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        self.clock.record(arrive_ns, time.monotonic_ns())
        if self.io_threads is not None:  # not with the shared-memory sum (join)
            self.io_threads.check(self.clock, grad.numel())
        grad.mul_(1.0 / self.world_size)

    def mean(self, values: torch.Tensor) -> torch.Tensor:
        """``values`` averaged over the ranks (a new tensor; ``values`` itself for one rank)."""
        if not self.distributed:
            return values
        total = values.clone()
        with _collective():
            dist.all_reduce(total, op=dist.ReduceOp.SUM)
        return total / self.world_size

    def sum(self, value: float) -> float:
        """``value`` summed over the ranks (a float on every rank)."""
        if not self.distributed:
            return value
        total = torch.tensor([value], dtype=torch.float64)
        with _collective():
            dist.all_reduce(total, op=dist.ReduceOp.SUM, group=self._objects)
        return float(total.item())

    def gather(self, obj: Any) -> list[Any] | None:
        """Every rank's ``obj`` on rank 0 (in rank order), None on the others."""
        if not self.distributed:
            return [obj]
        out = [None] * self.world_size if self.is_main else None
        with _collective():
            dist.gather_object(obj, out, dst=0, group=self._objects)
        return out

    def broadcast_object(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank (the others' argument is ignored)."""
        if not self.distributed:
            return obj
        box = [obj if self.is_main else None]
        with _collective():
            dist.broadcast_object_list(box, src=0, group=self._objects)
        return box[0]

    def close(self) -> None:
        """Leave the process group (a no-op for a single process)."""
        if self.grad_sum is not None:
            self.grad_sum.close()
        if self.distributed and dist.is_initialized():
            dist.destroy_process_group()


SINGLE = Ranks()


def join(
    backend: str,
    device: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    gloo_io: str = "idle",
    grad_exchange: str = "auto",
) -> Ranks:
    """Join the process group the launcher described in the environment; :data:`SINGLE`
    outside a launched rank or in a world of one.

    Args:
        backend: ``auto``, ``gloo`` or ``nccl``.
        device: the run's device (``cpu``/``cuda``): picks ``auto``'s backend; with CUDA each
            local rank takes its own GPU.
        timeout_s: how long a collective may wait for the other ranks before it fails.
        gloo_io: ``idle`` puts gloo's I/O threads under ``SCHED_IDLE`` while that does not
            starve them (:class:`GlooIoThreads`), where the gradient goes through gloo;
            ``normal`` leaves them as gloo made them.
        grad_exchange: how gloo ranks sum the gradient (:func:`open_grad_sum`): ``auto``,
            ``shm``, ``sendrecv`` or ``allreduce``.
    """
    if not launched_rank() or int(os.environ["WORLD_SIZE"]) == 1:
        return SINGLE
    backend = resolve_backend(backend, device)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device.startswith("cuda"):
        torch.cuda.set_device(local_rank)
    timeout = datetime.timedelta(seconds=timeout_s)
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store = _attempt_store(rank, world_size, timeout)
    dist.init_process_group(
        backend, store=store, rank=rank, world_size=world_size, timeout=timeout
    )  # fmt: skip
    objects = dist.new_group(backend="gloo", timeout=timeout) if backend != "gloo" else None
    grad_sum = None
    if backend == "gloo":
        grad_sum = open_grad_sum(grad_exchange, dist.PrefixStore("rlperf/grad", store),
                                 dist.group.WORLD, rank, world_size, timeout_s)  # fmt: skip
    # SCHED_IDLE cuts the tail of a gradient exchange that goes through gloo every minibatch.
    # Through shared memory gloo carries only a few calls an iteration, and without the
    # gradient's calls the starvation guard would never look: a busy machine could starve them.
    # Measured level with shm: normal over idle 1.01x paired SPS (docs/distributed.md).
    idle = gloo_io == "idle" and not isinstance(grad_sum, ShmSum)
    io_threads = GlooIoThreads.find().make_idle() if idle else None
    return Ranks(dist.get_rank(), dist.get_world_size(), local_rank, backend, objects,
                 AllreduceClock(), io_threads, grad_sum)  # fmt: skip


def _attempt_store(rank: int, world_size: int, timeout: datetime.timedelta) -> dist.Store:
    """The rendezvous store at ``MASTER_ADDR:MASTER_PORT`` (``env://``'s), its keys prefixed
    with the elastic restart count: after a restart the launcher's store still holds the failed
    attempt's keys, and gloo would connect to the dead ranks' addresses."""
    agent_hosts_it = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world_size,
        is_master=rank == 0 and not agent_hosts_it, timeout=timeout,
    )  # fmt: skip
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    return dist.PrefixStore(f"rlperf/attempt{attempt}", store)


def is_collective_error(error: BaseException) -> bool:
    """Whether ``error`` came out of a collective (see :class:`CollectiveError`)."""
    return isinstance(error, (CollectiveError, dist.DistError))
