"""Does PPO learn Ricochet Robots? Greedy solve rate on fresh puzzles, against a random policy.

    # symbolic planes + CNN, seeds 1 2 3, 5M steps each (issue target: >= 80% solved)
    python benchmarks/robots_learning.py --seeds 1 2 3 --total-steps 5000000 \
        -- --env-option obs_mode=symbolic --policy cnn --cnn-channels 32 32 \
        --cnn-features 128 --learning-rate 0.002
    # RGB + ConvLSTM on a 30-minute budget (target: >= 2x the random policy's solve rate)
    python benchmarks/robots_learning.py --seeds 1 --total-steps 1000000 --eval-every 100000 \
        --eval-puzzles 200 -- --preset robots-rgb

For each seed it trains ``rlperf train --env robots [flags after --]`` in this process, and every
``--eval-every`` env steps (and at the end) plays ``--eval-puzzles`` fresh puzzles (a robots env
seeded with ``EVAL_SEED``, so every evaluation and the random baseline see the same puzzles, none
of them the training seed's) with the greedy policy: the action of highest probability, found by
scoring every action with the policy's own ``evaluate`` (works for any policy of the protocol,
recurrent ones included: their state is stepped by ``act``, which the action does not affect).
A puzzle counts as solved when its first episode ends by reaching the target (within the env's
``max_steps``). The random policy's solve rate on the same puzzles is printed beside the curve.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

EVAL_SEED = 12_345


def solve_rate(env_options: dict, puzzles: int, choose) -> float:  # noqa: ANN001 - a callable
    """Fraction of ``puzzles`` fresh puzzles whose first episode reaches the target.

    ``choose(obs, done) -> actions`` picks the actions of one step ((N,) int64 numpy).
    """
    from rlperf.envs import make_vec

    env = make_vec("robots", puzzles, seed=EVAL_SEED, **env_options)
    obs, _ = env.reset(seed=EVAL_SEED)
    finished = np.zeros(puzzles, dtype=bool)
    solved = np.zeros(puzzles, dtype=bool)
    done = np.ones(puzzles, dtype=np.float32)
    while not finished.all():
        actions = choose(obs, done)
        obs, _, terminated, truncated, _ = env.step(actions)
        ended = (terminated | truncated) & ~finished
        solved |= ended & terminated
        finished |= ended
        done = (terminated | truncated).astype(np.float32)
    return float(solved.mean())


def greedy_chooser(policy, num_envs: int, num_actions: int):  # noqa: ANN001, ANN201
    """``choose(obs, done)`` with the policy's most probable action, its state carried."""
    state = [policy.initial_state(num_envs)]
    candidates = torch.arange(num_actions)

    @torch.inference_mode()
    def choose(obs: np.ndarray, done: np.ndarray) -> np.ndarray:
        obs_t, done_t = torch.from_numpy(obs), torch.from_numpy(done)
        before = state[0]
        # Score every action for every env in one evaluate call over (1, B * A) rows.
        rep_obs = obs_t.repeat_interleave(num_actions, 0).unsqueeze(0)
        rep_actions = candidates.repeat(num_envs).unsqueeze(0)
        rep_state = tuple(s.repeat_interleave(num_actions, 0) for s in before)
        rep_done = done_t.repeat_interleave(num_actions, 0).unsqueeze(0)
        logprob, _, _ = policy.evaluate(
            rep_obs, rep_actions, rep_state, rep_done if policy.recurrent else None, None
        )
        best = logprob.view(num_envs, num_actions).argmax(1)
        _, _, _, state[0] = policy.act(obs_t, before, done_t if policy.recurrent else None)
        return best.numpy()

    return choose


def random_chooser(num_actions: int, seed: int):  # noqa: ANN201
    rng = np.random.default_rng(seed)
    return lambda obs, done: rng.integers(0, num_actions, len(obs))


def train_one(seed: int, args: argparse.Namespace) -> list[tuple[int, float, float]]:
    """Train one seed; returns (global step, greedy solve rate, wall seconds) per evaluation."""
    from rlperf.cli import build_parser
    from rlperf.ppo.commands import config_from_args
    from rlperf.ppo.trainer import Trainer
    from rlperf.timing.sections import Profiler

    flags = ["train", "--env", "robots", "--seed", str(seed), "--threads", str(args.threads),
             "--total-steps", str(args.total_steps), "--no-progress", *args.extra]  # fmt: skip
    cfg = config_from_args(build_parser().parse_args(flags))
    trainer = Trainer(cfg, profiler=Profiler(enabled=False))
    options = dict(cfg.env.options)
    num_actions = int(trainer.spec.action.nvec[0])
    curve: list[tuple[int, float, float]] = []
    start = time.perf_counter()
    next_eval = [0]

    def evaluate(trainer: Trainer, row: dict) -> None:
        last = trainer.iteration == trainer.num_iterations
        if trainer.global_step < next_eval[0] and not last:
            return
        next_eval[0] = trainer.global_step + args.eval_every
        chooser = greedy_chooser(trainer.policy, args.eval_puzzles, num_actions)
        rate = solve_rate(options, args.eval_puzzles, chooser)
        curve.append((trainer.global_step, rate, time.perf_counter() - start))
        print(f"  seed {seed} step {trainer.global_step:>10,}  greedy solved {rate:6.1%}  "
              f"train return {row['mean_return'] or 0:+.3f}  "
              f"entropy {row.get('entropy', float('nan')):.2f}  "
              f"{time.perf_counter() - start:7.0f}s", flush=True)  # fmt: skip

    trainer.callbacks.append(evaluate)
    trainer.train()
    return curve


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--total-steps", type=int, default=5_000_000)
    ap.add_argument("--eval-every", type=int, default=500_000, help="env steps between evals")
    ap.add_argument("--eval-puzzles", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--target", type=float, default=0.8, help="greedy solve rate to reach")
    ap.add_argument("extra", nargs="*", help="more `rlperf train` flags, after --")
    args = ap.parse_args()

    from rlperf.cli import build_parser
    from rlperf.ppo.commands import config_from_args

    probe = ["train", "--env", "robots", *args.extra]
    options = dict(config_from_args(build_parser().parse_args(probe)).env.options)
    from rlperf.envs import make_vec

    num_actions = int(make_vec("robots", 1, **options).single_action_space.n)
    baseline = solve_rate(options, args.eval_puzzles, random_chooser(num_actions, 0))
    print(f"robots {options or '(defaults)'}: random policy solves {baseline:.1%} of "
          f"{args.eval_puzzles} fresh puzzles\n")  # fmt: skip
    reached = []
    for seed in args.seeds:
        curve = train_one(seed, args)
        first = next((step for step, rate, _ in curve if rate >= args.target), None)
        reached.append(first is not None)
        final = curve[-1][1]
        times = final / max(baseline, 1e-9)
        print(f"seed {seed}: final greedy solve rate {final:.1%} ({times:.1f}x "
              f"random); first step >= {args.target:.0%}: "
              f"{f'{first:,}' if first is not None else 'not reached'}\n")  # fmt: skip
    return 0 if all(reached) else 1


if __name__ == "__main__":
    sys.exit(main())
