# Adapted from gymnasium's tests/vector/test_autoreset_mode.py (Gymnasium v1.4.0, commit
# 95a790e19). MIT License, Copyright (c) 2016 OpenAI, Copyright (c) 2022 Farama Foundation:
# LICENSE.gymnasium.
"""gymnasium's autoreset tests on rlperf's envs: SAME_STEP, the only mode rlperf runs.

Two deliberate differences are allowed for, as docs/workers.md lists them: ``final_obs`` is a
dense array (rows where no episode ended hold no meaning; gymnasium's is an object array with
``None`` there), so infos are compared row by row where their masks are set; and every rlperf env
reports ``episode``/``_episode`` (RecordEpisodeStatistics' keys) itself, which gymnasium's bare
vector envs do not.
"""

from __future__ import annotations

import numpy as np
import pytest
from conformance_envs import (
    EPISODE_STEPS,
    SKIP_DISABLED,
    SKIP_NEXT_STEP,
    action_sampler,
    per_row,
    take,
)
from conformance_spaces import (
    COUNT_ENV_ID,
    SPACE_CASE_IDS,
    SPACE_CASES,
    TESTING_SPACES,
    dynamic_part,
    space_env,
)
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector.vector_env import AutoresetMode

from rlperf.envs import make_vec
from rlperf.envs.workers import MultiprocessVecEnv


def test_autoreset_next_step():
    pytest.skip(SKIP_NEXT_STEP)


def without_episode(info: dict) -> dict:
    return {k: v for k, v in info.items() if k not in ("episode", "_episode")}


def assert_infos(info: dict, expected: dict, num_envs: int = 3) -> None:
    assert data_equivalence(
        per_row(without_episode(info), num_envs), per_row(expected, num_envs), exact=False
    ), f"{info} != {expected}"


@pytest.mark.parametrize("backend", ["serial", "workers"])
def test_autoreset_within_step(backend):
    # gymnasium's module:id form: each worker imports conformance_spaces, registering the id.
    name = f"gym:conformance_spaces:{COUNT_ENV_ID}"
    if backend == "serial":
        envs = make_vec(name, 3, seed=0)
    else:  # one env per worker: sub-env i is seeded i either way
        envs = MultiprocessVecEnv(name, 3, 3, seed=0)
    assert envs.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP

    obs, info = envs.reset(seed=0)  # max_count [2, 3, 3] (conformance_spaces.CountEnv)
    assert np.all(obs == [0, 0, 0])
    assert without_episode(info) == {}

    obs, rewards, terminations, truncations, info = envs.step([1, 2, 3])
    assert np.all(obs == [1, 1, 1])
    assert np.all(rewards == [1, 2, 3])
    assert np.all(terminations == [False, False, False])
    assert np.all(truncations == [False, False, False])
    assert without_episode(info) == {}

    obs, rewards, terminations, truncations, info = envs.step([1, 2, 3])
    assert np.all(obs == [0, 2, 2])
    assert np.all(rewards == [1, 2, 3])
    assert np.all(terminations == [True, False, False])
    assert np.all(truncations == [False, False, False])
    assert_infos(
        info,
        {
            "final_obs": np.array([2, None, None], dtype=object),
            "final_info": {},
            "_final_obs": np.array([True, False, False]),
            "_final_info": np.array([True, False, False]),
        },
    )

    obs, rewards, terminations, truncations, info = envs.step([1, 2, 3])
    assert np.all(obs == [1, 0, 0])
    assert np.all(rewards == [1, 2, 3])
    assert np.all(terminations == [False, True, True])
    assert np.all(truncations == [False, False, False])
    assert_infos(
        info,
        {
            "final_obs": np.array([None, 3, 3], dtype=object),
            "final_info": {},
            "_final_obs": np.array([False, True, True]),
            "_final_info": np.array([False, True, True]),
        },
    )

    obs, rewards, terminations, truncations, info = envs.step([1, 2, 3])
    assert np.all(obs == [0, 1, 1])
    assert np.all(rewards == [1, 2, 3])
    assert np.all(terminations == [True, False, False])
    assert np.all(truncations == [False, False, False])
    assert_infos(
        info,
        {
            "final_obs": np.array([2, None, None], dtype=object),
            "final_info": {},
            "_final_obs": np.array([True, False, False]),
            "_final_info": np.array([True, False, False]),
        },
    )

    envs.close()


def test_autoreset_within_step_every_env(case, shared_env):
    """The same contract on every env: on a step where episodes end, ``final_obs``,
    ``final_info`` and ``episode`` with their masks equal to the finished rows, each final
    observation in the single observation space; on other steps none of them."""
    envs = shared_env
    envs.reset(seed=2)
    sampler = action_sampler(envs, 2)
    ended = 0
    for _ in range(EPISODE_STEPS):
        _, _, terminations, truncations, info = envs.step(sampler.sample())
        done = terminations | truncations
        keys = ("final_obs", "_final_obs", "final_info", "_final_info", "episode", "_episode")
        if not done.any():
            assert not any(k in info for k in keys), sorted(info)
            continue
        ended += int(done.sum())
        for key in keys:
            assert key in info, f"{key!r} missing from infos {sorted(info)}"
        for key in ("_final_obs", "_final_info", "_episode"):
            assert info[key].dtype == np.bool_ and np.array_equal(info[key], done), key
        assert isinstance(info["final_info"], dict)
        for i in np.flatnonzero(done):
            row = take(info["final_obs"], i)
            assert row in envs.single_observation_space, (i, row)
    assert ended > 0


def test_autoreset_disabled():
    pytest.skip(SKIP_DISABLED)


@pytest.mark.parametrize("autoreset_mode", list(AutoresetMode))
def test_autoreset_metadata(case, shared_env, autoreset_mode):
    if autoreset_mode is AutoresetMode.NEXT_STEP:
        pytest.skip(SKIP_NEXT_STEP)
    if autoreset_mode is AutoresetMode.DISABLED:
        pytest.skip(SKIP_DISABLED)
    assert shared_env.metadata["autoreset_mode"] == autoreset_mode
    assert AutoresetMode(shared_env.metadata["autoreset_mode"].value) == autoreset_mode


def test_make_vec_autoreset():
    pytest.skip(
        "tests gymnasium.make_vec's vector_kwargs; rlperf's envs are built by make_vec(name) or "
        "MultiprocessVecEnv and run SAME_STEP only"
    )


@pytest.mark.parametrize(("kind", "backend"), SPACE_CASES, ids=SPACE_CASE_IDS)
@pytest.mark.parametrize(
    "index", range(len(TESTING_SPACES)), ids=[f"space{i}" for i in range(len(TESTING_SPACES))]
)
def test_same_step_final_obs(index, kind, backend, spaces_env):
    """Each testing space's gym id, and the same env registered with rlperf.envs.register,
    serially and on workers (conformance_spaces.space_env)."""
    obs_space = TESTING_SPACES[index]
    if dynamic_part(obs_space) is not None:
        pytest.skip(
            f"{dynamic_part(obs_space)} has no fixed shape: rlperf refuses it at construction "
            "(test_vector_obs_action_spaces_of_testing_spaces checks that)"
        )
    envs = space_env(kind, backend, index)
    assert envs.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP

    envs.reset()
    envs.step(envs.action_space.sample())
    envs.step(envs.action_space.sample())
    # SpaceEnv ends every episode at its 3rd step
    obs, rewards, terminations, truncations, info = envs.step(envs.action_space.sample())
    assert np.all(terminations)
    for i in range(3):
        assert info["final_obs"][i] in envs.single_observation_space
    envs.close()
