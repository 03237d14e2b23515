"""gymnasium's own vector stack, the reference rlperf's envs are held to (tests/envs/, on
sys.path under pytest)."""

from __future__ import annotations

from typing import Any

import gymnasium
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.wrappers.vector import RecordEpisodeStatistics


def gymnasium_stack(
    env_id: str, num_envs: int, statistics: bool = True, **kwargs: Any
) -> VectorEnv:
    """``SyncVectorEnv(autoreset_mode=SAME_STEP)`` of ``env_id``, in ``RecordEpisodeStatistics``
    unless ``statistics`` is False: what a gymnasium 1.x user builds by hand. ``kwargs`` go to
    the env (``max_episode_steps``, ...)."""
    env = gymnasium.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        **kwargs,
    )
    return RecordEpisodeStatistics(env) if statistics else env
