"""The rollout's cost per step: the fused rollout against the torch path, CartPole, MLP 64x64
or the LSTM.

    python benchmarks/rollout_step.py                     # 4 x 128 and 64 x 32, 7 rounds
    python benchmarks/rollout_step.py --shapes 4x128 1024x32 --rounds 9
    python benchmarks/rollout_step.py --env gym:CartPole-v1   # the fused step: env as today
    python benchmarks/rollout_step.py --policy lstm --env-option observe=position

What it measures: microseconds of ``Trainer.collect`` per rollout step (all envs stepped once:
policy forward, sampling, env step, buffer writes, truncation bootstrap), on one torch thread,
for three variants of one trainer configuration in the same process:

- ``torch``: ``--no-fused-rollout``, the per-step Python loop (profiler on, as a training run);
- ``fused``: the fused rollout with the profiler on (the kernel reads the clock per phase); on
  an env without one (``--env gym:CartPole-v1``) the fused step;
- ``fused-noprof``: the fused rollout with the profiler disabled (no clock reads): the
  difference to ``fused`` is what the in-kernel timing costs.

Each round times ``--rollouts`` whole rollouts of each variant after one warm-up rollout, the
variants taking turns (A B C C B A ...), and the table shows median [min - max] over rounds.
No update runs between rollouts (the weights are the initial ones; the episodes are short,
so resets and truncation-free steps are both exercised).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from rlperf.config import Config, ConfigError, parse_env_options
from rlperf.ppo.fused_rollout import FusedStep
from rlperf.ppo.trainer import Trainer
from rlperf.timing.sections import Profiler

VARIANTS = ("torch", "fused", "fused-noprof")


def make(
    variant: str, env: str, options: dict, policy: str, num_envs: int, num_steps: int, seed: int
) -> Trainer:
    cfg = Config()
    cfg.env.env, cfg.env.options, cfg.policy.kind = env, dict(options), policy
    cfg.env.num_envs, cfg.ppo.num_steps = num_envs, num_steps
    cfg.run.total_steps = num_envs * num_steps
    cfg.run.threads, cfg.run.progress, cfg.run.seed = 1, False, seed
    cfg.policy.fused_rollout = variant != "torch"
    trainer = Trainer(cfg.validate(), profiler=Profiler(enabled=variant != "fused-noprof"))
    fused = trainer.whole_rollout is not None or isinstance(trainer.policy_step, FusedStep)
    if fused == (variant == "torch"):
        raise SystemExit(f"{variant}: the fused rollout kernel is not built here")
    return trainer


def us_per_step(trainer: Trainer, rollouts: int) -> float:
    prof = trainer.prof
    start = time.perf_counter()
    for _ in range(rollouts):
        with prof.section("rollout"):
            trainer.collect()
    elapsed = time.perf_counter() - start
    return elapsed / (rollouts * trainer.buffer.num_steps) * 1e6


def main() -> None:
    # Here, not at the top: run against an older tree (PYTHONPATH), only the timed code is its.
    from rlperf.bench.harness import parse_shape

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="cartpole", help="env name (default: cartpole)")
    parser.add_argument("--env-option", action="append", default=[], metavar="KEY=VALUE",
                        help="env option, as rlperf train's (repeatable)")  # fmt: skip
    parser.add_argument("--policy", choices=["mlp", "lstm"], default="mlp")
    parser.add_argument(
        "--shapes", nargs="+", type=parse_shape, default=[(4, 128), (64, 32)], metavar="NxT"
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--rollouts", type=int, default=10, help="timed rollouts per round")
    args = parser.parse_args()
    try:
        options = parse_env_options(args.env_option)
    except ConfigError as e:
        parser.error(str(e))
    torch.set_num_threads(1)
    print(f"{'envs x steps':>12} {'variant':>13} {'us per step: median [min - max]':>34}")
    for n, t in args.shapes:
        shape = f"{n}x{t}"
        trainers = {v: make(v, args.env, options, args.policy, n, t, seed=1) for v in VARIANTS}
        for tr in trainers.values():
            us_per_step(tr, 1)  # warm-up: workspaces, first-touch pages
        times: dict[str, list[float]] = {v: [] for v in VARIANTS}
        for r in range(args.rounds):
            order = VARIANTS if r % 2 == 0 else VARIANTS[::-1]
            for v in order:
                times[v].append(us_per_step(trainers[v], args.rollouts))
        for v in VARIANTS:
            xs = times[v]
            print(
                f"{shape:>12} {v:>13} {statistics.median(xs):>12.2f} "
                f"[{min(xs):.2f} - {max(xs):.2f}]"
            )
        ratios = [a / b for a, b in zip(times["torch"], times["fused"], strict=True)]
        print(f"{shape:>12} {'torch/fused':>13} {statistics.median(ratios):>12.1f}x (paired)")


if __name__ == "__main__":
    main()
