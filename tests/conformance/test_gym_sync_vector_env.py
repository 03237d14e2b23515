# Adapted from gymnasium's tests/vector/test_sync_vector_env.py (Gymnasium v1.4.0, commit
# 95a790e19). MIT License, Copyright (c) 2016 OpenAI, Copyright (c) 2022 Farama Foundation:
# LICENSE.gymnasium.
"""gymnasium's SyncVectorEnv tests on rlperf's envs, serial and on 2 workers (their
synchronous ``step``); see conformance_envs."""

from __future__ import annotations

import numpy as np
import pytest
from conformance_envs import (
    NUM_ENVS,
    SKIP_CALL,
    SKIP_ENV_FNS,
    check_render,
    leaf,
    make,
)
from conformance_spaces import RENDERING
from gymnasium.spaces import Box, Discrete, MultiBinary, MultiDiscrete
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from rlperf.envs import make_vec

# Rows per env in the env's own units (the grid: agents per map).
ROWS_PER_ENV = {"grid": 16}
ARRAY_SPACES = (Box, Discrete, MultiBinary, MultiDiscrete)


def check_observations(env, observations) -> None:
    """gymnasium's checks of a batch of observations against the batched space (for spaces
    batched into one array; a Tuple/Dict batch is checked by membership)."""
    if isinstance(env.single_observation_space, ARRAY_SPACES):
        assert isinstance(observations, np.ndarray)
        assert observations.dtype == env.observation_space.dtype
        assert observations.shape == (env.num_envs,) + env.single_observation_space.shape
        assert observations.shape == env.observation_space.shape
    assert observations in env.observation_space


def test_create_sync_vector_env(case):
    """Tests creating the sync vector environment."""
    name, backend = case
    env = make(name, backend)
    env.close()

    assert env.num_envs == NUM_ENVS * ROWS_PER_ENV.get(name, 1)


def test_metadata_sync_vector_env(case, shared_env):
    """The vector env's metadata names its autoreset mode (gymnasium's test also builds a
    NEXT_STEP env, which does not apply: rlperf's envs run SAME_STEP only)."""
    assert shared_env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP


def test_reset_sync_vector_env(case, shared_env):
    """Tests sync vector `reset` function."""
    env = shared_env
    observations, infos = env.reset()

    check_observations(env, observations)
    assert isinstance(infos, dict)


@pytest.mark.parametrize("use_single_action_space", [True, False])
def test_step_sync_vector_env(case, shared_env, use_single_action_space):
    """Test sync vector `steps` function."""
    env = shared_env
    env.reset()

    if use_single_action_space:
        actions = [env.single_action_space.sample() for _ in range(env.num_envs)]
    else:
        actions = env.action_space.sample()
    observations, rewards, terminations, truncations, _ = env.step(actions)

    check_observations(env, observations)

    assert isinstance(rewards, np.ndarray)
    assert isinstance(rewards[0], (float, np.floating))
    assert rewards.ndim == 1
    assert rewards.size == env.num_envs

    assert isinstance(terminations, np.ndarray)
    assert terminations.dtype == np.bool_
    assert terminations.ndim == 1
    assert terminations.size == env.num_envs

    assert isinstance(truncations, np.ndarray)
    assert truncations.dtype == np.bool_
    assert truncations.ndim == 1
    assert truncations.size == env.num_envs


@pytest.mark.parametrize("name", list(RENDERING))
def test_render_sync_vector(name):
    """gymnasium's test with an env that renders rgb_array frames without pygame, serially."""
    check_render(lambda n, options: make_vec(n, 3, **options), name, RENDERING[name])


def test_call_sync_vector_env():
    pytest.skip(SKIP_CALL)


def test_set_attr_sync_vector_env():
    pytest.skip(SKIP_CALL)


def test_check_spaces_sync_vector_env():
    pytest.skip(f"mixes CartPole and FrozenLake sub-envs in one vector env; {SKIP_ENV_FNS}")


def test_custom_space_sync_vector_env():
    pytest.skip(SKIP_ENV_FNS)


def test_sync_vector_env_seed(case, shared_env):
    """Test seeding: the env's action space, seeded as gymnasium's ``make_env`` seeds it,
    samples the same actions as a batch of its single action space seeded the same way."""
    env = shared_env
    other = batch_space(env.single_action_space, env.num_envs)
    env.action_space.seed(123)
    other.seed(123)
    assert env.action_space == other
    assert env.action_space.np_random.bit_generator.state == other.np_random.bit_generator.state
    for _ in range(100):
        assert np.all(env.action_space.sample() == other.sample())


def test_sync_vector_determinism(case, shared_env, seed: int = 123):
    """Check that two envs reset with the same seed step identically from the same actions
    (gymnasium's test checks the action samples of every registered env; those are
    test_sync_vector_env_seed's)."""
    name, backend = case
    env_1 = shared_env
    env_1.reset(seed=seed)
    env_2 = make(name, backend, seed=seed)
    try:
        sampler = batch_space(env_1.single_action_space, env_1.num_envs)
        sampler.seed(seed)
        for _ in range(100):
            actions = sampler.sample()
            results_1, results_2 = env_1.step(actions), env_2.step(actions)
            assert data_equivalence(leaf(results_1[:4]), leaf(results_2[:4]), exact=True)
    finally:
        env_2.close()
