"""Any registered gymnasium environment as an rlperf vector env (``make_vec("gym:<id>", n)``).

gymnasium's ``SyncVectorEnv`` in ``AutoresetMode.SAME_STEP`` reports final observations as an
object array holding ``None`` for sub-environments that did not finish. The trainer wants one
dense array it can feed to the critic, so this wrapper stacks them (rows of unfinished
sub-environments are zeros and masked out by ``_final_obs``) and adds gymnasium's own
``RecordEpisodeStatistics`` for the ``episode`` entries.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.wrappers.vector import RecordEpisodeStatistics


class DenseFinalObs(VectorWrapper):
    """Turns ``infos["final_obs"]`` from an object array into a dense float array."""

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        final = infos.get("final_obs")
        if final is not None and final.dtype == object:
            mask = infos["_final_obs"]
            dense = np.zeros_like(obs)
            for i in np.flatnonzero(mask):
                dense[i] = final[i]
            infos["final_obs"] = dense
        return obs, rewards, terminated, truncated, infos


def make_gym_vec(env_id: str, num_envs: int, **kwargs: Any) -> VectorEnv:
    """Wrap gymnasium id ``env_id`` in a synchronous vector env with SAME_STEP autoreset."""
    env = gymnasium.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        **kwargs,
    )
    return DenseFinalObs(RecordEpisodeStatistics(env))
