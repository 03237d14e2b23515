"""The PPO update's cost per minibatch as the trainer pays it (CartPole, the default MLP).

    python benchmarks/update_cost.py                          # 4 x 128: 128-sample minibatches
    python benchmarks/update_cost.py --shape 64x32 --repeats 200
    # before/after, paired: the same script against two source trees, rounds interleaved
    python benchmarks/update_cost.py --src /work/main/src --src src --rounds 5

One trainer (``--threads`` torch threads, default 1) collects one rollout and computes its
advantages; then ``Trainer.update()`` (update_epochs x num_minibatches minibatches: shuffle,
advantage normalisation, gradients, Adam) runs ``--repeats`` times and the script prints the
median microseconds per minibatch, the update's own sections from the profiler per minibatch,
and which update class ran. Each source tree runs in its own fresh process (``--src``), one
round after the other, so two trees are compared under the same machine state.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

WORKER = "--worker"


def measure(shape: str, repeats: int, threads: int) -> dict:
    """In this process: the update's microseconds per minibatch, median over ``repeats``."""
    import torch  # noqa: PLC0415  (imported from the --src tree the parent chose)

    from rlperf.config import Config  # noqa: PLC0415
    from rlperf.ppo.trainer import Trainer  # noqa: PLC0415

    envs, steps = (int(x) for x in shape.split("x"))
    cfg = Config()
    cfg.env.num_envs, cfg.ppo.num_steps = envs, steps
    cfg.run.threads, cfg.run.progress, cfg.run.seed = threads, False, 1
    cfg.run.total_steps = envs * steps * 10
    trainer = Trainer(cfg.validate())
    torch.set_num_threads(threads)
    trainer.collect()
    trainer.compute_advantages()
    per_update = cfg.ppo.update_epochs * cfg.ppo.num_minibatches
    for _ in range(5):  # warm-up: workspaces, first-touch pages
        trainer.update()
    trainer.prof.reset()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        with trainer.prof.section("update"):
            trainer.update()
        times.append((time.perf_counter_ns() - t0) / per_update / 1e3)
    sections = {
        name: ns / 1e3 / (repeats * per_update)
        for name, ns in trainer.prof.snapshot_ns().items()
        if name.startswith("update/")
    }
    return {
        "us_per_minibatch": statistics.median(times),
        "min_us": min(times),
        "max_us": max(times),
        "sections_us_per_minibatch": sections,
        "update": type(trainer.update_impl).__name__,
        "minibatch_rows": envs * steps // cfg.ppo.num_minibatches,
    }


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == WORKER:
        print(json.dumps(measure(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
        return 0
    from rlperf.bench.harness import parse_shape  # noqa: PLC0415  (the parent's rlperf only)

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", type=parse_shape, default=(4, 128),
                    help="ENVSxSTEPS (default 4x128)")  # fmt: skip
    ap.add_argument("--repeats", type=int, default=100, help="updates timed per round")
    ap.add_argument("--rounds", type=int, default=3, help="fresh processes per source tree")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--src", action="append", help="source tree(s) to import rlperf from, "
                    "each its own column (default: the rlperf this python imports)")  # fmt: skip
    args = ap.parse_args()
    if args.repeats < 1 or args.rounds < 1 or args.threads < 1:
        ap.error("--repeats, --rounds and --threads must be >= 1")
    srcs = args.src or [None]
    for src in srcs:
        if src is not None and not os.path.isdir(os.path.join(src, "rlperf")):
            ap.error(f"--src {src}: no rlperf package there")
    rows: dict[str | None, list[dict]] = {s: [] for s in srcs}
    for rnd in range(args.rounds):
        for src in srcs if rnd % 2 == 0 else srcs[::-1]:
            env = dict(os.environ)
            if src is not None:
                env["PYTHONPATH"] = os.path.abspath(src)
            shape = "x".join(map(str, args.shape))
            cmd = [sys.executable, __file__, WORKER, shape, str(args.repeats),
                   str(args.threads)]  # fmt: skip
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
            res = json.loads(out.stdout.strip().splitlines()[-1])
            rows[src].append(res)
            print(f"round {rnd} {src or 'default'}: {res['us_per_minibatch']:.1f} us/minibatch "
                  f"({res['update']})", flush=True)  # fmt: skip
    for src, res in rows.items():
        per = [r["us_per_minibatch"] for r in res]
        print(
            f"\n{src or 'default'}: {res[0]['update']}, {res[0]['minibatch_rows']} rows: "
            f"{statistics.median(per):.1f} us per minibatch [{min(per):.1f}-{max(per):.1f}]"
        )
        for name in res[0]["sections_us_per_minibatch"]:
            vals = [r["sections_us_per_minibatch"].get(name, 0.0) for r in res]
            print(f"  {name:<32} {statistics.median(vals):8.1f} us")
    if len(srcs) == 2:
        ratios = [a["us_per_minibatch"] / b["us_per_minibatch"]
                  for a, b in zip(rows[srcs[0]], rows[srcs[1]], strict=True)]  # fmt: skip
        print(
            f"\n{srcs[0]} / {srcs[1]}, paired by round: {statistics.median(ratios):.2f}x "
            f"[{min(ratios):.2f}-{max(ratios):.2f}]"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
