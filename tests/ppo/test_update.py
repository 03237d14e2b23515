"""The update implementations on one minibatch: AnalyticUpdate (the closed-form gradients of
the MLP and of the LSTM on flat observations) and AutogradUpdate (any policy through autograd)
give the same gradient in every parameter entry and the same statistics; both then step Adam
the same way. NativeMLPUpdate (the MLP's update in one C kernel) against both, at the end."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlperf import native
from rlperf.config import PPOConfig
from rlperf.envs.spec import ActionSpec, EnvSpec
from rlperf.policies.lstm import LSTMActorCritic
from rlperf.policies.mlp import MLPActorCritic
from rlperf.ppo.loss import normalize_advantages
from rlperf.ppo.samplers import Minibatch
from rlperf.ppo.update import AnalyticUpdate, AutogradUpdate, NativeMLPUpdate
from rlperf.timing.sections import Profiler


def minibatch(policy: MLPActorCritic, batch: int, seed: int) -> tuple[Minibatch, torch.Tensor]:
    """A (1, B) minibatch whose old log-probs and values sit on both sides of every clip."""
    gen = torch.Generator().manual_seed(seed)
    dtype = policy.flat.dtype
    obs = torch.randn(batch, policy.obs_dim, generator=gen, dtype=dtype)
    with torch.no_grad():
        actions, logprob, value, _ = policy.act(obs, (), None, None, gen)

    def noisy(x: torch.Tensor, scale: float) -> torch.Tensor:
        return (x + scale * torch.randn(batch, generator=gen, dtype=dtype)).unsqueeze(0)

    mb = Minibatch(
        obs=obs.unsqueeze(0),
        actions=actions.unsqueeze(0),
        logprobs=noisy(logprob, 0.4),
        values=noisy(value, 0.5),
        advantages=noisy(torch.zeros(batch, dtype=dtype), 1.0),
        returns=noisy(value, 1.0),
    )
    return mb, normalize_advantages(mb.advantages)


@pytest.mark.parametrize("max_grad_norm", [0.0, 0.5], ids=["no-clip", "clip"])
@pytest.mark.parametrize("clip_vloss", [True, False], ids=["vclip", "no-vclip"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_both_updates_give_the_same_gradients(max_grad_norm, clip_vloss, dtype) -> None:
    torch.manual_seed(0)
    ppo = PPOConfig(max_grad_norm=max_grad_norm, clip_vloss=clip_vloss)
    spec = EnvSpec(1, (4,), np.dtype(np.float32), ActionSpec("discrete", (3,), 1))
    policy = MLPActorCritic(spec, (32, 16)).to(dtype)
    mb, adv = minibatch(policy, 256, seed=1)
    prof = Profiler(enabled=False)

    analytic = AnalyticUpdate(policy, ppo, 256)
    stats_a = analytic.gradients(mb, adv, prof).clone()
    grad_a = policy.flat.grad.clone()
    autograd = AutogradUpdate(policy, ppo)
    stats_b = autograd.gradients(mb, adv, prof)
    grad_b = policy.flat.grad.clone()

    tol = {"rtol": 1e-4, "atol": 1e-6} if dtype == torch.float32 else {"rtol": 1e-9, "atol": 1e-12}
    torch.testing.assert_close(stats_a, stats_b.to(dtype), **tol)
    torch.testing.assert_close(grad_a, grad_b, **tol)
    assert grad_a.abs().sum() > 0
    if max_grad_norm:
        assert torch.linalg.vector_norm(grad_a) <= max_grad_norm * (1 + 1e-5)


def test_both_updates_take_the_same_adam_step() -> None:
    torch.manual_seed(0)
    ppo = PPOConfig()
    spec = EnvSpec(1, (4,), np.dtype(np.float32), ActionSpec("discrete", (2,), 1))
    policies = [MLPActorCritic(spec).double() for _ in range(2)]
    policies[1].load_state_dict(policies[0].state_dict())
    updates = [AnalyticUpdate(policies[0], ppo, 64), AutogradUpdate(policies[1], ppo)]
    prof = Profiler(enabled=False)
    for step in range(3):
        for policy, update in zip(policies, updates, strict=True):
            mb, adv = minibatch(policy, 64, seed=step)
            update.gradients(mb, adv, prof)
            update.apply(prof)
    torch.testing.assert_close(policies[0].flat, policies[1].flat, rtol=1e-7, atol=1e-9)


def test_analytic_update_refuses_a_policy_without_closed_form_gradients() -> None:
    masked = EnvSpec(1, (4,), np.dtype(np.float32), ActionSpec("discrete", (2,), 1), True)
    policy = MLPActorCritic(masked)
    assert not policy.analytic
    with pytest.raises(ValueError, match="no analytic gradient"):
        AnalyticUpdate(policy, PPOConfig(), 8)


def test_fp16_loss_scaling_skips_a_step_with_inf_gradients_and_halves_the_scale() -> None:
    """The fp16 path (CUDA in training; CPU autocast runs it here): a clean step trains, an
    inf gradient leaves the parameters and Adam's state alone and halves the loss scale."""
    torch.manual_seed(0)
    spec = EnvSpec(1, (4,), np.dtype(np.float32), ActionSpec("discrete", (2,), 1))
    policy = MLPActorCritic(spec)
    update = AutogradUpdate(policy, PPOConfig(), precision="fp16")
    prof = Profiler(enabled=False)
    mb, adv = minibatch(policy, 64, seed=0)
    before = policy.flat.detach().clone()
    update.gradients(mb, adv, prof)
    assert float(update.scaler.found_inf) == 0.0
    update.apply(prof)
    assert not torch.equal(policy.flat, before) and float(update.optimizer.step_count) == 1.0

    trained = policy.flat.detach().clone()
    update.gradients(mb, adv, prof)
    update.grad[3] = float("inf")  # as an fp16 overflow would leave it
    update.scaler.unscale_(update.grad)
    update.apply(prof)
    assert torch.equal(policy.flat, trained), "the step was skipped"
    assert float(update.optimizer.step_count) == 1.0
    assert float(update.scaler.scale) == 2.0**15


