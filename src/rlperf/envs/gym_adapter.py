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

from typing import Any, cast

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
            dense = cast(np.ndarray, create_empty_array(self.single_observation_space,
                                                        self.num_envs, fn=np.zeros))  # fmt: skip
            for i in np.flatnonzero(infos["_final_obs"]):
                dense[i] = final[i]
            infos["final_obs"] = dense
        return obs, rewards, terminated, truncated, infos


class InfoTypes:
    """The types gymnasium would give a ``gym:`` id's info entries across *all* workers, kept
    recoverable inside one worker.

    gymnasium's ``SyncVectorEnv`` gives an info entry the type of the first row that has it and
    casts later rows into it: FrozenLake's ``prob`` is an int after a reset, so a batch whose
    first row just reset truncates the other rows' 1/3 to 0. A worker's rows are only part of the
    batch, and which row comes first is only known where the parts meet (the parent). So in a
    worker the sub-env's ``_add_info`` keeps every value (an array is promoted when a later row
    needs a wider type) and :meth:`take` names the entries so promoted with the type their first
    row gave: the parent casts the combined entry to that type when this worker holds the
    batch's first such row (``workers/pool.py``), giving gymnasium's result exactly.
    """

    def __init__(self, env: VectorEnv) -> None:
        sync = env.unwrapped
        self._n = sync.num_envs
        self._first: dict[tuple[str, ...], np.dtype] = {}
        sync._add_info = self._add_info  # type: ignore[method-assign]  # instance attribute

    def take(self) -> dict[tuple[str, ...], np.dtype]:
        """The entries promoted since the last call: path of keys -> their first row's dtype."""
        first, self._first = self._first, {}
        return first

    def _add_info(self, vector_infos: dict[str, Any], env_info: dict[str, Any], env_num: int,
                  path: tuple[str, ...] = ()) -> dict[str, Any]:  # fmt: skip
        """gymnasium 1.4's ``VectorEnv._add_info``, promoting instead of casting (class doc)."""
        n = self._n
        for key, value in env_info.items():
            if key == "final_obs":
                array = vector_infos.get("final_obs")
                if array is None:
                    array = np.full(n, fill_value=None, dtype=object)
                array[env_num] = value
            elif isinstance(value, dict):
                array = self._add_info(vector_infos.get(key, {}), value, env_num, (*path, key))
            else:
                scalar = type(value) in (int, float, bool) or isinstance(value, np.number)
                array = vector_infos.get(key)
                if array is None:
                    if scalar:
                        array = np.zeros(n, dtype=type(value))
                    elif isinstance(value, np.ndarray):
                        array = np.zeros((n, *value.shape), dtype=value.dtype)
                    else:
                        array = np.full(n, fill_value=None, dtype=object)
                elif scalar and array.dtype != object:
                    wide = np.result_type(array.dtype, np.asarray(value).dtype)
                    if wide != array.dtype:
                        self._first.setdefault((*path, key), array.dtype)
                        array = array.astype(wide)
                array[env_num] = value
            mask = vector_infos.get(f"_{key}")
            if mask is None:
                mask = np.zeros(n, dtype=np.bool_)
            mask[env_num] = True
            vector_infos[key], vector_infos[f"_{key}"] = array, mask
        return vector_infos


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
