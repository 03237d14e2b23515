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

With ``--kernel-spans`` it measures what putting the C kernels' phases into the trace costs
(``profiling/torch_trace.py``): the default CartPole config trained under a torch.profiler
session (the profile's default schedule) with the kernels' span logs off (A) and on (B),
alternating A B B A ..., each a fresh trainer in this process. Timed in this process's CPU
seconds (``time.process_time``: other work on the machine adds wall time, not CPU time): the
run's whole CPU time and the ``rollout`` and ``update`` sections' CPU time in the recorded
window (the kernels log spans only there); and the wall seconds of
``measurement/torch_profiler`` (the export, and in B the spans written into it), the trace's
size and the ranges added.

Usage: ``python benchmarks/profiler_overhead.py [--rounds 5] [--steps 200000] [--threads N]
[--json out.json] [--trace | --kernel-spans]``
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


def traced_run(kernel_spans: bool, steps: int, threads: int | None) -> dict[str, float]:
    """CPU seconds of one default-config run under torch.profiler (the profile's default
    schedule), and what its trace holds; see the module docstring."""
    import tempfile
    from pathlib import Path

    from rlperf.profiling.torch_trace import TorchTrace, TraceSchedule
    from rlperf.timing import names

    cfg = Config()
    cfg.run.total_steps, cfg.run.progress = steps, False
    if threads is not None:
        cfg.run.threads = threads
    prof = Profiler()
    trainer = Trainer(cfg, profiler=prof)
    window_cpu = [0.0]  # CPU seconds of rollout + update while torch.profiler records

    def cpu_hooks() -> tuple[Any, Any]:
        started: dict[str, float] = {}

        def enter(path: str) -> None:
            if path in (names.ROLLOUT, names.UPDATE):
                started[path] = time.process_time()

        def leave(path: str) -> None:
            if path in started and prof.wants_spans == kernel_spans and recording():
                window_cpu[0] += time.process_time() - started.pop(path)

        return enter, leave

    with tempfile.TemporaryDirectory() as out:
        trace = TorchTrace(Path(out), TraceSchedule(), kernel_spans=kernel_spans)

        def recording() -> bool:
            return trace._profile.current_action.name.startswith("RECORD")

        enter, leave = cpu_hooks()
        prof.add_hooks(enter, leave)
        trainer.callbacks.append(trace.step)
        cpu0 = time.process_time()
        trace.start(prof)
        trainer.train()
        (path,) = trace.stop(prof)
        cpu = time.process_time() - cpu0
        events = json.loads(path.read_text())["traceEvents"]
        size_mb = path.stat().st_size / 1e6
    added = sum(1 for e in events if e.get("args", {}).get("source") == "rlperf kernel clock")
    export = prof.totals_s()[names.path(names.MEASUREMENT, names.TORCH_PROFILER)]
    return {"cpu_s": cpu, "window_cpu_s": window_cpu[0], "export_s": export,
            "trace_mb": size_mb, "spans": added}  # fmt: skip


def kernel_spans_overhead(rounds: int, steps: int, threads: int | None) -> None:
    """A/B of the kernels' spans in the trace (module docstring)."""
    traced_run(True, Config().batch_size * 8, threads)  # burn-in: imports, allocator
    runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for i in range(rounds):
        for on in (False, True) if i % 2 == 0 else (True, False):
            runs[on].append(traced_run(on, steps, threads))
        a, b = runs[False][-1], runs[True][-1]
        print(f"round {i + 1}/{rounds}: CPU off {a['cpu_s']:.2f} s, on {b['cpu_s']:.2f} s; "
              f"export off {a['export_s']:.3f} s, on {b['export_s']:.3f} s")  # fmt: skip
    print(f"\ndefault CartPole config, {steps:,} steps per run, {rounds} A/B pairs")
    for key, label in (("cpu_s", "run, CPU s"), ("window_cpu_s", "rollout+update in window, s"),
                       ("export_s", "measurement/torch_profiler, wall s"),
                       ("trace_mb", "trace, MB"), ("spans", "kernel ranges added")):  # fmt: skip
        off, on = ([r[key] for r in runs[flag]] for flag in (False, True))
        diffs = [b - a for a, b in zip(off, on, strict=True)]
        print(f"  {label:32} off {spread(off, '{:.3f}')}  on {spread(on, '{:.3f}')}  "
              f"paired on - off {spread(diffs, '{:+.3f}')}")  # fmt: skip


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
    parser.add_argument(
        "--kernel-spans",
        action="store_true",
        help="time what the C kernels' phases in the trace cost instead (A/B, CPU time)",
    )
    args = parser.parse_args()
    if args.trace:
        trace_overhead(args.rounds)
        return
    if args.kernel_spans:
        kernel_spans_overhead(args.rounds, args.steps, args.threads)
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
