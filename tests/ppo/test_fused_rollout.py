"""The fused rollout (``ppo/fused_rollout.py``, ``ppo/_rollout_cpu.c``) against the torch path it
replaces: the same seed gives the same trajectories (observations, actions, rewards, flags, env
state and generator bit-identical; log-probabilities, values and truncation bootstraps within
float32 tolerance), its sections are timed, and it is chosen only where it applies. The LSTM's
(``policies/_lstm_cpu.c``) against its torch path: everything bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlperf import native
from rlperf.config import Config
from rlperf.ppo.fused_rollout import FusedCartPoleRollout, FusedStep, draw_normal_steps
from rlperf.ppo.trainer import Trainer
from rlperf.timing.sections import Profiler

pytestmark = pytest.mark.skipif(
    not native.rollout_available(), reason="the fused rollout kernel is not built here"
)

# The policy's float32 arithmetic differs from torch's (summation order, tanh's exp): ~1e-7
# per layer, a few 1e-7 after three layers and the log-softmax.
TOL = {"rtol": 1e-5, "atol": 2e-6}


def config(num_envs: int, num_steps: int, fused: bool, **env_options: object) -> Config:
    cfg = Config()
    cfg.env.num_envs, cfg.ppo.num_steps = num_envs, num_steps
    cfg.env.options = dict(env_options)
    cfg.run.total_steps = 4 * num_envs * num_steps
    cfg.run.threads, cfg.run.progress, cfg.run.seed = 1, False, 5
    cfg.policy.fused_rollout = fused
    return cfg.validate()


def assert_same_env_and_episodes(fused: Trainer, ref: Trainer, where: str) -> None:
    """The env's state and generator, and the episodes logged, equal in every bit."""
    for key, value in ref.env.get_state().items():
        if key == "rng":
            assert fused.env.get_state()["rng"] == value, where
        else:
            np.testing.assert_array_equal(fused.env.get_state()[key], value, err_msg=where)
    assert list(fused.episodes.returns) == list(ref.episodes.returns), where
    assert list(fused.episodes.lengths) == list(ref.episodes.lengths), where


def test_one_noise_draw_per_rollout_is_the_per_step_draws() -> None:
    for shape in ((128, 4, 2), (32, 64, 2), (7, 3, 5), (3, 1024, 2)):
        gen = torch.Generator().manual_seed(11)
        steps = torch.stack([torch.empty(shape[1:]).exponential_(generator=gen)
                             for _ in range(shape[0])])  # fmt: skip
        whole = torch.empty(shape).exponential_(generator=torch.Generator().manual_seed(11))
        assert torch.equal(steps, whole), shape


@pytest.mark.parametrize("shape", [(64, 1, 6), (64, 1, 1), (9, 3, 5), (40, 2, 8), (16, 16, 1)])
def test_one_normal_draw_per_rollout_is_the_per_step_draws(shape: tuple[int, int, int]) -> None:
    """draw_normal_steps against the torch path's draws a step, below and from the 16 numbers
    a step where torch switches samplers; the generator ends in the same state."""
    gen = torch.Generator().manual_seed(5)
    steps = torch.stack([torch.randn(shape[1:], generator=gen) for _ in range(shape[0])])
    whole, gen_whole = torch.empty(shape), torch.Generator().manual_seed(5)
    draw_normal_steps(whole, gen_whole)
    assert torch.equal(whole, steps), shape
    assert torch.equal(gen_whole.get_state(), gen.get_state()), shape


