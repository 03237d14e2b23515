"""The backend's front door: which rlperf env names it steps (:func:`gym_id`,
:func:`batch_steps`, for ``--vec-backend auto``), whether MuJoCo 4's batch is installed
(:func:`batch_available`), and :func:`make_mujoco_vec`, which checks the options and builds
the vector env."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from rlperf.config import ConfigError
from rlperf.cores import usable_cores
from rlperf.envs.gym_adapter import quiet_mujoco
from rlperf.envs.mujoco_batch.tasks import SUPPORTED
from rlperf.envs.mujoco_batch.vec_env import MujocoBatchVecEnv
from rlperf.envs.registry import GYM_PREFIX, EnvOptionError, UnknownEnvError


def gym_id(env: str) -> str:
    """The gymnasium id of rlperf env name ``env`` (``gym:Hopper-v5`` -> ``Hopper-v5``).

    Raises:
        UnknownEnvError: not one of :data:`SUPPORTED` (one line, naming them).
    """
    task = env[len(GYM_PREFIX) :] if env.startswith(GYM_PREFIX) else env
    if task not in SUPPORTED:
        raise UnknownEnvError(
            f"--vec-backend mujoco steps gymnasium's MuJoCo v5 envs "
            f"({', '.join('gym:' + s for s in SUPPORTED)}), not {env!r}: use --vec-backend "
            f"serial for other envs"
        )
    return task


def batch_available() -> bool:
    """Whether MuJoCo >= 4.0's ``mujoco.batch`` is installed (found, not imported)."""
    return (
        importlib.util.find_spec("mujoco") is not None
        and importlib.util.find_spec("mujoco.batch") is not None
    )


def batch_steps(env: str, options: dict[str, Any]) -> bool:
    """Whether :func:`make_mujoco_vec` steps rlperf env name ``env`` with ``options``: one of
    :data:`SUPPORTED`, no ``wrappers``, MuJoCo >= 4.0 (``--vec-backend auto``)."""
    task = env[len(GYM_PREFIX) :] if env.startswith(GYM_PREFIX) else None
    return task in SUPPORTED and "wrappers" not in options and batch_available()


def make_mujoco_vec(
    env: str, num_envs: int, seed: int | None = None, **options: Any
) -> MujocoBatchVecEnv:
    """:class:`MujocoBatchVecEnv` for rlperf env name ``env``, reset with ``seed``.

    Raises:
        ConfigError: MuJoCo older than 4.0 (no ``mujoco.batch``), or none (one line).
        UnknownEnvError: ``env`` is not one of :data:`SUPPORTED`.
        EnvOptionError: an option gymnasium's env does not take, ``wrappers`` (the batch has no
            per-env env to wrap), or a bad ``batch_threads`` (one line).
    """
    task = gym_id(env)
    if not batch_available():
        raise ConfigError(
            "--vec-backend mujoco needs MuJoCo >= 4.0 for mujoco.batch "
            "(Python >= 3.11): pip install 'rlperf[mujoco]', or train with --vec-backend serial"
        )
    quiet_mujoco(task)
    options = dict(options)
    if "wrappers" in options:
        raise EnvOptionError(
            "--vec-backend mujoco takes no wrappers option (it has no per-env gymnasium env to "
            "wrap): use --vec-backend serial"
        )
    threads = options.pop("batch_threads", None)
    if threads is None:
        # Ranks on this machine (torchrun's LOCAL_WORLD_SIZE) share its cores.
        ranks = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
        threads = max(1, min(num_envs, usable_cores() // ranks))
    elif not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise EnvOptionError(f"batch_threads must be an integer >= 1, got {threads!r}")
    vec = MujocoBatchVecEnv(task, num_envs, threads, options)
    vec.reset(seed=seed)
    return vec