def lstm_minibatch(policy: LSTMActorCritic, t_len: int, batch: int, seed: int):
    """A (T, B) sequence minibatch with episode starts inside it, old log-probs and values on
    both sides of every clip, and a non-zero initial state."""
    gen = torch.Generator().manual_seed(seed)
    obs = torch.randn(t_len, batch, *policy.spec.obs_shape, generator=gen)
    dones = (torch.rand(t_len, batch, generator=gen) < 0.2).float()
    state0 = tuple(0.5 * torch.randn(s.shape, generator=gen) for s in policy.initial_state(batch))
    with torch.no_grad():
        actions = torch.randint(0, policy.spec.action.num_outputs, (t_len, batch), generator=gen)
        logprob, _, value = policy.evaluate(obs, actions, state0, dones)

    def noisy(x: torch.Tensor, scale: float) -> torch.Tensor:
        return x + scale * torch.randn(x.shape, generator=gen)

    mb = Minibatch(
        obs=obs, actions=actions, logprobs=noisy(logprob, 0.4), values=noisy(value, 0.5),
        advantages=noisy(torch.zeros(t_len, batch), 1.0), returns=noisy(value, 1.0),
        dones=dones, state0=state0,
    )  # fmt: skip
    return mb, normalize_advantages(mb.advantages)


@pytest.mark.kernel("lstm")
@pytest.mark.parametrize(
    "hidden_sizes, batch",
    [((16, 12), 6), ((8,), 6), ((), 6), ((16, 12), 19)],
    ids=["two-layers", "one-layer", "no-encoder", "two-layers-two-threads"],
)
@pytest.mark.parametrize(
    "clip_vloss, max_grad_norm", [(True, 0.0), (False, 0.0), (True, 0.05)],
    ids=["vclip", "no-vclip", "vclip-gradclip"],
)  # fmt: skip
def test_lstm_analytic_update_matches_autograd_through_the_torch_recurrence(
    hidden_sizes, batch, clip_vloss, max_grad_norm
) -> None:
    """The LSTM's analytic path (float32, the compiled network, tanh as 2 sigmoid(2z) - 1)
    against autograd over the plain torch recurrence and ``nn.Tanh`` in float64, parameter by
    parameter; and the analytic path writes every parameter's gradient. 19 environments: two
    threads (the kernel gives 8 or more rows a second one), 4-row tiles with a partial one.
    A max_grad_norm of 0.05 clips (the gradient's norm here is ~1): the kernel's clipping
    against ``clip_grad_norm_``'s arithmetic in torch."""
    torch.manual_seed(0)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        _check_lstm_analytic_update(hidden_sizes, batch, clip_vloss, max_grad_norm)
    finally:
        torch.set_num_threads(before)


