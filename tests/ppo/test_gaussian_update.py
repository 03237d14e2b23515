"""The analytic update of a Box action (the MLP's diagonal Gaussian head: forward_train +
gaussian_ppo_loss_and_head_grads + backward) against autograd (evaluate + ppo_loss +
loss.backward()): the same statistics and the same gradient in every entry of ``flat.grad``,
the log-std's included; and the AnalyticUpdate a Box run takes."""

from __future__ import annotations

import pytest
import torch

from rlperf.config import Config
from rlperf.policies.mlp import MLPActorCritic
from rlperf.ppo.build import make_update
from rlperf.ppo.loss import (
    LossCoefs,
    gaussian_ppo_loss_and_head_grads,
    normalize_advantages,
    ppo_loss,
)
from rlperf.ppo.update import AnalyticUpdate


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


def test_a_box_run_takes_the_analytic_update() -> None:
    cfg = Config()
    policy = make_policy(17, 6, torch.float32, seed=0)
    update = make_update(policy, cfg, 64, supervised_phase=False)
    assert isinstance(update, AnalyticUpdate) and update.gaussian is not None
