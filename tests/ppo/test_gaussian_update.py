"""The analytic update of a Box action (the MLP's diagonal Gaussian head: forward_train +
gaussian_ppo_loss_and_head_grads + backward) against autograd (evaluate + ppo_loss +
loss.backward()): the same statistics and the same gradient in every entry of ``flat.grad``,
the log-std's included; and the AnalyticUpdate a Box run takes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlperf import native
from rlperf.config import Config, PPOConfig
from rlperf.envs.spec import ActionSpec, EnvSpec
from rlperf.policies.mlp import MLPActorCritic
from rlperf.ppo.build import make_update
from rlperf.ppo.loss import (
    LossCoefs,
    gaussian_ppo_loss_and_head_grads,
    normalize_advantages,
    ppo_loss,
)
from rlperf.ppo.rollout import RolloutBuffer
from rlperf.ppo.samplers import Minibatch, PackedTableSampler
from rlperf.ppo.update import AnalyticUpdate, NativeMLPUpdate
from rlperf.timing.sections import Profiler


def make_policy(obs_dim: int, action_dim: int, dtype: torch.dtype, seed: int) -> MLPActorCritic:
    torch.manual_seed(seed)
    policy = MLPActorCritic.from_sizes(obs_dim, action_dim, (64, 64), continuous=True)
    with torch.no_grad():  # a log-std away from 0, so its gradient's scale is exercised
        policy.views(policy.flat)["actor_logstd"].copy_(torch.linspace(-0.7, 0.4, action_dim))
    return policy.to(dtype)


def make_batch(policy: MLPActorCritic, n: int, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    dtype = policy.flat.dtype
    obs = torch.randn(n, policy.obs_dim, generator=gen, dtype=dtype)
    with torch.no_grad():
        mean, value = policy.heads(obs)
        std = policy.views(policy.flat)["actor_logstd"].exp()
        actions = mean + std * torch.randn(mean.shape, generator=gen, dtype=dtype)
        logprob, _, _ = policy.evaluate(obs.unsqueeze(0), actions.unsqueeze(0))
    return {
        "obs": obs,
        "actions": actions,
        # Perturbed, so ratios land on both sides of the clip range.
        "oldlogprob": logprob[0] + 0.4 * torch.randn(n, generator=gen, dtype=dtype),
        "oldvalues": value + 0.5 * torch.randn(n, generator=gen, dtype=dtype),
        "advantages": normalize_advantages(torch.randn(n, generator=gen, dtype=dtype)),
        "returns": value + torch.randn(n, generator=gen, dtype=dtype),
    }


def autograd_grads(policy: MLPActorCritic, b: dict, coefs: LossCoefs):
    policy.flat.grad.zero_()
    logprob, entropy, value = policy.evaluate(b["obs"].unsqueeze(0), b["actions"].unsqueeze(0))
    loss, stats = ppo_loss(
        logprob[0], entropy[0], value[0], b["oldlogprob"], b["advantages"], b["returns"],
        b["oldvalues"], coefs,
    )  # fmt: skip
    loss.backward()
    return stats, policy.flat.grad.clone()


def analytic_grads(policy: MLPActorCritic, b: dict, coefs: LossCoefs):
    policy.flat.grad.fill_(float("nan"))  # every entry must be written, not accumulated
    mean, value, cache = policy.forward_train(b["obs"].unsqueeze(0))
    stats, _, _, _ = gaussian_ppo_loss_and_head_grads(
        mean, policy.logstd(), value, b["actions"], b["oldlogprob"], b["advantages"],
        b["returns"], b["oldvalues"], coefs, *policy.output_grad_views(cache),
        policy.logstd_grad(),
    )  # fmt: skip
    policy.backward(cache, 0.0)
    return stats, policy.flat.grad.clone()


@pytest.mark.parametrize("clip_vloss", [True, False])
@pytest.mark.parametrize(("dtype", "tol"), [(torch.float64, 1e-9), (torch.float32, 2e-4)])
@pytest.mark.parametrize(("obs_dim", "action_dim", "n"), [(17, 6, 64), (3, 1, 7), (11, 3, 256)])
def test_gaussian_gradients_match_autograd(clip_vloss, dtype, tol, obs_dim, action_dim, n) -> None:
    policy = make_policy(obs_dim, action_dim, dtype, seed=n)
    b = make_batch(policy, n, seed=obs_dim)
    coefs = LossCoefs(0.2, clip_vloss, ent_coef=0.01, vf_coef=0.5)
    ref_stats, ref_grad = autograd_grads(policy, b, coefs)
    stats, grad = analytic_grads(policy, b, coefs)
    torch.testing.assert_close(stats, ref_stats, rtol=tol, atol=tol)
    torch.testing.assert_close(grad, ref_grad, rtol=tol, atol=tol)
    # The log-std's own entries: the part the categorical head does not have.
    logstd_slot = policy.views(grad)["actor_logstd"]
    assert logstd_slot.abs().sum() > 0


def test_batch_exercises_every_clip_branch() -> None:
    policy = make_policy(17, 6, torch.float64, seed=0)
    b = make_batch(policy, 256, seed=1)
    with torch.no_grad():
        logprob, _, _ = policy.evaluate(b["obs"].unsqueeze(0), b["actions"].unsqueeze(0))
    ratio = (logprob[0] - b["oldlogprob"]).exp()
    assert (ratio > 1.2).any() and (ratio < 0.8).any() and ((ratio - 1).abs() < 0.2).any()


# -- the native update (ppo/_mlp_update_cpu.c) of the Gaussian head ------------------------
needs_kernel = pytest.mark.skipif(
    not native.update_available(), reason="the MLP update kernel is not built here"
)


def box_spec(num_envs: int, obs_dim: int, action_dim: int) -> EnvSpec:
    action = ActionSpec("box", (), action_dim, (-1.0,) * action_dim, (1.0,) * action_dim)
    return EnvSpec(num_envs, (obs_dim,), np.dtype(np.float32), action)


def box_minibatch(policy: MLPActorCritic, n: int, seed: int) -> tuple[Minibatch, torch.Tensor]:
    b = make_batch(policy, n, seed)
    mb = Minibatch(
        b["obs"].unsqueeze(0), b["actions"].unsqueeze(0), b["oldlogprob"].unsqueeze(0),
        b["oldvalues"].unsqueeze(0), b["advantages"].unsqueeze(0), b["returns"].unsqueeze(0),
    )  # fmt: skip
    return mb, b["advantages"].unsqueeze(0)


@needs_kernel
@pytest.mark.parametrize("max_grad_norm", [0.0, 0.5], ids=["no-clip", "clip"])
@pytest.mark.parametrize("clip_vloss", [True, False], ids=["vclip", "no-vclip"])
@pytest.mark.parametrize(("obs_dim", "action_dim", "n"), [(17, 6, 64), (3, 1, 7), (11, 3, 33)])
def test_native_gaussian_gradients_match_the_analytic_update(
    max_grad_norm, clip_vloss, obs_dim, action_dim, n
) -> None:
    ppo = PPOConfig(max_grad_norm=max_grad_norm, clip_vloss=clip_vloss, ent_coef=0.01)
    policy = make_policy(obs_dim, action_dim, torch.float32, seed=n)
    twin = make_policy(obs_dim, action_dim, torch.float32, seed=n)
    native_update, analytic = NativeMLPUpdate(policy, ppo, n), AnalyticUpdate(twin, ppo, n)
    prof = Profiler(enabled=False)
    for seed in range(3):
        mb, adv = box_minibatch(policy, n, seed)
        policy.flat.grad.fill_(float("nan"))  # the kernel must write every entry
        stats = native_update.gradients(mb, adv, prof)
        ref_stats = analytic.gradients(mb, adv, prof)
        tol = {"rtol": 1e-4, "atol": 1e-6}
        torch.testing.assert_close(stats, ref_stats, **tol)
        torch.testing.assert_close(policy.flat.grad, twin.flat.grad, **tol)
        assert policy.views(policy.flat.grad)["actor_logstd"].abs().sum() > 0
        native_update.apply(prof)
        analytic.apply(prof)
        torch.testing.assert_close(policy.flat.detach(), twin.flat.detach(), **tol)


@needs_kernel
@pytest.mark.parametrize(("shape", "minibatches"), [((2048, 1), 32), ((16, 8), 4)])
def test_native_gaussian_whole_update_is_the_minibatch_loop_bit_for_bit(shape, minibatches):
    """update_rollout of a Box rollout (MuJoCo's 1 x 2048 in 32 minibatches) against the packed
    table's minibatches through gradients and apply: every bit of the parameters."""
    ppo = PPOConfig(update_epochs=2, num_minibatches=minibatches, ent_coef=0.0)
    num_steps, num_envs = shape
    batch = num_steps * num_envs // minibatches
    spec = box_spec(num_envs, 17, 6)
    torch.manual_seed(0)
    whole_policy, loop_policy = MLPActorCritic(spec), MLPActorCritic(spec)
    loop_policy.flat.data.copy_(whole_policy.flat.detach())
    whole, loop = (
        NativeMLPUpdate(whole_policy, ppo, batch),
        NativeMLPUpdate(loop_policy, ppo, batch),
    )
    buf = RolloutBuffer(num_steps, num_envs, spec, torch.device("cpu"))
    gen = torch.Generator().manual_seed(3)
    buf.obs.copy_(torch.randn(buf.obs.shape, generator=gen))
    buf.actions.copy_(torch.randn(buf.actions.shape, generator=gen))
    buf.logprobs.copy_(-torch.rand(shape, generator=gen) * 8)
    buf.values.copy_(torch.randn(shape, generator=gen))
    buf.advantages.copy_(torch.randn(shape, generator=gen))
    assert whole.takes_rollout(buf)
    gens = [torch.Generator().manual_seed(7) for _ in range(2)]
    prof = Profiler(enabled=False)
    stats = whole.update_rollout(buf, minibatches, gens[0], prof)
    sampler = PackedTableSampler(buf)
    total = torch.zeros(5)
    sampler.prepare()
    for _ in range(ppo.update_epochs):
        for mb in sampler.epoch(minibatches, gens[1]):
            total += loop.gradients(mb, normalize_advantages(mb.advantages), prof)
            loop.apply(prof)
    assert torch.equal(stats, total)
    assert torch.equal(whole_policy.flat.detach(), loop_policy.flat.detach())


def test_a_box_run_takes_the_native_update_where_it_is_built() -> None:
    cfg = Config()
    policy = make_policy(17, 6, torch.float32, seed=0)
    chosen = type(make_update(policy, cfg, 64, supervised_phase=False))
    assert chosen is (NativeMLPUpdate if native.update_available() else AnalyticUpdate)
