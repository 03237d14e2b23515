# Adapted from Gymnasium v1.4.0 (commit 95a790e19): tests/wrappers/vector/
# test_normalize_observation.py.
# MIT License, Copyright (c) 2016 OpenAI, Copyright (c) 2022 Farama Foundation: LICENSE.gymnasium.
"""gymnasium's vector NormalizeObservation over rlperf's envs (those with a Box observation
space: the wrapper needs one)."""

from __future__ import annotations

import numpy as np
import pytest
from conformance_envs import ReferenceEnv, action_sampler, wrap_observations
from gymnasium import spaces, wrappers

UNIFORM_ONLY = (
    "its tolerances (mean 0 +- 0.15, variance 1 +- 0.2) hold for a GenericTestEnv's uniformly "
    "random observations, not for an env's own; test_wrapper_equivalence checks the statistics"
)


def box_env(env):
    if not isinstance(env.single_observation_space, spaces.Box):
        pytest.skip(
            f"NormalizeObservation needs a Box observation space, not "
            f"{env.single_observation_space}"
        )
    return env


def test_normalization():
    pytest.skip(UNIFORM_ONLY)


def test_wrapper_equivalence(case, shared_env, n_steps: int = 100):
    """gymnasium compares the vector wrapper with a per-env one; here the wrapper over the env
    with the wrapper over its reference (same rows): equal statistics and observations."""
    vec_env = wrap_observations(wrappers.vector.NormalizeObservation, box_env(shared_env))
    ref_env = wrap_observations(wrappers.vector.NormalizeObservation, ReferenceEnv(*case))
    try:
        sampler = action_sampler(vec_env, 123)
        assert np.array_equal(vec_env.reset(seed=123)[0], ref_env.reset(seed=123)[0])
        for _ in range(n_steps):
            action = sampler.sample()
            assert np.array_equal(vec_env.step(action)[0], ref_env.step(action)[0])
        assert vec_env.obs_rms.count == ref_env.obs_rms.count
        assert np.array_equal(vec_env.obs_rms.mean, ref_env.obs_rms.mean)
        assert np.array_equal(vec_env.obs_rms.var, ref_env.obs_rms.var)
    finally:
        ref_env.close()


def test_update_running_mean(case, shared_env):
    env = wrap_observations(wrappers.vector.NormalizeObservation, box_env(shared_env))

    # Default value is True
    assert env.update_running_mean

    env.reset(seed=0)
    for _ in range(100):
        env.step(env.action_space.sample())

    # Disable updating the running mean
    env.update_running_mean = False
    copied_rms_mean = np.copy(env.obs_rms.mean)
    copied_rms_var = np.copy(env.obs_rms.var)

    # Continue stepping through the environment and check that the running mean is not effected
    for _ in range(10):
        env.step(env.action_space.sample())

    assert np.all(copied_rms_mean == env.obs_rms.mean)
    assert np.all(copied_rms_var == env.obs_rms.var)

    # Re-enable updating the running mean
    env.update_running_mean = True

    for _ in range(10):
        env.step(env.action_space.sample())

    assert np.any(copied_rms_mean != env.obs_rms.mean)
    assert np.any(copied_rms_var != env.obs_rms.var)


def test_observation_space_and_dtype(case, shared_env):
    vec_env = wrap_observations(wrappers.vector.NormalizeObservation, box_env(shared_env))

    assert vec_env.single_observation_space.dtype == np.float32
    assert np.all(vec_env.single_observation_space.low == -np.inf)
    assert np.all(vec_env.single_observation_space.high == np.inf)

    obs, _ = vec_env.reset(seed=123)
    assert obs.dtype == np.float32

    obs, *_ = vec_env.step(vec_env.action_space.sample())
    assert obs.dtype == np.float32
