"""``obs_out`` (envs/spec.py, "Observations into a given array") against the plain env.

The reference is the same env and seed without ``obs_out``: every reset and step, including
the steps where episodes end and rows restart, must give the same observations and final
observations, written into the given array and returned as it.
"""

from __future__ import annotations

import numpy as np
import pytest

from rlperf.envs import make_vec

STEPS = 14
# case -> (num_envs, options): episodes end within STEPS.
ENVS = {
    "grid": (3, {"map_size": 16, "num_agents": 3, "max_steps": 5}),
    "robots rgb": (3, {"obs_mode": "rgb_image", "board_size": 5, "max_steps": 4}),
    "robots symbolic": (3, {"obs_mode": "symbolic", "board_size": 5, "max_steps": 4}),
}


@pytest.mark.parametrize("case", ENVS)
def test_observations_into_a_given_array_equal_the_plain_env(case):
    num_envs, options = ENVS[case]
    name = case.split()[0]
    plain, into = (make_vec(name, num_envs, **options) for _ in range(2))
    want, _ = plain.reset(seed=3)
    into.obs_out = out = np.full_like(want, 7)
    got, _ = into.reset(seed=3)
    assert got is out
    np.testing.assert_array_equal(got, want)
    rng, ended = np.random.default_rng(0), 0
    for _ in range(STEPS):
        actions = rng.integers(0, plain.single_action_space.n, plain.num_envs)
        want, *_, want_infos = plain.step(actions)
        got, *_, infos = into.step(actions)
        assert got is out
        np.testing.assert_array_equal(got, want)
        assert infos.keys() == want_infos.keys()
        if want_infos:
            ended += 1
            np.testing.assert_array_equal(infos["final_obs"], want_infos["final_obs"])
            assert not np.shares_memory(infos["final_obs"], out)
    assert ended >= 2
