"""Vectorised GAE against the plain per-environment reference loop, and against hand numbers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlperf.ppo.gae import gae, gae_reference


def random_rollout(seed: int, num_steps: int, num_envs: int, p_term: float, p_trunc: float):
    """Random rewards/values with terminations, truncations and both at once."""
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(num_steps, num_envs))
    values = rng.normal(size=(num_steps, num_envs))
    last_value = rng.normal(size=num_envs)
    terms = rng.random((num_steps, num_envs)) < p_term
    truncs = rng.random((num_steps, num_envs)) < p_trunc
    final_values = rng.normal(size=(num_steps, num_envs))
    # The trainer's contract: bootstrap values only where truncated and not terminated.
    bootstrap = np.where(truncs & ~terms, final_values, 0.0)
    return rewards, values, last_value, terms, truncs, final_values, bootstrap


def run_fast(kind: str, dtype, rewards, values, last_value, terms, truncs, bootstrap, gamma, lam):
    arrays = [rewards, values, last_value, terms.astype(float), truncs.astype(float), bootstrap]
    if kind == "numpy":
        np_dtype = {torch.float32: np.float32, torch.float64: np.float64}[dtype]
        args = [a.astype(np_dtype) for a in arrays]
        out = np.full(rewards.shape, np.nan, dtype=np_dtype)
        result = gae(*args, gamma, lam, out)
        assert result is out
        return torch.from_numpy(out)
    args = [torch.tensor(a, dtype=dtype) for a in arrays]
    out = torch.full(rewards.shape, float("nan"), dtype=dtype)
    result = gae(*args, gamma, lam, out)
    assert result is out
    return out


CASES = [
    # (num_steps, num_envs, p_term, p_trunc, gamma, gae_lambda)
    (1, 1, 0.5, 0.5, 0.99, 0.95),
    (1, 7, 0.3, 0.3, 0.9, 0.8),
    (2, 1, 0.0, 0.0, 0.99, 0.95),
    (5, 3, 0.2, 0.0, 0.99, 0.95),
    (5, 3, 0.0, 0.2, 0.99, 0.95),
    (16, 8, 0.1, 0.1, 0.99, 0.95),
    (32, 4, 0.05, 0.05, 0.999, 1.0),
    (32, 4, 0.3, 0.3, 0.5, 0.0),
    (64, 16, 0.02, 0.02, 1.0, 1.0),
    (20, 2, 1.0, 0.0, 0.99, 0.95),
    (20, 2, 0.0, 1.0, 0.99, 0.95),
    (20, 2, 1.0, 1.0, 0.99, 0.95),
    (11, 5, 0.0, 0.0, 0.0, 0.5),
]


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("case", CASES, ids=[f"T{c[0]}xN{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_gae_matches_reference_loop(kind: str, dtype: torch.dtype, case: tuple) -> None:
    num_steps, num_envs, p_term, p_trunc, gamma, lam = case
    for seed in range(4):
        rewards, values, last_value, terms, truncs, final_values, bootstrap = random_rollout(
            seed, num_steps, num_envs, p_term, p_trunc
        )
        expected = gae_reference(
            rewards.tolist(),
            values.tolist(),
            last_value.tolist(),
            terms.tolist(),
            truncs.tolist(),
            final_values.tolist(),
            gamma,
            lam,
        )
        got = run_fast(
            kind, dtype, rewards, values, last_value, terms, truncs, bootstrap, gamma, lam
        )
        torch.testing.assert_close(
            got, torch.tensor(expected, dtype=dtype), msg=lambda m, s=seed: f"seed {s}: {m}"
        )


def test_reference_against_hand_computation() -> None:
    """One env, four steps: step 1 truncated (bootstraps from V(final)=10), step 3 terminated."""
    gamma, lam = 0.5, 0.5
    rewards = [[1.0], [2.0], [3.0], [4.0]]
    values = [[0.5], [1.0], [1.5], [2.0]]
    terms = [[False], [False], [False], [True]]
    truncs = [[False], [True], [False], [False]]
    final_values = [[0.0], [10.0], [0.0], [0.0]]
    # Backwards: t=3 terminal: delta = 4 - 2 = 2, adv = 2.
    # t=2: next V = 2.0: delta = 3 + 0.5*2 - 1.5 = 2.5; adv = 2.5 + 0.25*2 = 3.0.
    # t=1 truncated: delta = 2 + 0.5*10 - 1 = 6; the recursion restarts: adv = 6.
    # t=0: next V = 1.0: delta = 1 + 0.5*1 - 0.5 = 1; adv = 1 + 0.25*6 = 2.5.
    expected = [[2.5], [6.0], [3.0], [2.0]]
    got = gae_reference(rewards, values, [99.0], terms, truncs, final_values, gamma, lam)
    assert got == expected
    fast = gae(
        np.array(rewards),
        np.array(values),
        np.array([99.0]),
        np.array(terms, dtype=float),
        np.array(truncs, dtype=float),
        np.array(final_values),
        gamma,
        lam,
        np.zeros((4, 1)),
    )
    assert fast.tolist() == expected


def test_last_value_bootstraps_an_unfinished_rollout() -> None:
    # No episode end: adv_T-1 = r + gamma * last_value - V.
    out = gae(
        np.array([[1.0]]),
        np.array([[0.25]]),
        np.array([2.0]),
        np.zeros((1, 1)),
        np.zeros((1, 1)),
        np.zeros((1, 1)),
        0.5,
        0.9,
        np.zeros((1, 1)),
    )
    assert out.tolist() == [[1.0 + 0.5 * 2.0 - 0.25]]


def test_no_advantage_flows_across_an_episode_end() -> None:
    base = random_rollout(0, 12, 3, 0.0, 0.0)
    rewards, values, last_value, terms, truncs, _, bootstrap = (a.copy() for a in base)
    terms[5, 0] = True
    truncs[7, 1] = True
    bootstrap[7, 1] = 3.0

    def adv(rew):
        out = np.zeros_like(rew)
        gae(rew, values, last_value, terms * 1.0, truncs * 1.0, bootstrap, 0.99, 0.95, out)
        return out

    before = adv(rewards)
    changed = rewards.copy()
    changed[6:, 0] += 100.0  # after env 0's termination
    changed[8:, 1] += 100.0  # after env 1's truncation
    after = adv(changed)
    assert np.array_equal(before[:6, 0], after[:6, 0])
    assert np.array_equal(before[:8, 1], after[:8, 1])
    assert np.array_equal(before[:, 2], after[:, 2])