def _check_lstm_analytic_update(hidden_sizes, batch, clip_vloss, max_grad_norm) -> None:
    ppo = PPOConfig(clip_vloss=clip_vloss, max_grad_norm=max_grad_norm)
    spec = EnvSpec(6, (3,), np.dtype(np.float32), ActionSpec("discrete", (4,), 1))
    fast = LSTMActorCritic(spec, hidden_sizes, 20)
    assert fast.analytic
    reference = LSTMActorCritic(spec, hidden_sizes, 20).double()
    reference.load_state_dict(fast.state_dict())
    mb, adv = lstm_minibatch(fast, 11, batch, seed=1)
    prof = Profiler(enabled=False)

    analytic = AnalyticUpdate(fast, ppo, 11 * batch)
    with torch.no_grad():
        for p in fast.parameters():
            p.grad.fill_(float("nan"))  # every entry must be written, not accumulated
    stats_a = analytic.gradients(mb, adv, prof)
    autograd = AutogradUpdate(reference, ppo)
    mb64 = Minibatch(**{
        k: (tuple(s.double() for s in v) if isinstance(v, tuple) else
            v.double() if v is not None and v.is_floating_point() else v)
        for k, v in vars(mb).items()
    })  # fmt: skip
    stats_b = autograd.gradients(mb64, adv.double(), prof)

    torch.testing.assert_close(stats_a.double(), stats_b, rtol=1e-4, atol=1e-6)
    for (name, p), ref in zip(fast.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad.double(), ref.grad, rtol=1e-4, atol=2e-6, msg=name)
        assert p.grad.abs().sum() > 0, name
    if max_grad_norm > 0:  # it did clip
        assert abs(analytic.grad.norm().item() - max_grad_norm) < 1e-6


@pytest.mark.kernel("lstm")
def test_the_lstm_takes_the_analytic_path_only_where_it_applies() -> None:
    flat = EnvSpec(2, (3,), np.dtype(np.float32), ActionSpec("discrete", (2,), 1))
    assert LSTMActorCritic(flat, (8,), 4).analytic
    assert not LSTMActorCritic(flat, (8,), 4).double().analytic, "float32 only"
    masked = EnvSpec(2, (3,), np.dtype(np.float32), ActionSpec("discrete", (2,), 1), True)
    assert not LSTMActorCritic(masked, (8,), 4).analytic
    images = EnvSpec(2, (1, 6, 6), np.dtype(np.uint8), ActionSpec("discrete", (2,), 1))
    assert not LSTMActorCritic(images, (8,), 4, cnn_channels=(4,), cnn_features=8).analytic
    box = EnvSpec(2, (3,), np.dtype(np.float32), ActionSpec("box", (), 2, (-1.0,) * 2, (1.0,) * 2))
    assert not LSTMActorCritic(box, (8,), 4).analytic
    assert not LSTMActorCritic(flat, (4,) * 9, 4).analytic, "more encoder layers than it takes"


# -- the native MLP update (ppo/_mlp_update_cpu.c) ------------------------------------------------
NATIVE_SIZES = [
    # (obs_dim, actions, hidden_sizes, batch): CartPole's, then partial tiles and odd widths
    (4, 2, (64, 64), 128),
    (4, 2, (64, 64), 7),
    (5, 3, (32, 16), 256),
    (3, 5, (17, 9, 20), 33),
    (6, 4, (), 10),
]


