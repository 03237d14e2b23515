"""Which signal separates a 2% slowdown from noise beside busy processes: wall time, CPU time,
the kernel's task clock, and instructions and cycles where the kernel exposes hardware counters.

    python benchmarks/signal_noise.py                              # the gate's CartPole case
    python benchmarks/signal_noise.py --busy 0,2 --rounds 20 --plant 0.02
    python benchmarks/signal_noise.py --case "petri_e2e[num_envs=96,env_steps=3072,threads=1]"

For one registry case, each round is a fresh process forked from this one (a new memory
layout, as the gate's rounds: ``rlperf.bench.harness.run_fresh``), which sets the case up,
warms it, sizes a sample to ``--sample-s`` of CPU as the gate does, and takes ``--pairs``
triples of samples in a rotating order: two plain samples (A and A') and one with a planted
slowdown (B). Every sample reads every signal at once. Per signal, a round's value is the median
over its triples of ``log(A' / A)`` (A/A) and of ``log(B / A)`` (planted), as the gate's round
value is; across rounds the script prints the A/A median and round sd, the planted median, in
how many rounds the planted sample was larger, and the rounds a one-sided test at 95% would need
to see the plant with 95% power at that round sd (normal approximation: ``((1.645 + 1.645) x sd
/ shift)^2``). Repeated with ``N`` busy processes (pure-Python spin loops) for each ``--busy``.

The plant is real work, not a wait: after the sample's calls, a pure-Python loop of a fixed
number of iterations sized in the round to ``--plant`` of the sample's CPU time. Every signal
sees it, but not at the same fraction: a loop's instructions per second differ from the case's,
so read the instructions' planted shift against their own A/A spread, not as a percentage of
time. Base and head here are the same code in one process (the pairing is within a process),
so layout moves between two trees are not in these spreads: ``gate_experiment.py`` measures the
gate end to end.

Where the kernel has no hardware counters (a VM without a virtual PMU), one line says so and
the table has wall, CPU and the task clock. Never imported by the package or the tests, except
its parser (``tests/bench/test_signal_noise.py``).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from typing import Any

from rlperf.bench import registry
from rlperf.bench.commands import split_cases
from rlperf.bench.counters import HARDWARE, Counters, unavailable
from rlperf.bench.harness import Implementation, busy_processes, run_fresh
from rlperf.bench.registry import gate_case_names
from rlperf.bench.worker import WARMUP_CALLS, calibrate_calls

Z95 = 1.645  # one-sided 95%, for both the test's level and its power
PLANT_CALIBRATION_ITERS = 200_000


def spin(iterations: int) -> int:
    """The planted work: a pure-Python loop of ``iterations`` (its instructions fixed)."""
    total = 0
    for i in range(iterations):
        total += i
    return total


def signals_now(counters: Counters | None) -> dict[str, float]:
    """Every signal's reading: wall and CPU seconds, and the open counters' counts."""
    now = {"wall": time.perf_counter(), "cpu": time.process_time()}
    if counters is not None:
        now.update(counters.read())
    return now


def one_round(name: str, pairs: int, sample_s: float, plant: float, events: list[str]) -> dict:
    """In a fresh process: set the case up, size a sample and the plant, take the triples."""
    import torch

    torch.set_num_threads(1)
    (case,) = registry.select([name])
    ready = case.setup()
    for _ in range(WARMUP_CALLS):
        ready.run()
    calls = calibrate_calls(ready.run, sample_s)
    t0 = time.process_time()
    spin(PLANT_CALIBRATION_ITERS)
    iter_s = (time.process_time() - t0) / PLANT_CALIBRATION_ITERS
    t0 = time.process_time()
    for _ in range(calls):
        ready.run()
    plant_iters = round(plant * (time.process_time() - t0) / iter_s)
    counters = Counters.open(tuple(events)) if events else None

    def sample(planted: bool) -> dict[str, float]:
        before = signals_now(counters)
        for _ in range(calls):
            ready.run()
        if planted:
            spin(plant_iters)
        after = signals_now(counters)
        return {k: after[k] - before[k] for k in after}

    aa: dict[str, list[float]] = {}
    planted: dict[str, list[float]] = {}
    kinds = ("a", "a2", "b")
    for j in range(pairs):
        order = kinds[j % 3 :] + kinds[: j % 3]  # rotate which runs first
        taken = {kind: sample(kind == "b") for kind in order}
        for signal, a in taken["a"].items():
            aa.setdefault(signal, []).append(math.log(taken["a2"][signal] / a))
            planted.setdefault(signal, []).append(math.log(taken["b"][signal] / a))
    if counters is not None:
        counters.close()
    return {
        "calls": calls,
        "aa": {s: statistics.median(v) for s, v in aa.items()},
        "planted": {s: statistics.median(v) for s, v in planted.items()},
    }


def rounds_needed(sd: float, shift: float) -> float:
    """Rounds a one-sided 95% test needs for 95% power against ``shift`` at round sd ``sd``."""
    if shift <= 0:
        return math.inf
    return (2 * Z95 * sd / shift) ** 2


def table(rounds: list[dict[str, Any]], plant: float) -> list[str]:
    """One line per signal: A/A median and round sd, planted median, rounds above, rounds a
    test would need for this plant and for a shift of ``plant`` itself at this sd."""
    lines = [
        "| signal | A/A median ratio | A/A round sd | planted median ratio | planted rounds > 1 "
        f"| rounds to see the plant | rounds to see {plant:.0%} |",
        "|---|---|---|---|---|---|---|",
    ]
    for signal in rounds[0]["aa"]:
        aa = [r["aa"][signal] for r in rounds]
        planted = [r["planted"][signal] for r in rounds]
        sd = statistics.stdev(aa) if len(aa) > 1 else math.nan
        shift = statistics.median(planted)
        above = sum(p > 0 for p in planted)
        lines.append(
            f"| {signal} | {math.exp(statistics.median(aa)):.4f} | {sd:.4f} "
            f"| {math.exp(shift):.4f} | {above}/{len(planted)} "
            f"| {rounds_needed(sd, shift):.1f} | {rounds_needed(sd, math.log1p(plant)):.1f} |"
        )
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument(
        "--case",
        default=gate_case_names()[0],
        help="a registry case (default: the gate's first, CartPole's e2e)",
    )
    parser.add_argument("--rounds", type=int, default=20, help="fresh processes per load level")
    parser.add_argument("--pairs", type=int, default=6, help="triples of samples per round")
    parser.add_argument("--sample-s", type=float, default=0.1, help="CPU seconds of a sample")
    parser.add_argument(
        "--plant",
        type=float,
        default=0.02,
        help="planted work, as a fraction of a sample's CPU time",
    )
    parser.add_argument(
        "--busy",
        default="0,2",
        help="comma-separated counts of busy processes to run beside (0: idle)",
    )
    args = parser.parse_args(argv)
    try:
        args.busy = [int(n) for n in args.busy.split(",")]
        (args.case,) = [c.name for c in registry.select(split_cases(args.case))]
    except ValueError as e:  # a bad count, an unknown case (UnknownCaseError), several cases
        parser.error(f"--busy takes counts like 0,2 and --case one case ({e})")
    if args.rounds < 2 or args.pairs < 1 or args.sample_s <= 0 or not 0 < args.plant < 1:
        parser.error("--rounds >= 2, --pairs >= 1, --sample-s > 0 and 0 < --plant < 1")
    if any(n < 0 for n in args.busy):
        parser.error("--busy counts must be >= 0")
    return args


def main() -> int:
    args = parse_args()
    import torch  # noqa: F401  # imported once, before the rounds fork

    events = ["task_clock"]
    why = unavailable(HARDWARE)
    if why is None:
        events += list(HARDWARE)
    print(f"hardware counters: {'instructions and cycles counted' if why is None else why}")
    software = unavailable(tuple(events))
    if software is not None:  # not even the task clock: wall and CPU only
        print(f"software counters: {software}")
        events = []
    for busy in args.busy:
        with busy_processes(busy):
            rounds = []
            for r in range(args.rounds):
                impl = Implementation(
                    f"round {r}",
                    one_round,
                    {
                        "name": args.case,
                        "pairs": args.pairs,
                        "sample_s": args.sample_s,
                        "plant": args.plant,
                        "events": events,
                    },
                )
                rounds.append(run_fresh(impl))
                print(f"  {busy} busy: round {r + 1}/{args.rounds}", file=sys.stderr, flush=True)
        print(
            f"\n{args.case}, {busy} busy process(es) beside (load average "
            f"{os.getloadavg()[0]:.1f}), {args.rounds} rounds x {args.pairs} triples, "
            f"{rounds[0]['calls']} calls a sample, plant {args.plant:.1%} of a sample's CPU:"
        )
        print("\n".join(table(rounds, args.plant)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
