"""The gradient's sum through shared memory (``distributed/shm_sum.py``), ranks as threads of
this process over a dictionary store: the sum is the reference's bit for bit on every rank
across the reuse of both slot sets, a rank that does not arrive times out, a rank that cannot
open the block makes every rank fall back, and the file is gone once the ranks hold it."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

from rlperf.distributed import shm_sum
from rlperf.distributed.group import open_grad_sum
from rlperf.distributed.shm_sum import PeerLost, ShmSum, supported

pytestmark = pytest.mark.skipif(not supported(), reason="needs /dev/shm on x86-64")

NUMEL = 9_220  # the default MLP's flat gradient


class DictStore:
    """The two calls of a torch.distributed store that ShmSum makes, for threads."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}
        self.changed = threading.Condition()

    def set(self, key: str, value: str) -> None:
        with self.changed:
            self.values[key] = value.encode()
            self.changed.notify_all()

    def get(self, key: str) -> bytes:
        with self.changed:
            assert self.changed.wait_for(lambda: key in self.values, timeout=10), key
            return self.values[key]


def on_ranks(world_size: int, fn: Callable[[int], Any]) -> list[Any]:
    """``fn(rank)`` on one thread per rank; the results in rank order (a thread's error raised)."""
    results: list[Any] = [None] * world_size

    def run(rank: int) -> None:
        try:
            results[rank] = fn(rank)
        except BaseException as e:  # noqa: BLE001 - handed to the test's thread
            results[rank] = e

    threads = [threading.Thread(target=run, args=(r,)) for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


def gradient(rank: int, call: int) -> torch.Tensor:
    return torch.randn(NUMEL, generator=torch.Generator().manual_seed(1000 * rank + call))


@pytest.mark.parametrize("world_size", [2, 3])
def test_every_rank_gets_the_rank_order_sum_bit_for_bit(world_size: int) -> None:
    store = DictStore()

    def rank_main(rank: int) -> list[torch.Tensor]:
        shm = ShmSum.open(store, rank, world_size, timeout_s=10)
        assert shm is not None
        out = []
        for call in range(5):  # both slot sets, each used more than once
            grad = gradient(rank, call)
            shm(grad)
            out.append(grad)
        shm.close()
        return out

    results = on_ranks(world_size, rank_main)
    for call in range(5):
        expected = gradient(0, call) + gradient(1, call)
        for r in range(2, world_size):
            expected = expected + gradient(r, call)
        for got in results:
            assert torch.equal(got[call], expected)


def test_a_rank_that_does_not_arrive_times_out_naming_it() -> None:
    store = DictStore()
    store.set("shm_sum/pid/1", "0")  # a pid this process cannot see: only the timeout applies
    store.set("shm_sum/ok/1", "1")  # rank 1 opened the block, then never sums
    shm = ShmSum.open(store, 0, 2, timeout_s=0.2)
    assert shm is not None
    start = time.perf_counter()
    with pytest.raises(PeerLost, match="rank 1 did not arrive at gradient sum 1 within 0.2 s"):
        shm(torch.ones(8))
    assert time.perf_counter() - start < 2.0
    shm.close()


def test_a_rank_that_exits_is_noticed_before_the_timeout() -> None:
    rank1 = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    store = DictStore()
    store.set("shm_sum/pid/1", str(rank1.pid))
    store.set("shm_sum/ok/1", "1")
    shm = ShmSum.open(store, 0, 2, timeout_s=30)
    assert shm is not None and shm.peer_pids == {1: rank1.pid}
    start = time.perf_counter()
    # Left unreaped, rank 1 stays a zombie: that counts as gone too.
    with pytest.raises(
        PeerLost, match=f"rank 1 \\(pid {rank1.pid}\\) exited before gradient sum 1"
    ):
        shm(torch.ones(8))
    assert time.perf_counter() - start < 5.0
    rank1.wait()
    shm.close()


def test_a_rank_that_cannot_open_the_block_makes_every_rank_fall_back(tmp_path: Any) -> None:
    store = DictStore()
    foreign = tmp_path / "block"  # the path rank 0 names, with another machine's token
    foreign.write_bytes(b"\0" * 16)
    store.set("shm_sum/path", f"{foreign}|{'ab' * 16}")
    store.set("shm_sum/ok/0", "1")
    store.set("shm_sum/pid/0", "0")
    assert ShmSum.open(store, 1, 2, timeout_s=1) is None
    assert store.get("shm_sum/ok/1") == b"0"
    # ...and rank 0, reading rank 1's "0", gives up its block too.
    store = DictStore()
    store.set("shm_sum/ok/1", "0")
    store.set("shm_sum/pid/1", "0")
    assert ShmSum.open(store, 0, 2, timeout_s=1) is None


def test_the_file_is_unlinked_once_every_rank_holds_it() -> None:
    store = DictStore()
    shms = on_ranks(2, lambda rank: ShmSum.open(store, rank, 2, timeout_s=10))
    path = store.get("shm_sum/path").decode().split("|")[0]
    assert path.startswith("/dev/shm/rlperf-grad-")
    assert not os.path.exists(path)
    on_ranks(2, lambda rank: shms[rank](torch.full((4,), float(rank + 1))))
    for shm in shms:
        shm.close()


def test_sums_of_changing_sizes_and_dtypes_follow_each_other() -> None:
    store = DictStore()
    sizes = [4, 9_220, 3, 37_699, 37_699, 5]  # larger ones get a region of their own

    def rank_main(rank: int) -> list[torch.Tensor]:
        shm = ShmSum.open(store, rank, 2, timeout_s=10)
        assert shm is not None
        out = []
        for call, n in enumerate(sizes):
            grad = gradient(rank, call)[:n] if n <= NUMEL else torch.randn(n)
            out.append(grad.clone())
            shm(grad)
            out.append(grad)
        half = torch.full((6,), 0.5 + rank, dtype=torch.float64)
        shm(half)
        out += [half]
        shm.close()
        return out

    rank0, rank1 = on_ranks(2, rank_main)
    for i in range(len(sizes)):
        expected = rank0[2 * i] + rank1[2 * i]
        assert torch.equal(rank0[2 * i + 1], expected) and torch.equal(rank1[2 * i + 1], expected)
    assert torch.equal(rank0[-1], torch.full((6,), 2.0, dtype=torch.float64))


def test_an_overflow_gives_inf_quietly_as_torch_does() -> None:
    store = DictStore()
    shms = on_ranks(2, lambda rank: ShmSum.open(store, rank, 2, timeout_s=10))
    big = torch.finfo(torch.float32).max

    def rank_main(rank: int) -> torch.Tensor:
        grad = torch.tensor([big, -big, 1.0]) if rank == 0 else torch.tensor([big, big, 1.0])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            shms[rank](grad)
        shms[rank].close()
        return grad

    for got in on_ranks(2, rank_main):
        assert torch.equal(got, torch.tensor([float("inf"), 0.0, 2.0]))


@pytest.mark.parametrize(
    ("exchange", "world_size", "expected"),
    [("auto", 2, "sendrecv"), ("auto", 3, "allreduce"), ("sendrecv", 2, "sendrecv"),
     ("allreduce", 2, "allreduce")],
)  # fmt: skip
def test_without_shared_memory_the_ranks_fall_back_together(
    monkeypatch: pytest.MonkeyPatch, exchange: str, world_size: int, expected: str
) -> None:
    monkeypatch.setattr(shm_sum, "supported", lambda: False)  # e.g. not x86-64
    store = DictStore()
    got = on_ranks(world_size, lambda r: open_grad_sum(exchange, store, None, r, world_size, 1.0))
    assert [g.name if g is not None else "allreduce" for g in got] == [expected] * world_size


@pytest.mark.parametrize(("exchange", "world_size"), [("shm", 2), ("sendrecv", 3)])
def test_an_exchange_that_cannot_be_is_refused_on_every_rank(
    monkeypatch: pytest.MonkeyPatch, exchange: str, world_size: int
) -> None:
    monkeypatch.setattr(shm_sum, "supported", lambda: exchange != "shm")
    store = DictStore()

    def rank_main(rank: int) -> str:
        try:
            grad_sum = open_grad_sum(exchange, store, None, rank, world_size, 1.0)
        except ValueError as e:
            return str(e)
        if grad_sum is not None:
            grad_sum.close()
        return "opened"

    says = on_ranks(world_size, rank_main)
    assert all(s.startswith(f"--grad-exchange {exchange}") for s in says), says


def test_a_full_dev_shm_fails_with_a_message_not_sigbus(monkeypatch: pytest.MonkeyPatch) -> None:
    store = DictStore()
    shms = on_ranks(2, lambda rank: ShmSum.open(store, rank, 2, timeout_s=10))

    def full(fd: int, offset: int, length: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(OSError, match=r"no room for the gradient's shared block \(0.1 MiB\)"):
        shms[0](torch.zeros(NUMEL))
    for shm in shms:
        shm.close()
