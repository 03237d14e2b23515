"""What ``--precision`` and ``--compile`` do to training speed, per policy kind.

    python benchmarks/switches.py                         # every workload, fp32/bf16/compile
    python benchmarks/switches.py --workloads lstm --variants fp32,bf16 --rounds 5

Each measurement is a fresh process running ``rlperf.ppo.Trainer`` for ``--iterations``
iterations after its warm-up (so ``torch.compile``'s compilation, which happens in the first
minibatch, is left out of SPS and reported apart as ``first_iteration_s``); variants take turns
(A B C C B A ...), and the table shows median [min - max] SPS and the update's time per minibatch
(``update/loss`` + ``update/backward`` + ``update/optimizer_step``), with each variant's ratio to
fp32 paired by round.

Workloads (64 envs x 32 steps, 4 minibatches x 4 epochs, 2 threads):
- ``mlp``: CartPole, the stacked MLP (fp32 uses the analytic update; bf16 and compile switch to
  the autograd update, which is part of what they cost);
- ``lstm``: position-only CartPole, the LSTM policy;
- ``cnn``: Catch (1 x 10 x 5 uint8 images), the CNN policy.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from rlperf.bench.harness import spread

WORKLOADS = {
    "mlp": {"env": "cartpole", "options": {}, "kind": "mlp"},
    "lstm": {"env": "cartpole", "options": {"observe": "position"}, "kind": "lstm"},
    "cnn": {"env": "catch", "options": {}, "kind": "cnn"},
}
VARIANTS = {"fp32": ("fp32", False), "bf16": ("bf16", False), "compile": ("fp32", True)}
UPDATE_PARTS = ("update/loss", "update/backward", "update/optimizer_step")


def worker(workload: str, variant: str, iterations: int, threads: int) -> dict:
    from rlperf.config import Config
    from rlperf.ppo.trainer import Trainer
    from rlperf.profiling import Profiler

    spec = WORKLOADS[workload]
    cfg = Config()
    cfg.env.env, cfg.env.options, cfg.policy.kind = spec["env"], spec["options"], spec["kind"]
    cfg.ppo.precision, cfg.ppo.compile = VARIANTS[variant]
    cfg.run.threads, cfg.run.progress, cfg.run.warmup_iters = threads, False, 2
    cfg.run.total_steps = (iterations + cfg.run.warmup_iters) * cfg.batch_size
    trainer = Trainer(cfg, profiler=Profiler())
    first: list[float] = []
    start = time.perf_counter()
    trainer.callbacks.append(lambda t, row: first or first.append(time.perf_counter() - start))
    summary = trainer.train()
    minibatches = cfg.ppo.update_epochs * cfg.ppo.num_minibatches * summary["iterations"]
    update_s = sum(summary["sections"].get(name, 0.0) for name in UPDATE_PARTS)
    return {
        "sps": summary["sps_cumulative"],
        "update_ms_per_minibatch": 1e3 * update_s / minibatches,
        "first_iteration_s": first[0],
        "update": summary["update"],
    }


def measure(workload: str, variant: str, iterations: int, threads: int) -> dict:
    cmd = [sys.executable, __file__, "--worker", workload, "--variant", variant,
           "--iterations", str(iterations), "--threads", str(threads)]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"switches.py: error: {workload} {variant} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workloads", default="mlp,lstm,cnn")
    ap.add_argument("--variants", default="fp32,bf16,compile")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=20, help="timed iterations per process")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="write all samples to this file")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--variant", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.variant, args.iterations, args.threads)))
        return
    variants = args.variants.split(",")
    results: dict[str, dict[str, list[dict]]] = {}
    for workload in args.workloads.split(","):
        results[workload] = {v: [] for v in variants}
        for r in range(args.rounds):
            for variant in variants if r % 2 == 0 else variants[::-1]:
                sample = measure(workload, variant, args.iterations, args.threads)
                results[workload][variant].append(sample)
                print(f"  round {r + 1}/{args.rounds} {workload:<5} {variant:<8} "
                      f"{sample['sps']:>9,.0f} SPS", file=sys.stderr, flush=True)  # fmt: skip
    print(
        f"\n{args.threads} threads, {args.rounds} processes per variant, interleaved; "
        "median [min - max]\n"
    )
    print(
        f"{'workload':<8} {'variant':<8} {'update impl':<15} {'SPS':>26} "
        f"{'update ms / minibatch':>26} {'SPS vs fp32, paired':>26} {'1st iter s':>10}"
    )
    for workload, by_variant in results.items():
        base = by_variant.get("fp32")
        for variant, samples in by_variant.items():
            sps = [s["sps"] for s in samples]
            upd = [s["update_ms_per_minibatch"] for s in samples]
            paired = ""
            if base and variant != "fp32":
                ratios = [s["sps"] / b["sps"] for s, b in zip(samples, base, strict=True)]
                paired = spread(ratios, ".3f")
            first = statistics.median(s["first_iteration_s"] for s in samples)
            impl = samples[0]["update"]
            print(f"{workload:<8} {variant:<8} {impl:<15} {spread(sps, ',.0f'):>26} "
                  f"{spread(upd, '.3f'):>26} {paired:>26} {first:>10.1f}")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
