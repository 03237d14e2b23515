"""MuJoCo's workload: ``--preset mujoco`` (CleanRL's continuous-action PPO) on HalfCheetah-v5.

Each case skips, saying why, where gymnasium's MuJoCo envs are not installed (the workload
declares the ``mujoco`` extra, checked before any setup) or the commit predates the preset.
The physics case is the floor every other env-step case is read against: MuJoCo's ``mj_step``
alone, the env's frame skip of substeps.
"""

from __future__ import annotations

import inspect
from typing import Any

from .core import ENVPOOL, HISTORY, MUJOCO, QUICK, SEED, Case, CaseSkipped, Prepared, Workload
from .training import continued_training

ENV = "gym:HalfCheetah-v5"
_history, _quick = {HISTORY}, {HISTORY, QUICK}


def requires_mujoco() -> None:
    """CaseSkipped without gymnasium's MuJoCo envs (the cases' declared extra is checked first;
    this catches what it does not name)."""
    from gymnasium.error import DependencyNotInstalled

    try:
        import gymnasium.envs.mujoco  # noqa: F401  # imports mujoco and imageio
    except (ImportError, DependencyNotInstalled) as e:  # gymnasium's own, for `import mujoco`
        raise CaseSkipped(
            f"gymnasium's MuJoCo envs do not import ({e}): pip install 'rlperf[mujoco]'"
        ) from e


def preset_config(num_envs: int = 1, num_steps: int = 2048) -> Any:
    """``--preset mujoco`` on :data:`ENV` at CleanRL's shape and arithmetic (``num_envs`` x
    ``num_steps`` in the trainer's process, statistics per env, as the cases have timed it from
    the start), seeded, quiet, the learning rate fixed."""
    requires_mujoco()
    try:
        from rlperf.config import preset

        cfg = preset("mujoco")
    except (ImportError, ValueError) as e:  # ConfigError: a commit without the preset
        raise CaseSkipped(f"no mujoco preset in this commit ({e})") from e
    cfg.env.env, cfg.env.num_envs, cfg.ppo.num_steps = ENV, num_envs, num_steps
    cfg.env.backend, cfg.env.norm_per_env = "serial", True
    cfg.run.seed, cfg.run.threads, cfg.run.progress = SEED, 1, False
    cfg.ppo.anneal_lr = False
    return cfg


def physics_step(frames: int) -> Prepared:
    """``frames`` steps of HalfCheetah-v5's physics alone: ``mj_step`` with its frame skip."""
    requires_mujoco()
    import gymnasium
    import mujoco

    try:  # MuJoCo's warnings as Python's, not lines in the working directory's MUJOCO_LOG.TXT
        from rlperf.envs.gym_adapter import quiet_mujoco

        quiet_mujoco(ENV.removeprefix("gym:"))
    except ImportError:  # commits before it
        pass
    sim: Any = gymnasium.make(ENV.removeprefix("gym:")).unwrapped  # a MujocoEnv
    sim.reset(seed=SEED)
    model, data, skip = sim.model, sim.data, sim.frame_skip

    def run() -> None:
        for _ in range(frames):
            mujoco.mj_step(model, data, nstep=skip)

    return Prepared(run, frames, "env_steps")


def env_step(env: str, num_envs: int, backend: str) -> Prepared:
    """One step of every env through rlperf's vector env: ``serial`` (gymnasium's envs in
    the trainer's process), ``workers`` (two worker processes), ``envpool`` (EnvPool's C++
    MuJoCo envs, the ``envpool`` extra) or ``batch`` (``--vec-backend mujoco``: MuJoCo's batch
    threads, mujoco >= 4)."""
    requires_mujoco()
    from .components import _env_step, _env_step_workers

    if backend == "workers":
        return _env_step_workers(env, num_envs, 2, num_envs)
    if backend == "envpool":
        try:
            from rlperf.envs.envpool_backend import make_envpool_vec
        except ImportError as e:  # commits before the backend, or envpool missing
            raise CaseSkipped(
                f"no EnvPool backend here ({e}): pip install 'rlperf[envpool]'"
            ) from e
        return _env_step(env, num_envs, make_envpool_vec)
    if backend == "batch":
        try:
            from rlperf.envs.mujoco_batch import make_mujoco_vec

            return _env_step(env, num_envs, make_mujoco_vec)
        except ImportError as e:  # commits before the backend
            raise CaseSkipped(f"no MuJoCo batch backend here ({e})") from e
        except ValueError as e:  # ConfigError: MuJoCo < 4 has no mujoco.batch
            raise CaseSkipped(str(e)) from e
    return _env_step(env, num_envs)


