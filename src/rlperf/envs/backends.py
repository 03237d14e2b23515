"""The trainer's env from its configuration: serial, or stepped by worker processes.

``make_env(cfg.env, seed)`` is the one place that reads ``--vec-backend``: ``serial`` builds
the env in this process (``make_vec``), ``multiprocess`` builds a
:class:`~rlperf.envs.workers.MultiprocessVecEnv` with ``--num-workers`` and
``--env-batch-size``, ``envpool`` an :class:`~rlperf.envs.envpool_backend.EnvPoolVecEnv`
(EnvPool's C++ threads, in this process; in batches with ``--env-batch-size``), ``mujoco`` a
:class:`~rlperf.envs.mujoco_batch.MujocoBatchVecEnv` (MuJoCo's batch threads, in this
process), ``torch`` the env's torch version on the training device
(:mod:`rlperf.envs.device`: cartpole and catch), ``auto`` the ``mujoco`` one where it steps the
env, the ``torch`` one on CUDA where the env has one, and ``serial`` elsewhere
(:func:`resolve_backend`). All come back reset with ``seed`` and follow the same vector-env
contract, except that the workers' arrays are views of their shared memory (``copy=False``):
the trainer copies them into its rollout buffer before the next step.
"""

from __future__ import annotations

import os

import torch
from gymnasium.vector import VectorEnv

from rlperf.config import EnvConfig
from rlperf.cores import usable_cores
from rlperf.envs.registry import make_vec

# The automatic --worker-spin-us where every process has a core: long enough to cover the
# spread between two workers' shares of a step (the workers' figures in docs/workers.md),
# short enough that a spinner soon gives its core back when the other side is slow.
AUTO_SPIN_US = 300.0


def worker_spin_us(cfg: EnvConfig, trainer_threads: int) -> float:
    """``cfg.worker_spin_us``, with -1 resolved: :data:`AUTO_SPIN_US` where the worker
    processes plus the trainer's ``trainer_threads`` threads, times the ranks on this machine
    (``LOCAL_WORLD_SIZE``), fit the cores this process may use; 0 where they do not (three
    processes polling two cores starve the one with work)."""
    if cfg.worker_spin_us >= 0:
        return cfg.worker_spin_us
    processes = cfg.num_workers - (1 if cfg.inline_worker else 0) + trainer_threads
    processes *= int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    return AUTO_SPIN_US if processes <= usable_cores() else 0.0


def resolve_backend(cfg: EnvConfig, device: str | torch.device = "cpu") -> str:
    """``cfg.backend``, with ``auto`` resolved: ``mujoco`` where MuJoCo's batch steps the env
    (one of its ids, no wrappers, MuJoCo >= 4), ``torch`` where the training ``device`` is CUDA
    and the env has a torch version (no copy to the host a step), else ``serial``."""
    if cfg.backend != "auto":
        return cfg.backend
    from rlperf.envs.device import has_device_env
    from rlperf.envs.mujoco_batch import batch_steps

    if str(device).startswith("cuda") and has_device_env(cfg.env):
        return "torch"
    return "mujoco" if batch_steps(cfg.env, cfg.options) else "serial"


def make_env(
    cfg: EnvConfig,
    seed: int | None,
    trainer_threads: int = 1,
    device: str | torch.device = "cpu",
) -> VectorEnv:
    """The vector env ``cfg`` describes, reset with ``seed``; ``trainer_threads`` is the
    trainer's torch thread count while the envs step, its rollout's (for the automatic
    ``--worker-spin-us``); ``device`` the training device (where a torch env steps).

    Raises:
        ConfigError: the backend settings cannot run here (checked before any process starts).
    """
    cfg.validate_backend()
    if cfg.backend != "multiprocess":
        return make_one(cfg, cfg.num_envs, seed, cfg.env_batch_size, device)
    from rlperf.envs.workers import MultiprocessVecEnv

    return MultiprocessVecEnv(
        cfg.env,
        cfg.num_envs,
        cfg.num_workers,
        batch_size=cfg.env_batch_size,
        seed=seed,
        options=cfg.options,
        spin_us=worker_spin_us(cfg, trainer_threads),
        pin_cores=cfg.pin_workers,
        inline=cfg.inline_worker,
        # The trainer copies every step into its rollout buffer (and the async collector each
        # batch): views of the shared block save a second copy.
        copy=False,
    )


def make_one(
    cfg: EnvConfig,
    num_envs: int = 1,
    seed: int | None = None,
    batch_size: int = 0,
    device: str | torch.device = "cpu",
) -> VectorEnv:
    """``num_envs`` envs as ``cfg`` describes them, in this process: EnvPool's with
    ``--vec-backend envpool`` (its ids, options and preprocessing; in batches of
    ``batch_size`` envs where set), the torch version on ``device`` with ``torch``, else the
    serial env that every worker builds its share as. For reading the env's spaces without
    starting workers.

    Raises:
        ConfigError, UnknownEnvError, EnvOptionError: as :func:`make_env` (one line);
            ConfigError for ``--vec-backend torch`` with an env that has no torch version.
    """
    backend = resolve_backend(cfg, device)
    if backend == "torch":
        from rlperf.envs.device import make_device_vec

        return make_device_vec(cfg.env, num_envs, device, seed, **cfg.options)
    if backend == "envpool":
        from rlperf.envs.envpool_backend import make_envpool_vec

        return make_envpool_vec(cfg.env, num_envs, seed, batch_size, **cfg.options)
    if backend == "mujoco":
        from rlperf.envs.mujoco_batch import make_mujoco_vec

        return make_mujoco_vec(cfg.env, num_envs, seed=seed, **cfg.options)
    return make_vec(cfg.env, num_envs, seed=seed, **cfg.options)
