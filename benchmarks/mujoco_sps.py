"""MuJoCo PPO throughput: rlperf against CleanRL's own ``ppo_continuous_action.py`` and against
the physics alone, at CleanRL's exact settings and at the preset's own.

    python benchmarks/mujoco_sps.py --cleanrl-script PATH/ppo_continuous_action.py
    python benchmarks/mujoco_sps.py --cleanrl-script PATH --env HalfCheetah-v5 --rounds 3
    python benchmarks/mujoco_sps.py --impls rlperf,physics          # without CleanRL
    python benchmarks/mujoco_sps.py --impls rlperf-preset,physics   # the preset's own shape
    python benchmarks/mujoco_sps.py --cleanrl-script PATH --adapted-out /tmp/ppo_cont.py
                                    # write the gymnasium-1.x copy and stop (to train with it)

The work, the same in each: 2048 steps an iteration, 32 minibatches x 10 epochs, lr 3e-4 annealed,
the 64x64 Tanh actor-critic with a state-independent log-std, observation and reward
normalisation with clips at +-10 (CleanRL's wrappers; rlperf's ``--preset mujoco``).

Implementations, each sample in a fresh process, interleaved ABBA (``rlperf.bench.harness``):

- ``rlperf``: ``rlperf.ppo.Trainer`` on ``--preset mujoco`` at CleanRL's shape and
  arithmetic, 1 env x 2048 steps, statistics per env (on the preset's backend: MuJoCo's batch,
  one env); SPS = steps / the training loop's wall time, every iteration counted, as CleanRL
  counts its own;
- ``rlperf-preset``: the preset as it is, 8 envs x 256 steps on MuJoCo's batch threads (every
  core on the physics), statistics shared by the batch;
- ``cleanrl``: CleanRL's script as published, run as its own process on the CPU
  (``--no-cuda``), adapted to gymnasium 1.x only where it must be (:func:`adapted_cleanrl`:
  ``TransformObservation`` takes the observation space, the vector env's autoreset is 0.29's
  same-step one, and episode returns come from 1.x's ``final_info`` of arrays); its last
  printed ``SPS:``, which is
  ``global_step / (time.time() - start_time)`` over its whole loop;
- ``physics``: MuJoCo's ``mj_step`` alone, the env's frame skip of substeps a step, for the same
  number of steps: the limit no trainer can pass on one core.

Prints each one's SPS median [min-max] and the paired ratios rlperf/cleanrl and
rlperf/physics (the wall time of 1M steps against the physics' own).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rlperf.bench.cleanrl import FINAL_INFO_EDIT, ScriptError, adapt_script, run_script
from rlperf.bench.harness import Implementation, compare, summary

ITERATION_STEPS = 2048  # CleanRL's 1 env x 2048 steps
# (original, replacement): the least that makes CleanRL's script run on gymnasium 1.x.
CLEANRL_EDITS = (
    # 1.x's TransformObservation takes the observation space it gives.
    (
        "gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10))",
        "gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10), "
        "env.observation_space)",
    ),
    # 1.x's default autoreset is NEXT_STEP; the script's GAE was written for 0.29's same-step
    # one (under NEXT_STEP each episode's end adds a step acting on the final observation).
    (
        "[make_env(args.env_id, i, args.capture_video, run_name, args.gamma) for i in range(args.num_envs)]\n",
        "[make_env(args.env_id, i, args.capture_video, run_name, args.gamma) for i in range(args.num_envs)],\n"
        "        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,\n",
    ),
    # 1.x's final_info is a dict of arrays with masks, not a list of dicts.
    FINAL_INFO_EDIT,
)  # fmt: skip


def adapted_cleanrl(source: str) -> str:
    """CleanRL's ``ppo_continuous_action.py`` text with :data:`CLEANRL_EDITS` applied;
    ScriptError when one of the lines they replace is missing (another version of it)."""
    return adapt_script(source, CLEANRL_EDITS)


# -- workers (each runs in its own process) ------------------------------------------------
def worker_rlperf(env: str, total: int, threads: int, shape: str = "cleanrl") -> dict:
    """``shape``: ``cleanrl`` (1 env x 2048 steps) or ``preset`` (the preset's own)."""
    from rlperf.config import preset
    from rlperf.ppo.trainer import Trainer
    from rlperf.profiling import Profiler

    cfg = preset("mujoco")
    if shape == "cleanrl":
        cfg.env.num_envs, cfg.ppo.num_steps, cfg.env.norm_per_env = 1, ITERATION_STEPS, True
    cfg.env.env, cfg.run.total_steps, cfg.run.threads = f"gym:{env}", total, threads
    cfg.run.progress, cfg.run.telemetry = False, False
    trainer = Trainer(cfg.validate(), profiler=Profiler(enabled=False))
    start = time.perf_counter()
    trainer.train()
    wall_s = time.perf_counter() - start
    return {"sps": trainer.global_step / wall_s, "wall_s": wall_s}


def worker_cleanrl(script: str, env: str, total: int, threads: int) -> dict:
    return run_script(
        script, ["--env-id", env, "--total-timesteps", str(total), "--no-cuda", "--seed", "1"],
        threads,
    )  # fmt: skip


def worker_physics(env: str, total: int) -> dict:
    import gymnasium
    import mujoco

    from rlperf.envs.gym_adapter import quiet_mujoco

    quiet_mujoco(env)  # MuJoCo's warnings as Python's, no MUJOCO_LOG.TXT in the directory
    sim = gymnasium.make(env).unwrapped
    sim.reset(seed=1)
    model, data, skip = sim.model, sim.data, sim.frame_skip
    start = time.perf_counter()
    for _ in range(total):
        mujoco.mj_step(model, data, nstep=skip)
    wall_s = time.perf_counter() - start
    return {"sps": total / wall_s, "wall_s": wall_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="HalfCheetah-v5", help="a gymnasium MuJoCo id")
    parser.add_argument("--impls", default="rlperf,cleanrl,physics",
                        help="comma-separated: rlperf, rlperf-preset, cleanrl, physics")  # fmt: skip
    parser.add_argument("--cleanrl-script", help="CleanRL's ppo_continuous_action.py, as published")
    parser.add_argument("--adapted-out", help="write the gymnasium-1.x copy here and stop")
    parser.add_argument("--iterations", type=int, default=4, help="of 2048 steps a sample")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads of both trainers")
    args = parser.parse_args()
    impls = [name.strip() for name in args.impls.split(",") if name.strip()]
    unknown = set(impls) - {"rlperf", "rlperf-preset", "cleanrl", "physics"}
    if unknown or not impls:
        parser.error(
            f"--impls takes rlperf, rlperf-preset, cleanrl and physics, got {args.impls!r}"
        )
    if args.iterations < 1 or args.rounds < 1 or args.threads < 1:
        parser.error("--iterations, --rounds and --threads must be >= 1")
    script = None
    if "cleanrl" in impls or args.adapted_out:
        if not args.cleanrl_script:
            parser.error("cleanrl needs --cleanrl-script (CleanRL's ppo_continuous_action.py)")
        try:
            text = adapted_cleanrl(Path(args.cleanrl_script).read_text())
        except (OSError, ScriptError) as e:
            parser.error(str(e))
        target = Path(args.adapted_out or "/tmp/rlperf_cleanrl_ppo_continuous_action.py")
        try:
            target.write_text(text)
        except OSError as e:
            parser.error(f"cannot write {target}: {e}")
        if args.adapted_out:
            print(f"wrote {target}")
            return
        script = str(target)
    total = args.iterations * ITERATION_STEPS
    runs = {
        "rlperf": (worker_rlperf, {"env": args.env, "total": total, "threads": args.threads}),
        "rlperf-preset": (
            worker_rlperf,
            {"env": args.env, "total": total, "threads": args.threads, "shape": "preset"},
        ),
        "cleanrl": (
            worker_cleanrl,
            {"script": script, "env": args.env, "total": total, "threads": args.threads},
        ),  # fmt: skip
        "physics": (worker_physics, {"env": args.env, "total": total}),
    }
    chosen = [Implementation(name, *runs[name]) for name in impls]

    def progress(r: int, name: str, result: dict) -> None:
        print(f"round {r}: {name} {result['sps']:,.0f} SPS", file=sys.stderr, flush=True)

    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"{args.env}, 2048 steps an iteration, {total} steps a sample, {args.rounds} rounds, "
          f"{args.threads} thread(s), {when}")  # fmt: skip
    results = compare(chosen, args.rounds, progress)
    for reference in [name for name in ("cleanrl", "physics") if name in results]:
        for line in summary(results, "sps", reference):
            if line.startswith("rlperf") or reference == impls[-1]:
                print(line)
    for name in ("rlperf", "rlperf-preset"):
        if "physics" in results and name in results:
            pairs = zip(results["physics"], results[name], strict=True)
            ratios = sorted(p["sps"] / r["sps"] for p, r in pairs)
            print(f"{name}'s wall time / the physics' own, paired: "
                  f"{ratios[len(ratios) // 2]:.2f}x [{ratios[0]:.2f}-{ratios[-1]:.2f}]")  # fmt: skip


if __name__ == "__main__":
    main()