def gaussian_act(num_envs: int, impl: str) -> Prepared:
    """One rollout step of the Gaussian MLP's policy: ``fused`` (the rollout kernel's step,
    ``ppo/fused_rollout.py``) or ``torch`` (``MLPActorCritic.act``)."""
    import torch

    cfg = preset_config(num_envs)
    from rlperf.ppo.trainer import Trainer

    cfg.policy.fused_rollout = impl == "fused"
    trainer = Trainer(cfg)
    buf, policy = trainer.buffer, trainer.policy
    obs, gen = buf.obs[0], torch.Generator().manual_seed(SEED)
    if impl == "fused":
        # The trainer's policy step (commits before the collectors were chosen once: its
        # fused_step, called with the step's index alone).
        step: Any = getattr(trainer, "policy_step", None) or getattr(trainer, "fused_step", None)
        if type(step).__name__ != "FusedStep":
            raise CaseSkipped("the fused step does not apply here (kernel not built?)")
        step.start_rollout(trainer.sample_gen)
        if "obs" in inspect.signature(step.__call__).parameters:
            return Prepared(lambda: step(0, obs, (), None, None), num_envs, "samples")
        return Prepared(lambda: step(0), num_envs, "samples")

    def run() -> Any:
        with torch.inference_mode():
            return policy.act(obs, (), None, None, gen)

    return Prepared(run, num_envs, "samples")


def update_epoch(env: str) -> Prepared:
    """One epoch of the preset's update on ``env`` (:data:`ENV`, named so the case's name is not
    the component's): 2048 samples in 32 minibatches of 64."""
    from rlperf.ppo.trainer import Trainer

    cfg = preset_config()
    cfg.env.env = env
    cfg.ppo.update_epochs = 1
    trainer = Trainer(cfg)
    trainer.collect()
    trainer.compute_advantages()
    return Prepared(trainer.update, cfg.ppo.num_steps, "samples")


def e2e_train(env_steps: int, num_steps: int) -> Prepared:
    """Continued training with the preset's settings, the rollout shortened to ``num_steps``
    (and its minibatches to 4) for a call of ~0.1 s."""
    cfg = preset_config(num_steps=num_steps)
    cfg.ppo.num_minibatches = 4
    return continued_training(cfg, env_steps)


WORKLOAD = Workload(
    "mujoco",
    ENV,
    e2e=Case("e2e_train", {"env_steps": 256, "num_steps": 256}, e2e_train),
    cases=(
        Case("physics_step", {"frames": 256}, physics_step, _history),
        Case("env_step", {"env": ENV, "num_envs": 1, "backend": "serial"}, env_step, _quick),
        Case("env_step", {"env": ENV, "num_envs": 2, "backend": "workers"}, env_step),
        Case(
            "env_step",
            {"env": ENV, "num_envs": 1, "backend": "envpool"},
            env_step,
            _history,
            (ENVPOOL,),
        ),  # fmt: skip
        Case("env_step", {"env": ENV, "num_envs": 8, "backend": "batch"}, env_step, _history),
        Case("policy_act_gaussian", {"num_envs": 1, "impl": "fused"}, gaussian_act, _quick),
        Case("policy_act_gaussian", {"num_envs": 1, "impl": "torch"}, gaussian_act),
        Case("update_epoch", {"env": ENV}, update_epoch, _history),
    ),
    needs=(MUJOCO,),
)
