"""rlperf's batched CartPole against gymnasium's own CartPole-v1, bit for bit.

Every comparison here is exact (``np.array_equal``): the native env promises the same float64
operations in the same order as gymnasium's single-env ``step``, so given the same state and
action the float32 observations, rewards and flags must be identical, not merely close.
"""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gym_reference import gymnasium_stack  # tests/envs/, on sys.path under pytest
from gymnasium.vector import AutoresetMode

from rlperf.envs import CartPoleVec, make_vec

X_THRESHOLD = 2.4
THETA_THRESHOLD_RAD = 12 * 2 * np.pi / 360
RESET_BOUND = 0.05
MAX_EPISODE_STEPS = 500


def random_states(rng: np.random.Generator, n: int) -> np.ndarray:
    """States spread over and just past the termination thresholds, plus exact edge cases."""
    states = np.stack(
        [
            rng.uniform(-1.1 * X_THRESHOLD, 1.1 * X_THRESHOLD, n),
            rng.normal(0.0, 2.0, n),
            rng.uniform(-1.2 * THETA_THRESHOLD_RAD, 1.2 * THETA_THRESHOLD_RAD, n),
            rng.normal(0.0, 2.0, n),
        ],
        axis=1,
    )
    # Exactly on a threshold with zero velocity stays on it: not terminated (strict >).
    edges = np.array(
        [
            [X_THRESHOLD, 0.0, 0.0, 0.0],
            [-X_THRESHOLD, 0.0, 0.0, 0.0],
            [0.0, 0.0, THETA_THRESHOLD_RAD, 0.0],
            [0.0, 0.0, -THETA_THRESHOLD_RAD, 0.0],
            [np.nextafter(X_THRESHOLD, 3.0), 0.0, 0.0, 0.0],
            [0.0, 0.0, np.nextafter(-THETA_THRESHOLD_RAD, -1.0), 0.0],
        ]
    )
    return np.concatenate([edges, states])


def gym_step_from(g: gymnasium.Env, state: np.ndarray, action: int) -> tuple:
    """One gymnasium CartPole-v1 step from ``state`` (after a fresh reset)."""
    g.reset(seed=0)
    g.unwrapped.state = state.copy()
    obs, reward, terminated, truncated, _ = g.step(action)
    return obs, reward, terminated, truncated, g.unwrapped.state.copy()


def balancing_actions(obs: np.ndarray) -> np.ndarray:
    """A linear controller that keeps the pole up for the whole 500 steps."""
    x, x_dot, theta, theta_dot = obs.T
    return (theta + 0.5 * theta_dot + 0.01 * x + 0.1 * x_dot > 0).astype(np.int64)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_step_matches_gymnasium_exactly(seed: int) -> None:
    rng = np.random.default_rng(seed)
    states = random_states(rng, 600)
    n = len(states)
    actions = rng.integers(0, 2, n)
    env = make_vec("cartpole", n, seed=seed)
    env.state = states
    obs, rewards, terminations, truncations, infos = env.step(actions)
    assert obs.dtype == np.float32 and obs.shape == (n, 4)
    assert 0 < terminations.sum() < n, "the states must cover both outcomes"
    g = gymnasium.make("CartPole-v1")
    for i in range(n):
        g_obs, g_reward, g_term, g_trunc, g_state = gym_step_from(g, states[i], int(actions[i]))
        msg = f"state {i} {states[i].tolist()} action {actions[i]}"
        assert bool(terminations[i]) == g_term, msg
        assert bool(truncations[i]) == g_trunc, msg
        assert rewards[i] == g_reward, msg
        if g_term:
            assert infos["_final_obs"][i], msg
            assert np.array_equal(infos["final_obs"][i], g_obs), msg
        else:
            assert np.array_equal(obs[i], g_obs), msg
            assert np.array_equal(env.state[i], g_state), msg
    if infos:
        assert np.array_equal(infos["_final_obs"], terminations | truncations)


def test_threshold_edges_terminate_like_gymnasium() -> None:
    edges = random_states(np.random.default_rng(0), 0)
    env = make_vec("cartpole", len(edges), seed=0)
    env.state = edges
    # Euler integration moves x and theta by the old velocities, which are zero here, so every
    # row stays exactly where it was: on a threshold (not terminated, the test is strict) or one
    # float64 ulp past it (terminated).
    _, _, terminations, _, _ = env.step(np.zeros(len(edges), dtype=np.int64))
    g = gymnasium.make("CartPole-v1")
    expected = [gym_step_from(g, s, 0)[2] for s in edges]
    assert terminations.tolist() == expected
    assert terminations.tolist() == [False, False, False, False, True, True]


