"""Does a config learn? By default: does the default config solve CartPole-v1 (mean return of
the last 100 episodes >= 475)?

    python benchmarks/learning.py                    # seeds 1 2 3, 500,000 steps each
    python benchmarks/learning.py --seeds 1 2 3 4 5 --total-steps 500000 --run-root runs/learning
    # memory: position-only CartPole, the LSTM preset against the MLP, 1M steps, threshold 450
    python benchmarks/learning.py --total-steps 1000000 --threshold 450 --run-root runs/pos-lstm \
        -- --preset lstm --env-option observe=position
    python benchmarks/learning.py --total-steps 1000000 --threshold 450 --run-root runs/pos-mlp \
        -- --env-option observe=position

For each seed it trains the default preset (one process after another, 1 torch thread so that
the result does not depend on the machine's load) and reads the run's metrics.jsonl: the first
global step at which the last-100 mean return reached the threshold, and the value at the end.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

SOLVED_RETURN = 475.0  # CartPole-v1's own "solved" threshold


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--total-steps", type=int, default=500_000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--run-root", default="runs/learning")
    ap.add_argument(
        "--threshold",
        type=float,
        default=SOLVED_RETURN,
        help="last-100 mean return that counts as learned (%(default)s)",
    )
    ap.add_argument("extra", nargs="*", help="more `rlperf train` flags, after --")
    args = ap.parse_args()
    rows = []
    for seed in args.seeds:
        run_dir = Path(args.run_root) / f"seed{seed}"
        # This interpreter's rlperf: an `rlperf` on PATH may be another environment's, or none.
        cmd = [sys.executable, "-m", "rlperf", "train", "--seed", str(seed),
               "--total-steps", str(args.total_steps), "--threads", str(args.threads),
               "--run-dir", str(run_dir), "--no-progress", *args.extra]  # fmt: skip
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        solved_at = None
        for line in (run_dir / "metrics.jsonl").read_text().splitlines():
            row = json.loads(line)
            if solved_at is None and (row["mean_return"] or 0) >= args.threshold:
                solved_at = row["global_step"]
        summary = json.loads((run_dir / "summary.json").read_text())
        rows.append((seed, solved_at, summary["mean_return_last_100"], summary["global_step"]))
    first_col = f"first step with last-100 mean >= {args.threshold:g}"
    print(f"{'seed':>4} {first_col:>38} {'final last-100 mean':>20}")
    for seed, solved_at, final, steps in rows:
        first = f"{solved_at:,}" if solved_at is not None else f"not within {steps:,}"
        print(f"{seed:>4} {first:>38} {final:>20.1f}")
    solved = all(s is not None for _, s, _, _ in rows)
    print("all seeds solved" if solved else "NOT all seeds solved")
    return 0 if solved else 1


if __name__ == "__main__":
    sys.exit(main())
