# Adapted from Gymnasium v1.4.0 (commit 95a790e19): tests/wrappers/vector/
# test_transform_observation.py. MIT License, Copyright (c) 2016 OpenAI, Copyright (c) 2022 Farama
# Foundation: LICENSE.gymnasium.
"""gymnasium's vector TransformObservation over rlperf's envs with a Box observation space."""

from __future__ import annotations

import numpy as np
import pytest
from conformance_envs import ReferenceEnv, action_sampler, wrap_observations
from gymnasium import spaces, wrappers


def box_space(env) -> spaces.Box:
    space = env.single_observation_space
    if not isinstance(space, spaces.Box):
        pytest.skip(f"transforms a Box observation space, not {space}")
    return space


def shifted(space: spaces.Box, by: float) -> spaces.Box:
    return spaces.Box(space.low.astype(np.float64) + by, space.high.astype(np.float64) + by)


def plus_100(x: np.ndarray) -> np.ndarray:
    """gymnasium's ``x + 100``, in float64 (100 more than an image's uint8 255 would wrap)."""
    return np.asarray(x, dtype=np.float64) + 100


def test_transform(case, shared_env):
    space = box_space(shared_env)
    vec_env = wrap_observations(
        wrappers.vector.TransformObservation,
        shared_env,
        func=plus_100,
        single_observation_space=shifted(space, 100),
    )
    reference = ReferenceEnv(*case)
    try:
        obs, _ = vec_env.reset(seed=123)
        assert np.array_equal(obs, plus_100(reference.reset(seed=123)[0]))
        sampler = action_sampler(vec_env, 123)
        for _ in range(20):
            action = sampler.sample()
            obs, *_ = vec_env.step(action)
            assert np.array_equal(obs, plus_100(reference.step(action)[0]))
            assert obs in vec_env.observation_space
    finally:
        reference.close()


def test_observation_space_from_single_observation_space(case, shared_env):
    space = box_space(shared_env)
    n_envs = shared_env.num_envs
    vec_env = wrap_observations(
        wrappers.vector.TransformObservation,
        shared_env,
        func=plus_100,
        single_observation_space=shifted(space, 100),
    )

    # Check observation space
    assert isinstance(vec_env.observation_space, spaces.Box)
    assert vec_env.observation_space.shape == (n_envs, *space.shape)
    assert vec_env.observation_space.dtype == np.float64
    assert (vec_env.observation_space.low == np.stack([plus_100(space.low)] * n_envs)).all()
    assert (vec_env.observation_space.high == np.stack([plus_100(space.high)] * n_envs)).all()

    # Check single observation space
    assert isinstance(vec_env.single_observation_space, spaces.Box)
    assert vec_env.single_observation_space.shape == space.shape
    assert (vec_env.single_observation_space.low == plus_100(space.low)).all()


def test_warning_on_mismatched_single_observation_space(case, shared_env):
    space = box_space(shared_env)
    n_envs = shared_env.num_envs
    # We only specify observation_space without single_observation_space, so
    # single_observation_space inherits its value from the wrapped env which would not match.
    with pytest.warns(
        Warning,
        match=r"the observation space and the batched single observation space don't match as expected",  # noqa: E501
    ):
        wrap_observations(
            wrappers.vector.TransformObservation,
            shared_env,
            func=plus_100,
            observation_space=spaces.Box(
                np.stack([plus_100(space.low)] * n_envs), np.stack([plus_100(space.high)] * n_envs)
            ),
        )