def _native_pair(size, ppo: PPOConfig, seed: int = 0):
    """A float32 MLP with a NativeMLPUpdate, and a float64 copy of it for the autograd
    reference; the actor's head sharpened so the entropy term is not negligible."""
    obs_dim, actions, hidden, _ = size
    torch.manual_seed(seed)
    spec = EnvSpec(1, (obs_dim,), np.dtype(np.float32), ActionSpec("discrete", (actions,), 1))
    policy = MLPActorCritic(spec, hidden)
    policy.named_layers()[f"actor.{2 * len(hidden)}.weight"].mul_(100.0)
    ref = MLPActorCritic(spec, hidden).double()
    ref.flat.data.copy_(policy.flat.detach())
    return policy, NativeMLPUpdate(policy, ppo, size[3]), ref


def _double(mb: Minibatch) -> Minibatch:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x.double() if x.is_floating_point() else x

    return Minibatch(f(mb.obs), mb.actions, f(mb.logprobs), f(mb.values), f(mb.advantages),
                     f(mb.returns))  # fmt: skip


@pytest.mark.kernel("update")
@pytest.mark.parametrize("max_grad_norm", [0.0, 0.5, 1e6], ids=["no-clip", "clip", "clip-idle"])
@pytest.mark.parametrize("clip_vloss", [True, False], ids=["vclip", "no-vclip"])
@pytest.mark.parametrize("size", NATIVE_SIZES, ids=lambda s: f"obs{s[0]}-A{s[1]}-h{s[2]}-B{s[3]}")
def test_native_update_gradients_match_autograd_in_float64(size, clip_vloss, max_grad_norm):
    """Float32 kernel against float64 autograd, every entry of the gradient (clipped) and the
    statistics, within the float32 tolerances of the analytic path; then AnalyticUpdate."""
    ppo = PPOConfig(max_grad_norm=max_grad_norm, clip_vloss=clip_vloss)
    policy, native_update, ref = _native_pair(size, ppo)
    prof = Profiler(enabled=False)
    for seed in range(3):
        mb, adv = minibatch(policy, size[3], seed=seed)
        policy.flat.grad.fill_(float("nan"))  # the kernel must write every entry
        stats = native_update.gradients(mb, adv, prof)
        grad = policy.flat.grad.clone()
        ref_stats = AutogradUpdate(ref, ppo).gradients(_double(mb), adv.double(), prof)
        tol = {"rtol": 1e-4, "atol": 1e-6}
        torch.testing.assert_close(stats.double(), ref_stats, **tol)
        torch.testing.assert_close(grad.double(), ref.flat.grad, **tol)
        analytic_stats = AnalyticUpdate(policy, ppo, size[3]).gradients(mb, adv, prof)
        torch.testing.assert_close(stats, analytic_stats, **tol)
        torch.testing.assert_close(grad, policy.flat.grad, **tol)
        if max_grad_norm == 0.5:
            assert torch.linalg.vector_norm(grad) <= 0.5 * (1 + 1e-5), "the clip is active"


@pytest.mark.kernel("update")
def test_native_adam_is_fused_torch_adam_bit_for_bit_with_annealing() -> None:
    """The kernel's Adam step against torch.optim.Adam(fused=True) on the same gradients:
    parameters, both moments and the step count equal in every bit."""
    ppo = PPOConfig(adam_eps=1e-5)
    policy, native_update, _ = _native_pair(NATIVE_SIZES[0], ppo)
    ref_param = torch.nn.Parameter(policy.flat.detach().clone())
    ref = torch.optim.Adam([ref_param], lr=ppo.learning_rate, eps=1e-5, fused=True)
    gen = torch.Generator().manual_seed(0)
    prof = Profiler(enabled=False)
    for i in range(20):
        grad = torch.randn(policy.flat.shape, generator=gen) * 10 ** (i % 4 - 2)
        policy.flat.grad.copy_(grad)
        ref_param.grad = grad.clone()
        native_update.lr = ref.param_groups[0]["lr"] = ppo.learning_rate * (1 - i / 20)
        native_update.apply(prof)
        ref.step()
        state = ref.state[ref_param]
        assert torch.equal(policy.flat.detach(), ref_param.detach()), f"step {i}"
        assert torch.equal(native_update.optimizer.exp_avg, state["exp_avg"]), f"step {i}"
        assert torch.equal(native_update.optimizer.exp_avg_sq, state["exp_avg_sq"]), f"step {i}"
        assert float(native_update.optimizer.step_count) == float(state["step"]) == i + 1


