"""The batched normalisation (envs/normalize.py) against gymnasium's own wrappers: the vector
NormalizeObservation and NormalizeReward for shared statistics, and one per-env
NormalizeObservation/NormalizeReward per sub-env for ``per_env`` (CleanRL's wrappers)."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import (
    NormalizeObservation,
    NormalizeReward,
    TransformObservation,
    TransformReward,
)
from gymnasium.wrappers import vector as vector_wrappers

from rlperf import native
from rlperf.envs.normalize import Normalizer, RunningStats

GAMMA = 0.99


def _vec(
    num_envs: int, wrappers: list | None = None, mode: AutoresetMode = AutoresetMode.SAME_STEP
) -> gymnasium.vector.VectorEnv:
    # Pendulum: float observations, float rewards, truncation at 200 steps.
    return gymnasium.make_vec(
        "Pendulum-v1",
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": mode},
        wrappers=wrappers,
    )


def _actions(rng: np.random.Generator, n: int, steps: int) -> np.ndarray:
    return rng.uniform(-2.0, 2.0, size=(steps, n, 1)).astype(np.float32)


@pytest.mark.parametrize("num_envs", [1, 3])
def test_shared_statistics_match_gymnasium_vector_wrappers(num_envs: int) -> None:
    # gymnasium's vector wrappers take NEXT_STEP autoreset only, which steps differently once
    # an episode ends; before that (Pendulum truncates at 200 steps) the streams are the same.
    steps = 199
    reference = vector_wrappers.NormalizeReward(
        vector_wrappers.NormalizeObservation(_vec(num_envs, mode=AutoresetMode.NEXT_STEP)),
        gamma=GAMMA,
    )
    raw = _vec(num_envs)
    norm = Normalizer(num_envs, (3,), GAMMA, clip_obs=0.0, clip_reward=0.0)
    # gymnasium keeps a float32 space's statistics in float32, ours (and SB3's) are float64:
    # the normalised values agree to float32's rounding of the statistics.
    ref_obs, _ = reference.reset(seed=5)
    obs = norm.reset(raw.reset(seed=5)[0])
    np.testing.assert_allclose(obs, ref_obs, atol=1e-4)
    for actions in _actions(np.random.default_rng(0), num_envs, steps):
        ref_obs, ref_rew, ref_term, ref_trunc, _ = reference.step(actions)
        o, r, term, trunc, infos = raw.step(actions)
        obs, rew, _ = norm.step(o, r, term, trunc, infos)
        assert not (term | trunc | ref_term | ref_trunc).any()
        np.testing.assert_allclose(obs, ref_obs, atol=1e-4)
        np.testing.assert_allclose(rew, ref_rew, rtol=1e-6)
    # The statistics themselves, not only what they produce.
    ref_obs_rms = reference.env.obs_rms
    np.testing.assert_allclose(norm.obs_stats.mean, ref_obs_rms.mean, rtol=1e-5)
    np.testing.assert_allclose(norm.obs_stats.var, ref_obs_rms.var, rtol=1e-5)
    np.testing.assert_allclose(norm.return_stats.var, reference.return_rms.var, rtol=1e-5)


def _cleanrl_stack(env: gymnasium.Env) -> gymnasium.Env:
    """CleanRL's ppo_continuous_action.py wrappers, less ClipAction (actions are not ours)."""
    env = NormalizeObservation(env)
    env = TransformObservation(env, lambda obs: np.clip(obs, -10, 10), env.observation_space)
    env = NormalizeReward(env, gamma=GAMMA)
    return TransformReward(env, lambda reward: np.clip(reward, -10, 10))


@pytest.mark.parametrize(("env_id", "steps"), [("Pendulum-v1", 450), ("CartPole-v1", 300)],
                         ids=["truncations", "terminations"])  # fmt: skip
