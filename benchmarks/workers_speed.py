"""Env steps per second of rlperf's env workers against the peers users know, side by side.

Synchronous stepping with random actions, every contender built once and timed in interleaved
rounds (one timing of each per round), medians [min-max] and paired ratios per round:

- ``gym:CartPole-v1``, 64 envs, 2 workers: rlperf's ``MultiprocessVecEnv`` as a user builds it
  (``copy=True``: fresh arrays every step, every info key carried) and as the trainer does
  (``copy=False``, "views": its shared memory itself), against
  PufferLib's ``pufferlib.vector.Multiprocessing`` (same envs, workers and batch), gymnasium's
  ``AsyncVectorEnv(shared_memory=True)`` (one process per env, as it is designed), gymnasium's
  ``SyncVectorEnv`` and rlperf's serial backend.
- The ceiling: the same envs split over 2 processes that step their shares at once with no
  signalling at all (each built, then all released together). No worker design can beat it:
  over the serial backend it is what 2 cores give this env at all, and what the workers fall
  short of it is the cost of handing every step over (docs/workers.md, "What 2 cores allow").
- A heavy env, where a worker's share costs over 1 ms a step: the grid at 4096 agent rows
  (256 maps) and ``gym:CartPole-v1`` at 256 envs, serial against 2 workers (processes, pinned,
  and inline: worker 0 in the timing process, ``--inline-worker``, without and with the spin
  the trainer's automatic ``--worker-spin-us`` gives it here).

The peers are benchmark-only dependencies, installed by hand (no extra: see pyproject.toml)::

    pip install --no-deps pufferlib-core==3.0.23   # --no-deps: it pins torch==2.9.0
    python benchmarks/workers_speed.py --rounds 7 --seconds 1.0

(``pufferlib-core`` imports without its other dependencies for ``pufferlib.vector``.)
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import os
import platform
import statistics
import time
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np

from rlperf.envs import make_vec
from rlperf.envs.backends import AUTO_SPIN_US
from rlperf.envs.workers import MultiprocessVecEnv

StepFn = Callable[[np.ndarray], Any]
SERIAL = "rlperf serial"
# What the trainer's automatic --worker-spin-us gives an inline worker on 2 cores with
# --threads 1 (envs/backends.py).
SPIN = AUTO_SPIN_US


class Contender:
    """A built vector env, its step function and a pool of random actions."""

    def __init__(self, name: str, num_envs: int, step: StepFn, close: Callable[[], None],
                 actions: np.ndarray) -> None:  # fmt: skip
        self.name, self.num_envs, self.step, self.close = name, num_envs, step, close
        self.actions = actions

    def steps_per_s(self, seconds: float) -> float:
        for k in range(10):  # warm: caches, lazily built buffers, workers awake
            self.step(self.actions[k % len(self.actions)])
        steps, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            self.step(self.actions[steps % len(self.actions)])
            steps += 1
        return steps * self.num_envs / elapsed


def random_actions(num_envs: int, choices: int, dtype: Any = np.int64) -> np.ndarray:
    return np.random.default_rng(0).integers(0, choices, (64, num_envs)).astype(dtype)


def rlperf_multiprocess(env_name: str, num_envs: int, workers: int, choices: int,
                        pin: bool = False, inline: bool = False, spin_us: float = 0.0,
                        copy: bool = True, **options: Any) -> Contender:  # fmt: skip
    env = MultiprocessVecEnv(env_name, num_envs, workers, seed=1, options=options, pin_cores=pin,
                             inline=inline, spin_us=spin_us, copy=copy)  # fmt: skip
    how = " pinned" if pin else " inline" if inline else ""
    how += f" spin {spin_us:g} us" if spin_us else ""
    how += "" if copy else " views"
    return Contender(f"rlperf multiprocess {workers}w{how}", env.num_envs, env.step, env.close,
                     random_actions(env.num_envs, choices))  # fmt: skip


def rlperf_serial(env_name: str, num_envs: int, choices: int, **options: Any) -> Contender:
    env = make_vec(env_name, num_envs, seed=1, **options)
    return Contender(SERIAL, env.num_envs, env.step, env.close,
                     random_actions(env.num_envs, choices))  # fmt: skip


def _step_share(env_name: str, num_envs: int, choices: int, seconds: float, options: dict,
                start: Any, out: Any) -> None:  # fmt: skip
    """One process of :class:`Ceiling`: build the share, wait for the start, step, report."""
    env = make_vec(env_name, num_envs, seed=1, **options)
    actions = random_actions(env.num_envs, choices)
    for k in range(10):
        env.step(actions[k % len(actions)])
    start.wait()
    steps, begin = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - begin) < seconds:
        env.step(actions[steps % len(actions)])
        steps += 1
    out.put(steps * env.num_envs / elapsed)
    env.close()


class Ceiling(Contender):
    """``workers`` processes each stepping ``num_envs / workers`` envs at once, no signalling:
    the sum of their env steps per second."""

    def __init__(self, env_name: str, num_envs: int, workers: int, choices: int,
                 **options: Any) -> None:  # fmt: skip
        super().__init__(f"ceiling: {workers} processes, no signalling", num_envs,
                         lambda a: None, lambda: None, np.empty(0))  # fmt: skip
        self.args = (env_name, num_envs // workers, choices)
        self.workers, self.options = workers, options

    def steps_per_s(self, seconds: float) -> float:
        ctx = multiprocessing.get_context("forkserver")
        start, out = ctx.Barrier(self.workers + 1), ctx.Queue()
        processes = [ctx.Process(target=_step_share, args=(*self.args, seconds, self.options,
                                                           start, out))
                     for _ in range(self.workers)]  # fmt: skip
        for p in processes:
            p.start()
        start.wait()
        total = sum(out.get(timeout=60 + seconds) for _ in processes)
        for p in processes:
            p.join()
        return total


def pufferlib_multiprocessing(num_envs: int, workers: int) -> Contender:
    import pufferlib.emulation
    import pufferlib.vector

    creator = functools.partial(
        pufferlib.emulation.GymnasiumPufferEnv, env_creator=gymnasium.make, env_args=["CartPole-v1"]
    )
    env = pufferlib.vector.make(creator, num_envs=num_envs, num_workers=workers,
                                batch_size=num_envs, backend=pufferlib.vector.Multiprocessing,
                                overwork=True)  # fmt: skip
    env.reset(seed=1)
    return Contender(f"pufferlib Multiprocessing {workers}w", num_envs, env.step, env.close,
                     random_actions(num_envs, 2, np.int32))  # fmt: skip


def gymnasium_vector(num_envs: int, mode: str) -> Contender:
    make = functools.partial(gymnasium.make, "CartPole-v1")
    if mode == "async":
        env = gymnasium.vector.AsyncVectorEnv([make] * num_envs, shared_memory=True)
        name = f"gymnasium AsyncVectorEnv {num_envs}p"
    else:
        env = gymnasium.vector.SyncVectorEnv([make] * num_envs)
        name = "gymnasium SyncVectorEnv"
    env.reset(seed=1)
    return Contender(name, num_envs, env.step, env.close, random_actions(num_envs, 2))


def run_group(title: str, builders: list[Callable[[], Contender]], rounds: int,
              seconds: float) -> dict[str, Any]:  # fmt: skip
    # Each contender exists only while it is timed: PufferLib's idle workers poll (each burnt
    # ~0.25 of a core here while another contender ran), which would slow whatever runs beside
    # them on 2 cores.
    rates: dict[str, list[float]] = {}
    missing: dict[Callable[[], Contender], str] = {}
    for _ in range(rounds):
        for build in builders:
            if build in missing:
                continue
            try:
                c = build()
            except ImportError as e:
                missing[build] = str(e)
                print(f"  skipped: {e}")
                continue
            try:
                rates.setdefault(c.name, []).append(c.steps_per_s(seconds))
            finally:
                c.close()
    ours = next(iter(rates))
    serial = rates.get(SERIAL)
    print(f"\n{title}: env steps/s, median [min-max] over {rounds} rounds; paired ratios: "
          f"{ours!r} to each" + (", each to the serial backend" if serial else ""))  # fmt: skip
    result: dict[str, Any] = {}
    for name, values in rates.items():
        ratios = [a / b for a, b in zip(rates[ours], values, strict=True)]
        result[name] = {"steps_per_s": values, "ratio": ratios}
        line = (f"  {name:40s} {statistics.median(values):>12,.0f} "
                f"[{min(values):,.0f}-{max(values):,.0f}]   x{statistics.median(ratios):.2f} "
                f"[{min(ratios):.2f}-{max(ratios):.2f}]")  # fmt: skip
        if serial:
            over = [a / b for a, b in zip(values, serial, strict=True)]
            result[name]["over_serial"] = over
            line += (f"   {statistics.median(over):.2f}x serial "
                     f"[{min(over):.2f}-{max(over):.2f}]")  # fmt: skip
        print(line)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=1.0, help="timed seconds per contender")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--skip-heavy", action="store_true")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    w = args.workers
    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {platform.node()}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    results = {
        "cartpole_64": run_group(
            "gym:CartPole-v1, 64 envs, synchronous",
            [
                lambda: rlperf_multiprocess("gym:CartPole-v1", 64, w, 2),
                lambda: rlperf_multiprocess("gym:CartPole-v1", 64, w, 2, copy=False),
                lambda: rlperf_multiprocess("gym:CartPole-v1", 64, w, 2, pin=True, copy=False),
                lambda: rlperf_multiprocess("gym:CartPole-v1", 64, w, 2, inline=True, copy=False),
                lambda: rlperf_multiprocess(
                    "gym:CartPole-v1", 64, w, 2, inline=True, spin_us=SPIN, copy=False
                ),
                lambda: Ceiling("gym:CartPole-v1", 64, w, 2),
                lambda: pufferlib_multiprocessing(64, w),
                lambda: gymnasium_vector(64, "async"),
                lambda: gymnasium_vector(64, "sync"),
                lambda: rlperf_serial("gym:CartPole-v1", 64, 2),
            ],
            args.rounds,
            args.seconds,
        )
    }
    if not args.skip_heavy:
        results["grid_4096_rows"] = run_group(
            "grid, 256 maps x 16 agents = 4096 rows",
            [
                lambda: rlperf_multiprocess("grid", 256, w, 5, copy=False),
                lambda: rlperf_multiprocess("grid", 256, w, 5, pin=True, copy=False),
                lambda: rlperf_multiprocess("grid", 256, w, 5, inline=True, copy=False),
                lambda: rlperf_multiprocess(
                    "grid", 256, w, 5, inline=True, spin_us=SPIN, copy=False
                ),
                lambda: Ceiling("grid", 256, w, 5),
                lambda: rlperf_serial("grid", 256, 5),
            ],
            args.rounds,
            args.seconds,
        )
        results["cartpole_256"] = run_group(
            "gym:CartPole-v1, 256 envs",
            [
                lambda: rlperf_multiprocess("gym:CartPole-v1", 256, w, 2, copy=False),
                lambda: rlperf_multiprocess("gym:CartPole-v1", 256, w, 2, pin=True, copy=False),
                lambda: rlperf_multiprocess("gym:CartPole-v1", 256, w, 2, inline=True, copy=False),
                lambda: rlperf_multiprocess(
                    "gym:CartPole-v1", 256, w, 2, inline=True, spin_us=SPIN, copy=False
                ),
                lambda: Ceiling("gym:CartPole-v1", 256, w, 2),
                lambda: rlperf_serial("gym:CartPole-v1", 256, 2),
            ],
            args.rounds,
            args.seconds,
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
