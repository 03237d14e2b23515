# Adapted from Gymnasium v1.4.0 (commit 95a790e19): tests/wrappers/vector/
# test_vectorize_transform.py. MIT License, Copyright (c) 2016 OpenAI, Copyright (c) 2022 Farama
# Foundation: LICENSE.gymnasium.
"""gymnasium's VectorizeTransform{Action,Observation} over rlperf's envs."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from conformance_envs import wrap_observations
from gymnasium import spaces


def test_vectorize_box_to_dict_action(case, shared_env):
    """A Dict action space over the env's Box one (gymnasium: a GenericTestEnv's Box(0, 1))."""
    space = shared_env.single_action_space
    if not isinstance(space, spaces.Box):
        pytest.skip(f"turns a Box action space into a Dict one, not {space}")

    def func(x):
        return x["key"]

    envs = gym.wrappers.vector.VectorizeTransformAction(
        env=shared_env,
        wrapper=gym.wrappers.TransformAction,
        func=func,
        action_space=gym.spaces.Dict({"key": space}),
    )

    obs, _ = envs.reset()
    obs, _, _, _, _ = envs.step(envs.action_space.sample())


def test_vectorize_dict_to_box_obs(case, shared_env):
    """gymnasium splits CartPole's observation into a Dict of its first and other entries;
    here every env with a one-dimensional Box observation space."""
    space = shared_env.single_observation_space
    if not isinstance(space, spaces.Box) or len(space.shape) != 1:
        pytest.skip(f"splits a one-dimensional Box observation, not {space}")
    size = space.shape[0]
    envs = wrap_observations(
        gym.wrappers.vector.VectorizeTransformObservation,
        shared_env,
        wrapper=gym.wrappers.TransformObservation,
        func=lambda x: {"key1": x[0:1], "key2": x[1:]},
        observation_space=gym.spaces.Dict(
            {
                "key1": gym.spaces.Box(low=-np.inf, high=np.inf, shape=(1,), dtype=space.dtype),
                "key2": gym.spaces.Box(
                    low=-np.inf, high=np.inf, shape=(size - 1,), dtype=space.dtype
                ),
            }
        ),
    )
    obs, _ = envs.reset()
    assert obs in envs.observation_space
    obs, _, _, _, _ = envs.step(envs.action_space.sample())
    assert obs in envs.observation_space