def test_lockstep_with_gymnasium_vector_stack() -> None:
    """Driven from the same states, match SyncVectorEnv(SAME_STEP) + RecordEpisodeStatistics.

    Half the sub-environments balance the pole (reaching the 500-step time limit), half act at
    random (terminating early), so terminations, truncations, final observations and episode
    statistics are all compared.
    """
    n, steps = 8, 620
    gym_vec = gymnasium_stack("CartPole-v1", n)
    g_obs, _ = gym_vec.reset(seed=5)
    env = make_vec("cartpole", n, seed=5)
    rng = np.random.default_rng(5)
    balancing = np.arange(n) % 2 == 0
    saw_truncation = saw_termination = False
    for step in range(steps):
        env.state = np.stack([sub.unwrapped.state for sub in gym_vec.env.envs])
        actions = np.where(balancing, balancing_actions(g_obs), rng.integers(0, 2, n))
        obs, rewards, terms, truncs, infos = env.step(actions)
        g_obs, g_rewards, g_terms, g_truncs, g_infos = gym_vec.step(actions)
        at = f"step {step}"
        assert np.array_equal(terms, g_terms), at
        assert np.array_equal(truncs, g_truncs), at
        assert np.array_equal(rewards, g_rewards), at
        done = terms | truncs
        assert np.array_equal(obs[~done], g_obs[~done]), at
        assert ("episode" in infos) == ("episode" in g_infos), at
        if done.any():
            assert np.array_equal(infos["_final_obs"], g_infos["_final_obs"]), at
            assert np.array_equal(infos["_episode"], g_infos["_episode"]), at
            for i in np.flatnonzero(done):
                assert np.array_equal(infos["final_obs"][i], g_infos["final_obs"][i]), at
            assert np.array_equal(infos["episode"]["r"], g_infos["episode"]["r"]), at
            assert np.array_equal(infos["episode"]["l"], g_infos["episode"]["l"]), at
            assert np.all(infos["episode"]["t"][done] >= 0), at
            saw_truncation |= bool(truncs.any())
            saw_termination |= bool(terms.any())
    assert saw_truncation and saw_termination


def test_truncation_at_500_steps_like_time_limit() -> None:
    env = make_vec("cartpole", 3, seed=0)
    calm = np.zeros((3, 4))
    for step in range(1, MAX_EPISODE_STEPS + 1):
        env.state = calm
        obs, rewards, terms, truncs, infos = env.step(np.array([0, 1, 0]))
        if step < MAX_EPISODE_STEPS:
            assert not truncs.any() and not terms.any(), f"step {step}"
            assert "episode" not in infos, f"step {step}"
    assert truncs.all() and not terms.any()
    assert infos["episode"]["l"].tolist() == [MAX_EPISODE_STEPS] * 3
    assert infos["episode"]["r"].tolist() == [float(MAX_EPISODE_STEPS)] * 3
    # The final observation is the calm state after one step, the returned one a fresh reset.
    assert np.all(np.abs(obs) <= RESET_BOUND)
    assert np.all(np.abs(infos["final_obs"][:, 0]) < 1e-3)
    # The counter restarted: the next episode is not truncated at its first step.
    _, _, _, truncs, _ = env.step(np.zeros(3, dtype=np.int64))
    assert not truncs.any()


