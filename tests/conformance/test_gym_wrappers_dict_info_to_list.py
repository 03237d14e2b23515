# Adapted from Gymnasium v1.4.0 (commit 95a790e19): tests/wrappers/vector/
# test_dict_info_to_list.py. MIT License, Copyright (c) 2016 OpenAI, Copyright (c) 2022 Farama
# Foundation: LICENSE.gymnasium.
"""gymnasium's DictInfoToList over rlperf's envs: their infos must have the structure the
wrapper asserts (every ``key`` with a ``_key`` mask of one entry per row)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from conformance_envs import EPISODE_STEPS, SKIP_NO_ENV, action_sampler
from gymnasium.wrappers.vector import DictInfoToList


def test_usage_in_vector_env(case, shared_env):
    env = gym.make("CartPole-v1", disable_env_checker=True)
    vector_env = DictInfoToList(shared_env)

    with pytest.raises(TypeError):
        DictInfoToList(env)

    # Beyond gymnasium's test: every step's infos convert, and a finished row's dict has
    # its final observation and episode statistics.
    _, infos = vector_env.reset(seed=3)
    assert isinstance(infos, list) and len(infos) == vector_env.num_envs
    sampler = action_sampler(vector_env, 3)
    ended = 0
    for _ in range(EPISODE_STEPS):
        _, _, terminated, truncated, infos = vector_env.step(sampler.sample())
        assert isinstance(infos, list) and len(infos) == vector_env.num_envs
        for i in np.flatnonzero(terminated | truncated):
            assert "final_obs" in infos[i] and "episode" in infos[i], sorted(infos[i])
            assert {"r", "l", "t"} <= set(infos[i]["episode"])
            ended += 1
    assert ended > 0


def test_update_info():
    pytest.skip(SKIP_NO_ENV + " (DictInfoToList on hand-made infos)")


def test_errors():
    pytest.skip(SKIP_NO_ENV + " (DictInfoToList on malformed infos)")