@pytest.mark.parametrize(
    "num_envs, num_steps, options",
    [(4, 64, {}), (16, 48, {"max_episode_steps": 20}), (5, 40, {"observe": "position"})],
    ids=["4x64", "16x48-truncations", "5x40-position"],
)
def test_fused_rollout_gives_the_torch_paths_trajectories(
    num_envs: int, num_steps: int, options: dict
) -> None:
    ref = Trainer(config(num_envs, num_steps, False, **options), profiler=Profiler())
    fused = Trainer(config(num_envs, num_steps, True, **options), profiler=Profiler())
    assert ref.whole_rollout is None and fused.whole_rollout is not None
    truncated = 0
    for it in range(3):
        with torch.no_grad():
            fused.policy.flat.copy_(ref.policy.flat)  # same weights for both
        ref.collect()
        fused.collect()
        a, b = ref.buffer, fused.buffer
        where = f"rollout {it}"
        np.testing.assert_array_equal(b.obs_slots.numpy(), a.obs_slots.numpy(), err_msg=where)
        np.testing.assert_array_equal(b.actions.numpy(), a.actions.numpy(), err_msg=where)
        for name in ("rewards_host", "terminations_host", "truncations_host"):
            np.testing.assert_array_equal(getattr(b, name), getattr(a, name), err_msg=where)
        for name in ("logprobs", "values", "bootstrap_values"):
            torch.testing.assert_close(getattr(b, name), getattr(a, name), **TOL, msg=where)
        truncated += int((a.truncations_host > a.terminations_host).sum())
        assert_same_env_and_episodes(fused, ref, where)
        assert fused.global_step == ref.global_step
        for t in (ref, fused):
            t.compute_advantages()
            t.update()
    if options.get("max_episode_steps"):
        assert truncated > 0  # the bootstrap was exercised
    assert ref.episodes.count > 0


def test_fused_rollout_times_its_phases_as_the_torch_paths_sections() -> None:
    trainer = Trainer(config(4, 32, True, max_episode_steps=10), profiler=Profiler())
    summary = trainer.train()
    sections = summary["sections"]
    for name in ("policy_forward", "env_step", "buffer_store", "truncation_bootstrap"):
        assert sections[f"rollout/{name}"] > 0, name
    calls = {s.name: s.calls for s in trainer.prof.stats()}
    assert calls["rollout/policy_forward"] == calls["rollout/env_step"] == 4 * 32
    assert sections["rollout"] >= sum(
        sections[f"rollout/{n}"] for n in ("policy_forward", "env_step", "buffer_store")
    )


def test_fused_rollout_reads_no_clock_with_the_profiler_off() -> None:
    prof = Profiler(enabled=False)
    trainer = Trainer(config(4, 16, True), profiler=prof)
    trainer.collect()
    assert not list(prof.stats())
    assert int(trainer.whole_rollout.finished.phase_ns[:, 0].sum()) == 0  # type: ignore[union-attr]


def with_overrides(cfg: Config, overrides: dict[str, object]) -> Config:
    for dotted, value in overrides.items():
        section, name = dotted.split(".")
        setattr(getattr(cfg, section), name, value)
    return cfg.validate()


def test_the_fused_rollout_applies_only_where_it_is_exact() -> None:
    cases = {  # what: (overrides, takes the fused step)
        "gym id": ({"env.env": "gym:CartPole-v1"}, True),
        "workers": ({"env.backend": "multiprocess", "env.num_workers": 2}, True),
        "lstm on a gym id": ({"policy.kind": "lstm", "env.env": "gym:CartPole-v1"}, False),
        "switched off": ({"policy.fused_rollout": False}, False),
        "async workers": (
            {"env.backend": "multiprocess", "env.num_workers": 2, "env.env_batch_size": 2},
            False,
        ),
    }
    for what, (overrides, step) in cases.items():
        trainer = Trainer(with_overrides(config(4, 16, True), overrides), profiler=Profiler())
        try:
            assert not isinstance(trainer.whole_rollout, FusedCartPoleRollout), what
            assert isinstance(trainer.policy_step, FusedStep) == step, what
        finally:
            trainer.env.close()