@pytest.mark.kernel("update")
@pytest.mark.parametrize("max_grad_norm", [0.0, 0.5], ids=["no-clip", "clip"])
def test_native_update_steps_as_the_analytic_update(max_grad_norm: float) -> None:
    """Five minibatches of gradients and Adam steps: parameters and Adam's state agree with
    AnalyticUpdate's within float32 rounding carried through the steps."""
    ppo = PPOConfig(max_grad_norm=max_grad_norm)
    size = NATIVE_SIZES[0]
    policy, native_update, _ = _native_pair(size, ppo)
    twin = MLPActorCritic(policy.spec, size[2])
    twin.flat.data.copy_(policy.flat.detach())
    analytic = AnalyticUpdate(twin, ppo, size[3])
    prof = Profiler(enabled=False)
    for step in range(5):
        for pol, update in ((policy, native_update), (twin, analytic)):
            mb, adv = minibatch(pol, size[3], seed=step)
            update.gradients(mb, adv, prof)
            update.apply(prof)
    tol = {"rtol": 1e-4, "atol": 1e-6}
    torch.testing.assert_close(policy.flat.detach(), twin.flat.detach(), **tol)
    for name in ("exp_avg", "exp_avg_sq", "step_count"):
        mine, theirs = getattr(native_update.optimizer, name), getattr(analytic.optimizer, name)
        torch.testing.assert_close(mine, theirs, rtol=1e-3, atol=1e-9, msg=name)


@pytest.mark.kernel("update")
def test_native_update_refuses_what_it_cannot_read() -> None:
    ppo = PPOConfig()
    policy, native_update, _ = _native_pair(NATIVE_SIZES[1], ppo)
    prof = Profiler(enabled=False)
    mb, adv = minibatch(policy, 7, seed=0)
    # The update takes flat observations in any dtype, as the policy does; the kernel float32.
    native_update.gradients(mb, adv, prof)
    grad = policy.flat.grad.clone()
    as_f64 = Minibatch(mb.obs.double(), mb.actions, mb.logprobs, mb.values, mb.advantages,
                       mb.returns)  # fmt: skip
    native_update.gradients(as_f64, adv, prof)
    assert torch.equal(policy.flat.grad, grad)
    rows = (mb.actions[0], mb.logprobs[0], adv[0], mb.returns[0], mb.values[0])
    with pytest.raises(ValueError, match="obs: .*float32"):
        native_update.kernel.gradients(mb.obs[0].double(), *rows, 0.2, True, 0.0, 0.5, 0.5)
    wrong = [
        (Minibatch(mb.obs[:, :6], mb.actions[:, :6], mb.logprobs[:, :6], mb.values[:, :6],
                   mb.advantages[:, :6], mb.returns[:, :6]), r"obs: .*shape \(7, 4\)"),
        (Minibatch(mb.obs, mb.actions.int(), mb.logprobs, mb.values, mb.advantages, mb.returns),
         "actions: .*int64"),
        (Minibatch(mb.obs, mb.actions + 5, mb.logprobs, mb.values, mb.advantages, mb.returns),
         "action 5 of row 0 is outside 0..1"),
    ]  # fmt: skip
    for bad, match in wrong:
        with pytest.raises(ValueError, match=match):
            native_update.gradients(bad, adv[:, : bad.obs.shape[1]], prof)
    policy.flat.data = policy.flat.data.clone()  # the bound parameters' storage moved
    with pytest.raises(native.StorageMoved, match="param"):
        native_update.gradients(mb, adv, prof)


def test_the_native_update_is_chosen_where_it_applies() -> None:
    from rlperf.config import Config
    from rlperf.ppo.build import make_update

    cfg = Config()
    policy = MLPActorCritic.from_sizes(4, 2)
    chosen = type(make_update(policy, cfg, 128, supervised_phase=False))
    assert chosen is (NativeMLPUpdate if native.update_available() else AnalyticUpdate)
    assert type(make_update(policy.double(), cfg, 128, False)) is AnalyticUpdate, "float64"
    cfg.policy.analytic = False
    assert type(make_update(policy, cfg, 128, False)) is AutogradUpdate


