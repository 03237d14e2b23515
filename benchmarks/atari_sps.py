"""Atari PPO throughput: rlperf's ``--preset atari`` against CleanRL's own ``ppo_atari.py``, at
CleanRL's exact settings, on Breakout.

    python benchmarks/atari_sps.py --cleanrl-script PATH/ppo_atari.py
    python benchmarks/atari_sps.py --cleanrl-script PATH --iterations 4 --rounds 3
    python benchmarks/atari_sps.py --impls rlperf,rlperf-envpool      # without CleanRL
    python benchmarks/atari_sps.py --cleanrl-script PATH --adapted-out /tmp/ppo_atari_1x.py
                                   # write the gymnasium-1.x copy and stop (to train with it)

The work, the same in each: 8 envs x 128 steps (1,024 a rollout), 4 minibatches x 4 epochs, lr
2.5e-4 annealed, clip 0.1, entropy 0.01, the Nature CNN on 4 stacked 84x84 gray uint8 frames;
NoopReset(30), MaxAndSkip(4), EpisodicLife, FireReset and ClipReward as CleanRL wraps each env.

Implementations, each sample in a fresh process, interleaved ABBA (``rlperf.bench.harness``):

- ``rlperf``: ``rlperf.ppo.Trainer`` on ``--preset atari`` (gymnasium's and stable-baselines3's
  wrappers, ``envs/atari.py``); SPS = steps / the training loop's wall time, every iteration
  counted, as CleanRL counts its own; ``update`` is the update's share of that time;
- ``rlperf-envpool``: the same with ``--vec-backend envpool`` (EnvPool's preprocessing in C++);
- ``cleanrl``: CleanRL's ``ppo_atari.py`` as published, its own process on the CPU
  (``--no-cuda``), on ``BreakoutNoFrameskip-v4`` (the v5 id with the preset's ALE options steps
  the same frames: ``tests/envs/test_atari.py``), adapted to gymnasium 1.x only where it must be
  (:data:`CLEANRL_EDITS`: ale-py's ids registered, the renamed ``GrayscaleObservation`` and
  ``FrameStackObservation``, the vector env's autoreset as gymnasium 0.29's, SB3's copy of the
  wrappers CleanRL vendors in ``cleanrl_utils``, episode returns read from 1.x's ``final_info``);
  its last printed ``SPS:``, ``global_step / (time.time() - start_time)`` over its whole loop.

Prints each one's SPS median [min-max] and the paired ratios against CleanRL.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rlperf.bench.cleanrl import ScriptError, adapt_script, run_script
from rlperf.bench.harness import Implementation, compare, summary

ITERATION_STEPS = 8 * 128  # CleanRL's 8 envs x 128 steps
CLEANRL_ENV = "BreakoutNoFrameskip-v4"
RLPERF_ENV = "gym:ale_py:ALE/Breakout-v5"
# (original, replacement): the least that makes CleanRL's ppo_atari.py run on gymnasium 1.x.
CLEANRL_EDITS = (
    # gymnasium 1.x registers ALE's ids when ale_py is imported (0.29 loaded them as a plugin).
    (
        "import gymnasium as gym\n",
        "import gymnasium as gym\nimport ale_py\n\ngym.register_envs(ale_py)\n",
    ),
    # cleanrl_utils/atari_wrappers.py is CleanRL's copy of SB3's (not installed with the file).
    (
        "from cleanrl_utils.atari_wrappers import (",
        "from stable_baselines3.common.atari_wrappers import (",
    ),
    # Renamed in gymnasium 1.0.
    ("gym.wrappers.GrayScaleObservation(env)", "gym.wrappers.GrayscaleObservation(env)"),
    ("gym.wrappers.FrameStack(env, 4)", "gym.wrappers.FrameStackObservation(env, 4)"),
    # 1.x's default autoreset is NEXT_STEP; the script's GAE was written for 0.29's same-step one.
    (
        "[make_env(args.env_id, i, args.capture_video, run_name) for i in range(args.num_envs)],",
        "[make_env(args.env_id, i, args.capture_video, run_name) for i in range(args.num_envs)],\n"
        "        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,",
    ),
    # 1.x's final_info is a dict of arrays with masks, not a list of dicts.
    (
        """            if "final_info" in infos:
                for info in infos["final_info"]:
                    if info and "episode" in info:
                        print(f"global_step={global_step}, episodic_return={info['episode']['r']}")
                        writer.add_scalar("charts/episodic_return", info["episode"]["r"], global_step)
                        writer.add_scalar("charts/episodic_length", info["episode"]["l"], global_step)""",
        """            if "episode" in infos.get("final_info", {}):
                info = infos["final_info"]
                for i in np.flatnonzero(info["_episode"]):
                    print(f"global_step={global_step}, episodic_return={info['episode']['r'][i]}")
                    writer.add_scalar("charts/episodic_return", info["episode"]["r"][i], global_step)
                    writer.add_scalar("charts/episodic_length", info["episode"]["l"][i], global_step)""",
    ),
)  # fmt: skip


def adapted_cleanrl(source: str) -> str:
    """CleanRL's ``ppo_atari.py`` text with :data:`CLEANRL_EDITS` applied; ScriptError when
    one of the lines they replace is missing (another version of it)."""
    return adapt_script(source, CLEANRL_EDITS)


# -- workers (each runs in its own process) ------------------------------------------------
def worker_rlperf(backend: str, total: int, threads: int) -> dict:
    from rlperf.config import preset
    from rlperf.ppo.trainer import Trainer
    from rlperf.timing.sections import Profiler

    cfg = preset("atari")
    cfg.env.env, cfg.env.backend = RLPERF_ENV, backend
    cfg.run.total_steps, cfg.run.threads = total, threads
    cfg.run.progress, cfg.run.telemetry = False, False
    profiler = Profiler()
    trainer = Trainer(cfg.validate(), profiler=profiler)
    start = time.perf_counter()
    trainer.train()
    wall_s = time.perf_counter() - start
    update_s = profiler.totals_s().get("update", 0.0)
    return {"sps": trainer.global_step / wall_s, "wall_s": wall_s, "update": update_s / wall_s}


def worker_cleanrl(script: str, total: int, threads: int) -> dict:
    return run_script(
        script,
        ["--env-id", CLEANRL_ENV, "--total-timesteps", str(total), "--no-cuda", "--seed", "1"],
        threads,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impls", default="rlperf,cleanrl",
                        help="comma-separated: rlperf, rlperf-envpool, cleanrl")  # fmt: skip
    parser.add_argument("--cleanrl-script", help="CleanRL's ppo_atari.py, as published")
    parser.add_argument("--adapted-out", help="write the gymnasium-1.x copy here and stop")
    parser.add_argument("--iterations", type=int, default=4, help="of 1,024 steps a sample")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of both trainers")
    args = parser.parse_args()
    known = ("rlperf", "rlperf-envpool", "cleanrl")
    impls = [name.strip() for name in args.impls.split(",") if name.strip()]
    if set(impls) - set(known) or not impls:
        parser.error(f"--impls takes {', '.join(known)}, got {args.impls!r}")
    if args.iterations < 1 or args.rounds < 1 or args.threads < 1:
        parser.error("--iterations, --rounds and --threads must be >= 1")
    script = None
    if "cleanrl" in impls or args.adapted_out:
        if not args.cleanrl_script:
            parser.error("cleanrl needs --cleanrl-script (CleanRL's ppo_atari.py)")
        target = Path(args.adapted_out or "/tmp/rlperf_cleanrl_ppo_atari.py")
        try:
            target.write_text(adapted_cleanrl(Path(args.cleanrl_script).read_text()))
        except (OSError, ScriptError) as e:
            parser.error(str(e))
        if args.adapted_out:
            print(f"wrote {target}")
            return
        script = str(target)
    total = args.iterations * ITERATION_STEPS
    runs = {
        "rlperf": (worker_rlperf, {"backend": "serial", "total": total, "threads": args.threads}),
        "rlperf-envpool": (
            worker_rlperf,
            {"backend": "envpool", "total": total, "threads": args.threads},
        ),  # fmt: skip
        "cleanrl": (worker_cleanrl, {"script": script, "total": total, "threads": args.threads}),
    }
    chosen = [Implementation(name, *runs[name]) for name in impls]

    def progress(r: int, name: str, result: dict) -> None:
        update = f", update {result['update']:.0%}" if "update" in result else ""
        print(f"round {r}: {name} {result['sps']:,.0f} SPS{update}", file=sys.stderr, flush=True)

    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"Breakout, 8 envs x 128 steps, {total} steps a sample, {args.rounds} rounds, "
          f"{args.threads} thread(s), {when}")  # fmt: skip
    results = compare(chosen, args.rounds, progress)
    reference = "cleanrl" if "cleanrl" in results else None
    for line in summary(results, "sps", reference):
        print(line)
    for name, samples in results.items():
        if "update" in samples[0]:
            shares = sorted(s["update"] for s in samples)
            print(f"{name}: the update is {shares[len(shares) // 2]:.0%} of its wall time "
                  f"[{shares[0]:.0%}-{shares[-1]:.0%}]")  # fmt: skip


if __name__ == "__main__":
    main()
