"""Grid env speed on one thread: agent-steps per second, the scripted teacher's cost, new maps.

    python benchmarks/grid_speed.py                            # extractor_hub_30, 4096 rows
    python benchmarks/grid_speed.py --rows 1024 --rounds 9 --cpu 0
    python benchmarks/grid_speed.py --mission extractor_hub_12 --steps 64

Every round, in alternating order (so a machine whose speed drifts affects them alike):

- **env step**: ``--steps`` calls of ``env.step`` with pre-drawn uniform random actions
  (default: one whole episode, so every map is truncated and regenerated once and its cost is
  amortised over the steps, as in training). Reported as microseconds per call and agent-steps
  per second (rows / seconds per call), with the env's own sections (``move``, ``observe``,
  ``reset``: new maps) per call from rlperf's profiler.
- **teacher**: the same number of steps, timing only the ``GridTeacher`` call on each returned
  observation; its share of the env step is paired round by round.
- **new maps**: ``env.reset()``, every map drawn again (walls, extractors, distance fields,
  agents) and the first observation built.
- **env step without the goal plane** (``--goal-plane-cost``): the same steps on an env made
  with ``goal_plane=False`` (eight planes, the observation before the ``GOAL`` plane), paired
  round by round with the default env: what the plane costs.

Reported: median [min - max] over the rounds. One process; numpy's elementwise work is single
threaded and BLAS is held to one thread; ``--cpu N`` also pins the process to core N. On a
machine shared with other busy processes, ``--clock cpu`` times with this thread's CPU time
instead of the wall clock (it leaves out the time the thread waits for a core, not the caches
the others evict); the env's sections are always wall time.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

from rlperf.bench.harness import spread  # noqa: E402

if TYPE_CHECKING:
    from rlperf.envs.grid import GridTeacher, GridVec

SECTIONS = ("move", "observe", "reset")
CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}


def time_env(
    env: GridVec, actions: np.ndarray, clock: Callable[[], float]
) -> tuple[float, dict[str, float]]:
    """Seconds per step call, and per-call seconds of the env's profiler sections."""
    from rlperf import get_profiler

    prof = get_profiler()
    before = prof.snapshot_ns()
    start = clock()
    for a in actions:
        env.step(a)
    per_step = (clock() - start) / len(actions)
    after = prof.snapshot_ns()
    parts = {s: (after.get(s, 0) - before.get(s, 0)) / 1e9 / len(actions) for s in SECTIONS}
    return per_step, parts


def time_teacher(
    env: GridVec, teacher: GridTeacher, actions: np.ndarray, clock: Callable[[], float]
) -> float:
    """Seconds per teacher call on the observations of ``actions``' steps."""
    total = 0.0
    obs = env.step(actions[0])[0]
    for a in actions[1:]:
        start = clock()
        teacher(obs)
        total += clock() - start
        obs = env.step(a)[0]
    return total / (len(actions) - 1)


def main() -> None:
    from rlperf.envs import make_vec
    from rlperf.envs.grid import MISSIONS, GridTeacher

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mission", default="extractor_hub_30", choices=list(MISSIONS))
    ap.add_argument("--rows", type=int, default=4096, help="agent rows (maps x agents)")
    ap.add_argument("--steps", type=int, default=None, help="steps per timing (default: max_steps)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cpu", type=int, default=None, help="pin to this core")
    ap.add_argument("--clock", choices=list(CLOCKS), default="wall")
    ap.add_argument("--goal-plane-cost", action="store_true",
                    help="also time an env without the GOAL plane, paired")  # fmt: skip
    args = ap.parse_args()
    clock = CLOCKS[args.clock]
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    agents = MISSIONS[args.mission].num_agents
    if args.rows % agents:
        raise SystemExit(f"--rows {args.rows} must be a multiple of {agents} agents per map")
    env = make_vec("grid", args.rows // agents, seed=0, mission=args.mission)
    teacher = GridTeacher(env)
    steps = args.steps or env.max_steps
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 5, (steps, env.num_envs))
    time_env(env, actions[: min(steps, 20)], clock)  # warm-up: allocator, caches
    results: dict[str, list[float]] = {"step": [], "teacher": [], "reset": [], "no_goal": []}
    parts: dict[str, list[float]] = {s: [] for s in SECTIONS}

    def run_step() -> None:
        env.reset(seed=1)
        per_step, sections = time_env(env, actions, clock)
        results["step"].append(per_step)
        for s in SECTIONS:
            parts[s].append(sections[s])

    def run_teacher() -> None:
        env.reset(seed=1)
        results["teacher"].append(time_teacher(env, teacher, actions, clock))

    def run_reset() -> None:
        start = clock()
        env.reset()
        results["reset"].append(clock() - start)

    order = [run_step, run_teacher, run_reset]
    if args.goal_plane_cost:
        plain = make_vec("grid", args.rows // agents, seed=0, mission=args.mission,
                         goal_plane=False)  # fmt: skip

        def run_step_without_goal() -> None:
            plain.reset(seed=1)
            results["no_goal"].append(time_env(plain, actions, clock)[0])

        order.insert(1, run_step_without_goal)
    for r in range(args.rounds):
        for fn in order if r % 2 == 0 else order[::-1]:
            fn()

    us = [s * 1e6 for s in results["step"]]
    sps = [env.num_envs / s / 1e6 for s in results["step"]]
    teacher_us = [s * 1e6 for s in results["teacher"]]
    share = [100 * t / s for t, s in zip(results["teacher"], results["step"], strict=True)]
    reset_ms = [s * 1e3 for s in results["reset"]]
    print(f"grid {args.mission}: {env.num_maps} maps x {env.num_agents} agents = "
          f"{env.num_envs} agent rows, obs {env.single_observation_space.shape} uint8, "
          f"one thread, {args.clock} clock")  # fmt: skip
    print(f"median [min - max] of {args.rounds} rounds of {steps} steps "
          f"(max_steps {env.max_steps})\n")  # fmt: skip
    print(f"{'env step, random actions':<28} {spread(us, ',.0f'):>26} us   "
          f"{spread(sps, '.2f')} M agent-steps/s")  # fmt: skip
    for s in SECTIONS:
        label = "new maps (amortised)" if s == "reset" else s
        print(f"  {label:<26} {spread([v * 1e6 for v in parts[s]], ',.0f'):>26} us")
    if args.goal_plane_cost:
        plain_us = [v * 1e6 for v in results["no_goal"]]
        ratio = [a / b for a, b in zip(results["step"], results["no_goal"], strict=True)]
        print(f"{'env step, no goal plane':<28} {spread(plain_us, ',.0f'):>26} us   "
              f"with / without: {spread(ratio, '.3f')}, paired")  # fmt: skip
    print(f"{'teacher call':<28} {spread(teacher_us, ',.0f'):>26} us   "
          f"{spread(share, '.1f')} % of env step, paired")  # fmt: skip
    print(f"{'reset: all maps new':<28} {spread(reset_ms, ',.1f'):>26} ms   "
          f"{spread([v / env.num_maps * 1e3 for v in reset_ms], '.0f')} us per map")  # fmt: skip


if __name__ == "__main__":
    main()
