"""Any registered gymnasium environment as an rlperf vector env (``make_vec("gym:<id>", n)``).

gymnasium's ``SyncVectorEnv`` in ``AutoresetMode.SAME_STEP`` plus its own
``RecordEpisodeStatistics``, so every info key the wrapped env gives (``prob`` of
``FrozenLake-v1``, ...) comes through with its ``_key`` mask, as do ``final_info``/``_final_info``
and ``episode``/``_episode``, and ``np_random_seed`` is SyncVectorEnv's tuple of the sub-envs'
seeds (``seed, seed + 1, ...`` after ``reset(seed=seed)``). Two differences, both for the
trainer:

- ``infos["final_obs"]`` is dense: gymnasium gives an object array holding ``None`` for the
  sub-environments that did not finish; here it is the batch of the observation space (one
  array, or a dict/tuple of arrays for Dict/Tuple spaces, as ``batch_space`` lays it out) with
  zeros in those rows, masked out by ``_final_obs``, so the critic can take it whole.
- actions are checked for shape and dtype on every step (``envs/contract.py``).

Observation and action spaces: Box, Discrete, MultiDiscrete, MultiBinary and Dict/Tuple of
those; Graph, Sequence, OneOf and Text are refused when the env is made (``registry.make_vec``).
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.vector.utils import create_empty_array
from gymnasium.wrappers.vector import RecordEpisodeStatistics

from rlperf.envs.contract import ActionCheck


def _set_row(space: spaces.Space, batch: Any, row: int, value: Any) -> None:
    """Write one sub-env's ``value`` of ``space`` into row ``row`` of the batch ``batch``."""
    if isinstance(space, spaces.Dict):
        for key, sub in space.spaces.items():
            _set_row(sub, batch[key], row, value[key])
    elif isinstance(space, spaces.Tuple):
        for i, sub in enumerate(space.spaces):
            _set_row(sub, batch[i], row, value[i])
    else:
        batch[row] = value


class DenseFinalObs(VectorWrapper):
    """Turns ``infos["final_obs"]`` from an object array into the dense batch (module docstring)
    and checks each batch of actions before the sub-environments see it."""

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)
        self._check_actions = ActionCheck(self.action_space)

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        obs, rewards, terminated, truncated, infos = self.env.step(self._check_actions(actions))
        final = infos.get("final_obs")
        if final is not None and isinstance(final, np.ndarray) and final.dtype == object:
            # Only on steps where an episode ended; the loop runs over the finished rows.
            space = self.single_observation_space
            dense = create_empty_array(space, self.num_envs, fn=np.zeros)
            for i in np.flatnonzero(infos["_final_obs"]):
                _set_row(space, dense, int(i), final[i])
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
