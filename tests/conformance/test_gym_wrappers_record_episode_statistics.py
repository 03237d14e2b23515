# Adapted from Gymnasium v1.4.0 (commit 95a790e19): tests/wrappers/vector/
# test_record_episode_statistics.py. MIT License, Copyright (c) 2016 OpenAI, Copyright (c) 2022
# Farama Foundation: LICENSE.gymnasium.
"""gymnasium's vector RecordEpisodeStatistics over rlperf's envs.

rlperf's envs report ``episode``/``_episode`` themselves (the trainer reads them); gymnasium's
wrapper refuses to write a key that is already there, so it is put over them here with
``stats_key="gym_episode"`` and its statistics must equal the env's own, dtypes included.
"""

from __future__ import annotations

import numpy as np
import pytest
from conformance_envs import EPISODE_STEPS, SKIP_DISABLED, SKIP_NEXT_STEP, action_sampler
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.vector import RecordEpisodeStatistics


def test_record_episode_statistics(case, shared_env, num_steps=EPISODE_STEPS):
    """gymnasium's test compares the vector wrapper with per-env wrappers on num_envs 1 and 3;
    here the vector wrapper with the env's own statistics (num_envs 4: 2 workers need an even
    count)."""
    wrapped = RecordEpisodeStatistics(shared_env, stats_key="gym_episode")
    assert wrapped.action_space == shared_env.action_space
    assert wrapped.observation_space == shared_env.observation_space
    assert wrapped.num_envs == shared_env.num_envs

    wrapped.reset(seed=123)
    sampler = action_sampler(wrapped, 123)
    returns, lengths = [], []
    for _ in range(num_steps):
        _, _, terminated, truncated, info = wrapped.step(sampler.sample())
        done = terminated | truncated
        assert ("gym_episode" in info) == bool(done.any())
        if "gym_episode" not in info:
            continue
        assert "episode" in info
        assert np.array_equal(info["_episode"], info["_gym_episode"])
        ours, theirs = info["episode"], info["gym_episode"]
        for key in ("r", "l"):
            assert ours[key].dtype == theirs[key].dtype, (key, ours[key].dtype, theirs[key].dtype)
        # as gymnasium's data_equivalence compares them (float sums may round differently)
        assert np.allclose(ours["r"][done], theirs["r"][done], rtol=1e-5, atol=1e-5)
        assert np.array_equal(ours["l"][done], theirs["l"][done])
        assert ours["t"].shape == theirs["t"].shape
        assert ours["t"].dtype == theirs["t"].dtype
        returns += list(ours["r"][done])
        lengths += list(ours["l"][done])
    assert wrapped.episode_count == len(returns) > 0
    kept = len(wrapped.return_queue)  # the last 100 (its buffer_length)
    assert np.allclose(list(wrapped.return_queue), returns[-kept:], rtol=1e-5, atol=1e-5)
    assert np.array_equal(list(wrapped.length_queue), lengths[-kept:])


@pytest.mark.parametrize("autoreset_mode", list(AutoresetMode))
def test_episode_statistics_with_autoreset_mode(autoreset_mode):
    """Checks fixed-length episodes of a GenericTestEnv in each autoreset mode; rlperf's envs
    run SAME_STEP, whose check is test_record_episode_statistics on every env."""
    if autoreset_mode is AutoresetMode.NEXT_STEP:
        pytest.skip(SKIP_NEXT_STEP)
    if autoreset_mode is AutoresetMode.DISABLED:
        pytest.skip(SKIP_DISABLED)
    pytest.skip(
        "builds its env from a GenericTestEnv function; SAME_STEP on every rlperf env is "
        "test_record_episode_statistics"
    )
