"""The CleanRL reference loops (rlperf.bench.cleanrl): GAE against its definition, whole-env
minibatches for the LSTM, and tiny runs of both loops with the keys the scripts read."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from rlperf.bench.cleanrl import (
    CleanRLAgent,
    gae,
    lstm_agent,
    mlp_agent,
    run_lstm,
    run_mlp,
    train,
)


@pytest.fixture(autouse=True)
def _keep_global_torch_and_numpy_state() -> Iterator[None]:
    """The loops set torch's thread count and seed torch's and numpy's global RNGs, as the
    scripts' fresh processes may; other tests in this process get them back as they were."""
    threads = torch.get_num_threads()
    torch_rng, np_rng = torch.random.get_rng_state(), np.random.get_state()
    yield
    torch.set_num_threads(threads)
    torch.random.set_rng_state(torch_rng)
    np.random.set_state(np_rng)


def test_importing_the_module_does_not_import_torch() -> None:
    code = "import sys, rlperf.bench.cleanrl; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    assert done.stdout.strip() == "False"


def gae_by_definition(rewards, values, dones, next_value, next_done, gamma, lam) -> torch.Tensor:
    """A_t = sum_k (gamma lam)^k delta_{t+k}, stopping at the step that ends the episode, where
    delta_u = r_u + gamma V_{u+1} (1 - d_{u+1}) - V_u; one env and one t at a time."""
    num_steps, num_envs = rewards.shape
    out = torch.zeros_like(rewards)
    for i in range(num_envs):
        for t in range(num_steps):
            total, weight = 0.0, 1.0
            for u in range(t, num_steps):
                last = u == num_steps - 1
                ends = float(next_done[i] if last else dones[u + 1, i]) == 1.0
                v_next = 0.0 if ends else float(next_value[0, i] if last else values[u + 1, i])
                total += weight * (float(rewards[u, i]) + gamma * v_next - float(values[u, i]))
                if ends:
                    break
                weight *= gamma * lam
            out[t, i] = total
    return out


def test_gae_equals_its_definition_with_episode_ends() -> None:
    gen = torch.Generator().manual_seed(0)
    num_steps, num_envs = 9, 5
    rewards = torch.randn(num_steps, num_envs, generator=gen, dtype=torch.float64)
    values = torch.randn(num_steps, num_envs, generator=gen, dtype=torch.float64)
    dones = (torch.rand(num_steps, num_envs, generator=gen) < 0.25).double()
    next_value = torch.randn(1, num_envs, generator=gen, dtype=torch.float64)
    next_done = torch.tensor([0.0, 1.0, 0.0, 1.0, 0.0], dtype=torch.float64)
    assert dones[1:].sum() > 0, "the case has episode ends inside the rollout"
    got = gae(rewards, values, dones, next_value, next_done, 0.99, 0.95)
    want = gae_by_definition(rewards, values, dones, next_value, next_done, 0.99, 0.95)
    torch.testing.assert_close(got, want)


def test_gae_by_hand_a_done_cuts_the_bootstrap() -> None:
    # Two steps of reward 1, values 0, gamma 0.5, lambda 1; obs[1] starts a new episode, so
    # A_0 = 1 (nothing from step 1) and A_1 = 1 + 0.5 * V(next) = 1.5.
    rewards, values = torch.ones(2, 1), torch.zeros(2, 1)
    dones = torch.tensor([[0.0], [1.0]])
    got = gae(rewards, values, dones, torch.tensor([[1.0]]), torch.zeros(1), 0.5, 1.0)
    torch.testing.assert_close(got, torch.tensor([[1.0], [1.5]]))


def test_lstm_minibatches_are_whole_envs_and_each_epoch_covers_the_batch() -> None:
    np.random.seed(0)
    agent = lstm_agent(2, 2, 8)
    num_steps, num_envs = 4, 8
    state = agent.initial_state(num_envs)
    state[0][:] = torch.arange(num_envs, dtype=torch.float32).view(1, -1, 1)  # h = env index
    dones = torch.zeros(num_steps, num_envs)
    batches = list(agent.minibatches(dones, state, 4, 2))
    assert len(batches) == 8
    for epoch in (batches[:4], batches[4:]):
        flat = np.concatenate([inds for inds, _ in epoch])
        assert sorted(flat) == list(range(num_steps * num_envs))
    for inds, ((h, _c), mb_dones) in batches:
        envs = inds.reshape(num_steps, -1) % num_envs  # step-major: the same envs every step
        assert (envs == envs[0]).all() and len(envs[0]) == 2
        assert h[0, :, 0].tolist() == envs[0].tolist()  # each env's own starting state
        assert mb_dones.shape == (num_steps * 2,)


def test_mlp_minibatches_shuffle_transitions() -> None:
    np.random.seed(0)
    batches = list(mlp_agent(4, 2).minibatches(torch.zeros(8, 8), None, 4, 3))
    assert len(batches) == 12 and all(len(inds) == 16 and extra is None
                                      for inds, extra in batches)  # fmt: skip
    flat = np.concatenate([inds for inds, _ in batches[:4]])
    assert sorted(flat) == list(range(64))


def _check_timings(result: dict, keys: set[str]) -> None:
    assert set(result) == keys
    for key in keys - {"mean_return"}:
        assert math.isfinite(result[key]) and result[key] > 0, (key, result[key])


def test_run_mlp_tiny() -> None:
    result = run_mlp(8, 8, 3 * 64, threads=1, seed=0)
    _check_timings(result, {"sps"})


def test_run_lstm_tiny() -> None:
    result = run_lstm(3 * 64, threads=1, seed=0, num_envs=8, num_steps=8, hidden=8)
    _check_timings(result, {"sps", "rollout_ms", "update_ms", "mean_return"})
    assert result["mean_return"] is None or math.isfinite(result["mean_return"])


def test_a_run_without_a_timed_iteration_is_refused() -> None:
    with pytest.raises(ValueError, match="none is timed after 2 of warm-up"):
        run_mlp(8, 8, 2 * 64 + 63, threads=1)


def test_the_same_seed_trains_the_same_weights() -> None:
    def trained(seed: int) -> list[torch.Tensor]:
        agents: list[CleanRLAgent] = []

        def make_agent(obs_dim: int, n_actions: int) -> CleanRLAgent:
            agents.append(mlp_agent(obs_dim, n_actions))
            return agents[-1]

        def make_envs():  # noqa: ANN202
            import gymnasium as gym

            return gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="vector_entry_point")

        train(make_envs, make_agent, num_envs=4, num_steps=8, total=3 * 32, threads=1, seed=seed,
              warmup_iters=1)  # fmt: skip
        return [p.detach().clone() for p in agents[0].parameters()]

    first, again, other = trained(3), trained(3), trained(4)
    for a, b in zip(first, again, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert any(not torch.equal(a, b) for a, b in zip(first, other, strict=True))