def _rollout(num_steps: int, num_envs: int, obs_dim: int, actions: int, seed: int):
    """A RolloutBuffer of random (T, N) transitions, as after GAE."""
    from rlperf.ppo.rollout import RolloutBuffer

    spec = EnvSpec(num_envs, (obs_dim,), np.dtype(np.float32),
                   ActionSpec("discrete", (actions,), 1))  # fmt: skip
    buf = RolloutBuffer(num_steps, num_envs, spec, torch.device("cpu"))
    gen = torch.Generator().manual_seed(seed)
    shape = (num_steps, num_envs)
    buf.obs.copy_(torch.randn((*shape, obs_dim), generator=gen))
    buf.actions.copy_(torch.randint(0, actions, shape, generator=gen))
    buf.logprobs.copy_(-torch.rand(shape, generator=gen) * 2)
    buf.values.copy_(torch.randn(shape, generator=gen) * 3)
    buf.advantages.copy_(torch.randn(shape, generator=gen) * 2 + 0.5)
    return buf


def _minibatch_path(update, sampler, ppo: PPOConfig, gen: torch.Generator) -> torch.Tensor:
    """The trainer's per-minibatch loop (ppo/trainer.py), the reference of update_rollout."""
    prof = Profiler(enabled=False)
    total = torch.zeros(5)
    sampler.prepare()
    for _ in range(ppo.update_epochs):
        for mb in sampler.epoch(ppo.num_minibatches, gen):
            adv = normalize_advantages(mb.advantages) if ppo.norm_adv else mb.advantages
            total += update.gradients(mb, adv, prof)
            update.apply(prof)
    return total


@pytest.mark.kernel("update")
@pytest.mark.parametrize(
    ("shape", "epochs", "minibatches", "norm_adv", "max_grad_norm"),
    [((128, 4), 4, 4, True, 0.5), ((32, 64), 4, 4, True, 0.5), ((10, 6), 2, 3, False, 0.5),
     ((16, 8), 3, 2, True, 0.0), ((8, 256), 1, 1, True, 1e6)],
    ids=["4x128", "64x32", "6x10-no-norm", "8x16-no-clip", "256x8-one-minibatch"],
)  # fmt: skip
def test_whole_update_is_the_minibatch_loop_bit_for_bit(
    shape, epochs, minibatches, norm_adv, max_grad_norm
) -> None:
    """update_rollout (every epoch in one kernel call, the advantage normalization in C)
    against the sampler's minibatches through gradients and apply, over two rollouts: the
    parameters, Adam's state, the generator's state and the summed stats equal in every bit."""
    from rlperf.ppo.samplers import PackedTableSampler

    ppo = PPOConfig(update_epochs=epochs, num_minibatches=minibatches, norm_adv=norm_adv,
                    max_grad_norm=max_grad_norm)  # fmt: skip
    num_steps, num_envs = shape
    batch = num_steps * num_envs // minibatches
    torch.manual_seed(0)
    spec = EnvSpec(num_envs, (4,), np.dtype(np.float32), ActionSpec("discrete", (3,), 1))
    whole_policy, loop_policy = MLPActorCritic(spec, (64, 64)), MLPActorCritic(spec, (64, 64))
    loop_policy.flat.data.copy_(whole_policy.flat.detach())
    whole = NativeMLPUpdate(whole_policy, ppo, batch)
    loop = NativeMLPUpdate(loop_policy, ppo, batch)
    gens = [torch.Generator().manual_seed(7) for _ in range(2)]
    prof = Profiler(enabled=False)
    for rollout in range(2):
        buf = _rollout(num_steps, num_envs, 4, 3, seed=rollout)
        assert whole.takes_rollout(buf)
        whole.lr = loop.lr = ppo.learning_rate * (1 - rollout / 2)
        stats = whole.update_rollout(buf, minibatches, gens[0], prof)
        ref = _minibatch_path(loop, PackedTableSampler(buf), ppo, gens[1])
        assert torch.equal(stats, ref), f"rollout {rollout}: stats"
        assert torch.equal(whole_policy.flat.detach(), loop_policy.flat.detach()), "parameters"
        for name in ("exp_avg", "exp_avg_sq", "step_count"):
            a, b = getattr(whole.optimizer, name), getattr(loop.optimizer, name)
            assert torch.equal(a, b), f"rollout {rollout}: {name}"
        assert torch.equal(gens[0].get_state(), gens[1].get_state()), "the same draws"
    assert float(whole.optimizer.step_count) == 2 * epochs * minibatches


