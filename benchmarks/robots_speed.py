"""Ricochet Robots speed: the batched renderer against the per-env Pillow reference, env steps
per second in both observation modes, and what a new episode costs.

    python benchmarks/robots_speed.py                 # 5 rounds
    python benchmarks/robots_speed.py --rounds 9 --render-envs 256 --step-envs 1024

One process, one thread (BLAS/OpenMP pools pinned to 1 before numpy loads; the env itself uses
numpy only). Rounds interleave the contenders, alternating which goes first, so that a machine
whose speed drifts affects both alike; each line shows the median [min - max] over rounds.

1. Rendering, ``--render-envs`` boards at ``--image-size`` (default 256 at 64x64), images/s:
   ``batched step`` is the env's per-step observation (cached backgrounds copied, target and
   robots pasted), ``batched full`` also draws the backgrounds (grid and walls) as a reset
   does, ``pillow`` the per-env reference (ImageDraw on a 4x canvas, box resize). The ratios
   are paired per round: pillow time / batched time for the same boards.
2. Env steps/s at ``--step-envs`` envs (default 1024), random actions, observations included,
   ``rgb_image`` and ``symbolic``.
3. New episodes: puzzle generation (one refill batch, batched BFS) in microseconds per puzzle,
   and a full ``reset()`` of every env (pool draws and refills, backgrounds or wall planes,
   first observations) in microseconds per env.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

import numpy as np  # noqa: E402

from rlperf.bench.harness import spread  # noqa: E402


def timed(fn: Callable[[], object], repeat: int = 1) -> float:
    """Seconds per call of ``fn`` over ``repeat`` calls."""
    start = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - start) / repeat


def interleaved(contenders: dict[str, Callable[[], float]], rounds: int) -> dict[str, list]:
    """Run each contender once per round, the order reversed every other round."""
    times: dict[str, list[float]] = {name: [] for name in contenders}
    order = list(contenders)
    for r in range(rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            times[name].append(contenders[name]())
    return times


def bench_render(envs: int, image_size: int, rounds: int) -> None:
    from rlperf.envs.robots import make_robots
    from rlperf.envs.robots.reference import reference_image

    env = make_robots(envs, image_size=image_size)
    env.reset(seed=0)
    renderer = env._renderer
    walls, positions = env.walls.copy(), env.positions.copy()
    robot, cell = env.target_robot.copy(), env.target_cell.copy()

    def full() -> None:
        images = renderer.backgrounds(walls)
        renderer.draw_target(images, robot, cell)
        renderer.draw_robots(images, positions, robot, cell)

    def pillow() -> None:
        for i in range(envs):
            reference_image(walls[i], positions[i], int(robot[i]), int(cell[i]), image_size)

    contenders = {
        "batched step": lambda: timed(env._observe, 20),
        "batched full": lambda: timed(full, 10),
        "pillow": lambda: timed(pillow),
    }
    for fn in contenders.values():  # warm-up
        fn()
    times = interleaved(contenders, rounds)
    print(f"1. rendering {envs} boards at {image_size}x{image_size}: images/s, "
          f"median [min - max] of {rounds} rounds")  # fmt: skip
    for name, t in times.items():
        print(f"   {name:<13} {spread([envs / x for x in t], ',.0f'):>36}")
    for name in ("batched step", "batched full"):
        ratios = [p / b for p, b in zip(times["pillow"], times[name], strict=True)]
        print(f"   pillow / {name:<13} {spread(ratios, ',.0f'):>26} x (paired)")


def bench_steps(envs: int, image_size: int, rounds: int, steps: int) -> None:
    from rlperf.envs import make_vec

    rng = np.random.default_rng(0)
    made = {mode: make_vec("robots", envs, seed=0, obs_mode=mode, image_size=image_size)
            for mode in ("rgb_image", "symbolic")}  # fmt: skip
    actions = [rng.integers(0, made["symbolic"].single_action_space.n, envs)
               for _ in range(steps)]  # fmt: skip

    def run(mode: str) -> float:
        env = made[mode]
        return timed(lambda: [env.step(a) for a in actions]) / steps

    for mode in made:  # warm-up
        run(mode)
    times = interleaved({mode: (lambda m=mode: run(m)) for mode in made}, rounds)
    print(f"\n2. env steps/s at {envs} envs ({steps} steps per round, random actions)")
    for mode, t in times.items():
        print(f"   {mode:<13} {spread([envs / x for x in t], ',.0f'):>36}")


def bench_reset(envs: int, image_size: int, rounds: int) -> None:
    from rlperf.envs import make_vec
    from rlperf.envs.robots.puzzles import generate

    made = {mode: make_vec("robots", envs, seed=0, obs_mode=mode, image_size=image_size)
            for mode in ("rgb_image", "symbolic")}  # fmt: skip
    pool = made["symbolic"].pool
    rng = np.random.default_rng(0)
    counts: list[int] = []

    def generation() -> float:
        start = time.perf_counter()
        made_now = generate(rng, pool.batch_boards, pool.board_size, pool.num_robots,
                            pool.max_depth)  # fmt: skip
        counts.append(len(made_now))
        return (time.perf_counter() - start) / len(made_now)

    contenders = {"generation": generation}
    for mode, env in made.items():
        contenders[f"reset {mode}"] = lambda e=env: timed(e.reset) / envs
    times = interleaved(contenders, rounds)
    print(f"\n3. new episodes: microseconds each (refill batches of {pool.batch_boards} boards, "
          f"{statistics.median(counts):.0f} puzzles per batch; reset of {envs} envs)")  # fmt: skip
    for name, t in times.items():
        print(f"   {name:<17} {spread([x * 1e6 for x in t], '.1f'):>32}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--render-envs", type=int, default=256)
    ap.add_argument("--step-envs", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=50, help="env steps per round")
    ap.add_argument("--image-size", type=int, default=64)
    args = ap.parse_args()
    bench_render(args.render_envs, args.image_size, args.rounds)
    bench_steps(args.step_envs, args.image_size, args.rounds, args.steps)
    bench_reset(args.step_envs, args.image_size, args.rounds)


if __name__ == "__main__":
    main()
