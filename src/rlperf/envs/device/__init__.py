"""The built-in envs as batched torch code on any device (``--vec-backend torch``).

:data:`DEVICE_ENVS` names the envs that have a torch version (the built-ins whose state is a
few small arrays); :func:`make_device_vec` builds one with the numpy env's options. The trainer
steps them in its device rollout (``ppo/device_rollout.py``); everywhere else they follow
gymnasium's vector API as the numpy envs do (``envs/device/base.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from rlperf.config import ConfigError
from rlperf.envs.device.base import DeviceStep, DeviceVecEnv
from rlperf.envs.device.cartpole import CartPoleTorch
from rlperf.envs.device.catch import CatchTorch
from rlperf.envs.registry import EnvOptionError, check_options, factory_of

# Each takes the numpy env's arguments (num_envs, options) and a keyword ``device``.
DEVICE_ENVS: dict[str, Callable[..., DeviceVecEnv]] = {
    "cartpole": CartPoleTorch,
    "catch": CatchTorch,
}


def has_device_env(name: str) -> bool:
    """Whether env ``name`` has a torch version."""
    return name in DEVICE_ENVS


def make_device_vec(
    name: str,
    num_envs: int,
    device: str | torch.device = "cpu",
    seed: int | None = None,
    **options: Any,
) -> DeviceVecEnv:
    """``num_envs`` copies of env ``name``'s torch version on ``device``, reset with ``seed``;
    ``options`` as the numpy env takes them.

    Raises:
        ConfigError: ``name`` has no torch version (:func:`has_device_env`; one line).
        EnvOptionError: an option the env does not take, or one it refused (one line).
    """
    if not has_device_env(name):
        raise ConfigError(
            f"--vec-backend torch steps the envs that have a torch version "
            f"({', '.join(DEVICE_ENVS)}), not {name!r}"
        )
    cls = DEVICE_ENVS[name]
    reference = factory_of(name)
    if reference is not None:  # the numpy env's option names, and its messages
        check_options(name, reference, options)
    if num_envs <= 0:
        raise ValueError(f"num_envs must be positive, got {num_envs}")
    try:
        env = cls(num_envs, **options, device=device)
    except (TypeError, ValueError) as e:
        if not options:
            raise
        raise EnvOptionError(f"env {name!r}: {str(e).strip().splitlines()[0]}") from e
    env.reset(seed=seed)
    return env


__all__ = [
    "DEVICE_ENVS",
    "CartPoleTorch",
    "CatchTorch",
    "DeviceStep",
    "DeviceVecEnv",
    "has_device_env",
    "make_device_vec",
]
