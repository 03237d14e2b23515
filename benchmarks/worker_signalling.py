"""How should the trainer and its env workers wake each other? Round trips per second, measured.

One parent and ``--workers`` worker processes (forkserver) play the rollout's rhythm: the parent
computes for ``parent_us`` (the policy's forward), signals every worker, each worker computes
for ``work_us`` (its env step) and signals back, the parent waits for all. The work is a busy
loop, like an env step or a forward pass: it needs a core. Schemes:

- ``spin``: both sides poll sequence numbers in shared memory (PufferLib's Multiprocessing).
- ``semaphore``: POSIX semaphores (futex waits): one per worker for commands, one for results.
- ``pipe``: one byte per command and per result; the parent blocks in
  ``multiprocessing.connection.wait`` on the result pipes and the process sentinels.
- ``hybrid-N``: spin N microseconds on the sequence numbers, then block on the pipe (rlperf's
  workers, ``envs/workers/``).

Interleaved rounds, median [min-max] of round trips per second per scheme. Run:

    python benchmarks/worker_signalling.py --rounds 5 --seconds 0.5
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time
from multiprocessing.connection import wait

import numpy as np

SCHEMES = ("spin", "semaphore", "pipe", "hybrid-20", "hybrid-100")


def busy(us: float) -> None:
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass


def spin_of(scheme: str) -> float:
    if scheme == "spin":
        return float("inf")
    return float(scheme.split("-")[1]) * 1e-6 if scheme.startswith("hybrid") else 0.0


def worker(index, scheme, work_us, shared, cmd_r, res_w, cmd_sem, res_sem):  # noqa: ANN001
    seqs = np.frombuffer(shared, dtype=np.int64).reshape(2, -1)  # [command seq, done seq]
    spin_s, seq = spin_of(scheme), 0
    while True:
        seq += 1
        if scheme == "semaphore":
            cmd_sem.acquire()
        else:
            deadline = time.perf_counter() + spin_s
            while seqs[0, index] < seq and time.perf_counter() < deadline:
                pass
            if scheme != "spin" and not os.read(cmd_r.fileno(), 1):
                return
            while seqs[0, index] < seq:  # spin only
                pass
        if seqs[0, index] < 0:
            return
        busy(work_us)
        if scheme == "semaphore":
            seqs[1, index] = seq
            res_sem.release()
        else:
            seqs[1, index] = seq  # before the byte: whoever wakes on it sees the number
            if scheme != "spin":
                os.write(res_w.fileno(), b"d")


def run_scheme(
    scheme: str, workers: int, work_us: float, parent_us: float, seconds: float
) -> float:
    ctx = mp.get_context("forkserver")
    shared = ctx.RawArray("b", 16 * workers)
    seqs = np.frombuffer(shared, dtype=np.int64).reshape(2, -1)
    pipes = [(ctx.Pipe(duplex=False), ctx.Pipe(duplex=False)) for _ in range(workers)]
    cmd_sems = [ctx.Semaphore(0) for _ in range(workers)]
    res_sem = ctx.Semaphore(0)
    procs = []
    for i, ((cmd_r, _), (_, res_w)) in enumerate(pipes):
        p = ctx.Process(target=worker, args=(i, scheme, work_us, shared, cmd_r, res_w,
                                              cmd_sems[i], res_sem), daemon=True)  # fmt: skip
        p.start()
        procs.append(p)
    spin_s, seq = spin_of(scheme), 0

    def trip() -> None:
        nonlocal seq
        busy(parent_us)
        seq += 1
        for i in range(workers):
            if scheme == "semaphore":
                seqs[0, i] = seq
                cmd_sems[i].release()
            else:
                seqs[0, i] = seq
                if scheme != "spin":
                    os.write(pipes[i][0][1].fileno(), b"c")
        if scheme == "semaphore":
            for _ in range(workers):
                res_sem.acquire()
            return
        pending = set(range(workers))
        deadline = time.perf_counter() + spin_s
        while pending and time.perf_counter() < deadline:
            for i in [i for i in pending if seqs[1, i] >= seq]:
                pending.discard(i)
                if scheme != "spin":
                    os.read(pipes[i][1][0].fileno(), 1)
        while pending:
            objs = {pipes[i][1][0]: i for i in pending}
            objs.update({procs[i].sentinel: i for i in pending})
            for obj in wait(list(objs)):
                i = objs[obj]
                if i in pending:
                    os.read(pipes[i][1][0].fileno(), 1)
                    pending.discard(i)

    for _ in range(20):  # the workers are up and warm before the clock starts
        trip()
    trips, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        trip()
        trips += 1
    rate = trips / (time.perf_counter() - start)
    seqs[0, :] = -1
    for i in range(workers):
        cmd_sems[i].release()
        pipes[i][0][1].close()
    for p in procs:
        p.join(1)
        if p.is_alive():
            p.kill()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=0.5)
    parser.add_argument("--work-us", type=float, nargs="+", default=[0.0, 100.0, 500.0])
    parser.add_argument("--parent-us", type=float, nargs="+", default=[0.0, 100.0])
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores, {args.workers} workers, {args.rounds} interleaved rounds of "
          f"{args.seconds}s; round trips/s median [min-max]")  # fmt: skip
    for work_us in args.work_us:
        for parent_us in args.parent_us:
            rates: dict[str, list[float]] = {s: [] for s in SCHEMES}
            for _ in range(args.rounds):
                for scheme in SCHEMES:
                    rates[scheme].append(
                        run_scheme(scheme, args.workers, work_us, parent_us, args.seconds)
                    )
            cells = "  ".join(
                f"{s} {statistics.median(r):,.0f} [{min(r):,.0f}-{max(r):,.0f}]"
                for s, r in rates.items()
            )
            print(f"worker {work_us:.0f}us parent {parent_us:.0f}us: {cells}")


if __name__ == "__main__":
    main()