@pytest.mark.kernel("update")
def test_whole_update_times_every_phase_of_every_minibatch() -> None:
    ppo = PPOConfig(update_epochs=3, num_minibatches=4)
    torch.manual_seed(0)
    spec = EnvSpec(4, (4,), np.dtype(np.float32), ActionSpec("discrete", (2,), 1))
    update = NativeMLPUpdate(MLPActorCritic(spec, (64, 64)), ppo, 32)
    prof = Profiler()
    with prof.section("update"):
        update.update_rollout(_rollout(32, 4, 4, 2, seed=0), 4, torch.Generator(), prof)
        update.report_times(prof)
    got = {s.name: s for s in prof.stats()}
    for name in ("loss", "backward", "optimizer_step"):
        assert got[f"update/{name}"].calls == 12, name
        assert got[f"update/{name}"].total_ns > 0, name
    # Twelve gathers in the kernel, and the permutations drawn once in Python.
    assert got["update/minibatch_prep"].calls == 13


@pytest.mark.kernel("update")
def test_whole_update_refuses_bad_indices_and_writes_nothing() -> None:
    ppo = PPOConfig(update_epochs=2, num_minibatches=2)
    torch.manual_seed(0)
    spec = EnvSpec(4, (4,), np.dtype(np.float32), ActionSpec("discrete", (2,), 1))
    policy = MLPActorCritic(spec, (64, 64))
    update = NativeMLPUpdate(policy, ppo, 16)
    buf = _rollout(8, 4, 4, 2, seed=0)
    before, rows = policy.flat.detach().clone(), 32
    perms = torch.stack([torch.randperm(rows) for _ in range(2)])
    args = (0.2, True, 0.0, 0.5, 0.5, 2.5e-4, 0.9, 0.999, 1e-5)
    columns = (buf.obs.view(rows, 4), buf.actions.view(rows), buf.logprobs.view(rows),
               buf.values.view(rows), buf.advantages.view(rows))  # fmt: skip
    bad_perms = perms.clone()
    bad_perms[1, 5] = rows
    with pytest.raises(ValueError, match="permutation entry 37 is 32, outside 0..31"):
        update.kernel.epochs(*columns, bad_perms, 2, True, *args)
    bad_actions = buf.actions.view(rows).clone()
    bad_actions[3] = 2
    with pytest.raises(ValueError, match="action 2 of row 3 is outside 0..1"):
        update.kernel.epochs(columns[0], bad_actions, *columns[2:], perms, 2, True, *args)
    with pytest.raises(ValueError, match="32 rows do not hold 3 minibatches of 16 rows"):
        update.kernel.epochs(*columns, perms, 3, True, *args)
    with pytest.raises(ValueError, match=r"perms: .*int64"):
        update.kernel.epochs(*columns, perms.int(), 2, True, *args)
    assert torch.equal(policy.flat.detach(), before)
    assert float(update.optimizer.step_count) == 0


@pytest.mark.kernel("update")
def test_whole_update_is_taken_only_where_it_applies() -> None:
    from rlperf.ppo.build import whole_update
    from rlperf.ppo.rollout import RolloutBuffer

    ppo = PPOConfig()
    spec = EnvSpec(4, (4,), np.dtype(np.float32), ActionSpec("discrete", (2,), 1))
    update = NativeMLPUpdate(MLPActorCritic(spec, (64, 64)), ppo, 32)
    cpu = torch.device("cpu")
    buf = RolloutBuffer(32, 4, spec, cpu)
    assert whole_update(update, buf) is update
    assert whole_update(update, RolloutBuffer(32, 4, spec, cpu, teacher=True)) is None
    update.grad_allreduce = lambda grad: None  # several ranks: a gradient per minibatch
    assert whole_update(update, buf) is None
    analytic = AnalyticUpdate(MLPActorCritic(spec, (64, 64)), ppo, 32)
    assert whole_update(analytic, buf) is None
