"""The PPO loss: clipped policy objective, clipped value loss, entropy bonus.

``loss = pg_loss - ent_coef * entropy + vf_coef * v_loss`` with, per sample,

- ``ratio = exp(newlogprob - oldlogprob)``,
  ``pg_loss = mean(max(-adv * ratio, -adv * clip(ratio, 1 - c, 1 + c)))``;
- ``v_loss = 0.5 * mean(max((v - ret)^2, (oldv + clip(v - oldv, -c, c) - ret)^2))``
  (or ``0.5 * mean((v - ret)^2)`` without value clipping);
- ``entropy = mean(H(pi(.|obs)))``.

:func:`ppo_loss` computes it from log-probabilities, entropies and values under autograd (the
reference, as in CleanRL). :func:`discrete_ppo_loss_and_head_grads` computes the same loss from
the actor's logits and the critic's values together with the loss's gradient with respect to
those two outputs, in closed form, for the analytic update of ``policies/mlp.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# Order of the entries of the per-minibatch statistics vector.
STAT_NAMES = ("loss", "pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac")


@dataclass(frozen=True)
class LossCoefs:
    clip_coef: float = 0.2
    clip_vloss: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5


def normalize_advantages(adv: torch.Tensor) -> torch.Tensor:
    """``(adv - mean) / (std + 1e-8)`` with the unbiased std, as CleanRL."""
    return (adv - adv.mean()) / (adv.std() + 1e-8)


def ppo_loss(
    newlogprob: torch.Tensor,
    entropy: torch.Tensor,
    newvalue: torch.Tensor,
    oldlogprob: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    oldvalues: torch.Tensor,
    coefs: LossCoefs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference PPO loss (all inputs (B,)); returns the scalar loss and stats (STAT_NAMES)."""
    logratio = newlogprob - oldlogprob
    ratio = logratio.exp()
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, 1 - coefs.clip_coef, 1 + coefs.clip_coef)
    pg_loss = torch.max(pg_loss1, pg_loss2).mean()
    if coefs.clip_vloss:
        v_loss_unclipped = (newvalue - returns) ** 2
        v_clipped = oldvalues + torch.clamp(
            newvalue - oldvalues, -coefs.clip_coef, coefs.clip_coef
        )
        v_loss_clipped = (v_clipped - returns) ** 2
        v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
    else:
        v_loss = 0.5 * ((newvalue - returns) ** 2).mean()
    entropy_loss = entropy.mean()
    loss = pg_loss - coefs.ent_coef * entropy_loss + v_loss * coefs.vf_coef
    with torch.no_grad():
        approx_kl = ((ratio - 1) - logratio).mean()
        clipfrac = ((ratio - 1.0).abs() > coefs.clip_coef).float().mean()
        stats = torch.stack([loss, pg_loss, v_loss, entropy_loss, approx_kl, clipfrac]).detach()
    return loss, stats


@torch.no_grad()
def discrete_ppo_loss_and_head_grads(
    logits: torch.Tensor,
    newvalue: torch.Tensor,
    actions: torch.Tensor,
    oldlogprob: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    oldvalues: torch.Tensor,
    coefs: LossCoefs,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The PPO loss of a categorical policy and its gradient w.r.t. logits and values.

    Args:
        logits: (B, A) actor outputs; newvalue: (B,) critic outputs; actions: (B,) int64;
        the rest (B,) as in :func:`ppo_loss`.

    Returns:
        stats (STAT_NAMES, a (6,) tensor), grad_logits (B, A), grad_value (B,).

    Gradients (B = batch size), matching autograd's choice at ties:
    - policy term: d pg_loss / d newlogprob = -adv * ratio / B where the unclipped term is the
      max (it is also the max whenever the ratio is inside the clip range), else 0;
    - d newlogprob / d logits = onehot(action) - p;
    - entropy: d H / d logits = -p * (log p + H);
    - value term: d v_loss / d v = (v - ret) / B where the unclipped term is the max, else 0.
    """
    n = logits.shape[0]
    logp_all = torch.log_softmax(logits, dim=-1)
    p = logp_all.exp()
    newlogprob = logp_all.gather(1, actions.unsqueeze(1)).view(-1)
    plogp = p * logp_all
    entropy = -plogp.sum(-1)

    logratio = newlogprob - oldlogprob
    ratio = logratio.exp()
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, 1 - coefs.clip_coef, 1 + coefs.clip_coef)
    pg_max = torch.maximum(pg_loss1, pg_loss2)
    pg_loss = pg_max.mean()

    diff = newvalue - returns
    if coefs.clip_vloss:
        v_unclipped = diff.square()
        v_clipped = (
            oldvalues + torch.clamp(newvalue - oldvalues, -coefs.clip_coef, coefs.clip_coef)
        ) - returns
        v_clipped = v_clipped.square()
        v_loss = 0.5 * torch.maximum(v_unclipped, v_clipped).mean()
        grad_value = torch.where(v_unclipped >= v_clipped, diff, 0.0)
    else:
        v_loss = 0.5 * diff.square().mean()
        grad_value = diff
    grad_value.mul_(coefs.vf_coef / n)
    entropy_mean = entropy.mean()
    loss = pg_loss - coefs.ent_coef * entropy_mean + coefs.vf_coef * v_loss

    # d loss / d newlogprob (B,)
    g_logp = torch.where(pg_loss1 >= pg_loss2, pg_loss1, 0.0).mul_(1.0 / n)
    # grad_logits = g_logp * (onehot - p) + (ent_coef / B) * (p * log p + p * H)
    grad_logits = torch.addcmul(plogp, p, entropy.unsqueeze(1)).mul_(coefs.ent_coef / n)
    grad_logits.addcmul_(p, g_logp.unsqueeze(1), value=-1.0)
    grad_logits.scatter_add_(1, actions.unsqueeze(1), g_logp.unsqueeze(1))

    approx_kl = ((ratio - 1) - logratio).mean()
    clipfrac = ((ratio - 1.0).abs() > coefs.clip_coef).float().mean()
    stats = torch.stack([loss, pg_loss, v_loss, entropy_mean, approx_kl, clipfrac])
    return stats, grad_logits, grad_value
