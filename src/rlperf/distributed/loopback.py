"""Two gloo ranks inside one measuring process and one partner process, for timing collectives.

The benchmark registry's ``allreduce`` case times what a distributed run adds to each minibatch:
the sum of the policy's flat gradient over the two ranks, made as a 2-rank training run on one
machine makes it (``group.open_grad_sum``: through shared memory, where the machine allows).
:func:`pair` starts a partner process that sums a tensor of the same size with this side in a
loop, and returns this side (its own store and group object, not torch.distributed's global
default group, so cases of different sizes can follow each other in one process). The partner
is a ``python -c`` subprocess of the same ``rlperf`` (multiprocessing's spawn would re-run the
measuring tool's ``__main__``); it ends when :meth:`Pair.close` or this process's exit
terminates it, or when its exchange fails because this side is gone (at once over gloo, within
~0.1 s of polling through shared memory).
"""

from __future__ import annotations

import atexit
import datetime
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from rlperf.distributed.group import GlooIoThreads, GradSum, open_grad_sum

TIMEOUT = datetime.timedelta(seconds=60)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _grad_sum(port: int, rank: int) -> GradSum:
    """This rank's gradient sum in a 2-rank gloo group, chosen as a training run's
    (``--grad-exchange auto``), the group's I/O threads under SCHED_IDLE as a training run's
    (the default ``--gloo-io idle``, ``group.GlooIoThreads``)."""
    # Each group has its own loop thread; the measuring process makes a group a case.
    before = len(GlooIoThreads.find(at_least=0).tids)
    store = dist.TCPStore("127.0.0.1", port, 2, is_master=rank == 0, timeout=TIMEOUT)
    group = dist.ProcessGroupGloo(store, rank, 2, TIMEOUT)
    GlooIoThreads.find(at_least=before + 1).make_idle()
    grad_sum = open_grad_sum("auto", store, group, rank, 2, TIMEOUT.total_seconds())
    assert grad_sum is not None  # two ranks: shared memory or send and receive
    return grad_sum


def partner_loop(port: int, numel: int) -> None:
    """The partner rank: sum ``numel`` floats with this side until it goes away."""
    torch.set_num_threads(1)
    grad_sum, grad = _grad_sum(port, 1), torch.zeros(numel)
    while True:
        grad_sum(grad)


@dataclass
class Pair:
    """This process's side of a 2-rank gloo group; :meth:`allreduce_` is one gradient sum."""

    grad_sum: GradSum
    partner: subprocess.Popen

    def allreduce_(self, grad: torch.Tensor) -> None:
        """Sum ``grad`` with the partner's (in place), as a distributed run's gradient."""
        self.grad_sum(grad)

    def close(self) -> None:
        self.partner.kill()
        self.partner.wait()


def pair(numel: int) -> Pair:
    """Start a partner rank that sums ``numel`` floats with this side in a loop; return it."""
    port = _free_port()
    src = str(Path(__file__).resolve().parents[2])  # the rlperf this process imported
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    code = f"from rlperf.distributed.loopback import partner_loop; partner_loop({port}, {numel})"
    partner = subprocess.Popen([sys.executable, "-c", code], env=env)
    side = Pair(_grad_sum(port, 0), partner)
    atexit.register(side.close)
    return side