def test_per_env_statistics_match_cleanrls_per_env_wrappers(env_id: str, steps: int) -> None:
    """CleanRL's layout, through episode ends: each sub-env of a SAME_STEP SyncVectorEnv
    wrapped in NormalizeObservation, an observation clip, NormalizeReward and a reward clip.
    Pendulum truncates every env at 200 steps; CartPole under random actions terminates after
    ~20, at different steps in different envs. Observations, rewards and final observations
    to float32's rounding (gymnasium keeps a float32 space's statistics in float32), the
    return statistics to float64's."""
    num_envs = 3
    make = lambda wrappers=None: gymnasium.make_vec(  # noqa: E731
        env_id, num_envs=num_envs, vectorization_mode="sync", wrappers=wrappers,
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )  # fmt: skip
    reference, raw = make([_cleanrl_stack]), make()
    shape = raw.single_observation_space.shape
    norm = Normalizer(num_envs, shape, GAMMA, clip_obs=10.0, clip_reward=10.0, per_env=True)
    ref_obs, _ = reference.reset(seed=9)
    obs = norm.reset(raw.reset(seed=9)[0])
    np.testing.assert_allclose(obs, ref_obs, atol=1e-5)
    rng = np.random.default_rng(1)
    ends = 0
    for t in range(steps):
        actions = raw.action_space.sample() if env_id == "CartPole-v1" else None
        if actions is None:
            actions = rng.uniform(-2.0, 2.0, size=(num_envs, 1)).astype(np.float32)
        else:
            actions = rng.integers(0, 2, size=num_envs)
        ref_obs, ref_rew, ref_term, ref_trunc, ref_infos = reference.step(actions)
        o, r, term, trunc, infos = raw.step(actions)
        if "final_obs" in infos:  # dense, as rlperf's GymVecEnv gives it
            rows = zip(infos["final_obs"], infos["_final_obs"], strict=True)
            infos["final_obs"] = np.stack([x if m else np.zeros(shape) for x, m in rows])
        obs, rew, infos = norm.step(o, r, term, trunc, infos)
        np.testing.assert_array_equal(term | trunc, ref_term | ref_trunc)
        np.testing.assert_allclose(obs, ref_obs, atol=1e-4, err_msg=f"obs, step {t}")
        np.testing.assert_allclose(rew, ref_rew, rtol=1e-6, err_msg=f"rewards, step {t}")
        for i in np.flatnonzero(term | trunc):
            np.testing.assert_allclose(infos["final_obs"][i], ref_infos["final_obs"][i],
                                       atol=1e-4, err_msg=f"final obs, step {t}")  # fmt: skip
        ends += int((term | trunc).sum())
    assert ends >= num_envs  # every env went through an episode end at least once
    for i, env in enumerate(reference.envs):
        obs_rms = env.get_wrapper_attr("obs_rms")
        np.testing.assert_allclose(norm.obs_stats.mean[i], obs_rms.mean, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(norm.obs_stats.var[i], obs_rms.var, rtol=1e-5)
        return_rms = env.get_wrapper_attr("return_rms")
        np.testing.assert_allclose(norm.return_stats.var[i], return_rms.var, rtol=1e-9)
        np.testing.assert_allclose(norm.returns[i], env.get_wrapper_attr("discounted_reward"))


def test_clips_and_final_obs() -> None:
    norm = Normalizer(2, (2,), GAMMA, clip_obs=1.0, clip_reward=0.5)
    norm.reset(np.zeros((2, 2)))
    obs = np.array([[100.0, -100.0], [0.0, 0.0]])
    final = np.array([[50.0, 50.0], [0.0, 0.0]])
    infos = {"final_obs": final.copy(), "_final_obs": np.array([True, False])}
    out, rew, infos = norm.step(
        obs, np.array([100.0, -100.0]), np.zeros(2, bool), np.array([True, False]), infos
    )
    assert out.dtype == np.float32 and np.abs(out).max() <= 1.0
    assert np.abs(rew).max() <= 0.5
    # The final observation is normalised with the statistics after this step, not updating them.
    stats = norm.obs_stats
    expected = np.clip((final - stats.mean) / np.sqrt(stats.var + 1e-8), -1.0, 1.0)
    np.testing.assert_allclose(infos["final_obs"], expected, rtol=1e-6)
    # The truncated env's discounted return restarts; the other's goes on.
    assert norm.returns[0] == 0.0 and norm.returns[1] == -100.0


def test_frozen_statistics_do_not_move() -> None:
    norm = Normalizer(2, (3,), GAMMA)
    norm.reset(np.ones((2, 3)))
    norm.training = False
    before = norm.state_dict()
    norm.step(np.full((2, 3), 5.0), np.ones(2), np.zeros(2, bool), np.zeros(2, bool), {})
    after = norm.state_dict()
    np.testing.assert_array_equal(before["obs"]["mean"], after["obs"]["mean"])
    np.testing.assert_array_equal(before["return"]["var"], after["return"]["var"])


def test_state_round_trip_and_mismatch() -> None:
    a = Normalizer(2, (3,), GAMMA, per_env=True)
    a.reset(np.random.default_rng(0).normal(size=(2, 3)))
    a.step(np.ones((2, 3)), np.ones(2), np.zeros(2, bool), np.zeros(2, bool), {})
    b = Normalizer(2, (3,), GAMMA, per_env=True)
    b.load_state_dict(a.state_dict())
    x = np.random.default_rng(1).normal(size=(2, 3))
    np.testing.assert_array_equal(a.normalize_obs(x, False), b.normalize_obs(x, False))
    with pytest.raises(ValueError, match="shape"):
        Normalizer(2, (3,), GAMMA).load_state_dict(a.state_dict())
    with pytest.raises(ValueError, match="does not match"):
        Normalizer(2, (3,), GAMMA, reward=False, per_env=True).load_state_dict(a.state_dict())


def test_per_row_update_equals_one_sample_batches() -> None:
    """A per-row update is gymnasium's RunningMeanStd.update of a batch of that one sample."""
    from gymnasium.wrappers.utils import RunningMeanStd

    rng = np.random.default_rng(3)
    ours = RunningStats((4,), rows=2)
    refs = [RunningMeanStd(shape=(4,)) for _ in range(2)]
    for _ in range(50):
        x = rng.normal(size=(2, 4)) * 3 + 1
        ours.update(x)
        for i, ref in enumerate(refs):
            ref.update(x[i : i + 1])
    for i, ref in enumerate(refs):
        np.testing.assert_allclose(ours.mean[i], ref.mean, rtol=1e-12)
        np.testing.assert_allclose(ours.var[i], ref.var, rtol=1e-12)


@pytest.mark.skipif(
    not native.normalize_available(), reason="the normalisation kernel is not built"
)
@pytest.mark.parametrize("per_env", [False, True], ids=["shared", "per-env"])
@pytest.mark.parametrize("num_envs", [1, 3, 16])
@pytest.mark.parametrize("parts", [(True, True), (True, False), (False, True)],
                         ids=["both", "obs", "reward"])  # fmt: skip
def test_the_kernel_is_the_numpy_step(per_env: bool, num_envs: int, parts) -> None:
    """envs/_normalize_cpu.c against the numpy arithmetic it replaces, over a stream with
    terminations, truncations and final observations: the same statistics, returns,
    observations and rewards (float64 sums in another order at most: 1e-12)."""
    rng = np.random.default_rng(num_envs)
    kw = {"obs": parts[0], "reward": parts[1], "per_env": per_env, "clip_obs": 3.0,
          "clip_reward": 2.0}  # fmt: skip
    fast, slow = Normalizer(num_envs, (5,), GAMMA, **kw), Normalizer(num_envs, (5,), GAMMA, **kw)
    slow.kernel = False
    first = rng.normal(size=(num_envs, 5))
    np.testing.assert_array_equal(fast.reset(first), slow.reset(first))
    for t in range(60):
        obs = rng.normal(size=(num_envs, 5)) * 4 + 2
        rewards = rng.normal(size=num_envs) * 10
        term, trunc = rng.random(num_envs) < 0.1, rng.random(num_envs) < 0.05
        final = rng.normal(size=(num_envs, 5))
        infos_a = {"final_obs": final.copy(), "_final_obs": term | trunc}
        infos_b = {"final_obs": final.copy(), "_final_obs": term | trunc}
        if t == 40:
            fast.training = slow.training = False
        a = fast.step(obs.copy(), rewards.copy(), term, trunc, infos_a)
        b = slow.step(obs.copy(), rewards.copy(), term, trunc, infos_b)
        tol = {"rtol": 1e-12, "atol": 1e-12}
        np.testing.assert_allclose(a[0], b[0], rtol=1e-6, atol=1e-6, err_msg=f"obs, step {t}")
        assert a[0].dtype == b[0].dtype
        np.testing.assert_allclose(a[1], b[1], **tol, err_msg=f"rewards, step {t}")
        np.testing.assert_allclose(a[2]["final_obs"], b[2]["final_obs"], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(fast.returns, slow.returns, **tol)
    for key in ("obs", "return"):
        sa, sb = fast.state_dict()[key], slow.state_dict()[key]
        assert (sa is None) == (sb is None)
        for name in () if sa is None else ("mean", "var", "count"):
            np.testing.assert_allclose(sa[name], sb[name], rtol=1e-12, err_msg=f"{key} {name}")
