# Adapted from Gymnasium v1.4.0 (commit 95a790e19): tests/wrappers/vector/
# test_vector_wrappers.py. MIT License, Copyright (c) 2016 OpenAI, Copyright (c) 2022 Farama
# Foundation: LICENSE.gymnasium.
"""gymnasium's vector wrappers over rlperf's envs give what they give over the reference.

gymnasium's test compares ``VectorWrapper(make_vec(id))`` with ``make_vec(id, wrappers=(Wrapper,))``
(each sub-env wrapped). For a ``gym:`` id that is the same here, the vector wrapper over rlperf's
env against gymnasium's per-env wrappers; rlperf's own envs have no gymnasium sub-envs, so the
vector wrapper over the env is compared with the same wrapper over the env's reference.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from conformance_envs import (
    GYM_PREFIX,
    SKIP_NEXT_STEP,
    ReferenceEnv,
    action_sampler,
    leaf,
    per_row,
    wrap_observations,
)
from gymnasium import spaces, wrappers
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector.vector_env import AutoresetMode


def box_obs(env) -> dict[str, Any] | None:
    return {} if isinstance(env.single_observation_space, spaces.Box) else None


def box_action(env) -> dict[str, Any] | None:
    return {} if isinstance(env.single_action_space, spaces.Box) else None


def rescale_kwargs(env) -> dict[str, Any] | None:
    """gymnasium's CartPole kwargs, generalised: [0, 1] where the bounds are finite."""
    space = env.single_observation_space
    if not isinstance(space, spaces.Box) or not np.issubdtype(space.dtype, np.floating):
        return None
    finite = np.isfinite(space.low) & np.isfinite(space.high)
    return {
        "min_obs": np.where(finite, 0.0, -np.inf).astype(space.dtype),
        "max_obs": np.where(finite, 1.0, np.inf).astype(space.dtype),
    }


def reshape_kwargs(env) -> dict[str, Any] | None:
    space = env.single_observation_space
    if not isinstance(space, spaces.Box):
        return None
    return {"shape": (int(np.prod(space.shape)),)}


# (wrapper, kwargs of the env or None where it does not apply, why it does not)
WRAPPERS = [
    ("FilterObservation", lambda env: None, "needs a Dict observation space"),
    ("FlattenObservation", lambda env: {}, ""),
    ("GrayscaleObservation", lambda env: None, "needs an (H, W, 3) image (rlperf's are (C, H, W))"),
    ("ResizeObservation", lambda env: None, "needs an (H, W, 3) image (rlperf's are (C, H, W))"),
    ("ReshapeObservation", reshape_kwargs, "needs a Box observation space"),
    ("RescaleObservation", rescale_kwargs, "needs a floating-point Box observation space"),
    (
        "DtypeObservation",
        lambda env: {"dtype": np.int32} if box_obs(env) is not None else None,
        "needs a Box observation space",
    ),  # fmt: skip
    ("ClipAction", box_action, "needs a Box action space"),
    (
        "RescaleAction",
        lambda env: {"min_action": 1, "max_action": 2} if box_action(env) is not None else None,
        "needs a Box action space",
    ),  # fmt: skip
    ("ClipReward", lambda env: {"min_reward": -0.25, "max_reward": 0.75}, ""),
]


@pytest.mark.parametrize("autoreset_mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
@pytest.mark.parametrize("wrapper_name, kwargs_of, why", WRAPPERS, ids=[w[0] for w in WRAPPERS])
def test_vector_wrapper_equivalence(
    case, shared_env, autoreset_mode, wrapper_name, kwargs_of, why, num_steps: int = 50
):
    if autoreset_mode is AutoresetMode.NEXT_STEP:
        pytest.skip(SKIP_NEXT_STEP)
    name, backend = case
    kwargs = kwargs_of(shared_env)
    if kwargs is None:
        pytest.skip(f"{wrapper_name} {why}")
    vector_wrapper = getattr(wrappers.vector, wrapper_name)
    wrapper_vector_env = wrap_observations(vector_wrapper, shared_env, **kwargs)
    if name.startswith(GYM_PREFIX):
        env_wrapper = getattr(wrappers, wrapper_name)
        vector_wrapper_env = gym.wrappers.vector.RecordEpisodeStatistics(
            gym.make_vec(
                name[len(GYM_PREFIX) :],
                num_envs=shared_env.num_envs,
                vectorization_mode="sync",
                vector_kwargs={"autoreset_mode": autoreset_mode},
                wrappers=(lambda env: env_wrapper(env, **kwargs),),
            )
        )
    else:
        vector_wrapper_env = vector_wrapper(ReferenceEnv(name, backend), **kwargs)

    try:
        assert wrapper_vector_env.action_space == vector_wrapper_env.action_space
        assert wrapper_vector_env.observation_space == vector_wrapper_env.observation_space
        assert wrapper_vector_env.single_action_space == vector_wrapper_env.single_action_space
        assert (
            wrapper_vector_env.single_observation_space
            == vector_wrapper_env.single_observation_space
        )
        assert wrapper_vector_env.num_envs == vector_wrapper_env.num_envs

        wrapper_vector_obs, _ = wrapper_vector_env.reset(seed=123)
        vector_wrapper_obs, _ = vector_wrapper_env.reset(seed=123)
        assert data_equivalence(leaf(wrapper_vector_obs), leaf(vector_wrapper_obs))

        sampler = action_sampler(wrapper_vector_env, 123)
        n = wrapper_vector_env.num_envs
        for _ in range(num_steps):
            action = sampler.sample()
            got = wrapper_vector_env.step(action)
            want = vector_wrapper_env.step(action)
            for g, w in zip(got[:4], want[:4], strict=True):
                assert data_equivalence(leaf(g), leaf(w))
            if name.startswith(GYM_PREFIX):  # the reference of rlperf's own envs has no infos
                # without episode statistics: gymnasium's per-env reward wrappers come before
                # them, the vector wrapper over rlperf's env after
                got_rows, want_rows = per_row(got[4], n), per_row(want[4], n)
                for row in (*got_rows, *want_rows):
                    row.pop("episode", None)
                assert data_equivalence(got_rows, want_rows)
    finally:
        vector_wrapper_env.close()
