"""Distributed scaling on this machine: 2 ranks x 1 thread against 1 rank x 1 thread.

    python benchmarks/distributed_scaling.py                    # 3 rounds, MLP and LSTM
    python benchmarks/distributed_scaling.py --rounds 7 --iterations 12 --json scaling.json

What it measures: ``rlperf train`` on CartPole, ``--threads 1`` per rank, the same
``--num-envs`` per rank (1024 for the MLP, ``--lstm-envs`` for the LSTM), once as one process
and once as ``--nproc 2`` (gloo), each for ``--iterations`` iterations of every rank (2 ranks
make twice the steps in the same number of iterations). SPS is the run's ``sps_cumulative``
(rank 0's ``summary.json``: the global step counts every rank's steps, warm-up iterations left
out), and the all-reduce share is rank 0's ``update/allreduce`` seconds over its wall time.

How: every measurement is a fresh ``python -m rlperf train`` (the 2-rank one through
torch.distributed's elastic launcher); the two configurations take turns round by round
(A B B A ...), and the ratio is also given paired round by round (2-rank SPS over the 1-rank
SPS of the same round), which cancels most of a drifting machine's effect. Figures are
median [min - max] over the rounds. Run it on an otherwise idle machine: two ranks of one thread
need both cores, and any other busy process slows one rank, which the other then waits for in
every all-reduce.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ALLREDUCE = "update/allreduce"
NUM_STEPS = 32  # per iteration and rank: 1024 envs x 32 steps = 32768 samples


def run_once(policy: str, num_envs: int, nproc: int, iterations: int, seed: int,
             extra: list[str]) -> dict:  # fmt: skip
    """One ``rlperf train`` process (or launch of ``nproc`` ranks); its summary figures."""
    with tempfile.TemporaryDirectory(prefix="rlperf-scaling-") as tmp:
        run_dir = Path(tmp) / "run"
        steps = iterations * num_envs * NUM_STEPS * nproc
        argv = [sys.executable, "-m", "rlperf", "train", "--policy", policy,
                "--num-envs", str(num_envs), "--num-steps", str(NUM_STEPS),
                "--threads", "1", "--total-steps", str(steps), "--seed", str(seed),
                "--no-progress", "--run-dir", str(run_dir), *extra]  # fmt: skip
        if nproc > 1:
            argv += ["--nproc", str(nproc)]
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stderr[-2000:]}")
        summary = json.loads((run_dir / "summary.json").read_text())
    allreduce_s = summary["sections"].get(ALLREDUCE, 0.0)
    return {"sps": summary["sps_cumulative"], "wall_s": summary["wall_s"],
            "allreduce_pct": 100.0 * allreduce_s / summary["wall_s"]}  # fmt: skip


def spread(values: list[float], fmt: str = ",.0f") -> str:
    return (f"{statistics.median(values):{fmt}} "
            f"[{min(values):{fmt}} - {max(values):{fmt}}]")  # fmt: skip


def contenders(gloo_io: list[str], exchanges: list[str]) -> list[tuple[str, int, list[str]]]:
    """(name, ranks, extra flags): one rank, then two ranks with each ``--gloo-io`` and
    ``--grad-exchange`` setting."""
    two = [
        (f"2 ranks, {io}, {ex}", 2, ["--gloo-io", io, "--grad-exchange", ex])
        for io in gloo_io
        for ex in exchanges
    ]
    return [("1 rank", 1, [])] + two


def measure(policy: str, num_envs: int, rounds: int, iterations: int, seed: int,
            gloo_io: list[str], exchanges: list[str]) -> dict:  # fmt: skip
    """Every contender once a round, the order rotated round by round."""
    runs = contenders(gloo_io, exchanges)
    results: dict[str, list[dict]] = {name: [] for name, _, _ in runs}
    for r in range(rounds):
        shift = r % len(runs)
        for name, nproc, extra in runs[shift:] + runs[:shift]:
            result = run_once(policy, num_envs, nproc, iterations, seed + r, extra)
            results[name].append(result)
            print(f"  {policy} round {r + 1}: {name}: {result['sps']:,.0f} SPS, "
                  f"allreduce {result['allreduce_pct']:.1f}% of wall", flush=True)  # fmt: skip
    one = results["1 rank"]
    ratios = {name: [b["sps"] / a["sps"] for a, b in zip(one, results[name], strict=True)]
              for name, nproc, _ in runs if nproc > 1}  # fmt: skip
    return {"policy": policy, "num_envs_per_rank": num_envs, "runs": results,
            "paired_ratio": ratios}  # fmt: skip


def report(m: dict) -> str:
    lines = [f"{m['policy']} at {m['num_envs_per_rank']} envs per rank, 1 thread per rank:"]
    for name, runs in m["runs"].items():
        line = f"  {name:<30} SPS {spread([x['sps'] for x in runs])}"
        if name in m["paired_ratio"]:
            line += (f"; paired ratio over 1 rank {spread(m['paired_ratio'][name], '.2f')}; "
                     f"update/allreduce {spread([x['allreduce_pct'] for x in runs], '.1f')}% "
                     "of wall")  # fmt: skip
        lines.append(line)
    two = [name for name in m["runs"] if name in m["paired_ratio"]]
    for name in two[1:]:  # each other 2-rank setting against the first, round by round
        first, other = m["runs"][two[0]], m["runs"][name]
        pairs = [b["sps"] / a["sps"] for a, b in zip(first, other, strict=True)]
        lines.append(f"  {name} over {two[0]}: SPS paired {spread(pairs, '.2f')}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=8, help="per rank, 2 of them warm-up")
    parser.add_argument("--mlp-envs", type=int, default=1024)
    parser.add_argument("--lstm-envs", type=int, default=256)
    parser.add_argument("--policies", default="mlp,lstm")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--gloo-io", default="idle,normal",
        help="the 2-rank runs' --gloo-io settings, each its own contender (default: idle,normal)",
    )  # fmt: skip
    parser.add_argument(
        "--grad-exchange", default="auto",
        help="the 2-rank runs' --grad-exchange settings, each its own contender with each "
        "--gloo-io (default: auto)",
    )  # fmt: skip
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"load average at start: {load:.2f} on {os.cpu_count()} cores "
          f"({time.strftime('%Y-%m-%d %H:%M')})")  # fmt: skip
    envs = {"mlp": args.mlp_envs, "lstm": args.lstm_envs}
    gloo_io = args.gloo_io.split(",")
    exchanges = args.grad_exchange.split(",")
    results = [measure(p, envs[p], args.rounds, args.iterations, args.seed, gloo_io, exchanges)
               for p in args.policies.split(",")]  # fmt: skip
    print()
    for m in results:
        print(report(m))
    if args.json:
        Path(args.json).write_text(json.dumps({"load_at_start": load, "results": results}))


if __name__ == "__main__":
    main()
