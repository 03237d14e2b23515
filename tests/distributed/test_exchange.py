"""The gradient average between two gloo ranks, through shared memory (``shm_sum.ShmSum``, the
default on one machine) or one send and one receive each (``group.PeerSum``), must be the
all-reduce's result bit for bit on both ranks; no shared-memory file is left behind."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from ranks import run_ranks

from rlperf.distributed.group import Ranks
from rlperf.distributed.shm_sum import supported

NUMEL = 9_220  # the default MLP's flat gradient


def gradient(rank: int, call: int) -> torch.Tensor:
    return torch.randn(NUMEL, generator=torch.Generator().manual_seed(1000 * rank + call))


def average_three_times(ranks: Ranks) -> dict[str, list[torch.Tensor]]:
    """Three minibatches' gradients through the trainer's path, and through all_reduce."""
    assert ranks.grad_allreduce is not None
    ours, reference = [], []
    for call in range(3):
        grad = gradient(ranks.rank, call)
        ref = grad.clone()
        ranks.grad_allreduce(grad)
        dist.all_reduce(ref, op=dist.ReduceOp.SUM)
        ours.append(grad)
        reference.append(ref * (1.0 / ranks.world_size))
    return {"ours": ours, "reference": reference, "calls": [ranks.clock.calls],
            "exchange": ranks.grad_exchange, "gloo_io": ranks.gloo_io}  # fmt: skip


def test_two_gloo_ranks_average_as_all_reduce_bit_for_bit(tmp_path: Path) -> None:
    rank0, rank1 = run_ranks(average_three_times, 2, tmp_path)
    for call in range(3):
        expected = (gradient(0, call) + gradient(1, call)) * 0.5
        for got in (rank0, rank1):
            assert torch.equal(got["ours"][call], expected)
            assert torch.equal(got["reference"][call], expected)
    assert rank0["calls"] == rank1["calls"] == [3]  # each call went through the clock


EXCHANGES = [
    ("auto", "shm" if supported() else "sendrecv"),
    pytest.param("shm", "shm", marks=pytest.mark.skipif(not supported(), reason="no shm")),
    ("sendrecv", "sendrecv"),
    ("allreduce", "allreduce"),
]


@pytest.mark.parametrize(("option", "exchange"), EXCHANGES)
def test_grad_exchange_picks_the_path_and_both_average_bit_for_bit(
    tmp_path: Path, option: str, exchange: str
) -> None:
    before = set(glob.glob("/dev/shm/rlperf-grad-*"))
    results = run_ranks(average_three_times, 2, tmp_path, join_options={"grad_exchange": option})
    for call in range(3):
        expected = (gradient(0, call) + gradient(1, call)) * 0.5
        assert all(torch.equal(got["ours"][call], expected) for got in results)
    assert [got["exchange"] for got in results] == [exchange, exchange]
    assert set(glob.glob("/dev/shm/rlperf-grad-*")) <= before
    # --gloo-io idle (the default) where the gradient goes through gloo, not with shared memory.
    gloo_io = "idle" if exchange != "shm" and hasattr(os, "SCHED_IDLE") else "normal"
    assert [got["gloo_io"] for got in results] == [gloo_io, gloo_io]


def test_a_single_process_has_no_exchange() -> None:
    assert Ranks().grad_exchange is None
