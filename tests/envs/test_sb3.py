"""rlperf's envs as a stable-baselines3 VecEnv (``rlperf.envs.sb3``).

The reference is SB3's own ``DummyVecEnv`` of ``Monitor``-wrapped gymnasium envs: for
``gym:CartPole-v1`` the adapter must give the same observations, rewards, dones and infos
(``terminal_observation``, ``TimeLimit.truncated``, ``episode``) row by row. Then SB3's PPO trains
a short run on the worker backend.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3", reason="stable-baselines3 is the optional extra 'sb3'")
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv  # noqa: E402
from stable_baselines3.common.vec_env.base_vec_env import VecEnv  # noqa: E402

from rlperf.envs import make_vec  # noqa: E402
from rlperf.envs.sb3 import Sb3VecEnv  # noqa: E402
from rlperf.envs.workers import MultiprocessVecEnv  # noqa: E402

NUM_ENVS = 4


def make(backend: str, name: str = "gym:CartPole-v1", **kwargs) -> Sb3VecEnv:
    if backend == "serial":
        return Sb3VecEnv(make_vec(name, NUM_ENVS))
    return Sb3VecEnv(MultiprocessVecEnv(name, NUM_ENVS, 2, **kwargs))


@pytest.mark.parametrize("backend", ["serial", "workers"])
def test_matches_dummy_vec_env(backend):
    """Row for row what SB3's DummyVecEnv of Monitor(CartPole-v1) gives, episode ends
    included; ``t`` (elapsed seconds) only by type."""
    ours = make(backend)
    theirs = DummyVecEnv([lambda: Monitor(gym.make("CartPole-v1"))] * NUM_ENVS)
    try:
        assert isinstance(ours, VecEnv)
        assert ours.num_envs == theirs.num_envs
        assert ours.observation_space == theirs.observation_space
        assert ours.action_space == theirs.action_space
        ours.seed(11)
        theirs.seed(11)
        obs = ours.reset()
        assert np.array_equal(obs, theirs.reset())
        assert ours.reset_infos == [{}] * NUM_ENVS
        rng = np.random.default_rng(0)
        ended = 0
        for _ in range(300):
            actions = rng.integers(0, 2, NUM_ENVS)
            ours.step_async(actions)
            theirs.step_async(actions)
            obs, rewards, dones, infos = ours.step_wait()
            want_obs, want_rewards, want_dones, want_infos = theirs.step_wait()
            assert obs.shape == (NUM_ENVS, 4) and obs.dtype == want_obs.dtype
            assert np.array_equal(obs, want_obs)
            assert np.array_equal(rewards, want_rewards)
            assert dones.dtype == np.bool_ and np.array_equal(dones, want_dones)
            assert isinstance(infos, list) and len(infos) == NUM_ENVS
            for got, want in zip(infos, want_infos, strict=True):
                assert sorted(got) == sorted(want)
                assert got["TimeLimit.truncated"] == want["TimeLimit.truncated"]
                if "terminal_observation" in want:
                    ended += 1
                    assert np.array_equal(got["terminal_observation"], want["terminal_observation"])
                    assert got["episode"]["r"] == want["episode"]["r"]
                    assert got["episode"]["l"] == want["episode"]["l"]
                    assert isinstance(got["episode"]["t"], float)
        assert ended > 0
    finally:
        ours.close()
        theirs.close()


def test_builtin_env_rows_and_attributes():
    """rlperf's own cartpole on workers: terminal observations where episodes end, the vector
    env's attributes, and one line for what a batched env cannot do."""
    venv = make("workers", "cartpole", seed=0)
    try:
        venv.seed(3)
        venv.reset()
        ended = 0
        for _ in range(60):
            venv.step_async(np.zeros(NUM_ENVS, dtype=np.int64))
            obs, rewards, dones, infos = venv.step_wait()
            for i in np.flatnonzero(dones):
                assert infos[i]["terminal_observation"].shape == (4,)
                assert infos[i]["episode"]["l"] > 0
                ended += 1
        assert ended > 0
        assert venv.get_attr("num_workers") == [2] * NUM_ENVS
        assert venv.get_attr("num_workers", indices=[1]) == [2]
        assert venv.env_is_wrapped(Monitor) == [False] * NUM_ENVS
        with pytest.raises(ValueError, match="every env"):
            venv.set_attr("anything", 1, indices=[0])
    finally:
        venv.close()


def test_async_worker_env_refused():
    env = MultiprocessVecEnv("cartpole", NUM_ENVS, 2, batch_size=2)
    try:
        with pytest.raises(ValueError, match="batch_size"):
            Sb3VecEnv(env)
    finally:
        env.close()


def test_ppo_trains_on_workers(tmp_path):
    """SB3's PPO runs a short training (2048 steps) on rlperf's worker backend and logs
    episode returns from the adapter's ``episode`` infos."""
    venv = Sb3VecEnv(MultiprocessVecEnv("cartpole", 8, 2, seed=0))
    try:
        model = PPO(
            "MlpPolicy", venv, n_steps=128, batch_size=256, n_epochs=2, seed=0, device="cpu"
        )
        model.learn(total_timesteps=2048)
        assert model.num_timesteps >= 2048
        returns = [info["r"] for info in model.ep_info_buffer]
        assert returns and all(r > 0 for r in returns)
    finally:
        venv.close()