@pytest.mark.parametrize(
    "overrides",
    [{"env.env": "gym:CartPole-v1"}, {"env.backend": "multiprocess", "env.num_workers": 2}],
    ids=["gym-id", "workers"],
)
def test_fused_step_gives_the_torch_paths_trajectories(overrides: dict) -> None:
    """Envs without a fused rollout: the policy's part of each step in one call, same data."""
    ref = Trainer(with_overrides(config(4, 32, False), overrides), profiler=Profiler())
    fused = Trainer(with_overrides(config(4, 32, True), overrides), profiler=Profiler())
    try:
        assert isinstance(fused.policy_step, FusedStep)
        assert not isinstance(ref.policy_step, FusedStep)
        for it in range(2):
            with torch.no_grad():
                fused.policy.flat.copy_(ref.policy.flat)
            ref.collect()
            fused.collect()
            a, b = ref.buffer, fused.buffer
            where = f"rollout {it}"
            np.testing.assert_array_equal(b.obs_slots.numpy(), a.obs_slots.numpy(), where)
            np.testing.assert_array_equal(b.actions.numpy(), a.actions.numpy(), where)
            for name in ("rewards_host", "terminations_host", "truncations_host"):
                np.testing.assert_array_equal(getattr(b, name), getattr(a, name), where)
            for name in ("logprobs", "values"):
                torch.testing.assert_close(getattr(b, name), getattr(a, name), **TOL, msg=where)
            for t in (ref, fused):
                t.compute_advantages()
                t.update()
    finally:
        ref.env.close()
        fused.env.close()


@pytest.mark.parametrize(
    "normalize, num_envs",
    [(False, 4), (True, 4), (False, 16)],
    ids=["raw", "normalized", "16-envs"],
)
def test_fused_gaussian_step_gives_the_torch_paths_trajectories(
    normalize: bool, num_envs: int
) -> None:
    """A Box action (Pendulum's torque): the Gaussian head in the kernel, on the torch path's
    N(0, 1) draws. The mean differs from torch's in the last bits (the tanh), so the actions,
    and through the env the next observations, agree to float32 tolerance, not bit for bit."""
    overrides = {"env.env": "gym:Pendulum-v1"}
    cfgs = [with_overrides(config(num_envs, 32, fused), overrides) for fused in (False, True)]
    for cfg in cfgs:
        cfg.env.normalize_obs = cfg.env.normalize_reward = normalize
    ref, fused = (Trainer(cfg, profiler=Profiler()) for cfg in cfgs)
    assert isinstance(fused.policy_step, FusedStep)
    assert not isinstance(ref.policy_step, FusedStep)
    for it in range(2):
        with torch.no_grad():
            fused.policy.flat.copy_(ref.policy.flat)
        ref.collect()
        fused.collect()
        a, b, where = ref.buffer, fused.buffer, f"rollout {it}"
        assert b.actions.shape == (32, num_envs, 1)
        for name in ("obs_slots", "actions", "logprobs", "values"):
            torch.testing.assert_close(getattr(b, name), getattr(a, name), **TOL, msg=where)
        np.testing.assert_allclose(b.rewards_host, a.rewards_host, rtol=1e-5, err_msg=where)
        assert torch.equal(fused.sample_gen.get_state(), ref.sample_gen.get_state()), where
        for t in (ref, fused):
            t.compute_advantages()
            t.update()


def test_the_fused_step_rebinds_where_the_weights_move() -> None:
    """The fused step keeps its binding across rollouts while the flat parameter keeps its
    storage, and binds again where it moved (share_memory() gives it a new one)."""
    cfg = with_overrides(config(2, 16, True), {"env.env": "gym:Pendulum-v1"})
    trainer = Trainer(cfg, profiler=Profiler())
    trainer.collect()
    steps = trainer.policy_step.steps
    trainer.collect()
    assert trainer.policy_step.steps is steps, "the same binding while the weights stay put"
    trainer.policy.share_memory()
    with torch.no_grad():
        trainer.policy.flat.mul_(1.5)
    trainer.collect()
    assert trainer.policy_step.steps is not steps, "bound again to the moved weights"
    with torch.no_grad():  # the values written are the moved weights' own
        _, value = trainer.policy.heads(trainer.buffer.obs[0])
    torch.testing.assert_close(trainer.buffer.values[0], value, **TOL)


