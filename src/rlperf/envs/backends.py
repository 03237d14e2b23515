"""The trainer's env from its configuration: serial, or stepped by worker processes.

``make_env(cfg.env, seed)`` is the one place that reads ``--vec-backend``: ``serial`` builds
the env in this process (``make_vec``), ``multiprocess`` builds a
:class:`~rlperf.envs.workers.MultiprocessVecEnv` with ``--num-workers`` and
``--env-batch-size``. Both come back reset with ``seed`` and follow the same vector-env contract.
"""

from __future__ import annotations

from gymnasium.vector import VectorEnv

from rlperf.config import EnvConfig
from rlperf.envs.registry import make_vec


def make_env(cfg: EnvConfig, seed: int | None) -> VectorEnv:
    """The vector env ``cfg`` describes, reset with ``seed``.

    Raises:
        ConfigError: the backend settings cannot run here (checked before any process starts).
    """
    cfg.validate_backend()
    if cfg.backend == "serial":
        return make_vec(cfg.env, cfg.num_envs, seed=seed, **cfg.options)
    from rlperf.envs.workers import MultiprocessVecEnv

    return MultiprocessVecEnv(
        cfg.env,
        cfg.num_envs,
        cfg.num_workers,
        batch_size=cfg.env_batch_size,
        seed=seed,
        options=cfg.options,
        pin_cores=cfg.pin_workers,
        inline=cfg.inline_worker,
    )
