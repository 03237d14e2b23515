"""Vectorised GAE against the plain per-environment reference loop, and against hand numbers."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlperf import native
from rlperf.ppo.gae import gae, gae_reference

ARRAY_NAMES = ("rewards", "values", "last_value", "terminations", "truncations", "bootstrap_values")


def gae_of(arrays, gamma, lam, out):
    """``gae`` with its six arrays given in order (keyword-only in the function itself)."""
    return gae(**dict(zip(ARRAY_NAMES, arrays, strict=True)), gamma=gamma, gae_lambda=lam, out=out)


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
        result = gae_of(args, gamma, lam, out)
        assert result is out
        return torch.from_numpy(out)
    args = [torch.tensor(a, dtype=dtype) for a in arrays]
    out = torch.full(rewards.shape, float("nan"), dtype=dtype)
    result = gae_of(args, gamma, lam, out)
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
        rewards=np.array(rewards),
        values=np.array(values),
        last_value=np.array([99.0]),
        terminations=np.array(terms, dtype=float),
        truncations=np.array(truncs, dtype=float),
        bootstrap_values=np.array(final_values),
        gamma=gamma,
        gae_lambda=lam,
        out=np.zeros((4, 1)),
    )
    assert fast.tolist() == expected


def test_last_value_bootstraps_an_unfinished_rollout() -> None:
    # No episode end: adv_T-1 = r + gamma * last_value - V.
    out = gae(
        rewards=np.array([[1.0]]),
        values=np.array([[0.25]]),
        last_value=np.array([2.0]),
        terminations=np.zeros((1, 1)),
        truncations=np.zeros((1, 1)),
        bootstrap_values=np.zeros((1, 1)),
        gamma=0.5,
        gae_lambda=0.9,
        out=np.zeros((1, 1)),
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
        gae_of((rew, values, last_value, terms * 1.0, truncs * 1.0, bootstrap), 0.99, 0.95, out)
        return out

    before = adv(rewards)
    changed = rewards.copy()
    changed[6:, 0] += 100.0  # after env 0's termination
    changed[8:, 1] += 100.0  # after env 1's truncation
    after = adv(changed)
    assert np.array_equal(before[:6, 0], after[:6, 0])
    assert np.array_equal(before[:8, 1], after[:8, 1])
    assert np.array_equal(before[:, 2], after[:, 2])


@pytest.mark.parametrize(
    "name, shape",
    [
        ("values", (4, 2)),
        ("terminations", (5, 4)),
        ("bootstrap_values", (5,)),
        ("last_value", (5,)),
        ("out", (3, 5)),
    ],
)
def test_a_misshapen_argument_is_named(name: str, shape: tuple[int, ...]) -> None:
    arrays = dict(zip(ARRAY_NAMES, random_rollout(0, 5, 3, 0.1, 0.1)[:5], strict=False))
    arrays["bootstrap_values"] = np.zeros((5, 3))
    arrays["terminations"] = arrays["terminations"] * 1.0
    arrays["truncations"] = arrays["truncations"] * 1.0
    kwargs = {**arrays, "out": np.zeros((5, 3))}
    kwargs[name] = np.zeros(shape)
    with pytest.raises(ValueError, match=f"gae: {name} must"):
        gae(**kwargs, gamma=0.99, gae_lambda=0.95)


def test_rewards_must_be_two_dimensional() -> None:
    with pytest.raises(ValueError, match=r"rewards must be \(T, N\)"):
        gae(
            rewards=np.zeros(5), values=np.zeros(5), last_value=np.zeros(()),
            terminations=np.zeros(5), truncations=np.zeros(5), bootstrap_values=np.zeros(5),
            gamma=0.99, gae_lambda=0.95, out=np.zeros(5),
        )  # fmt: skip


@pytest.mark.skipif(not native.rollout_available(), reason="the rollout kernel is not built")
@pytest.mark.parametrize(("num_steps", "num_envs"), [(1, 3), (128, 4), (32, 64), (7, 1)])
@pytest.mark.parametrize(("gamma", "lam"), [(0.99, 0.95), (0.9, 1.0), (1.0, 0.0)])
def test_native_advantages_are_the_numpy_arithmetic_bit_for_bit(
    monkeypatch, num_steps, num_envs, gamma, lam
) -> None:
    """Reference: the same float32 arrays through gae()'s numpy loop, the kernel switched off."""
    *arrays, _, bootstrap = random_rollout(5, num_steps, num_envs, 0.05, 0.03)
    rewards, values, last_value, terms, truncs = arrays
    flags = terms.astype(float), truncs.astype(float)
    args = [a.astype(np.float32) for a in (rewards, values, last_value, *flags, bootstrap)]
    calls = []
    real = native.gae_advantages
    monkeypatch.setattr(native, "gae_advantages", lambda *a: calls.append(1) or real(*a))
    fast = gae_of(args, gamma, lam, np.full(rewards.shape, np.nan, np.float32))
    assert calls == [1]  # the kernel ran
    monkeypatch.setattr(native, "rollout_available", lambda: False)
    slow = gae_of(args, gamma, lam, np.full(rewards.shape, np.nan, np.float32))
    assert calls == [1]  # the numpy loop ran
    assert fast.tobytes() == slow.tobytes()


def test_native_advantages_refuse_what_they_cannot_take() -> None:
    if not native.rollout_available():
        pytest.skip("the rollout kernel is not built")
    good = np.zeros((4, 3), np.float32)
    last = np.zeros(3, np.float32)

    def call(**change):
        names = ("rewards", "values", "terminations", "truncations", "bootstrap_values")
        arrays = {**dict.fromkeys(names, good), "last_value": last, "out": good.copy(), **change}
        native.gae_advantages(
            arrays["rewards"], arrays["values"], arrays["last_value"], arrays["terminations"],
            arrays["truncations"], arrays["bootstrap_values"], 0.99, 0.95, arrays["out"],
        )  # fmt: skip

    call()
    with pytest.raises(native.KernelArgumentError, match="rewards: .*float32"):
        call(rewards=good.astype(np.float64))
    with pytest.raises(native.KernelArgumentError, match=r"last_value: .*\(3,\)"):
        call(last_value=np.zeros(4, np.float32))
    with pytest.raises(native.KernelArgumentError, match="T >= 1"):
        call(out=good[:0].copy())


def test_the_buffer_hands_gae_a_contiguous_last_value() -> None:
    """A policy's value may be a strided view (the LSTM's is a column of its heads' output):
    the arrays GAE gets are contiguous, so the trainer's CPU case takes the kernel."""
    from rlperf.envs.spec import ActionSpec, EnvSpec
    from rlperf.ppo.rollout import RolloutBuffer

    spec = EnvSpec(3, (2,), np.dtype(np.float32), ActionSpec("discrete", (2,), 1))
    buf = RolloutBuffer(5, 3, spec, torch.device("cpu"))
    heads = torch.arange(9, dtype=torch.float32).view(3, 3)
    inputs = buf.gae_inputs(heads[:, 2])
    for name, array in inputs.items():
        assert array.flags.c_contiguous, name
    np.testing.assert_array_equal(inputs["last_value"], [2.0, 5.0, 8.0])
