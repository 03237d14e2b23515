"""The environment registry and the ``gym:<id>`` adapter's contract with the trainer."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from rlperf.envs import CartPoleVec, UnknownEnvError, check_env_name, make_vec, register, registered

X_THRESHOLD = 2.4
THETA_THRESHOLD_RAD = 12 * 2 * np.pi / 360


def step_until_done(env, actions_fn, max_steps: int) -> list[tuple]:
    """Step ``env`` collecting every step on which some sub-environment finished."""
    finished = []
    for step in range(max_steps):
        obs, rewards, terms, truncs, infos = env.step(actions_fn(step))
        if (terms | truncs).any():
            finished.append((step, obs, terms, truncs, infos))
    return finished


def test_cartpole_is_registered() -> None:
    assert "cartpole" in registered()
    assert isinstance(make_vec("cartpole", 2), CartPoleVec)


def test_unknown_names_raise_one_line_errors() -> None:
    for name in ("cartpol", "gym:NoSuchEnv-v0", ""):
        with pytest.raises(UnknownEnvError) as err:
            make_vec(name, 2)
        assert "\n" not in str(err.value) and name in str(err.value)
        with pytest.raises(UnknownEnvError):
            check_env_name(name)


def test_non_positive_num_envs_is_rejected() -> None:
    for num_envs in (0, -3):
        with pytest.raises(ValueError, match="num_envs"):
            make_vec("cartpole", num_envs)


@pytest.mark.usefixtures("isolated_env_registry")
def test_register_adds_a_name_and_reserves_the_gym_prefix() -> None:
    calls = []

    def factory(num_envs: int, **kwargs) -> CartPoleVec:
        calls.append((num_envs, kwargs))
        return CartPoleVec(num_envs, **kwargs)

    register("test_registry_cartpole_short", factory)
    env = make_vec("test_registry_cartpole_short", 3, seed=0, max_episode_steps=7)
    assert calls == [(3, {"max_episode_steps": 7})]
    assert "test_registry_cartpole_short" in registered()
    for _ in range(6):
        env.state = np.zeros((3, 4))
        _, _, _, truncs, _ = env.step(np.zeros(3, dtype=np.int64))
        assert not truncs.any()
    env.state = np.zeros((3, 4))
    assert env.step(np.zeros(3, dtype=np.int64))[3].all(), "kwargs reach the factory"
    with pytest.raises(ValueError, match="reserved"):
        register("gym:Mine-v0", factory)


def test_make_vec_seed_fixes_the_first_observation() -> None:
    a = make_vec("gym:CartPole-v1", 3, seed=4)
    b = make_vec("gym:CartPole-v1", 3, seed=4)
    assert np.array_equal(a.reset(seed=4)[0], b.reset(seed=4)[0])


def test_gym_cartpole_gives_dense_final_obs_and_episode_stats() -> None:
    env = make_vec("gym:CartPole-v1", 4, seed=0)
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert env.single_action_space == spaces.Discrete(2)
    rng = np.random.default_rng(0)
    finished = step_until_done(env, lambda _: rng.integers(0, 2, 4), 200)
    assert finished, "random CartPole episodes end within 200 steps"
    for step, obs, terms, truncs, infos in finished:
        done = terms | truncs
        final = infos["final_obs"]
        assert isinstance(final, np.ndarray) and final.dtype == np.float32, step
        assert final.shape == (4, 4), step
        assert np.array_equal(infos["_final_obs"], done), step
        assert np.all(final[~done] == 0.0), f"unfinished rows are zero at step {step}"
        # A terminal CartPole observation lies past a threshold; the returned one is a reset.
        past = (np.abs(final[:, 0]) > X_THRESHOLD) | (np.abs(final[:, 2]) > THETA_THRESHOLD_RAD)
        assert np.all(past[terms]), step
        assert np.all(np.abs(obs[done]) <= 0.05), step
        assert np.array_equal(infos["_episode"], done), step
        assert np.all(infos["episode"]["l"][done] > 0), step
        assert np.array_equal(infos["episode"]["r"][done], infos["episode"]["l"][done]), step


def test_gym_pendulum_is_continuous_and_truncates_with_dense_final_obs() -> None:
    env = make_vec("gym:Pendulum-v1", 3, seed=0)
    assert isinstance(env.single_action_space, spaces.Box)
    assert env.single_action_space.shape == (1,)
    finished = step_until_done(env, lambda _: np.zeros((3, 1), dtype=np.float32), 201)
    assert len(finished) == 1, "Pendulum-v1 ends only by its 200-step time limit"
    step, obs, terms, truncs, infos = finished[0]
    assert step == 199 and truncs.all() and not terms.any()
    final = infos["final_obs"]
    assert final.dtype == np.float32 and final.shape == (3, 3)
    assert infos["_final_obs"].all()
    # (cos, sin, angular velocity): the final observation lies on the unit circle.
    assert np.allclose(final[:, 0] ** 2 + final[:, 1] ** 2, 1.0, atol=1e-5)
    assert not np.array_equal(final, obs), "the returned observation is the reset one"
    assert infos["episode"]["l"].tolist() == [200, 200, 200]
