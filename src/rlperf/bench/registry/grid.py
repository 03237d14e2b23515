"""The grid workload: many agents per map, the CNN policy and a scripted teacher."""

from __future__ import annotations

from typing import Any

from .core import HISTORY, QUICK, SEED, Case, CaseSkipped, Prepared, Workload, requires_env
from .training import continued_training

GRID_MISSION = "extractor_hub_30"


def _grid_vec(num_maps: int) -> Any:
    requires_env("grid")
    from rlperf.envs import make_vec

    return make_vec("grid", num_maps, seed=SEED, mission=GRID_MISSION)


def _grid_step(num_maps: int) -> Prepared:
    """One step of every agent row (maps x agents) with random actions."""
    import numpy as np

    vec = _grid_vec(num_maps)
    actions = np.random.default_rng(SEED).integers(0, vec.single_action_space.n, vec.num_envs)
    return Prepared(lambda: vec.step(actions), int(vec.num_envs), "agent_steps")


def _grid_reset(num_maps: int) -> Prepared:
    vec = _grid_vec(num_maps)
    return Prepared(lambda: vec.reset(), int(vec.num_envs), "agent_resets")


def _teacher_call(num_maps: int) -> Prepared:
    """The scripted teacher on every agent row's observation (host side)."""
    vec = _grid_vec(num_maps)
    obs, _ = vec.reset(seed=SEED)
    teacher = vec.make_teacher()
    return Prepared(lambda: teacher(obs), int(vec.num_envs), "agent_rows")


def grid_config(num_maps: int, threads: int, phase: str) -> Any:
    """The grid preset on ``num_maps`` maps, all supervised or all PPO."""
    requires_env("grid")
    from rlperf.config import ConfigError, preset

    try:
        cfg = preset("grid")
    except ConfigError as e:  # the grid env landed two commits before its preset
        raise CaseSkipped(f"no grid preset in this commit ({e})") from e
    cfg.env.num_envs = num_maps
    cfg.run.seed, cfg.run.threads, cfg.run.progress = SEED, threads, False
    cfg.ppo.anneal_lr = False
    cfg.run.total_steps = 1 << 40
    cfg.teacher.supervised_steps = cfg.run.total_steps if phase == "supervised" else 0
    return cfg


def _grid_update_epoch(num_maps: int, threads: int, phase: str) -> Prepared:
    """One update epoch of the grid preset: the supervised loss or PPO's."""
    from rlperf.ppo.trainer import Trainer

    cfg = grid_config(num_maps, threads, phase)
    cfg.ppo.update_epochs = 1
    trainer = Trainer(cfg)
    trainer.collect()
    trainer.compute_advantages()
    supervised = phase == "supervised"
    return Prepared(lambda: trainer.update(supervised), trainer.batch_size, "samples")


def _grid_e2e(
    num_maps: int, env_steps: int, threads: int, phase: str, num_steps: int | None = None
) -> Prepared:
    """Continued training of the grid preset in one phase (supervised: the teacher every
    step); ``num_steps`` (steps per agent per rollout) overrides the preset's, to shrink an
    iteration."""
    cfg = grid_config(num_maps, threads, phase)
    if num_steps is not None:
        cfg.ppo.num_steps = num_steps
    return continued_training(cfg, env_steps)


_quick = {HISTORY, QUICK}
# One map of 16 agents x 16 steps, ~0.07 s a call, supervised: the teacher runs every step. The
# PPO phase runs no code that this phase and the other workloads' e2e cases do not. (At 32
# steps a call took 0.099-0.134 s, on the edge of the gate's 0.1 s sample.)
WORKLOAD = Workload(
    "grid",
    "grid",
    e2e=Case("grid_e2e", {"num_maps": 1, "env_steps": 256, "threads": 1, "phase": "supervised",
                          "num_steps": 16}, _grid_e2e),  # fmt: skip
    cases=(
        Case("grid_step", {"num_maps": 256}, _grid_step, _quick),
        Case("grid_reset", {"num_maps": 256}, _grid_reset),
        Case("teacher_call", {"num_maps": 256}, _teacher_call, {HISTORY}),
        *(Case(component, {"num_maps": 16, "threads": 1, "phase": phase, **extra}, fn)
          for phase in ("supervised", "ppo")
          for component, fn, extra in (("grid_update_epoch", _grid_update_epoch, {}),
                                       ("grid_e2e", _grid_e2e, {"env_steps": 8192}))),
    ),
)  # fmt: skip
