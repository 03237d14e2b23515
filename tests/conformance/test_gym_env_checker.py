# Adapted from gymnasium/utils/env_checker.py (gymnasium 1.4.0 as installed; its checks of one
# env, run here on a vector env's batches). MIT License, Copyright (c) 2016 OpenAI, Copyright (c)
# 2022 Farama Foundation: LICENSE.gymnasium.
"""gymnasium's env checker, batch by batch, on rlperf's vector envs.

gymnasium 1.4.0's ``check_env`` takes a single ``gymnasium.Env`` and has no vector variant; its
checks that are about what a vector env returns are ported here (reset's return type, seeded
reset and step determinism, options, and new data on every call), with the batch in place of
the single observation.
"""

from __future__ import annotations

from copy import deepcopy
from itertools import combinations

from conformance_envs import action_sampler, leaf
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.utils.passive_env_checker import data_shares_objects


def test_check_reset_return_type(case, shared_env):
    env = shared_env
    result = env.reset()
    assert isinstance(result, tuple), type(result)
    assert len(result) == 2, len(result)
    obs, info = result
    assert obs in env.observation_space
    assert isinstance(info, dict), type(info)


def test_check_reset_seed_determinism(case, shared_env):
    env = shared_env
    obs_1 = deepcopy(env.reset(seed=123)[0])
    obs_2 = deepcopy(env.reset()[0])
    obs_3 = deepcopy(env.reset(seed=123)[0])
    obs_4 = deepcopy(env.reset()[0])
    for obs in (obs_1, obs_2, obs_3, obs_4):
        assert obs in env.observation_space
    assert data_equivalence(leaf(obs_1), leaf(obs_3), exact=True), "reset(seed=123) differs"
    assert data_equivalence(leaf(obs_2), leaf(obs_4), exact=True), (
        "reset(seed=123) then reset() differs"
    )


def test_check_reset_options(case, shared_env):
    shared_env.reset(options={})


def test_check_step_determinism(case, shared_env, seed: int = 123):
    env = shared_env
    action = action_sampler(env, seed).sample()
    env.reset(seed=seed)
    first = deepcopy(env.step(action))
    env.reset(seed=seed)
    second = env.step(action)
    for name, a, b in zip(("obs", "rewards", "terminations"), first[:3], second[:3], strict=True):
        assert data_equivalence(leaf(a), leaf(b), exact=True), f"step {name} differ"
    assert not second[3].all(), "Environment truncates after 1 step"
    info_0, info_1 = first[4], second[4]
    for info in (info_0, info_1):
        if "episode" in info:
            info["episode"] = {k: v for k, v in info["episode"].items() if k != "t"}
    assert data_equivalence(info_0, info_1), "step infos differ"


def test_check_returned_data_not_reused(case, shared_env, seed: int = 123):
    """Environments must return new observation and info data on every call."""
    env = shared_env
    sampler = action_sampler(env, seed)
    calls = [("env.reset() (call 1)", env.reset(seed=seed))]
    for _ in range(2):
        obs, _, _, _, info = env.step(sampler.sample())
        calls.append((f"env.step() (call {len(calls) + 1})", (obs, info)))
    calls.append((f"env.reset() (call {len(calls) + 1})", env.reset(seed=seed)))

    for (source_1, (obs_1, info_1)), (source_2, (obs_2, info_2)) in combinations(calls, 2):
        assert not data_shares_objects(obs_1, obs_2), (
            f"The observations returned by `{source_1}` and `{source_2}` share an object"
        )
        assert not data_shares_objects(info_1, info_2), (
            f"The infos returned by `{source_1}` and `{source_2}` share an object"
        )
