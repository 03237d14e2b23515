"""The two update implementations on one minibatch: AnalyticUpdate (the MLP's closed-form
gradients) and AutogradUpdate (any policy through autograd) give the same gradient in every
parameter entry and the same statistics; both then step Adam the same way."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlperf.config import PPOConfig
from rlperf.envs.spec import ActionSpec, EnvSpec
from rlperf.policies.mlp import MLPActorCritic
from rlperf.ppo.loss import normalize_advantages
from rlperf.ppo.samplers import Minibatch
from rlperf.ppo.update import AnalyticUpdate, AutogradUpdate
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
