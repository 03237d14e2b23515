# Adapted from Gymnasium v1.4.0 (commit 95a790e19): tests/wrappers/vector/
# test_transform_action.py. MIT License, Copyright (c) 2016 OpenAI, Copyright (c) 2022 Farama
# Foundation: LICENSE.gymnasium.
"""gymnasium's vector TransformAction over rlperf's envs with a Box action space."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces, wrappers


def box_space(env) -> spaces.Box:
    space = env.single_action_space
    if not isinstance(space, spaces.Box):
        pytest.skip(f"transforms a Box action space, not {space}")
    return space


def test_action_space_from_single_action_space(case, shared_env):
    space = box_space(shared_env)
    n_envs = shared_env.num_envs
    vec_env = wrappers.vector.TransformAction(
        shared_env,
        func=lambda x: x - 100,
        single_action_space=spaces.Box(space.low + 100, space.high + 100, dtype=space.dtype),
    )

    # Check action space
    assert isinstance(vec_env.action_space, spaces.Box)
    assert vec_env.action_space.shape == (n_envs, *space.shape)
    assert vec_env.action_space.dtype == space.dtype
    assert (vec_env.action_space.low == np.stack([space.low + 100] * n_envs)).all()
    assert (vec_env.action_space.high == np.stack([space.high + 100] * n_envs)).all()

    # Check single action space
    assert isinstance(vec_env.single_action_space, spaces.Box)
    assert vec_env.single_action_space.shape == space.shape
    assert (vec_env.single_action_space.low == space.low + 100).all()
    assert (vec_env.single_action_space.high == space.high + 100).all()

    # Beyond gymnasium's test: the transformed actions step the env.
    vec_env.reset(seed=0)
    vec_env.step(vec_env.action_space.sample())


def test_warning_on_mismatched_single_action_space(case, shared_env):
    space = box_space(shared_env)
    n_envs = shared_env.num_envs
    with pytest.warns(
        Warning,
        match=r"the action space and the batched single action space don't match as expected",
    ):
        wrappers.vector.TransformAction(
            shared_env,
            func=lambda x: x - 100,
            action_space=spaces.Box(
                np.stack([space.low + 100] * n_envs), np.stack([space.high + 100] * n_envs)
            ),
        )