def test_a_patched_env_step_keeps_the_torch_path(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlperf.envs.cartpole import CartPoleVec

    original = CartPoleVec.step
    monkeypatch.setattr(CartPoleVec, "step", lambda self, a: original(self, a))
    assert Trainer(config(4, 16, True), profiler=Profiler()).whole_rollout is None


def test_the_kernel_boundary_refuses_what_it_cannot_read() -> None:
    trainer = Trainer(config(4, 16, True), profiler=Profiler())
    fr = trainer.whole_rollout
    assert fr is not None
    from rlperf.ppo.fused_rollout import fused_mlp

    mlp = fused_mlp(trainer.policy)
    obs = torch.zeros(4, 4)
    noise, actions = torch.ones(4, 2), torch.zeros(4, dtype=torch.int64)
    logprob, value = torch.zeros(4), torch.zeros(4)
    with pytest.raises(native.KernelArgumentError, match="noise"):
        mlp.act(obs, noise.double(), actions, logprob, value)
    with pytest.raises(native.KernelArgumentError, match="actions"):
        mlp.act(obs, noise, actions.int(), logprob, value)
    with pytest.raises(native.KernelArgumentError, match="obs"):
        mlp.act(torch.zeros(4, 3), noise, actions, logprob, value)
    arrays = fr.env_arrays
    bad = native.CartPoleArrays(
        arrays.state.T, arrays.episode_steps, arrays.episode_returns, arrays.episode_start_s,
        arrays.physics, arrays.observe_full, arrays.max_episode_steps,
    )  # fmt: skip
    pool = np.zeros(fr.reset_draws)
    noise = torch.ones(16, 4, 2)
    with pytest.raises(native.KernelArgumentError, match="state"):
        native.cartpole_rollout(mlp, fr.tensors, bad, noise, pool, fr.finished, False)
    with pytest.raises(native.KernelArgumentError, match="reset draws"):
        native.cartpole_rollout(mlp, fr.tensors, arrays, noise, pool[:-1], fr.finished, False)


def test_act_matches_the_torch_policy() -> None:
    trainer = Trainer(config(64, 16, True), profiler=Profiler())
    policy = trainer.policy
    from rlperf.ppo.fused_rollout import fused_mlp

    obs = torch.randn(64, 4, generator=torch.Generator().manual_seed(2))
    actions, logprob, value = torch.zeros(64, dtype=torch.int64), torch.zeros(64), torch.zeros(64)
    gen = torch.Generator().manual_seed(3)
    noise = torch.empty(64, 2).exponential_(generator=torch.Generator().manual_seed(3))
    fused_mlp(policy).act(obs, noise, actions, logprob, value)
    ref_actions, ref_logprob, ref_value, _ = policy.act(obs, (), None, None, gen)
    assert torch.equal(actions, ref_actions)
    torch.testing.assert_close(logprob, ref_logprob, **TOL)
    torch.testing.assert_close(value, ref_value, **TOL)


def lstm_config(num_envs: int, num_steps: int, fused: bool, horizon: int, **options) -> Config:
    cfg = config(num_envs, num_steps, fused, **options)
    cfg.policy.kind, cfg.ppo.bptt_horizon = "lstm", horizon
    return cfg.validate()


@pytest.mark.skipif(not native.lstm_available(), reason="the LSTM kernel is not built here")
@pytest.mark.parametrize(
    "num_envs, num_steps, horizon, options",
    [(4, 32, 0, {"observe": "position"}), (8, 16, 8, {"max_episode_steps": 12}),
     (12, 16, 4, {"observe": "position", "max_episode_steps": 9})],
    ids=["4x32-position", "8x16-bptt8-truncations", "12x16-bptt4-position-truncations"],
)  # fmt: skip
def test_lstm_fused_rollout_is_the_torch_paths_trajectories_bit_for_bit(
    num_envs: int, num_steps: int, horizon: int, options: dict
) -> None:
    """Three rollouts and updates each way from the same seed: the buffer (observations,
    actions, log-probs, values, bootstraps, episode-start flags, the states saved at segment
    starts), the state the rollout ends in, the env and the episodes, all equal in every bit."""
    ref = Trainer(lstm_config(num_envs, num_steps, False, horizon, **options), Profiler())
    fused = Trainer(lstm_config(num_envs, num_steps, True, horizon, **options), Profiler())
    assert ref.whole_rollout is None and type(fused.whole_rollout).__name__ == (
        "FusedLSTMCartPoleRollout"
    )
    truncated = 0
    for it in range(3):
        ref.collect()
        fused.collect()
        a, b = ref.buffer, fused.buffer
        where = f"rollout {it}"
        for name in ("obs_slots", "actions", "logprobs", "values", "bootstrap_values",
                     "done_slots"):  # fmt: skip
            assert torch.equal(getattr(b, name), getattr(a, name)), f"{where}: {name}"
        for name in ("rewards_host", "terminations_host", "truncations_host"):
            np.testing.assert_array_equal(getattr(b, name), getattr(a, name), err_msg=where)
        for mine, theirs in zip(b.states, a.states, strict=True):
            assert torch.equal(mine, theirs), f"{where}: segment states"
        for mine, theirs in zip(fused.state, ref.state, strict=True):
            assert torch.equal(mine, theirs), f"{where}: the state after the rollout"
        truncated += int((a.truncations_host > a.terminations_host).sum())
        assert_same_env_and_episodes(fused, ref, where)
        for t in (ref, fused):
            t.compute_advantages()
            t.update()
        assert torch.equal(fused.buffer.advantages, ref.buffer.advantages), where
    if options.get("max_episode_steps"):
        assert truncated > 0  # the bootstrap was exercised
    assert ref.episodes.count > 0


@pytest.mark.skipif(not native.lstm_available(), reason="the LSTM kernel is not built here")
def test_lstm_fused_rollout_times_its_phases_and_refuses_bad_sizes() -> None:
    trainer = Trainer(lstm_config(4, 32, True, 8, max_episode_steps=10), profiler=Profiler())
    summary = trainer.train()
    for name in ("policy_forward", "env_step", "buffer_store", "truncation_bootstrap"):
        assert summary["sections"][f"rollout/{name}"] > 0, name
    calls = {s.name: s.calls for s in trainer.prof.stats()}
    assert calls["rollout/policy_forward"] == calls["rollout/env_step"] == 4 * 32
    fr, buf = trainer.whole_rollout, trainer.buffer
    assert fr is not None
    noise, pool = torch.ones(32, 4, 2), np.zeros(fr.reset_draws)
    rest = (fr.tensors, fr.env_arrays, noise, pool, fr.finished, False)

    def run(step, state, horizon: int) -> None:
        native.lstm_cartpole_rollout(step, state, buf.done_slots, buf.states, horizon, *rest)

    step = trainer.policy.compiled_step(4, 4)
    with pytest.raises(native.KernelArgumentError, match="horizon dividing 32"):
        run(step, trainer.state, 5)
    with pytest.raises(native.KernelArgumentError, match="batch 4"):
        run(trainer.policy.compiled_step(3, 4), trainer.state, 8)
    with pytest.raises(native.KernelArgumentError, match=r"h: .*shape \(4, 64\)"):
        run(step, (trainer.state[0][:3], trainer.state[1]), 8)


def test_bound_steps_act_as_the_checked_call_and_refuse_a_step_out_of_range() -> None:
    """FusedStep's per-rollout binding: step t of the bound slots gives what act() on those
    slots gives, in every bit; a step outside the rollout and a slot of the wrong dtype are
    refused."""
    from rlperf.envs.spec import ActionSpec, EnvSpec
    from rlperf.policies.mlp import MLPActorCritic
    from rlperf.ppo.fused_rollout import fused_mlp

    torch.manual_seed(0)
    spec = EnvSpec(3, (4,), np.dtype(np.float32), ActionSpec("discrete", (2,), 1))
    mlp = fused_mlp(MLPActorCritic(spec, (64, 64)))
    gen = torch.Generator().manual_seed(1)
    obs = torch.randn(5, 3, 4, generator=gen)
    noise = torch.empty(5, 3, 2).exponential_(generator=gen)
    slots = (torch.zeros(5, 3, dtype=torch.int64), torch.zeros(5, 3), torch.zeros(5, 3))
    bound = mlp.bind_rollout(obs, noise, *slots)
    for t in range(5):
        bound.act(t)
        ref = (torch.zeros(3, dtype=torch.int64), torch.zeros(3), torch.zeros(3))
        mlp.act(obs[t], noise[t], *ref)
        for mine, theirs in zip((s[t] for s in slots), ref, strict=True):
            assert torch.equal(mine, theirs), t
    with pytest.raises(native.KernelArgumentError, match="step 5 outside"):
        bound.act(5)
    with pytest.raises(native.KernelArgumentError, match="actions: .*int64"):
        mlp.bind_rollout(obs, noise, slots[0].int(), *slots[1:])
