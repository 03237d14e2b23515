"""The gradient's sum over the ranks of one machine, through shared memory.

Why not gloo: on one machine gloo has only its TCP transport, and its sum of a 9,220-float
gradient is made of thread hand-offs (the caller wakes a gloo worker, which wakes the event loop,
several times a call); each is a wake-up on a core the other rank is using. On the 2-core
development machine the exchange after both ranks arrived cost 0.14-0.35 ms at the median with a
tail of several milliseconds, ~5% of a training run's wall time (docs/distributed.md). Here each
rank copies its gradient into its own slot of a block every rank maps, publishes the call's
number, spins until every other rank has published it, and adds the slots in rank order: no
thread hand-off, no system call, and the same sum on every rank bit for bit. (NCCL does the same
between the GPUs of one machine: a shared-memory transport beside its network one.) The process
group of torch.distributed still does everything else: rendezvous, the initial broadcast, the
loss statistics, checkpoints, and the gradient between machines.

The block: one 64-byte line per rank for its call number (no two ranks write the same cache
line), then ``2 x world_size`` slots of ``numel`` elements (a larger tensor gets a new region
past the old one, so no rank overwrites slots another may still read). Call k uses the slots
of parity ``k % 2``: a rank writes call k + 2's slot only after finishing call k + 1, which
needed every other rank's call k + 1 number, which each publishes only after it finished
reading call k. So two sets of slots are enough and no rank ever acknowledges a read.

Ordering: the slot is written, then the number is stored; a reader loads the number, then the
slot. x86-64 keeps stores in program order and loads in program order (TSO), so a number seen
means its slot is there. Weaker machines (ARM) would need fences that numpy and torch do not
give from Python, so :func:`supported` is False there and the run keeps gloo.

The file lives in ``/dev/shm``, made by rank 0 with a random token; every other rank opens it and
checks the token, so ranks that do not share that directory (other machines, other containers)
find out and every rank falls back together (:meth:`ShmSum.open`). Rank 0 unlinks it as soon as
every rank holds it open, so from then on nothing is left behind, even after SIGKILL.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import platform
import secrets
import tempfile
import time
from typing import Any

import numpy as np
import torch

SHM_DIR = "/dev/shm"
LINE_BYTES = 64  # one cache line per rank's call number
TOKEN_BYTES = 16
# Spin this long for the other ranks before polling with sleeps. The ranks of a run arrive at a
# minibatch's sum within ~0.6 ms of each other on average and within a scheduler tick (4 ms) in
# the tail on the 2-core development machine; a waiting rank has nothing else to run.
SPIN_S = 0.005
POLL_SLEEP_S = 50e-6
PID_LOOK_S = 0.1  # while polling, how often to look whether the awaited rank still runs


def supported() -> bool:
    """Whether this machine can hold the block: Linux's ``/dev/shm`` and x86-64's ordering."""
    return os.path.isdir(SHM_DIR) and platform.machine().lower() in ("x86_64", "amd64")


class PeerLost(RuntimeError):
    """Another rank did not arrive at a sum: it exited, or did not come within the timeout."""


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in (b"Z", b"X")


class ShmSum:
    """``tensor`` summed over the ranks, in place, through a block every rank maps (module
    docstring). Build it with :meth:`open`.

    Attributes:
        name: how the gradient travels, as ``summary.json``'s ``grad_exchange`` says it.
    """

    name = "shm"

    def __init__(
        self, fd: int, rank: int, world_size: int, timeout_s: float,
        peer_pids: dict[int, int] | None = None, spin_s: float = SPIN_S,
    ) -> None:  # fmt: skip
        self.fd, self.rank, self.world_size = fd, rank, world_size
        # The other ranks' process ids, where this process can see them (one pid namespace):
        # a rank that exits is noticed while polling, not only at the timeout.
        self.peer_pids = peer_pids or {}
        self.timeout_s, self.spin_s = timeout_s, spin_s
        self.calls = 0
        self._end = LINE_BYTES * (1 + world_size)  # the token's line, then one per rank
        self._map: mmap.mmap | None = None
        self._seq: np.ndarray | None = None
        self._slots: np.ndarray | None = None
        self._others = [r for r in range(world_size) if r != rank]

    @classmethod
    def open(cls, store: Any, rank: int, world_size: int, timeout_s: float) -> ShmSum | None:
        """Every rank calls this once, together: rank 0 makes the block's file, the others open
        it and check its token. Returns the sum on every rank, or None on every rank when one
        of them could not share the block.

        Args:
            store: the run's ``torch.distributed`` store (each rank sets its keys once).
        """
        fd, token = -1, b""
        if rank == 0:
            path = ""
            if supported():
                fd, path = tempfile.mkstemp(prefix="rlperf-grad-", dir=SHM_DIR)
                token = secrets.token_bytes(TOKEN_BYTES)
                os.write(fd, token)
            store.set("shm_sum/path", f"{path}|{token.hex()}")
        else:
            path, token_hex = store.get("shm_sum/path").decode().split("|")
            if path and supported():
                with contextlib.suppress(OSError):
                    fd = os.open(path, os.O_RDWR)
                if fd >= 0 and os.pread(fd, TOKEN_BYTES, 0) != bytes.fromhex(token_hex):
                    os.close(fd)  # a same-named file of another machine's /dev/shm
                    fd = -1
        store.set(f"shm_sum/pid/{rank}", str(os.getpid()))
        store.set(f"shm_sum/ok/{rank}", "1" if fd >= 0 else "0")
        everyone = all(store.get(f"shm_sum/ok/{r}") == b"1" for r in range(world_size))
        if rank == 0 and path:
            os.unlink(path)  # every rank has it open (or gave up): the file outlives no rank
        if not everyone:
            if fd >= 0:
                os.close(fd)
            return None
        pids = {r: int(store.get(f"shm_sum/pid/{r}")) for r in range(world_size) if r != rank}
        return cls(fd, rank, world_size, timeout_s, {r: p for r, p in pids.items() if _alive(p)})

    def _map_for(self, flat: np.ndarray) -> None:
        """Slots for ``flat`` in a new region past every earlier one: a rank that moves on to
        a larger tensor writes there while another may still read the last call's slots."""
        base = -(-self._end // LINE_BYTES) * LINE_BYTES
        size = base + 2 * self.world_size * flat.nbytes
        if os.fstat(self.fd).st_size < size:
            # Allocated now, not at first touch: a full /dev/shm (Docker's default is 64 MB)
            # then fails here with a message, where a sparse file would kill the rank with
            # SIGBUS at the copy. Every rank asks for the same size: the first one allocates.
            try:
                os.posix_fallocate(self.fd, 0, size)
            except OSError as e:
                raise OSError(
                    e.errno, f"{SHM_DIR} has no room for the gradient's shared block "
                    f"({size / 2**20:.1f} MiB): give it more (docker run --shm-size) or pass "
                    "--grad-exchange allreduce",
                ) from e  # fmt: skip
        self._release_map()
        self._map = mmap.mmap(self.fd, size)
        self._seq = np.ndarray((self.world_size,), dtype=np.int64, buffer=self._map,
                               offset=LINE_BYTES, strides=(LINE_BYTES,))  # fmt: skip
        self._slots = np.ndarray((2, self.world_size, flat.size), dtype=flat.dtype,
                                 buffer=self._map, offset=base)  # fmt: skip
        self._end = size

    def __call__(self, tensor: torch.Tensor) -> None:
        """Sum ``tensor`` (contiguous, on the CPU) over the ranks, in place. Every rank calls it
        with the same number of elements and dtype at the same call (a collective)."""
        # numpy, not torch: its copy and add run on this thread whatever torch's thread count.
        # A torch add of the LSTM's 37,699 floats woke a second OpenMP thread, which found the
        # other core held by the spinning peer and waited a scheduler tick (~4 ms, half the
        # registry case's calls, where the measuring process keeps torch's 2 threads).
        flat = tensor.detach().view(-1).numpy()
        if (self._slots is None or flat.size > self._slots.shape[2]
                or flat.dtype != self._slots.dtype):  # fmt: skip
            self._map_for(flat)
        slots, seq = self._slots, self._seq
        assert slots is not None and seq is not None
        self.calls += 1
        call = self.calls
        mine = slots[call % 2, :, : flat.size]
        mine[self.rank] = flat
        seq[self.rank] = call
        for other in self._others:
            if seq[other] < call:
                self._wait(other, call)
        # An overflow gives inf quietly, as torch's add: the trainer stops on non-finite losses.
        with np.errstate(over="ignore", invalid="ignore"):
            np.add(mine[0], mine[1], out=flat)  # rank order: the same sum on every rank
            for r in range(2, self.world_size):
                np.add(flat, mine[r], out=flat)

    def _wait(self, other: int, call: int) -> None:
        seq = self._seq
        assert seq is not None
        start = time.perf_counter()
        spin_until, give_up = start + self.spin_s, start + self.timeout_s
        look_at = spin_until
        pid = self.peer_pids.get(other)
        while seq[other] < call:
            now = time.perf_counter()
            if now > spin_until:
                if now > give_up:
                    raise PeerLost(
                        f"rank {other} did not arrive at gradient sum {call} within "
                        f"{self.timeout_s:g} s"
                    )
                if pid is not None and now > look_at:
                    if not _alive(pid):
                        raise PeerLost(f"rank {other} (pid {pid}) exited before gradient sum "
                                       f"{call}")  # fmt: skip
                    look_at = now + PID_LOOK_S
                time.sleep(POLL_SLEEP_S)

    def _release_map(self) -> None:
        self._slots = self._seq = None
        if self._map is not None:
            # A view still held (a traceback's frame) keeps the mapping until it goes.
            with contextlib.suppress(BufferError):
                self._map.close()
            self._map = None

    def close(self) -> None:
        """Drop this rank's mapping and descriptor (the block goes with the last rank's)."""
        self._release_map()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