def test_terminated_and_truncated_on_the_same_step() -> None:
    env = make_vec("cartpole", 2, seed=0)
    for _ in range(MAX_EPISODE_STEPS - 1):
        env.state = np.zeros((2, 4))
        env.step(np.zeros(2, dtype=np.int64))
    env.state = np.array([[X_THRESHOLD, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    _, _, terms, truncs, infos = env.step(np.zeros(2, dtype=np.int64))
    assert terms.tolist() == [True, False]
    assert truncs.tolist() == [True, True]
    assert infos["_final_obs"].tolist() == [True, True]
    assert infos["final_obs"][0, 0] > X_THRESHOLD


def test_same_step_autoreset_returns_fresh_observation() -> None:
    env = make_vec("cartpole", 4, seed=0)
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    env.state = np.array([[2.39, 5.0, 0.0, 0.0], [0.0] * 4, [0.0, 0.0, -0.2, -5.0], [0.0] * 4])
    obs, _, terms, _, infos = env.step(np.ones(4, dtype=np.int64))
    assert terms.tolist() == [True, False, True, False]
    assert np.all(np.abs(obs[terms]) <= RESET_BOUND)
    assert np.array_equal(env.state[terms].astype(np.float32), obs[terms])
    assert infos["final_obs"][0, 0] > X_THRESHOLD
    assert infos["final_obs"][2, 2] < -THETA_THRESHOLD_RAD
    assert infos["episode"]["l"].tolist() == [1, 0, 1, 0]
    assert infos["_episode"].tolist() == [True, False, True, False]


def test_episode_statistics_count_every_step() -> None:
    env = make_vec("cartpole", 16, seed=3)
    rng = np.random.default_rng(3)
    steps_since_reset = np.zeros(16, dtype=np.int64)
    finished = 0
    for step in range(300):
        _, rewards, terms, truncs, infos = env.step(rng.integers(0, 2, 16))
        assert np.all(rewards == 1.0), f"step {step}"
        steps_since_reset += 1
        done = terms | truncs
        if done.any():
            assert np.array_equal(infos["_episode"], done), f"step {step}"
            assert np.array_equal(infos["episode"]["l"][done], steps_since_reset[done])
            assert np.array_equal(infos["episode"]["r"][done], steps_since_reset[done])
            assert np.all(infos["episode"]["l"][~done] == 0)
            finished += int(done.sum())
        else:
            assert "episode" not in infos, f"step {step}"
        steps_since_reset[done] = 0
    assert finished > 50


def test_same_seed_is_deterministic_step_by_step() -> None:
    a, b = make_vec("cartpole", 32, seed=11), make_vec("cartpole", 32, seed=11)
    obs_a, _ = a.reset(seed=11)
    obs_b, _ = b.reset(seed=11)
    assert np.array_equal(obs_a, obs_b)
    rng = np.random.default_rng(0)
    for step in range(700):
        actions = rng.integers(0, 2, 32)
        out_a, out_b = a.step(actions), b.step(actions)
        for name, x, y in zip(("obs", "rewards", "terms", "truncs"), out_a, out_b, strict=False):
            assert np.array_equal(x, y), f"{name} differ at step {step}"
        info_a, info_b = out_a[4], out_b[4]
        assert info_a.keys() == info_b.keys(), f"info keys differ at step {step}"
        if info_a:
            assert np.array_equal(info_a["final_obs"], info_b["final_obs"]), f"step {step}"
            for key in ("r", "l"):
                assert np.array_equal(info_a["episode"][key], info_b["episode"][key]), step


def test_different_seeds_differ() -> None:
    a, b = make_vec("cartpole", 8, seed=1), make_vec("cartpole", 8, seed=2)
    assert not np.array_equal(a.reset(seed=1)[0], b.reset(seed=2)[0])


def test_reset_distribution_is_uniform_in_bounds() -> None:
    env = make_vec("cartpole", 4096, seed=0)
    obs, infos = env.reset(seed=0)
    assert obs.shape == (4096, 4) and obs.dtype == np.float32
    assert np.all(np.abs(obs) <= RESET_BOUND)
    # Uniform on [-0.05, 0.05]: reaches both ends, mean ~0, std ~0.1/sqrt(12).
    assert obs.min() < -0.049 and obs.max() > 0.049
    assert np.all(np.abs(obs.mean(axis=0)) < 0.003)
    assert np.allclose(obs.std(axis=0), 0.1 / np.sqrt(12), rtol=0.05)
    assert np.array_equal(env.state.astype(np.float32), obs)


def test_state_is_writable_with_shape_n_by_4() -> None:
    env = make_vec("cartpole", 5, seed=0)
    assert env.state.shape == (5, 4) and env.state.dtype == np.float64
    new = np.arange(20, dtype=np.float64).reshape(5, 4) / 100
    env.state = new
    assert np.array_equal(env.state, new)
    env.state[2, 3] = 0.5  # in-place writes reach the env too
    assert env.state[2, 3] == 0.5
    with pytest.raises(ValueError, match="shape"):
        env.state = np.zeros((4, 5))


def test_spaces_match_gymnasium() -> None:
    env = CartPoleVec(3)
    g = gymnasium.make("CartPole-v1")
    assert env.single_action_space == g.action_space
    assert env.single_observation_space == g.observation_space
    assert env.observation_space.shape == (3, 4)
