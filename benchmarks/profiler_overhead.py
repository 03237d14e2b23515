"""What do the section timers cost? Figures quoted in docs/profiling.md come from this script.

Two measurements:

1. **Per section**: a bare ``with prof.section("x"): pass`` on an enabled and on a disabled
   profiler, in nanoseconds per enter+exit, with the cost of the empty loop subtracted.
2. **Training**: the default CartPole configuration (``rlperf train`` defaults) trained with the
   trainer's sections disabled (A) and enabled (B), alternating A B B A A B ... in one process
   (so run order favours neither side), each run on a fresh trainer; SPS is the trainer's
   cumulative figure after warm-up. The overhead is the median of the paired drops
   ``1 - SPS_B / SPS_A``, and the table shows median [min-max].
   The per-section cost times the number of sections per second gives the expected overhead,
   a check on the (noisier) end-to-end figure.

With ``--trace`` it measures instead what ``rlperf profile --torch-profiler`` costs: a short
profile whose torch.profiler exports one window, run ``--rounds`` times; it prints the time in
``measurement/torch_profiler`` (the export included) against the untimed glue, the figures the
tests check by section membership only (``tests/profiling/test_measurement_overhead.py``).

Usage: ``python benchmarks/profiler_overhead.py [--rounds 5] [--steps 200000] [--threads N]
[--json out.json] [--trace]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from rlperf.config import Config
from rlperf.ppo.trainer import Trainer
from rlperf.timing.sections import Profiler


def section_cost_ns(enabled: bool, loops: int = 200_000, repeats: int = 7) -> list[float]:
    """ns per ``with prof.section("x"): pass`` (empty-loop time subtracted), one per repeat."""
    prof = Profiler(enabled=enabled)
    section = prof.section
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for _ in range(loops):
            pass
        empty_ns = time.perf_counter_ns() - t0
        t0 = time.perf_counter_ns()
        for _ in range(loops):
            with section("x"):
                pass
        out.append((time.perf_counter_ns() - t0 - empty_ns) / loops)
    return out


def train_once(enabled: bool, steps: int, threads: int | None) -> tuple[float, int, float]:
    """(SPS after warm-up, section calls, wall seconds) of one default-config run."""
    cfg = Config()
    cfg.run.total_steps = steps
    if threads is not None:
        cfg.run.threads = threads
    cfg.run.progress = False
    prof = Profiler(enabled=enabled)
    summary = Trainer(cfg, profiler=prof).train()
    calls = sum(s.calls for s in prof.stats())
    return summary["sps_cumulative"], calls, summary["wall_s"]


def spread(values: list[float], fmt: str = "{:,.0f}") -> str:
    return (
        f"{fmt.format(statistics.median(values))} "
        f"[{fmt.format(min(values))}-{fmt.format(max(values))}]"
    )


def trace_overhead(rounds: int) -> None:
    """Seconds in ``measurement/torch_profiler`` and untimed, per short traced profile."""
    import tempfile

    from rlperf.cli import main as rlperf_main
    from rlperf.profiling.report import load_report
    from rlperf.timing import names

    overhead = names.path(names.MEASUREMENT, names.TORCH_PROFILER)
    measured, untimed = [], []
    for i in range(rounds):
        with tempfile.TemporaryDirectory() as out:
            argv = ["profile", "--num-envs", "8", "--num-steps", "16", "--total-steps", "1024",
                    "--threads", "1", "--no-progress", "--out", out, "--torch-profiler",
                    "--wait", "2", "--warmup", "1", "--active", "2"]  # fmt: skip
            if rlperf_main(argv) != 0:
                raise SystemExit("rlperf profile failed")
            report = load_report(out)
        totals = {e["name"]: e["total_s"] for e in report["sections"]}
        measured.append(totals[overhead])
        untimed.append(report["totals"]["untimed_s"])
        print(
            f"round {i + 1}/{rounds}: {overhead} {measured[-1]:.3f} s, untimed {untimed[-1]:.3f} s"
        )
    print(f"{overhead}: {spread(measured, '{:.3f}')} s; untimed: {spread(untimed, '{:.3f}')} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="A/B pairs (default 5)")
    parser.add_argument("--steps", type=int, default=200_000, help="steps per run")
    parser.add_argument(
        "--threads",
        type=int,
        help="torch threads (default: the config's); use 1 on a machine busy with other work, "
        "where spinning intra-op threads make SPS collapse",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument(
        "--trace", action="store_true", help="time the torch.profiler trace's own cost instead"
    )
    args = parser.parse_args()
    if args.trace:
        trace_overhead(args.rounds)
        return

    on_ns, off_ns = section_cost_ns(True), section_cost_ns(False)
    print(f"bare section enter+exit, enabled:  {spread(on_ns, '{:.0f}')} ns")
    print(f"bare section enter+exit, disabled: {spread(off_ns, '{:.0f}')} ns")

    train_once(
        True, Config().batch_size * 4, args.threads
    )  # burn-in: imports, allocator, thread pool
    sps_off, sps_on, calls_per_s = [], [], []
    for i in range(args.rounds):
        # A B in even rounds, B A in odd ones: whatever the second run of a pair inherits
        # (garbage, allocator state, clock boost) lands on both sides equally.
        if i % 2 == 0:
            a, _, _ = train_once(False, args.steps, args.threads)
            b, calls, wall_s = train_once(True, args.steps, args.threads)
        else:
            b, calls, wall_s = train_once(True, args.steps, args.threads)
            a, _, _ = train_once(False, args.steps, args.threads)
        sps_off.append(a)
        sps_on.append(b)
        calls_per_s.append(calls / wall_s)
        print(f"round {i + 1}/{args.rounds}: disabled {a:,.0f} SPS, enabled {b:,.0f} SPS")
    drops = [1 - b / a for a, b in zip(sps_off, sps_on, strict=True)]
    expected = statistics.median(calls_per_s) * statistics.median(on_ns) / 1e9
    threads = args.threads if args.threads is not None else Config().run.threads
    print(
        f"\ndefault CartPole config ({threads} threads), {args.steps:,} steps per run, "
        f"{args.rounds} A/B pairs"
    )
    print(f"  sections disabled: {spread(sps_off)} SPS")
    print(f"  sections enabled:  {spread(sps_on)} SPS")
    print(f"  paired overhead:   {spread([100 * d for d in drops], '{:+.2f}')} % of SPS")
    print(
        f"  expected from per-section cost: {statistics.median(calls_per_s):,.0f} sections/s x "
        f"{statistics.median(on_ns):.0f} ns = {100 * expected:.2f}% of wall time"
    )
    if args.json:
        figures: dict[str, Any] = {
            "section_ns_enabled": on_ns, "section_ns_disabled": off_ns,
            "sps_disabled": sps_off, "sps_enabled": sps_on, "paired_overhead": drops,
            "sections_per_s": calls_per_s, "steps": args.steps,
        }  # fmt: skip
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)


if __name__ == "__main__":
    main()
