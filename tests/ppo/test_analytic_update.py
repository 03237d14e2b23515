"""The analytic update (forward_train + discrete_ppo_loss_and_head_grads + backward) against
autograd (evaluate + ppo_loss + loss.backward()): same loss statistics, same gradient in every
entry of ``flat.grad``.

Old log-probabilities and values are the current ones plus noise, so ratios and value changes
land on both sides of the clip range and every branch of both max() terms is taken.
"""

from __future__ import annotations

import pytest
import torch

from rlperf.policies.mlp import MLPActorCritic
from rlperf.ppo.loss import (
    STAT_NAMES,
    LossCoefs,
    discrete_ppo_loss_and_head_grads,
    normalize_advantages,
    ppo_loss,
)

CLIP = 0.2


def evaluate_rows(policy, obs, actions):
    """``evaluate`` on B independent rows (a T = 1 sequence): logprob, entropy, value (B,)."""
    logprob, entropy, value = policy.evaluate(obs.unsqueeze(0), actions.unsqueeze(0))
    return logprob[0], entropy[0], value[0]


def make_batch(policy: MLPActorCritic, batch_size: int, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    dtype = policy.flat.dtype
    obs = torch.randn(batch_size, policy.obs_dim, generator=gen, dtype=dtype)
    actions = torch.randint(0, policy.action_dim, (batch_size,), generator=gen)
    with torch.no_grad():
        logprob, _, value = evaluate_rows(policy, obs, actions)
    return {
        "obs": obs,
        "actions": actions,
        "oldlogprob": logprob + 0.4 * torch.randn(batch_size, generator=gen, dtype=dtype),
        "oldvalues": value + 0.5 * torch.randn(batch_size, generator=gen, dtype=dtype),
        "advantages": normalize_advantages(torch.randn(batch_size, generator=gen, dtype=dtype))
        if batch_size > 1
        else torch.randn(batch_size, generator=gen, dtype=dtype),
        "returns": value + torch.randn(batch_size, generator=gen, dtype=dtype),
    }


def autograd_update(policy: MLPActorCritic, b: dict, coefs: LossCoefs):
    policy.flat.grad.zero_()
    newlogprob, entropy, newvalue = evaluate_rows(policy, b["obs"], b["actions"])
    loss, stats = ppo_loss(
        newlogprob,
        entropy,
        newvalue,
        b["oldlogprob"],
        b["advantages"],
        b["returns"],
        b["oldvalues"],
        coefs,
    )
    loss.backward()
    return stats, policy.flat.grad.clone()


def analytic_update(policy: MLPActorCritic, b: dict, coefs: LossCoefs):
    # NaN first: backward must write every entry of the gradient, not accumulate into it.
    policy.flat.grad.fill_(float("nan"))
    logits, newvalue, cache = policy.forward_train(b["obs"].unsqueeze(0))
    stats, grad_logits, grad_value = discrete_ppo_loss_and_head_grads(
        logits,
        newvalue,
        b["actions"],
        b["oldlogprob"],
        b["advantages"],
        b["returns"],
        b["oldvalues"],
        coefs,
    )
    # The loss wrote fresh tensors: hand them to backward where it reads them (no clipping).
    views_logits, views_value = policy.output_grad_views(cache)
    views_logits.copy_(grad_logits)
    views_value.copy_(grad_value)
    policy.backward(cache, 0.0)
    return stats, policy.flat.grad.clone()


def describe_mismatch(policy: MLPActorCritic, ref: torch.Tensor, fast: torch.Tensor) -> str:
    ref_views, fast_views = policy.named_layers(ref), policy.named_layers(fast)
    worst = {
        name: (ref_views[name] - fast_views[name]).abs().max().item()
        for name in ref_views
        if ref_views[name].numel()
    }
    return f"max |diff| per parameter: {worst}"


CASES = [
    # (obs_dim, action_dim, hidden_sizes, batch_size)
    (4, 2, (64, 64), 512),
    (4, 2, (64, 64), 7),
    (4, 2, (64, 64), 1),
    (8, 3, (32,), 64),
    (5, 6, (16, 32, 8), 128),
    (3, 4, (8, 8, 8), 33),
]


TOLERANCES = {
    # float32, as the trainer runs: summation order and the analytic path's tanh-through-sigmoid
    # (~1e-7 absolute per activation).
    torch.float32: {"rtol": 1e-4, "atol": 1e-6},
    # float64: the same math must agree to near machine precision.
    torch.float64: {"rtol": 1e-9, "atol": 1e-12},
}


@pytest.mark.parametrize("dtype", list(TOLERANCES), ids=["f32", "f64"])
@pytest.mark.parametrize("clip_vloss", [True, False], ids=["vclip", "no-vclip"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"obs{c[0]}-A{c[1]}-h{c[2]}-B{c[3]}")
def test_analytic_gradients_match_autograd(case, clip_vloss: bool, dtype: torch.dtype) -> None:
    torch.set_num_threads(1)
    obs_dim, action_dim, hidden, batch_size = case
    tol = TOLERANCES[dtype]
    coefs = LossCoefs(CLIP, clip_vloss, ent_coef=0.01, vf_coef=0.5)
    for seed in range(3):
        torch.manual_seed(seed)
        policy = MLPActorCritic.from_sizes(obs_dim, action_dim, hidden).to(dtype)
        # Sharper actor than the 0.01-gain init so the entropy gradient is not negligible.
        policy.named_layers()[f"actor.{2 * len(hidden)}.weight"].mul_(100.0)
        b = make_batch(policy, batch_size, seed)
        ref_stats, ref_grad = autograd_update(policy, b, coefs)
        fast_stats, fast_grad = analytic_update(policy, b, coefs)
        assert torch.isfinite(fast_grad).all(), f"seed {seed}: backward left entries unwritten"
        assert fast_stats.dtype == fast_grad.dtype == dtype, "the module's dtype throughout"
        torch.testing.assert_close(
            fast_stats,
            ref_stats,
            **tol,
            msg=lambda m, s=seed: f"seed {s}, stats {STAT_NAMES}: {m}",
        )
        torch.testing.assert_close(
            fast_grad,
            ref_grad,
            **tol,
            msg=lambda m, s=seed, r=ref_grad, f=fast_grad, p=policy: (
                f"seed {s}: {m}\n{describe_mismatch(p, r, f)}"
            ),
        )


def test_perturbed_batch_exercises_every_branch() -> None:
    """Guard for the test above: the perturbation reaches clipped and unclipped samples."""
    torch.manual_seed(0)
    policy = MLPActorCritic.from_sizes(4, 2).double()
    b = make_batch(policy, 512, 0)
    with torch.no_grad():
        newlogprob, _, newvalue = evaluate_rows(policy, b["obs"], b["actions"])
    ratio = (newlogprob - b["oldlogprob"]).exp()
    outside = (ratio - 1).abs() > CLIP
    adv = b["advantages"]
    pg_clipped = -adv * ratio < -adv * ratio.clamp(1 - CLIP, 1 + CLIP)
    for name, mask in {"ratio outside clip": outside, "pg clipped": pg_clipped}.items():
        assert 0.1 < mask.double().mean() < 0.9, name
    assert (outside & ~pg_clipped).any(), "unclipped branch outside the range"
    v_unclipped = (newvalue - b["returns"]).square()
    v_clip = b["oldvalues"] + (newvalue - b["oldvalues"]).clamp(-CLIP, CLIP)
    v_clipped_wins = (v_clip - b["returns"]).square() > v_unclipped
    assert 0.1 < v_clipped_wins.double().mean() < 0.9


def test_value_gradient_when_the_unclamped_clipped_term_wins_by_rounding() -> None:
    """Inside the clip range ``oldv + (v - oldv)`` can round one ulp above ``v``; autograd then
    takes the clipped term, whose gradient is not zero there (clamp passes it through)."""
    newvalue = torch.tensor([-0.08377947239717036], dtype=torch.float64)
    oldvalues = torch.tensor([-0.2438126280967861], dtype=torch.float64)
    returns = torch.tensor([-0.04346084621141477], dtype=torch.float64)
    assert (oldvalues + (newvalue - oldvalues) - returns).square() > (newvalue - returns).square()
    coefs = LossCoefs(CLIP, clip_vloss=True, ent_coef=0.0, vf_coef=1.0)
    logits = torch.zeros(1, 2, dtype=torch.float64)
    actions = torch.zeros(1, dtype=torch.int64)
    logprob = torch.log_softmax(logits, -1)[:, 0]
    zero = torch.zeros(1, dtype=torch.float64)
    _, _, grad_value = discrete_ppo_loss_and_head_grads(
        logits, newvalue, actions, logprob, zero, returns, oldvalues, coefs
    )
    v = newvalue.clone().requires_grad_()
    loss, _ = ppo_loss(logprob, zero, v, logprob, zero, returns, oldvalues, coefs)
    loss.backward()
    torch.testing.assert_close(grad_value, v.grad)
