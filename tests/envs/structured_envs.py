"""Envs with Tuple and Dict spaces and a variable-size one, for the worker contract tests
(importable by worker processes; registered by the tests)."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.vector.utils import create_empty_array
from gymnasium.wrappers.vector import RecordEpisodeStatistics


class DenseTupleFinalObs(VectorWrapper):
    """gymnasium's object array of final observations as the dense batch of a Tuple or Dict
    space (the contract rlperf's envs give), row by row: the slow, obviously right way."""

    def step(self, actions: Any) -> tuple[Any, Any, Any, Any, dict[str, Any]]:
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        if "final_obs" in infos:
            space = self.single_observation_space
            dense = create_empty_array(space, self.num_envs, fn=np.zeros)
            for i in np.flatnonzero(infos["_final_obs"]):
                for key in range(len(space)) if isinstance(space, spaces.Tuple) else space:
                    dense[key][i] = infos["final_obs"][i][key]
            infos["final_obs"] = dense
        return obs, rewards, terminations, truncations, infos


class DictObs(gymnasium.ObservationWrapper):
    """Blackjack's Tuple observation as a Dict with a MultiBinary part."""

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self.observation_space = spaces.Dict(
            {
                "sum": spaces.Discrete(32),
                "dealer": spaces.Discrete(11),
                "ace": spaces.MultiBinary(2),
            }
        )

    def observation(self, obs: Any) -> dict[str, Any]:
        ace = np.array([obs[2], 1 - obs[2]], dtype=np.int8)
        return {"sum": obs[0], "dealer": obs[1], "ace": ace}


def blackjack(num_envs: int, as_dict: bool = False) -> VectorEnv:
    """gymnasium's Blackjack-v1 (Tuple observations; Dict with ``as_dict``), SAME_STEP."""
    env = gymnasium.make_vec(
        "Blackjack-v1",
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        wrappers=[DictObs] if as_dict else None,
    )
    return DenseTupleFinalObs(RecordEpisodeStatistics(env))


class SequenceObs(VectorEnv):
    """A vector env whose observation space is a Sequence (no fixed-size batch)."""

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs
        self.single_observation_space = spaces.Sequence(spaces.Discrete(3))
        self.single_action_space = spaces.Discrete(2)
        self.observation_space = spaces.Tuple([self.single_observation_space] * num_envs)
        self.action_space = spaces.MultiDiscrete([2] * num_envs)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):  # type: ignore[no-untyped-def]
        return tuple((0,) for _ in range(self.num_envs)), {}
