"""The grid's expected-SPS table, measured: the supervised phase (teacher on) against the PPO
phase (teacher off), and the teacher's share of the rollout.

    python benchmarks/grid_sps.py                       # CPU, 2 threads, 7 rounds
    python benchmarks/grid_sps.py --device cuda         # on a GPU machine

Two trainers of the ``grid`` preset are built once, one that stays in the supervised phase
(``supervised_steps`` beyond the run) and one in PPO from the start, each with its own profiler.
Each round trains each of them ``--iterations`` more iterations, in alternating order, and
records agent steps per second of wall time; the supervised trainer's sections give the
teacher's share of the rollout (``rollout/teacher`` over ``rollout``) and its parts. Medians and
[min - max] over rounds; the SPS ratio is paired per round.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from rlperf.bench.harness import spread


def build(phase: str, args: argparse.Namespace):  # noqa: ANN201
    from rlperf.cli import build_parser
    from rlperf.ppo.commands import config_from_args
    from rlperf.ppo.trainer import Trainer
    from rlperf.timing.sections import Profiler

    big = 1 << 40
    flags = ["train", "--preset", "grid", "--threads", str(args.threads), "--device", args.device,
             "--total-steps", str(big), "--no-progress", "--no-anneal-lr",
             "--supervised-steps", str(big if phase == "supervised" else 0),
             *args.extra]  # fmt: skip
    cfg = config_from_args(build_parser().parse_args(flags))
    cfg.run.warmup_iters = 0
    return Trainer(cfg, profiler=Profiler())


def train_more(trainer, iterations: int) -> float:  # noqa: ANN001
    """Agent steps per second of ``iterations`` more iterations."""
    trainer.cfg.run.total_steps = trainer.global_step + iterations * trainer.batch_size
    start = time.perf_counter()
    trainer.train()
    return iterations * trainer.batch_size / (time.perf_counter() - start)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--iterations", type=int, default=3, help="iterations per side per round")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("extra", nargs="*", help="more `rlperf train` flags, after --")
    args = ap.parse_args()
    trainers = {phase: build(phase, args) for phase in ("supervised", "ppo")}
    for trainer in trainers.values():  # warm-up, and the profilers start from here
        train_more(trainer, 1)
        trainer.prof.reset()
    sps: dict[str, list[float]] = {phase: [] for phase in trainers}
    order = list(trainers)
    for r in range(args.rounds):
        for phase in order if r % 2 == 0 else order[::-1]:
            sps[phase].append(train_more(trainers[phase], args.iterations))
    sup = trainers["supervised"]
    totals = sup.prof.totals_s()
    rollout = totals["rollout"]
    device = str(sup.device) + (f" ({torch.cuda.get_device_name()})" if sup.device.type == "cuda"
                                else f", {torch.get_num_threads()} threads")  # fmt: skip
    print(f"grid preset: {sup.rows} agent rows x {sup.cfg.ppo.num_steps} steps, {device}, "
          f"{args.rounds} rounds of {args.iterations} iterations per phase")  # fmt: skip
    print(f"  supervised phase SPS   {spread(sps['supervised'], ',.0f')}")
    print(f"  PPO phase SPS          {spread(sps['ppo'], ',.0f')}")
    ratios = [s / p for s, p in zip(sps["supervised"], sps["ppo"], strict=True)]
    print(f"  supervised / PPO       {spread(ratios, '.3f')} (paired per round)")
    teacher = totals.get("rollout/teacher", 0.0)
    print(
        f"  teacher share of the supervised rollout: {teacher / rollout:.1%} "
        f"(rollout {rollout:.2f}s, teacher {teacher:.3f}s)"
    )
    for part in ("reshape", "device_to_host", "call", "to_device"):
        seconds = totals.get(f"rollout/teacher/{part}", 0.0)
        print(f"    teacher/{part:<15} {seconds / rollout:6.2%} of the rollout")
    for name in ("rollout/policy_forward", "rollout/env_step", "rollout/buffer_store", "update"):
        print(f"  {name:<24} {totals.get(name, 0.0):7.2f}s (supervised trainer)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
