"""How much a pair's two samples disagree when they run in turns and when they run together.

    python benchmarks/pairing_noise.py                                  # the gate's CartPole case
    python benchmarks/pairing_noise.py --busy 0,2 --rounds 10 --pairs 3
    python benchmarks/pairing_noise.py --case "petri_e2e[num_envs=96,env_steps=3072,threads=1]"

The gate's own worker times this tree against itself (A/A): every round it forks both sides'
round processes (fresh, random memory layouts, as ``rlperf gate`` does), sizes a sample to
``--sample-s`` of CPU on one side, and takes ``--pairs`` pairs each way, alternating: a pair in
turns (one side's sample, then the other's, on one CPU) and a pair together (both sides' samples
at once on that CPU, the scheduler switching between them). The two pairings see the same
processes, layouts and load. Per pairing it prints the sd of a pair's ``log(B / A)`` in CPU
time, the sd across rounds of a round's median over its pairs (what the gate's statistic sees),
and the rounds a one-sided 95% test would need to see 2% with 95% power at that round sd (normal
approximation: ``((1.645 + 1.645) x sd / 0.02)^2``). Repeated with ``N`` busy processes
(pure-Python spin loops) for each ``--busy``. Never imported by the package or the tests.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

from rlperf.bench.gate import (
    PAIRINGS,
    Side,
    Worker,
    begin_round,
    end_round,
    measure_pair,
    pair_cpu,
)
from rlperf.bench.harness import busy_processes
from rlperf.bench.registry import gate_case_names, select
from rlperf.cores import pinnable_cores

Z95 = 1.645  # one-sided 95%, for both the test's level and its power
SHIFT = 0.02  # the slowdown the gate must see


def pair_log_ratio(worker: Worker, case: str, calls: int, pairing: str, j: int,
                   cpu: dict[str, int]) -> float:  # fmt: skip
    """One pair's log(head / base) in CPU seconds; the side that starts alternates with ``j``."""
    order = ["base", "head"] if j % 2 == 0 else ["head", "base"]
    request = {"op": "measure", "case": case, "calls": calls, **cpu}
    answers = measure_pair(worker, request, order, pairing)
    return math.log(answers["head"]["cpu_s"] / answers["base"]["cpu_s"])


def measure(case: str, rounds: int, pairs: int, sample_s: float) -> dict[str, dict[str, list]]:
    """pairing -> {"pairs": every pair's log-ratio, "rounds": each round's median}."""
    src = Path(__file__).resolve().parents[1] / "src"
    tree = Side("base", "this tree", "", src)
    worker = Worker()
    worker.sides = {"base": tree, "head": Side("head", "this tree", "", src)}
    out: dict[str, dict[str, list]] = {p: {"pairs": [], "rounds": []} for p in PAIRINGS}
    cpus = pinnable_cores()
    try:
        worker.ask({"op": "ready"})
        for r in range(rounds):
            # Sections on the CPU clock or not does not matter here: only the CPU time is read.
            begin_round(worker, [case], 0.1, "together")
            request = {"op": "calibrate", "side": "base", "case": case, "sample_s": sample_s}
            calls = worker.ask(request)["calls"]
            this_round: dict[str, list[float]] = {p: [] for p in PAIRINGS}
            for j in range(pairs):
                cpu = pair_cpu(cpus, r, j, pairs)
                for pairing in PAIRINGS if j % 2 == 0 else PAIRINGS[::-1]:
                    this_round[pairing].append(pair_log_ratio(worker, case, calls, pairing, j, cpu))
            end_round(worker)
            for pairing, values in this_round.items():
                out[pairing]["pairs"] += values
                out[pairing]["rounds"].append(statistics.median(values))
    finally:
        worker.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--case", default=gate_case_names()[0], help="a registry case name")
    parser.add_argument("--busy", default="2", help="comma-separated busy process counts")
    parser.add_argument("--rounds", type=int, default=10, help="fresh process pairs per load")
    parser.add_argument("--pairs", type=int, default=3, help="pairs of each pairing per round")
    parser.add_argument("--sample-s", type=float, default=0.1, help="CPU seconds of a sample")
    args = parser.parse_args()
    try:
        busy = [int(b) for b in args.busy.split(",")]
    except ValueError:
        parser.error(f"--busy takes comma-separated counts, got {args.busy!r}")
    if any(b < 0 for b in busy) or args.rounds < 2 or args.pairs < 1 or args.sample_s <= 0:
        parser.error("--busy counts >= 0, --rounds >= 2, --pairs >= 1 and --sample-s > 0")
    matched = [c.name for c in select([args.case])]
    if len(matched) != 1:
        parser.error(f"--case must name one registry case, got {len(matched)} for {args.case!r}")
    print(f"case {matched[0]}; {args.rounds} rounds x {args.pairs} pairs each way, samples of "
          f"{args.sample_s} CPU s; A/A, CPU time")  # fmt: skip
    print("busy  pairing   pair sd  round sd  rounds to see 2%  median")
    for count in busy:
        with busy_processes(count):
            out = measure(matched[0], args.rounds, args.pairs, args.sample_s)
        for pairing, values in out.items():
            pair_sd = statistics.stdev(values["pairs"])
            round_sd = statistics.stdev(values["rounds"])
            need = math.ceil((2 * Z95 * round_sd / SHIFT) ** 2)
            print(f"{count:>4}  {pairing:<8}  {pair_sd:7.4f}  {round_sd:8.4f}  {need:>16}  "
                  f"{statistics.median(values['rounds']):+.4f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
