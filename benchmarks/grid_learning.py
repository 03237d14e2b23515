"""Kickstarting on the grid: supervised-then-PPO against PPO from scratch, on one step budget.

    python benchmarks/grid_learning.py --seeds 1 2 3 --total-steps 1000000 \
        --supervised-steps 300000

For each seed it trains the ``grid`` preset twice in this process (agent steps counted over all
agent rows): with ``--supervised-steps`` of teacher supervision and then PPO, and with PPO from
the first step. Every ``--eval-every`` steps (and at the switch and the end) it plays one full
episode on ``--eval-maps`` fresh maps (a grid env seeded with ``EVAL_SEED``: the same maps at
every evaluation, for the teacher and both students, none of them a training map) and reports:

- the student's mean episode return per agent, acting as it does in training (sampled actions);
- the scripted teacher's mean return on the same maps (the reference);
- on the supervised run, the student's agreement with the teacher: the share of the teacher's
  actions that are also the student's most probable action (greedy), over every agent and step
  of the evaluation episode, in the states the *student* visits.

Targets (issue 10): after the supervised phase agreement >= 90% and return >= 80% of the
teacher's; at the end, supervised-then-PPO above PPO from scratch; after the switch the return
never below 90% of its value at the switch.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import torch

EVAL_SEED = 54_321


def play(policy, options: dict, maps: int, teacher_only: bool = False) -> tuple[float, float]:  # noqa: ANN001
    """One episode on the evaluation maps: (mean return per agent, greedy agreement)."""
    from rlperf.envs import make_vec

    env = make_vec("grid", maps, seed=EVAL_SEED, **options)
    obs, _ = env.reset(seed=EVAL_SEED)
    teacher = env.make_teacher()
    rows = env.num_envs
    returns = np.zeros(rows)
    agree = total = 0
    gen = torch.Generator().manual_seed(EVAL_SEED)
    state = () if teacher_only else policy.initial_state(rows)
    done = torch.ones(rows)
    finished = np.zeros(rows, dtype=bool)
    with torch.inference_mode():
        while not finished.all():
            teacher_actions = teacher(obs)
            if teacher_only:
                actions = teacher_actions
            else:
                obs_t = torch.from_numpy(obs)
                actions_t, _, _, state = policy.act(
                    obs_t, state, done if policy.recurrent else None, None, gen
                )
                actions = actions_t.numpy()
                if not policy.recurrent:
                    logits, _ = policy.heads(obs_t)
                    agree += int((logits.argmax(1).numpy() == teacher_actions).sum())
                    total += rows
            obs, rewards, terminated, truncated, _ = env.step(actions)
            ended = terminated | truncated
            returns += np.where(finished, 0.0, rewards)
            finished |= ended
            done = torch.from_numpy(ended.astype(np.float32))
    return float(returns.mean()), (agree / total if total else float("nan"))


def train_one(seed: int, supervised_steps: int, args: argparse.Namespace, options: dict):  # noqa: ANN201
    from rlperf.cli import build_parser
    from rlperf.ppo.commands import config_from_args
    from rlperf.ppo.trainer import Trainer
    from rlperf.timing.sections import Profiler

    flags = ["train", "--preset", "grid", "--seed", str(seed), "--threads", str(args.threads),
             "--total-steps", str(args.total_steps), "--supervised-steps", str(supervised_steps),
             "--no-progress", *args.extra]  # fmt: skip
    cfg = config_from_args(build_parser().parse_args(flags))
    trainer = Trainer(cfg, profiler=Profiler(enabled=False))
    curve: list[dict] = []
    start, next_eval = time.perf_counter(), [0]
    label = "supervised->ppo" if supervised_steps else "ppo only"

    def evaluate(trainer: Trainer, row: dict) -> None:
        at_switch = supervised_steps and row.get("phase") == "supervised" and trainer.phase == "ppo"
        last = trainer.iteration == trainer.num_iterations
        if trainer.global_step < next_eval[0] and not (at_switch or last):
            return
        next_eval[0] = trainer.global_step + args.eval_every
        ret, agreement = play(trainer.policy, options, args.eval_maps)
        point = {"step": trainer.global_step, "return": ret, "agreement": agreement,
                 "switch": bool(at_switch)}  # fmt: skip
        curve.append(point)
        extra = f"  greedy agreement {agreement:6.1%}" if supervised_steps else ""
        print(f"  seed {seed} {label:<16} step {trainer.global_step:>9,}  return {ret:6.2f}"
              f"{extra}{'  <- switch' if at_switch else ''}  "
              f"{time.perf_counter() - start:5.0f}s", flush=True)  # fmt: skip

    trainer.callbacks.append(evaluate)
    summary = trainer.train()
    return curve, summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--total-steps", type=int, default=1_000_000)
    ap.add_argument("--supervised-steps", type=int, default=300_000)
    ap.add_argument("--eval-every", type=int, default=100_000)
    ap.add_argument("--eval-maps", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("extra", nargs="*", help="more `rlperf train` flags, after --")
    args = ap.parse_args()

    from rlperf.cli import build_parser
    from rlperf.ppo.commands import config_from_args

    probe = config_from_args(build_parser().parse_args(["train", "--preset", "grid", *args.extra]))
    options = dict(probe.env.options)
    teacher_return, _ = play(None, options, args.eval_maps, teacher_only=True)
    print(f"grid {options or '(preset)'}: the teacher earns {teacher_return:.2f} per agent on "
          f"{args.eval_maps} evaluation maps\n")  # fmt: skip
    ok = True
    for seed in args.seeds:
        kick, _ = train_one(seed, args.supervised_steps, args, options)
        scratch, _ = train_one(seed, 0, args, options)
        switch = next(p for p in kick if p["switch"])
        after = [p["return"] for p in kick if p["step"] > switch["step"]]
        lowest = min(after) if after else switch["return"]
        checks = {
            "agreement >= 90% at the switch": switch["agreement"] >= 0.9,
            "return >= 80% of the teacher's at the switch": switch["return"]
            >= 0.8 * teacher_return,
            "kickstarted > scratch at the end": kick[-1]["return"] > scratch[-1]["return"],
            "no collapse (>= 90% of the switch value)": lowest >= 0.9 * switch["return"],
        }
        ok &= all(checks.values())
        print(f"seed {seed}: switch agreement {switch['agreement']:.1%}, return "
              f"{switch['return']:.2f} ({switch['return'] / teacher_return:.0%} of the "
              f"teacher); end: kickstarted {kick[-1]['return']:.2f} vs scratch "
              f"{scratch[-1]['return']:.2f}; lowest after the switch {lowest:.2f}")  # fmt: skip
        for name, passed in checks.items():
            print(f"   {'ok  ' if passed else 'MISS'} {name}")
        print()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
