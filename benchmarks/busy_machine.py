"""Does the default thread count hold on a busy machine? `rlperf train` beside busy processes.

    python benchmarks/busy_machine.py --rounds 5 --busy 2          # the three workloads, busy
    python benchmarks/busy_machine.py --rounds 5 --busy 0 --base-src /path/to/old/src  # idle

Runs ``rlperf train`` in fresh processes, each variant in turn within a round (so a machine
whose speed drifts affects them alike), beside ``--busy`` processes that each keep a core busy
(pure-Python spin loops, as a CI runner's other jobs or a laptop's browser would). Variants:

- ``default``: the command as a user types it (``--threads 2`` with ``--adapt-threads``);
- ``threads1``: ``--threads 1``;
- ``threads2``: ``--threads 2 --no-adapt-threads`` (the fixed two threads that were the
  default before ``--adapt-threads``);
- ``base``: with ``--base-src``, the default command run on an older ``src/`` tree.

Workloads (``--workloads``): ``cartpole`` (``--env cartpole``), ``lstm`` (``--preset lstm``),
``workers`` (``--env gym:CartPole-v1 --vec-backend multiprocess --num-workers 2``). Each run is
bounded by ``--max-wall-s`` (two fixed threads beside busy processes may run 20x slower), and
its figure is the run's cumulative SPS after warm-up, from its summary.json.

Prints, per workload, each variant's median [min-max] SPS and the paired ratios
default / best-of(threads1, threads2) and default / base, round by round. ``--out`` keeps every
run as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rlperf.bench.harness import busy_processes

WORKLOADS = {
    "cartpole": ["--env", "cartpole"],
    "lstm": ["--preset", "lstm"],
    "workers": ["--env", "gym:CartPole-v1", "--vec-backend", "multiprocess", "--num-workers", "2"],
}
VARIANTS = {
    "default": [],
    "threads1": ["--threads", "1"],
    "threads2": ["--threads", "2", "--no-adapt-threads"],
    "base": [],
}


def run_train(flags: list[str], src: str | None, total: int, wall_s: float, tmp: Path) -> dict:
    """One ``rlperf train`` in a fresh process; its summary's SPS and thread use."""
    run_dir = tmp / "run"
    env = {**os.environ}
    if src is not None:
        env["PYTHONPATH"] = src
    cmd = [sys.executable, "-m", "rlperf", "train", *flags, "--total-steps", str(total),
           "--max-wall-s", str(wall_s), "--no-progress", "--no-telemetry",
           "--run-dir", str(run_dir), "--overwrite"]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"busy_machine.py: {' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    summary = json.loads((run_dir / "summary.json").read_text())
    return {"sps": summary["sps_cumulative"], "threads_used": summary.get("threads_used")}


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} [{min(values):,.0f}-{max(values):,.0f}]"


def ratio_spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}x [{min(values):.2f}-{max(values):.2f}]"


def report(results: dict[str, dict[str, list[dict]]]) -> str:
    lines = []
    for workload, variants in results.items():
        lines.append(f"\n{workload}")
        for variant, runs in variants.items():
            lines.append(f"  {variant:9s} SPS {spread([r['sps'] for r in runs])}")
        default = [r["sps"] for r in variants["default"]]
        if "threads1" in variants and "threads2" in variants:
            best = [
                max(a["sps"], b["sps"])
                for a, b in zip(variants["threads1"], variants["threads2"], strict=True)
            ]
            lines.append(
                "  default / best of threads1, threads2 (paired): "
                + ratio_spread([d / b for d, b in zip(default, best, strict=True)])
            )
        for other in ("threads2", "base"):
            if other in variants:
                theirs = [r["sps"] for r in variants[other]]
                lines.append(
                    f"  default / {other} (paired): "
                    + ratio_spread([d / t for d, t in zip(default, theirs, strict=True)])
                )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5, help="runs of each variant (default: 5)")
    ap.add_argument("--busy", type=int, default=2, help="busy processes beside (default: 2)")
    ap.add_argument(
        "--workloads",
        default="cartpole,lstm,workers",
        help=f"comma-separated, of {', '.join(WORKLOADS)} (default: all)",
    )
    ap.add_argument(
        "--total-steps",
        type=int,
        default=1_000_000,
        help="each run's --total-steps (default: 1000000)",
    )
    ap.add_argument(
        "--max-wall-s", type=float, default=10.0, help="each run's --max-wall-s (default: 10)"
    )
    ap.add_argument("--base-src", help="an older rlperf src/ tree: adds the variant 'base'")
    ap.add_argument(
        "--variants",
        default="default,threads1,threads2",
        help="comma-separated, of default, threads1, threads2 (default: all three; "
        "'base' is added by --base-src)",
    )
    ap.add_argument("--out", type=Path, help="write every run here as JSON")
    args = ap.parse_args()  # fmt: skip
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown or not workloads:
        ap.error(f"--workloads: unknown {unknown or 'none given'}; choose from {list(WORKLOADS)}")
    if args.rounds < 1 or args.busy < 0 or args.max_wall_s <= 0:
        ap.error("--rounds must be >= 1, --busy >= 0 and --max-wall-s > 0")
    if args.base_src and not (Path(args.base_src) / "rlperf").is_dir():
        ap.error(f"--base-src {args.base_src}: no rlperf package there (give its src/ folder)")
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if "default" not in variants or not set(variants) <= set(VARIANTS) - {"base"}:
        ap.error("--variants: 'default' and any of threads1, threads2")
    variants += ["base"] if args.base_src else []
    results: dict[str, dict[str, list[dict]]] = {w: {v: [] for v in variants} for w in workloads}
    with tempfile.TemporaryDirectory() as tmp, busy_processes(args.busy):
        for r in range(args.rounds):
            for workload in workloads:
                order = variants if r % 2 == 0 else variants[::-1]
                for variant in order:
                    src = args.base_src if variant == "base" else None
                    flags = WORKLOADS[workload] + VARIANTS[variant]
                    run = run_train(flags, src, args.total_steps, args.max_wall_s, Path(tmp))
                    results[workload][variant].append(run)
                    print(f"round {r + 1} {workload:8s} {variant:9s} SPS {run['sps']:,.0f}",
                          file=sys.stderr, flush=True)  # fmt: skip
    print(f"{args.busy} busy processes, {args.rounds} rounds, --max-wall-s {args.max_wall_s:g}; "
          "SPS median [min-max]" + report(results))  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps({"args": vars(args) | {"out": str(args.out)},
                                        "results": results}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
