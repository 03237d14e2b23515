"""The gradient exchange between two ranks, alone: how long each call takes once both ranks
have arrived, for gloo's I/O threads as gloo makes them and under ``SCHED_IDLE``
(``--gloo-io``), for the ring all-reduce against the two-rank send and receive
(``distributed/group.py``: ``GlooIoThreads``, ``PeerSum``), and for the sum through shared
memory (``distributed/shm_sum.py``, ``ShmSum``: the default between ranks of one machine).

    python benchmarks/gloo_exchange.py                       # 1,000 calls each, MLP gradient
    python benchmarks/gloo_exchange.py --numel 4000000 --calls 100
    python benchmarks/gloo_exchange.py --hogs 2 --calls 300  # beside two busy loops

Two spawned ranks, one torch thread each, busy ``--gap-us`` between calls (a minibatch's
forward and backward). Each rank notes when it called and when it returned
(``time.monotonic_ns``, one clock for both processes); the exchange of a call is its return
minus the later of the two arrivals, and the wait is the earlier rank's head start. The
contenders take turns, each in fresh processes. Figures: median, p90, p99 and mean of the
exchange over both ranks' calls, in microseconds.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from rlperf.distributed.group import GlooIoThreads, PeerSum
from rlperf.distributed.shm_sum import ShmSum

CONTENDERS = ("allreduce/normal", "allreduce/idle", "peer/normal", "peer/idle", "shm/idle")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, how: str, port: int, numel: int, calls: int, gap_us: float, out: dict):
    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, 2, is_master=rank == 0)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
    op, io = how.split("/")
    if io == "idle":
        GlooIoThreads.find().make_idle()
    grad = torch.randn(numel)
    if op == "shm":
        grad_sum = ShmSum.open(dist.PrefixStore("shm", store), rank, 2, timeout_s=60)
        if grad_sum is None:
            raise RuntimeError("this machine cannot share the block (shm_sum.supported)")
    else:
        grad_sum = PeerSum(dist.group.WORLD, rank)
    arrive, done = [], []
    for _ in range(calls):
        end = time.perf_counter() + gap_us * 1e-6
        while time.perf_counter() < end:
            pass
        arrive.append(time.monotonic_ns())
        if op in ("peer", "shm"):
            grad_sum(grad)
        else:
            dist.all_reduce(grad)
        done.append(time.monotonic_ns())
        grad.mul_(0.5)  # keep the values finite
    out[rank] = (arrive, done)
    dist.barrier()
    dist.destroy_process_group()


def measure(how: str, numel: int, calls: int, gap_us: float) -> dict[str, float]:
    with mp.Manager() as manager:
        out = manager.dict()
        mp.start_processes(_rank, (how, _free_port(), numel, calls, gap_us, out), nprocs=2,
                           start_method="spawn")  # fmt: skip
        (a0, d0), (a1, d1) = out[0], out[1]
    exchange, wait = [], []
    for i in range(calls):
        last = max(a0[i], a1[i])
        exchange += [(d0[i] - last) / 1e3, (d1[i] - last) / 1e3]
        wait.append(abs(a0[i] - a1[i]) / 1e3)
    exchange.sort()

    def q(p: float) -> float:
        return exchange[int(p * (len(exchange) - 1))]

    return {"median": q(0.5), "p90": q(0.9), "p99": q(0.99),
            "mean": statistics.mean(exchange), "wait_mean": statistics.mean(wait)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--numel", type=int, default=9_220, help="floats (default: the MLP's)")
    parser.add_argument("--calls", type=int, default=1_000)
    parser.add_argument("--gap-us", type=float, default=2_000.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--hogs", type=int, default=0, help="busy loops beside the ranks")
    args = parser.parse_args()
    hows = args.contenders.split(",")
    unknown = [h for h in hows if h not in CONTENDERS]
    if unknown:
        parser.error(f"unknown contender {unknown[0]!r}: choose from {', '.join(CONTENDERS)}")
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}; {args.numel:,} floats, {args.calls} calls, gap "
          f"{args.gap_us:g} us, {args.hogs} busy loops; exchange in us")  # fmt: skip
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)]
    try:
        for r in range(args.rounds):
            for how in hows[r % len(hows) :] + hows[: r % len(hows)]:
                m = measure(how, args.numel, args.calls, args.gap_us)
                print(f"  round {r + 1} {how:<17} median {m['median']:8.1f}  p90 {m['p90']:8.1f}"
                      f"  p99 {m['p99']:8.1f}  mean {m['mean']:8.1f}  (wait mean "
                      f"{m['wait_mean']:.1f})", flush=True)  # fmt: skip
    finally:
        for hog in hogs:
            hog.kill()


if __name__ == "__main__":
    main()
