"""Any registered gymnasium environment as an rlperf vector env (``make_vec("gym:<id>", n)``).

gymnasium's ``SyncVectorEnv`` in ``AutoresetMode.SAME_STEP`` plus its own
``RecordEpisodeStatistics``, so every info key the wrapped env gives (``prob`` of
``FrozenLake-v1``, ...) comes through with its ``_key`` mask, as do ``final_info``/``_final_info``
and ``episode``/``_episode``, and ``np_random_seed`` is SyncVectorEnv's tuple of the sub-envs'
seeds (``seed, seed + 1, ...`` after ``reset(seed=seed)``). Two differences, both for the
trainer:

- ``infos["final_obs"]`` is dense for observation spaces batched into one array: gymnasium
  gives an object array holding ``None`` for the sub-environments that did not finish; here it
  is the batch with zeros in those rows, masked out by ``_final_obs``, so the critic can take it
  whole. Dict and Tuple spaces keep gymnasium's object array (``envs/contract.py``).
- actions are checked for shape and dtype on every step (``envs/contract.py``).

Observation and action spaces: Box, Discrete, MultiDiscrete, MultiBinary and Dict/Tuple of
those; Graph, Sequence, OneOf and Text are refused when the env is made (``registry.make_vec``).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.vector.utils import create_empty_array
from gymnasium.wrappers.vector import RecordEpisodeStatistics

from rlperf.envs.contract import ARRAY_SPACES, ActionCheck


class DenseFinalObs(VectorWrapper):
    """Turns ``infos["final_obs"]`` from an object array into the dense batch (module docstring)
    and checks each batch of actions before the sub-environments see it."""

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)
        self._check_actions = ActionCheck(self.action_space)
        self._dense = isinstance(self.single_observation_space, ARRAY_SPACES)

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        obs, rewards, terminated, truncated, infos = self.env.step(self._check_actions(actions))
        final = infos.get("final_obs")
        if self._dense and final is not None and final.dtype == object:
            # Only on steps where an episode ended; the loop runs over the finished rows.
            dense = create_empty_array(self.single_observation_space, self.num_envs, fn=np.zeros)
            for i in np.flatnonzero(infos["_final_obs"]):
                dense[i] = final[i]
            infos["final_obs"] = dense
        return obs, rewards, terminated, truncated, infos


def make_gym_vec(env_id: str, num_envs: int, **kwargs: Any) -> VectorEnv:
    """Wrap gymnasium id ``env_id`` in a synchronous vector env with SAME_STEP autoreset;
    ``kwargs`` go to ``gymnasium.make_vec`` (``wrappers=[...]`` included)."""
    env = gymnasium.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        **kwargs,
    )
    return DenseFinalObs(RecordEpisodeStatistics(env))
