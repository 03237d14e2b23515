"""What do telemetry and the dashboard cost? Figures quoted in docs/profiling.md come from here.

One long training run of the default CartPole configuration (``rlperf train`` defaults), cut
into blocks of ``--block-iters`` iterations. Each round is three adjacent blocks, one per mode,
in an order rotated from round to round:

- ``plain``: no sampling, no dashboard;
- ``telemetry``: a sample every ``telemetry_interval_s`` (1 s, the default), taken by
  :meth:`Telemetry.sample` in a background thread exactly as the sampler's own thread does;
- ``dashboard``: the same sampling, and the dashboard drawing every frame (ANSI codes and all)
  into ``/dev/null`` through a rich Console that believes it is a terminal.

Separate runs on a shared machine differ by tens of percent from one minute to the next; adjacent
blocks of one run see nearly the same machine, so each round gives a paired figure:
``1 - SPS_telemetry / SPS_plain`` for the sampler and ``1 - SPS_dashboard / SPS_telemetry`` for
the dashboard, shown as median [min-max] over the rounds. Beside them, the direct estimates:
the sampler's CPU time per sample over the interval, and the ``measurement/dashboard`` section's
share of the dashboard blocks' time.

Usage: ``python benchmarks/telemetry_overhead.py [--rounds 30] [--block-iters 25] [--threads N]
[--json out.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from typing import Any

from profiler_overhead import spread  # the sibling script (its folder is on sys.path)
from rich.console import Console

from rlperf.config import Config
from rlperf.ppo.trainer import Trainer
from rlperf.run.dashboard import Dashboard
from rlperf.run.telemetry import Telemetry
from rlperf.timing import names
from rlperf.timing.sections import Profiler

MODES = ("plain", "telemetry", "dashboard")
WARMUP_ITERS = 10
NEVER_S = 1e9  # the sampler's own thread never samples: the gated loop below does
DASHBOARD_PATH = names.path(names.MEASUREMENT, names.DASHBOARD)


class Blocks:
    """A trainer callback: switches the mode at block boundaries and times each block."""

    def __init__(self, rounds: int, block_iters: int, dashboard: Dashboard, gate: threading.Event):
        self.block_iters, self.dashboard, self.gate = block_iters, dashboard, gate
        self.schedule = [m for i in range(rounds) for m in MODES[i % 3 :] + MODES[: i % 3]]
        self.block_s: list[float] = []
        self.dashboard_s: list[float] = []
        self._mode: str | None = None
        self._t0 = 0.0
        self._dash_ns0 = 0

    def __call__(self, trainer: Trainer, row: dict[str, Any]) -> None:
        if self._mode == "dashboard":
            self.dashboard(trainer, row)
        done = trainer.iteration - WARMUP_ITERS
        if done < 0 or done % self.block_iters:
            return
        now, dash_ns = time.perf_counter(), trainer.prof.snapshot_ns().get(DASHBOARD_PATH, 0)
        if self._mode is not None:
            self.block_s.append(now - self._t0)
            if self._mode == "dashboard":
                self.dashboard_s.append((dash_ns - self._dash_ns0) / 1e9)
        block = done // self.block_iters
        self._mode = self.schedule[block] if block < len(self.schedule) else None
        if self._mode is None:
            self.gate.clear()
            return
        (self.gate.set if self._mode != "plain" else self.gate.clear)()
        self._t0, self._dash_ns0 = time.perf_counter(), dash_ns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="rounds of three blocks")
    parser.add_argument("--block-iters", type=int, default=25, help="iterations per block")
    parser.add_argument("--threads", type=int, help="torch threads (default: the config's)")
    parser.add_argument(
        "--refresh-s",
        type=float,
        help="least seconds between two redraws (default: the Dashboard's)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args()

    cfg = Config()
    cfg.run.progress = False
    if args.threads is not None:
        cfg.run.threads = args.threads
    iterations = WARMUP_ITERS + 3 * args.rounds * args.block_iters
    cfg.run.total_steps = iterations * cfg.batch_size
    trainer = Trainer(cfg, profiler=Profiler())
    interval_s = cfg.run.telemetry_interval_s
    gate, stop = threading.Event(), threading.Event()
    with open(os.devnull, "w") as null, Telemetry(NEVER_S) as telemetry:

        def sample_when_on() -> None:
            while not stop.wait(interval_s):
                if gate.is_set():
                    telemetry.sample()

        sampler = threading.Thread(target=sample_when_on, daemon=True)
        sampler.start()
        console = Console(file=null, force_terminal=True, width=120, height=50)
        refresh = {} if args.refresh_s is None else {"refresh_s": args.refresh_s}
        with Dashboard.for_trainer(trainer, telemetry, console=console, **refresh) as dashboard:
            blocks = Blocks(args.rounds, args.block_iters, dashboard, gate)
            trainer.callbacks.append(blocks)
            trainer.train()
        stop.set()
        sampler.join()
        sample_cpu_ms = telemetry.summary_fields()["telemetry"]["sample_cpu_ms_mean"]

    steps = args.block_iters * cfg.batch_size
    sps = {
        m: [steps / s for s, b in zip(blocks.block_s, blocks.schedule, strict=True) if b == m]
        for m in MODES
    }
    telemetry_cost = [
        100 * (1 - t / p) for p, t in zip(sps["plain"], sps["telemetry"], strict=True)
    ]
    dashboard_cost = [
        100 * (1 - d / t) for t, d in zip(sps["telemetry"], sps["dashboard"], strict=True)
    ]
    dash_blocks = [
        s for s, b in zip(blocks.block_s, blocks.schedule, strict=True) if b == "dashboard"
    ]
    dashboard_share = [100 * d / s for d, s in zip(blocks.dashboard_s, dash_blocks, strict=True)]
    print(
        f"default CartPole config ({cfg.run.threads} threads), {args.rounds} rounds of three "
        f"blocks of {args.block_iters} iterations ({steps:,} steps) in one run; dashboard "
        f"redrawn at most every {dashboard.refresh_s:g} s"
    )
    for mode in MODES:
        print(f"  {mode:<10} {spread(sps[mode], '{:,.0f}')} SPS")
    print(f"  telemetry, paired SPS drop:          {spread(telemetry_cost, '{:+.2f}')} %")
    print(
        f"  telemetry, sampler CPU / interval:   {sample_cpu_ms:.2f} ms / {interval_s:g} s = "
        f"{100 * sample_cpu_ms / 1e3 / interval_s:.3f} %"
    )
    print(f"  dashboard, paired SPS drop:          {spread(dashboard_cost, '{:+.2f}')} %")
    print(f"  dashboard, its section / block time: {spread(dashboard_share, '{:.3f}')} %")
    if args.json:
        figures = {"sps": sps, "telemetry_cost_pct": telemetry_cost,
                   "dashboard_cost_pct": dashboard_cost, "dashboard_share_pct": dashboard_share,
                   "sample_cpu_ms": sample_cpu_ms, "threads": cfg.run.threads,
                   "block_iters": args.block_iters,
                   "refresh_s": dashboard.refresh_s}  # fmt: skip
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)


if __name__ == "__main__":
    main()
