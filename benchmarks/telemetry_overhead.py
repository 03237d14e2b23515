"""What do telemetry and the dashboard cost? Figures quoted in docs/profiling.md come from here.

The default CartPole configuration (``rlperf train`` defaults) is trained, each run on a fresh
trainer in this process, in three ways per round, the order rotated from round to round:

- ``plain``: no telemetry, no dashboard;
- ``telemetry``: the sampler at the default 1 s interval (``rlperf train``'s default);
- ``dashboard``: telemetry and the dashboard, drawing every frame (ANSI codes and all) into
  ``/dev/null`` through a rich Console that believes it is a terminal.

SPS is the trainer's cumulative figure after warm-up. Overheads are paired within a round
(``1 - SPS_telemetry / SPS_plain``; the dashboard's ``1 - SPS_dashboard / SPS_telemetry``) and
shown as median [min-max]. The direct estimates beside them: the sampler's CPU time per sample
over the interval, and the ``measurement/dashboard`` section's share of the wall time.

Usage: ``python benchmarks/telemetry_overhead.py [--rounds 5] [--steps 200000] [--threads N]
[--json out.json]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from contextlib import ExitStack
from typing import Any

from rich.console import Console

from rlperf.config import Config
from rlperf.ppo.trainer import Trainer
from rlperf.run.dashboard import Dashboard
from rlperf.run.telemetry import Telemetry
from rlperf.timing.sections import Profiler

MODES = ("plain", "telemetry", "dashboard")


def train_once(mode: str, steps: int, threads: int | None) -> dict[str, float]:
    """SPS of one default-config run, with the sampler's and the dashboard's own costs."""
    cfg = Config()
    cfg.run.total_steps, cfg.run.progress = steps, False
    if threads is not None:
        cfg.run.threads = threads
    prof = Profiler()
    trainer = Trainer(cfg, profiler=prof)
    telemetry = Telemetry(cfg.run.telemetry_interval_s) if mode != "plain" else None
    with open(os.devnull, "w") as null, ExitStack() as stack:
        if telemetry is not None:
            stack.enter_context(telemetry)
        if mode == "dashboard":
            console = Console(file=null, force_terminal=True, width=120, height=50)
            dashboard = stack.enter_context(
                Dashboard.for_trainer(trainer, telemetry, console=console)
            )
            trainer.callbacks.append(dashboard)
        summary = trainer.train()
    figures = {"sps": summary["sps_cumulative"], "wall_s": summary["wall_s"]}
    if telemetry is not None:
        block = telemetry.summary_fields()["telemetry"]
        figures["sample_share"] = block["sample_cpu_ms_mean"] / 1e3 / telemetry.interval_s
    figures["dashboard_share"] = (
        prof.snapshot_ns().get("measurement/dashboard", 0) / 1e9 / (summary["wall_s"])
    )
    return figures


def spread(values: list[float], fmt: str) -> str:
    return (
        f"{fmt.format(statistics.median(values))} "
        f"[{fmt.format(min(values))} to {fmt.format(max(values))}]"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the three runs")
    parser.add_argument("--steps", type=int, default=200_000, help="steps per run")
    parser.add_argument("--threads", type=int, help="torch threads (default: the config's)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args()

    train_once("plain", Config().batch_size * 4, args.threads)  # burn-in
    runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for i in range(args.rounds):
        order = MODES[i % 3 :] + MODES[: i % 3]  # rotated: no mode always runs first
        for mode in order:
            runs[mode].append(train_once(mode, args.steps, args.threads))
        print(f"round {i + 1}/{args.rounds}: " + ", ".join(
            f"{m} {runs[m][-1]['sps']:,.0f} SPS" for m in MODES))  # fmt: skip
    sps = {mode: [r["sps"] for r in runs[mode]] for mode in MODES}
    telemetry_cost = [
        100 * (1 - t / p) for p, t in zip(sps["plain"], sps["telemetry"], strict=True)
    ]
    dashboard_cost = [
        100 * (1 - d / t) for t, d in zip(sps["telemetry"], sps["dashboard"], strict=True)
    ]
    sample_share = [100 * r["sample_share"] for r in runs["telemetry"]]
    dashboard_share = [100 * r["dashboard_share"] for r in runs["dashboard"]]
    threads = args.threads if args.threads is not None else Config().run.threads
    print(f"\ndefault CartPole config ({threads} threads), {args.steps:,} steps per run, "
          f"{args.rounds} rounds")  # fmt: skip
    for mode in MODES:
        print(f"  {mode:<10} {spread(sps[mode], '{:,.0f}')} SPS")
    print(f"  telemetry, paired SPS drop:          {spread(telemetry_cost, '{:+.2f}')} %")
    print(f"  telemetry, sampler CPU / interval:   {spread(sample_share, '{:.3f}')} %")
    print(f"  dashboard, paired SPS drop:          {spread(dashboard_cost, '{:+.2f}')} %")
    print(f"  dashboard, its section / wall time:  {spread(dashboard_share, '{:.3f}')} %")
    if args.json:
        figures: dict[str, Any] = {"runs": runs, "steps": args.steps, "threads": threads}
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)


if __name__ == "__main__":
    main()
