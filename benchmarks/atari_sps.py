"""Atari PPO throughput: rlperf's ``--preset atari`` against CleanRL's own ``ppo_atari.py`` and
``ppo_atari_envpool.py``, at CleanRL's exact settings, on Breakout.

    python benchmarks/atari_sps.py --cleanrl-script PATH/ppo_atari.py
    python benchmarks/atari_sps.py --cleanrl-script PATH --iterations 4 --rounds 3
    python benchmarks/atari_sps.py --impls rlperf-envpool,cleanrl-envpool \
                                   --cleanrl-envpool-script PATH/ppo_atari_envpool.py
    python benchmarks/atari_sps.py --impls rlperf,rlperf-envpool      # without CleanRL
    python benchmarks/atari_sps.py --cleanrl-script PATH --adapted-out /tmp/ppo_atari_1x.py
                                   # write the gymnasium-1.x copy and stop (to train with it)
    python benchmarks/atari_sps.py --cleanrl-envpool-script PATH \
                                   --adapted-envpool-out /tmp/ppo_atari_envpool_1x.py

The work, the same in each: 8 envs x 128 steps (1,024 a rollout), 4 minibatches x 4 epochs, lr
2.5e-4 annealed, clip 0.1, entropy 0.01, the Nature CNN on 4 stacked 84x84 gray uint8 frames;
NoopReset(30), MaxAndSkip(4), EpisodicLife, FireReset and ClipReward as CleanRL wraps each env.

Implementations, each sample in a fresh process, interleaved ABBA (``rlperf.bench.harness``):

- ``rlperf``: ``rlperf.ppo.Trainer`` on ``--preset atari`` (gymnasium's and stable-baselines3's
  wrappers, ``envs/atari.py``); SPS = steps / the training loop's wall time, every iteration
  counted, as CleanRL counts its own; ``update`` is the update's share of that time;
- ``rlperf-envpool``: the same with ``--vec-backend envpool`` (EnvPool's preprocessing in C++);
- ``rlperf-envpool-async``: ``--vec-backend envpool --env-batch-size 4``: the policy acts on
  one batch of 4 envs while EnvPool's thread steps the other 4 (``envs/envpool_backend.py``);
- ``rlperf-workers``: the same with ``--vec-backend multiprocess`` (2 env worker processes);
- ``rlperf-bf16``, ``rlperf-envpool-bf16``, ``rlperf-envpool-async-bf16``: ``--precision
  bf16`` (the update under bf16 autocast) on the gymnasium and EnvPool backends;
- ``cleanrl``: CleanRL's ``ppo_atari.py`` as published, its own process on the CPU
  (``--no-cuda``), on ``BreakoutNoFrameskip-v4`` (the v5 id with the preset's ALE options steps
  the same frames: ``tests/envs/test_atari.py``), adapted to gymnasium 1.x only where it must be
  (:data:`CLEANRL_EDITS`: ale-py's ids registered, the renamed ``GrayscaleObservation`` and
  ``FrameStackObservation``, the vector env's autoreset as gymnasium 0.29's, SB3's copy of the
  wrappers CleanRL vendors in ``cleanrl_utils``, episode returns read from 1.x's ``final_info``);
  its last printed ``SPS:``, ``global_step / (time.time() - start_time)`` over its whole loop;
- ``cleanrl-envpool``: CleanRL's ``ppo_atari_envpool.py`` as published, the same way, on
  EnvPool's ``Breakout-v5`` (``episodic_life`` and ``reward_clip`` set, EnvPool's defaults for
  the rest, the preset's settings: 30 no-ops, 4-frame skip, 84x84 gray x 4, FIRE reset, no
  sticky actions), adapted to EnvPool 1.x and gymnasium only where it must be
  (:data:`CLEANRL_ENVPOOL_EDITS`: gymnasium imported for the uninstalled ``gym``, the pool made
  with ``env_type="gymnasium"``, the three attributes it sets set on its wrapper (EnvPool's
  own are read-only, gymnasium's wrapper forwards none), its wrapper reading the 2-tuple reset and 5-tuple step); EnvPool's next-step autoreset
  is the one the script was written for. Its last printed ``SPS:`` as above.

Prints each one's SPS median [min-max] and the paired ratios against CleanRL's ``cleanrl``, and
against ``cleanrl-envpool`` when it runs too.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rlperf.bench.cleanrl import FINAL_INFO_EDIT, ScriptError, adapt_script, run_script
from rlperf.bench.harness import Implementation, compare, summary

ITERATION_STEPS = 8 * 128  # CleanRL's 8 envs x 128 steps
CLEANRL_ENV = "BreakoutNoFrameskip-v4"
CLEANRL_ENVPOOL_ENV = "Breakout-v5"  # EnvPool's id, ppo_atari_envpool.py's default
RLPERF_ENV = "gym:ale_py:ALE/Breakout-v5"
KNOWN = ("rlperf", "rlperf-envpool", "rlperf-envpool-async", "rlperf-workers", "rlperf-bf16",
         "rlperf-envpool-bf16", "rlperf-envpool-async-bf16", "cleanrl", "cleanrl-envpool")  # fmt: skip
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
    FINAL_INFO_EDIT,
)  # fmt: skip


# (original, replacement): the least that makes CleanRL's ppo_atari_envpool.py (written for gym
# 0.23 and EnvPool 0.6-0.8's gym API) run on EnvPool 1.x, whose pools speak gymnasium only.
CLEANRL_ENVPOOL_EDITS = (
    # gym is not installed; EnvPool 1.x's pools are gymnasium envs (the script uses Wrapper, spaces).
    ("import envpool\nimport gym\n", "import envpool\nimport gymnasium as gym\n"),
    # EnvPool 1.x makes "dm" and "gymnasium" pools only; "gym" was removed.
    ('env_type="gym",', 'env_type="gymnasium",'),
    # Set on the wrapper, not the pool: EnvPool 1.x's are read-only properties (setting one
    # raises), and gymnasium's Wrapper does not forward attributes to its env as gym's did.
    (
        "    envs.num_envs = args.num_envs\n"
        "    envs.single_action_space = envs.action_space\n"
        "    envs.single_observation_space = envs.observation_space\n"
        "    envs = RecordEpisodeStatistics(envs)\n",
        "    envs = RecordEpisodeStatistics(envs)\n"
        "    envs.num_envs = args.num_envs\n"
        "    envs.single_action_space = envs.action_space\n"
        "    envs.single_observation_space = envs.observation_space\n",
    ),
    # gymnasium's reset returns (obs, info); the script's wrapper hands on obs, as gym's did.
    ("observations = super().reset(**kwargs)", "observations, _ = super().reset(**kwargs)"),
    # gymnasium's step splits gym's done into terminated and truncated; the script wants either.
    (
        "observations, rewards, dones, infos = super().step(action)",
        "observations, rewards, terminations, truncations, infos = super().step(action)\n"
        "        dones = terminations | truncations",
    ),
)  # fmt: skip
# impl: (its option, CleanRL's file, the edits, where the adapted copy goes by default)
CLEANRL_SCRIPTS = {
    "cleanrl": ("cleanrl_script", "ppo_atari.py", CLEANRL_EDITS, "adapted_out"),
    "cleanrl-envpool": ("cleanrl_envpool_script", "ppo_atari_envpool.py",
                        CLEANRL_ENVPOOL_EDITS, "adapted_envpool_out"),
}  # fmt: skip


def adapted_cleanrl(source: str) -> str:
    """CleanRL's ``ppo_atari.py`` text with :data:`CLEANRL_EDITS` applied; ScriptError when
    one of the lines they replace is missing (another version of it)."""
    return adapt_script(source, CLEANRL_EDITS)


def adapted_cleanrl_envpool(source: str) -> str:
    """CleanRL's ``ppo_atari_envpool.py`` text with :data:`CLEANRL_ENVPOOL_EDITS` applied;
    ScriptError when one of the lines they replace is missing."""
    return adapt_script(source, CLEANRL_ENVPOOL_EDITS)


# -- workers (each runs in its own process) ------------------------------------------------
def worker_rlperf(
    backend: str, total: int, threads: int, precision: str = "fp32", env_batch_size: int = 0
) -> dict:
    from rlperf import openmp

    # As the rlperf command would for this run, before torch loads (this is a fresh process).
    flags = ["--vec-backend", backend, "--env-batch-size", str(env_batch_size)]
    openmp.tune(["train", *flags])
    from rlperf.config import preset
    from rlperf.ppo.trainer import Trainer
    from rlperf.timing.sections import Profiler

    cfg = preset("atari")
    cfg.env.env, cfg.env.backend, cfg.ppo.precision = RLPERF_ENV, backend, precision
    cfg.env.env_batch_size = env_batch_size
    cfg.run.total_steps, cfg.run.threads = total, threads
    cfg.run.progress, cfg.run.telemetry = False, False
    profiler = Profiler()
    trainer = Trainer(cfg.validate(), profiler=profiler)
    start = time.perf_counter()
    trainer.train()
    wall_s = time.perf_counter() - start
    update_s = profiler.totals_s().get("update", 0.0)
    return {"sps": trainer.global_step / wall_s, "wall_s": wall_s, "update": update_s / wall_s}


def worker_cleanrl(script: str, env_id: str, total: int, threads: int) -> dict:
    # Both scripts' defaults: no wandb (--track off), no video (ppo_atari.py's --capture-video
    # off; the EnvPool script records none).
    return run_script(
        script,
        ["--env-id", env_id, "--total-timesteps", str(total), "--no-cuda", "--seed", "1"],
        threads,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--impls", default="rlperf,cleanrl",
                        help="comma-separated: " + ", ".join(KNOWN))  # fmt: skip
    parser.add_argument("--cleanrl-script", help="CleanRL's ppo_atari.py, as published")
    parser.add_argument("--cleanrl-envpool-script",
                        help="CleanRL's ppo_atari_envpool.py, as published")  # fmt: skip
    parser.add_argument("--adapted-out", help="write the gymnasium-1.x copy here and stop")
    parser.add_argument("--adapted-envpool-out",
                        help="write the EnvPool-1.x copy of the EnvPool script here and stop")  # fmt: skip
    parser.add_argument("--iterations", type=int, default=4, help="of 1,024 steps a sample")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of both trainers")
    args = parser.parse_args()
    impls = [name.strip() for name in args.impls.split(",") if name.strip()]
    if set(impls) - set(KNOWN) or not impls:
        parser.error(f"--impls takes {', '.join(KNOWN)}, got {args.impls!r}")
    if args.iterations < 1 or args.rounds < 1 or args.threads < 1:
        parser.error("--iterations, --rounds and --threads must be >= 1")
    writing = [name for name, spec in CLEANRL_SCRIPTS.items() if getattr(args, spec[3])]
    scripts: dict[str, str | None] = dict.fromkeys(CLEANRL_SCRIPTS)
    for name in writing or [name for name in impls if name in CLEANRL_SCRIPTS]:
        option, file, edits, out = CLEANRL_SCRIPTS[name]
        source = getattr(args, option)
        if not source:
            parser.error(f"{name} needs --{option.replace('_', '-')} (CleanRL's {file})")
        target = Path(getattr(args, out) or f"/tmp/rlperf_cleanrl_{file}")
        try:
            target.write_text(adapt_script(Path(source).read_text(), edits))
        except (OSError, ScriptError) as e:
            parser.error(str(e))
        if writing:
            print(f"wrote {target}")
        scripts[name] = str(target)
    if writing:
        return
    total = args.iterations * ITERATION_STEPS
    sized = {"total": total, "threads": args.threads}
    batches = {"env_batch_size": 4}  # of CleanRL's 8 envs: two batches
    runs = {
        "rlperf": (worker_rlperf, {"backend": "serial", **sized}),
        "rlperf-envpool": (worker_rlperf, {"backend": "envpool", **sized}),
        "rlperf-envpool-async": (worker_rlperf, {"backend": "envpool", **batches, **sized}),
        "rlperf-envpool-async-bf16": (
            worker_rlperf,
            {"backend": "envpool", "precision": "bf16", **batches, **sized},
        ),
        "rlperf-workers": (worker_rlperf, {"backend": "multiprocess", **sized}),
        "rlperf-bf16": (worker_rlperf, {"backend": "serial", "precision": "bf16", **sized}),
        "rlperf-envpool-bf16": (
            worker_rlperf,
            {"backend": "envpool", "precision": "bf16", **sized},
        ),  # fmt: skip
        "cleanrl": (worker_cleanrl, {"script": scripts["cleanrl"], "env_id": CLEANRL_ENV, **sized}),
        "cleanrl-envpool": (
            worker_cleanrl,
            {"script": scripts["cleanrl-envpool"], "env_id": CLEANRL_ENVPOOL_ENV, **sized},
        ),
    }
    chosen = [Implementation(name, *runs[name]) for name in impls]

    def progress(r: int, name: str, result: dict) -> None:
        update = f", update {result['update']:.0%}" if "update" in result else ""
        print(f"round {r}: {name} {result['sps']:,.0f} SPS{update}", file=sys.stderr, flush=True)

    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"Breakout, 8 envs x 128 steps, {total} steps a sample, {args.rounds} rounds, "
          f"{args.threads} thread(s), {when}")  # fmt: skip
    results = compare(chosen, args.rounds, progress)
    references = [name for name in ("cleanrl", "cleanrl-envpool") if name in results]
    for line in summary(results, "sps", references[0] if references else None):
        print(line)
    for reference in references[1:]:  # both CleanRL scripts: the ratios against the second too
        print(f"against {reference}:")
        for line in summary({name: samples for name, samples in results.items()
                             if name not in references or name == reference},
                            "sps", reference):  # fmt: skip
            print(line)
    for name, samples in results.items():
        if "update" in samples[0]:
            shares = sorted(s["update"] for s in samples)
            print(f"{name}: the update is {shares[len(shares) // 2]:.0%} of its wall time "
                  f"[{shares[0]:.0%}-{shares[-1]:.0%}]")  # fmt: skip


if __name__ == "__main__":
    main()
