# Adapted from gymnasium's tests/vector/test_vector_env.py (Gymnasium v1.4.0, commit 95a790e19).
# MIT License, Copyright (c) 2016 OpenAI, Copyright (c) 2022 Farama Foundation: LICENSE.gymnasium.
"""gymnasium's vector-env tests on rlperf's envs (serial and 2 workers); see conformance_envs."""

from __future__ import annotations

import numpy as np
import pytest
from conformance_envs import (
    EPISODE_STEPS,
    GYM_ENVS,
    GYM_PREFIX,
    NUM_ENVS,
    NUM_WORKERS,
    SKIP_DISABLED,
    SKIP_ENV_FNS,
    SKIP_NEXT_STEP,
    action_sampler,
    compare_with_references,
    concat,
    leaf,
    make,
    per_row,
    references,
    take,
)
from conformance_spaces import SPACE_CASE_IDS, SPACE_CASES, TESTING_SPACES, dynamic_part, space_env
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.vector.utils import batch_space
from gymnasium.vector.vector_env import AutoresetMode


# gymnasium: async vs sync, with and without shared memory. Here: each backend against the
# reference that must give the same rows (conformance_envs.references); rlperf's workers always
# share memory.
@pytest.mark.parametrize("autoreset_mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_vector_env_equal(case, shared_env, autoreset_mode):
    """Test that vector environment are equal for both async and sync variants."""
    if autoreset_mode is AutoresetMode.NEXT_STEP:
        pytest.skip(SKIP_NEXT_STEP)
    name, backend = case
    compare_with_references(shared_env, name, backend, seed=0, steps=EPISODE_STEPS)


@pytest.mark.parametrize("name", ["cartpole", "catch", "grid", *GYM_ENVS])
def test_async_vector_env_equal(name):
    """The asynchronous worker API (batches of one worker's envs through async_reset/recv/send)
    gives every row the same results, step for step, as its synchronous reference."""
    seed, steps = 3, 60
    env = make(name, "workers", batch_size=NUM_ENVS // NUM_WORKERS, seed=seed)
    refs = references(name, "workers", NUM_ENVS, seed, per_worker=True)
    try:
        # The reference run: every row's results after t steps, from a table of actions.
        sampler = action_sampler(env, seed)
        table = [sampler.sample() for _ in range(steps)]
        want_obs = [concat([ref.reset(seed=ref_seed)[0] for _, ref, ref_seed in refs])]
        want_arrays, want_infos = [None], [None]
        for t in range(steps):
            results = [ref.step(take(table[t], rows)) for rows, ref, _ in refs]
            want_obs.append(concat([r[0] for r in results]))
            want_arrays.append([concat([r[k] for r in results]) for k in (1, 2, 3)])
            rows_infos = []
            for (rows, _, _), r in zip(refs, results, strict=True):
                rows_infos += per_row(r[4], rows.stop - rows.start)
            want_infos.append(rows_infos)

        sent = np.zeros(env.num_envs, dtype=np.int64)  # steps sent to each row so far
        finished = 0  # batches whose last step was checked
        env.async_reset(seed=seed)
        while finished < NUM_WORKERS:
            obs, rewards, terminations, truncations, infos, env_ids = env.recv()
            t = int(sent[env_ids[0]])
            assert np.all(sent[env_ids] == t)
            what = f"rows {env_ids.tolist()} after {t} steps"
            assert data_equivalence(leaf(obs), leaf(take(want_obs[t], env_ids)), exact=True), what
            if t > 0:
                got_arrays = (rewards, terminations, truncations)
                for got, want in zip(got_arrays, want_arrays[t], strict=True):
                    assert data_equivalence(leaf(got), leaf(want[env_ids]), exact=True), what
                got_rows = per_row(infos, len(env_ids))
                want_rows = [want_infos[t][i] for i in env_ids]
                assert data_equivalence(got_rows, want_rows, exact=True), (what, got_rows)
            if t == steps:
                finished += 1
                continue
            env.send(take(table[t], env_ids), env_ids)
            sent[env_ids] += 1
    finally:
        env.close()
        for _, ref, _ in refs:
            ref.close()


def test_vector_obs_action_spaces(case, shared_env):
    """rlperf's envs in their own spaces: observations in the observation space, sampled
    actions accepted."""
    envs = shared_env
    obs, _ = envs.reset()
    assert obs in envs.observation_space
    obs, _, _, _, _ = envs.step(envs.action_space.sample())
    assert obs in envs.observation_space


@pytest.mark.parametrize(("kind", "backend"), SPACE_CASES, ids=SPACE_CASE_IDS)
@pytest.mark.parametrize(
    "index", range(len(TESTING_SPACES)), ids=[f"space{i}" for i in range(len(TESTING_SPACES))]
)
def test_vector_obs_action_spaces_of_testing_spaces(index, kind, backend, spaces_env, num_envs=3):
    """gymnasium's test over its testing spaces, through an env observing and acting in each
    space: its gym id and the same env registered with rlperf.envs.register, serially and on
    workers (conformance_spaces.space_env). Spaces without a fixed shape (Graph, Sequence, OneOf,
    Text) are refused at construction, naming the space (gymnasium's AsyncVectorEnv with shared
    memory refuses them too)."""
    space = TESTING_SPACES[index]
    dynamic = dynamic_part(space)
    if dynamic is not None:
        with pytest.raises((TypeError, ValueError), match=dynamic):
            space_env(kind, backend, index, num_envs)
        return
    envs = space_env(kind, backend, index, num_envs)
    assert envs.observation_space == envs.action_space
    obs, _ = envs.reset()
    assert obs in envs.observation_space
    obs, _, _, _, _ = envs.step(envs.action_space.sample())
    assert obs in envs.observation_space
    envs.close()


def test_final_obs_info():
    """Tests that the vector environments correctly return the final observation and info."""
    pytest.skip(f"{SKIP_ENV_FNS}; its assertions are NEXT_STEP mode's: {SKIP_NEXT_STEP}")


def expected_seed(name: str, seed: int, num_envs: int):
    """What ``np_random_seed`` reports after ``reset(seed=seed)``: gymnasium's SyncVectorEnv
    gives each sub-env's (``seed + i``); rlperf's own envs draw from one generator per vector
    env, and report the seed it was reset with, on either backend."""
    if name.startswith(GYM_PREFIX):
        return tuple(seed + i for i in range(num_envs))
    return seed


def test_random_seeding_basics(case, shared_env):
    seed = 42
    name, _ = case
    vector_env = shared_env
    vector_env.reset(seed=seed)
    assert vector_env.np_random_seed == expected_seed(name, seed, vector_env.num_envs)
    # resetting with seed=None means seed remains the same
    vector_env.reset(seed=None)
    assert vector_env.np_random_seed == expected_seed(name, seed, vector_env.num_envs)


def test_random_seeds_set_at_retrieval(case, shared_env):
    """gymnasium: a vector env of seeded sub-envs reports their seeds. Here: reading
    ``np_random_seed`` (and ``np_random``) gives the same value every time and never changes a
    trajectory (reading it once reseeded rlperf's built-in envs at random)."""
    name, _ = case
    vector_env = shared_env
    sampler = action_sampler(vector_env, 1)
    actions = [sampler.sample() for _ in range(20)]

    def trajectory(read: bool) -> list:
        out = [vector_env.reset(seed=5)[0]]
        if read:
            first = vector_env.np_random_seed
            assert vector_env.np_random_seed == first
            assert first == expected_seed(name, 5, vector_env.num_envs)
            _ = vector_env.np_random
        for a in actions:
            out.append(vector_env.step(a)[:4])
        return leaf(tuple(out))

    assert data_equivalence(trajectory(read=False), trajectory(read=True), exact=True)


def test_partial_reset():
    pytest.skip(SKIP_DISABLED)


def test_partial_reset_failure():
    pytest.skip(SKIP_DISABLED)


def test_action_count_compatibility(case, shared_env):
    """Test that the number of actions is compatible with the number of environments.

    gymnasium's test builds its envs with AutoresetMode.DISABLED; the checks do not depend on
    it, and rlperf's envs run SAME_STEP."""
    envs = shared_env
    num_envs = envs.num_envs

    # Reset the environment
    envs.reset()

    # Test correct number of actions (should work)
    correct_actions = envs.action_space.sample()
    assert len(correct_actions) == num_envs

    # Test with actions that match the number of environments
    obs, rewards, terminations, truncations, infos = envs.step(correct_actions)
    assert len(obs[0] if isinstance(obs, tuple) else obs) == num_envs
    assert len(rewards) == num_envs
    assert len(terminations) == num_envs
    assert len(truncations) == num_envs

    # Test with too few actions (should raise error)
    with pytest.raises(ValueError):
        envs.step(correct_actions[: num_envs - 1])

    # Test with too many actions (should raise error)
    with pytest.raises(ValueError):
        envs.step(np.concatenate([correct_actions, correct_actions[:1]]))

    # Test with scalar action (should raise error for vector env)
    with pytest.raises(TypeError):
        envs.step(0)


def test_structured_spaces_on_workers():
    """What the testing spaces' gym ids check serially, for the worker backend: a Tuple
    observation space (Blackjack) batched as gymnasium's batch_space does, on 2 workers."""
    envs = make("gym:Blackjack-v1", "workers")
    try:
        assert envs.observation_space == batch_space(envs.single_observation_space, NUM_ENVS)
        obs, _ = envs.reset(seed=0)
        assert obs in envs.observation_space
        for _ in range(10):
            obs, *_ = envs.step(envs.action_space.sample())
            assert obs in envs.observation_space
    finally:
        envs.close()
