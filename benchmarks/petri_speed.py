"""Petri-net env step: the batched numpy implementation (turbo) against the plain-Python
reference, on the same net, envs and actions.

    python benchmarks/petri_speed.py                      # jobshop, 64 / 256 / 1024 envs
    python benchmarks/petri_speed.py --net random:1 --envs 256 --rounds 9

Both implementations step identical trajectories (tests/envs/test_petri*.py), so each round
steps both from the same reset with the same pre-drawn valid actions (drawn from the mask of
the observation, as a masked policy would choose); rounds alternate which goes first. Reported:
median [min - max] of per-round mean microseconds per ``step`` call, and the paired
reference/turbo ratio. One process, one thread of numpy work (the env uses no torch).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def actions_for(env, steps: int, seed: int) -> list[np.ndarray]:  # noqa: ANN001
    """A valid action per env per step, following the env's own masks (turbo env)."""
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    out = []
    for _ in range(steps):
        enabled = env.enabled
        # A uniformly random enabled transition per env (any transition if none is enabled).
        scores = rng.random(enabled.shape) + enabled
        actions = scores.argmax(1)
        out.append(actions)
        env.step(actions)
    return out


def time_steps(env, actions: list[np.ndarray], seed: int) -> float:  # noqa: ANN001
    env.reset(seed=seed)
    start = time.perf_counter()
    for a in actions:
        env.step(a)
    return (time.perf_counter() - start) / len(actions) * 1e6


def main() -> None:
    from rlperf.envs import make_vec

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--net", default="jobshop")
    ap.add_argument("--envs", default="64,256,1024")
    ap.add_argument("--steps", type=int, default=200, help="steps per timing")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    print(f"net {args.net}; us per step call, median [min - max] of {args.rounds} rounds\n")
    print(f"{'envs':>6} {'turbo':>24} {'reference':>28} {'reference / turbo, paired':>34}")
    for n in (int(x) for x in args.envs.split(",")):
        turbo = make_vec("petri", n, seed=0, net=args.net, turbo=True)
        ref = make_vec("petri", n, seed=0, net=args.net, turbo=False)
        actions = actions_for(turbo, args.steps, seed=0)
        times: dict[str, list[float]] = {"turbo": [], "reference": []}
        for r in range(args.rounds):
            order = [("turbo", turbo), ("reference", ref)]
            for name, env in order if r % 2 == 0 else order[::-1]:
                times[name].append(time_steps(env, actions, seed=0))
        ratios = [b / a for a, b in zip(times["turbo"], times["reference"], strict=True)]

        def spread(v: list[float], fmt: str) -> str:
            return f"{statistics.median(v):{fmt}} [{min(v):{fmt}} - {max(v):{fmt}}]"

        print(f"{n:>6} {spread(times['turbo'], ',.1f'):>24} "
              f"{spread(times['reference'], ',.0f'):>28} {spread(ratios, '.1f'):>34}")  # fmt: skip


if __name__ == "__main__":
    main()
