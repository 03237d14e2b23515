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
those two outputs, in closed form, for the analytic update (``policies/base.py``,
``ppo/update.py``); on the CPU in float32 through the compiled loop of ``_loss_cpu.c``
(``rlperf/native/``), elsewhere as torch ops.

Statistics stay on the device while training: both functions return a (5,) tensor of means
(:data:`STAT_NAMES`; the value entry is ``mean(max(...))`` before the 0.5), so summing them over
minibatches is one add, and :func:`finalize_stats` turns the sum into the logged figures on the
host, once per iteration. The total loss is a linear combination of those means and is
computed there too.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlperf import native
from rlperf.policies.distributions import LOG_SQRT_2PI as _LOG_SQRT_2PI

# Per-sample quantities averaged into the device-side statistics vector, in this order.
STAT_NAMES = ("pg_loss", "v_loss", "entropy", "approx_kl", "clipfrac")
# Figures finalize_stats reports, in this order.
LOGGED_STATS = ("loss", *STAT_NAMES)


@dataclass(frozen=True)
class LossCoefs:
    clip_coef: float = 0.2
    clip_vloss: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5


def normalize_advantages(adv: torch.Tensor) -> torch.Tensor:
    """``(adv - mean) / (std + 1e-8)`` with the unbiased std, as CleanRL."""
    std, mean = torch.std_mean(adv)
    return (adv - mean) / (std + 1e-8)


def finalize_stats(stat_means: list[float], coefs: LossCoefs) -> dict[str, float]:
    """Host-side figures from a (summed and averaged) statistics vector."""
    pg_loss, v_max, entropy, approx_kl, clipfrac = stat_means
    v_loss = 0.5 * v_max
    loss = pg_loss - coefs.ent_coef * entropy + coefs.vf_coef * v_loss
    values = (loss, pg_loss, v_loss, entropy, approx_kl, clipfrac)
    return dict(zip(LOGGED_STATS, values, strict=True))


def _stat_vector(
    rows: torch.Tensor, ratio: torch.Tensor, logratio: torch.Tensor, clip_coef: float
) -> torch.Tensor:
    """Means of ``rows`` (5, B), whose first three rows (pg_max, v_max, entropy) are filled;
    fills the last two (approx_kl, clipped) from the ratio. Overwrites ``ratio``."""
    ratio_m1 = ratio.sub_(1.0)
    torch.sub(ratio_m1, logratio, out=rows[3])
    torch.gt(ratio_m1.abs_(), clip_coef, out=rows[4])  # float 0/1
    return rows.mean(1)


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
    """Reference PPO loss (all inputs (B,)); returns the scalar loss and the stats vector."""
    logratio = newlogprob - oldlogprob
    ratio = logratio.exp()
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, 1 - coefs.clip_coef, 1 + coefs.clip_coef)
    pg_max = torch.max(pg_loss1, pg_loss2)
    pg_loss = pg_max.mean()
    if coefs.clip_vloss:
        v_loss_unclipped = (newvalue - returns) ** 2
        v_clipped = oldvalues + torch.clamp(newvalue - oldvalues, -coefs.clip_coef, coefs.clip_coef)
        v_loss_clipped = (v_clipped - returns) ** 2
        v_max = torch.max(v_loss_unclipped, v_loss_clipped)
    else:
        v_max = (newvalue - returns) ** 2
    v_loss = 0.5 * v_max.mean()
    entropy_loss = entropy.mean()
    loss = pg_loss - coefs.ent_coef * entropy_loss + v_loss * coefs.vf_coef
    with torch.no_grad():
        rows = ratio.new_empty(len(STAT_NAMES), len(ratio))
        torch.stack((pg_max, v_max, entropy), out=rows[:3])
        stats = _stat_vector(rows, ratio.detach().clone(), logratio.detach(), coefs.clip_coef)
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
    grad_logits_out: torch.Tensor | None = None,
    grad_value_out: torch.Tensor | None = None,
    stat_rows_out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The PPO loss of a categorical policy and its gradient w.r.t. logits and values.

    Same arguments and results as :func:`discrete_ppo_loss_and_head_grads_torch` (its docstring
    has the derivation). On the CPU in float32 it runs the compiled loop of ``_loss_cpu.c``:
    one pass over the rows instead of ~30 torch ops (LSTM minibatch of 512 rows, 2 threads:
    ~200 -> ~15 us), else the torch version; the two are tested against each other.
    """
    if not (native.loss_available() and logits.dtype == torch.float32 and logits.is_cpu):
        return discrete_ppo_loss_and_head_grads_torch(
            logits, newvalue, actions, oldlogprob, advantages, returns, oldvalues, coefs,
            grad_logits_out, grad_value_out, stat_rows_out,
        )  # fmt: skip
    grad_logits = torch.empty_like(logits) if grad_logits_out is None else grad_logits_out
    grad_value = torch.empty_like(newvalue) if grad_value_out is None else grad_value_out
    stats = native.ppo_loss_and_head_grads(
        logits, newvalue, actions, oldlogprob, advantages, returns, oldvalues, coefs.clip_coef,
        coefs.clip_vloss, coefs.ent_coef, coefs.vf_coef, grad_logits, grad_value,
    )  # fmt: skip
    return stats, grad_logits, grad_value


def compiled_loss_available() -> bool:
    """Whether the compiled loss (``rlperf.ppo._loss_cpu``) was built and imported."""
    return native.loss_available()


@torch.no_grad()
def discrete_ppo_loss_and_head_grads_torch(
    logits: torch.Tensor,
    newvalue: torch.Tensor,
    actions: torch.Tensor,
    oldlogprob: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    oldvalues: torch.Tensor,
    coefs: LossCoefs,
    grad_logits_out: torch.Tensor | None = None,
    grad_value_out: torch.Tensor | None = None,
    stat_rows_out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The PPO loss of a categorical policy and its gradient w.r.t. logits and values, as
    torch ops (any device and dtype; the reference of the compiled loop).

    Args:
        logits: (B, A) actor outputs; newvalue: (B,) critic outputs; actions: (B,) int64;
            the rest (B,) as in :func:`ppo_loss`.
        grad_logits_out, grad_value_out: optional (B, A) and (B,) tensors (may be strided
            views) to write the gradients into, saving a copy.
        stat_rows_out: optional (5, B) scratch for the per-sample statistics; pass one that
            lives across calls (at B=8192 a fresh one costs ~0.2 ms in page faults).

    Returns:
        stats (5,) (see :data:`STAT_NAMES`), grad_logits (B, A), grad_value (B,).

    Gradients (B = batch size), matching autograd's:
    - policy term: d pg_loss / d newlogprob = -adv * ratio / B where the unclipped term is the
      max (it is also the max whenever the ratio is inside the clip range, where both terms are
      equal), else 0;
    - d newlogprob / d logits = onehot(action) - p;
    - entropy: d H / d logits = -p * (log p + H);
    - value term: d v_loss / d v = (v - ret) / B where the unclipped term is the max, else
      (clipped v - ret) / B where the clamp is inactive, else 0. (``oldv + (v - oldv)`` need
      not round to ``v``, so "clipped term larger" does not imply "clamp active".) At an exact
      tie with an active clamp, a measure-zero event, autograd would give half of (v - ret).

    The per-action work runs on ``logits.T``, (A, B): the policy's logits are a transposed view
    of its output (see ``policies/mlp.py``), so that is the contiguous layout, and reductions
    over actions become row operations (B=8192: 0.69 -> 0.44 ms for this whole function).
    Per-sample statistics are written straight into the rows they are averaged from.
    """
    n = logits.shape[0]
    rows = logits.new_empty(len(STAT_NAMES), n) if stat_rows_out is None else stat_rows_out
    pg_max, v_max, entropy = rows[0], rows[1], rows[2]
    logp_all = torch.log_softmax(logits.T, dim=0)  # (A, B)
    p = logp_all.exp()
    action_row = actions.unsqueeze(0)
    newlogprob = logp_all.gather(0, action_row).view(-1)
    plogp = p * logp_all
    torch.sum(plogp, 0, out=entropy).neg_()

    logratio = newlogprob - oldlogprob
    ratio = logratio.exp()
    neg_adv = -advantages
    pg_loss1 = neg_adv * ratio
    pg_loss2 = neg_adv * torch.clamp(ratio, 1 - coefs.clip_coef, 1 + coefs.clip_coef)
    torch.maximum(pg_loss1, pg_loss2, out=pg_max)

    grad_value = _value_loss_and_grad(newvalue, returns, oldvalues, coefs, v_max, grad_value_out)

    # d loss / d newlogprob, times -B: pg_loss1 where it is the max, else 0.
    g_logp = pg_loss1.masked_fill(pg_loss1 < pg_loss2, 0.0)
    # grad_logits = (ent_coef/B) * (p log p + p H) - (g/B) * p + (g/B) * onehot(action)
    out_t = None if grad_logits_out is None else grad_logits_out.T
    grad_t = torch.addcmul(plogp, p, entropy.unsqueeze(0), out=out_t)  # (A, B)
    grad_t.mul_(coefs.ent_coef / n)
    g_logp.mul_(1.0 / n)
    g_row = g_logp.unsqueeze(0)
    grad_t.addcmul_(p, g_row, value=-1.0)
    grad_t.scatter_add_(0, action_row, g_row)

    stats = _stat_vector(rows, ratio, logratio, coefs.clip_coef)
    return stats, grad_t.T, grad_value


@torch.no_grad()
def gaussian_ppo_loss_and_head_grads(
    mean: torch.Tensor,
    logstd: torch.Tensor,
    newvalue: torch.Tensor,
    actions: torch.Tensor,
    oldlogprob: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    oldvalues: torch.Tensor,
    coefs: LossCoefs,
    grad_mean_out: torch.Tensor | None = None,
    grad_value_out: torch.Tensor | None = None,
    grad_logstd_out: torch.Tensor | None = None,
    stat_rows_out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The PPO loss of a diagonal Gaussian policy with a state-independent log-std (Box
    actions, CleanRL's ``ppo_continuous_action.py``) and its gradient w.r.t. the mean, the
    log-std and the values, as torch ops (the reference of the compiled update).

    Args:
        mean: (B, D) actor outputs; logstd: (D,); newvalue: (B,); actions: (B, D) float, the
            sampled (unclipped) actions; the rest (B,) as in :func:`ppo_loss`.
        grad_mean_out, grad_value_out, grad_logstd_out: optional (B, D), (B,) and (D,)
            tensors (may be strided views) to write the gradients into.
        stat_rows_out: optional (5, B) scratch, as in the categorical version.

    Returns:
        stats (5,), grad_mean (B, D), grad_value (B,), grad_logstd (D,).

    With ``z = (a - mean) exp(-logstd)``, ``log pi = sum_d(-z^2/2 - logstd - log sqrt(2 pi))``
    and the entropy ``sum_d(1/2 + log sqrt(2 pi) + logstd)``, the same for every row:
    - ``g = d loss / d log pi`` per row as in the categorical version (``pg_loss1 / B`` where
      the unclipped term is the max, else 0);
    - ``d log pi / d mean = z exp(-logstd)``, ``d log pi / d logstd = z^2 - 1``;
    - the entropy bonus adds ``-ent_coef`` to each log-std's gradient (d mean(H) / d logstd
      is 1), and nothing to the mean's;
    - the value gradient as in the categorical version.
    """
    n = mean.shape[0]
    rows = mean.new_empty(len(STAT_NAMES), n) if stat_rows_out is None else stat_rows_out
    pg_max, v_max, entropy = rows[0], rows[1], rows[2]
    inv_std = torch.exp(-logstd)
    z = (actions - mean) * inv_std
    newlogprob = (-0.5 * z.square() - logstd - _LOG_SQRT_2PI).sum(-1)
    entropy.copy_((0.5 + _LOG_SQRT_2PI + logstd).sum().expand(n))  # no host read: CUDA too

    logratio = newlogprob - oldlogprob
    ratio = logratio.exp()
    neg_adv = -advantages
    pg_loss1 = neg_adv * ratio
    pg_loss2 = neg_adv * torch.clamp(ratio, 1 - coefs.clip_coef, 1 + coefs.clip_coef)
    torch.maximum(pg_loss1, pg_loss2, out=pg_max)
    grad_value = _value_loss_and_grad(newvalue, returns, oldvalues, coefs, v_max, grad_value_out)

    g = pg_loss1.masked_fill(pg_loss1 < pg_loss2, 0.0).mul_(1.0 / n).unsqueeze(1)  # (B, 1)
    grad_mean = torch.mul(z * inv_std, g, out=grad_mean_out)
    grad_logstd = torch.sum((z.square() - 1.0) * g, 0, out=grad_logstd_out)
    grad_logstd.sub_(coefs.ent_coef)
    stats = _stat_vector(rows, ratio, logratio, coefs.clip_coef)
    return stats, grad_mean, grad_value, grad_logstd


def _value_loss_and_grad(
    newvalue: torch.Tensor,
    returns: torch.Tensor,
    oldvalues: torch.Tensor,
    coefs: LossCoefs,
    v_max_out: torch.Tensor,
    grad_value_out: torch.Tensor | None,
) -> torch.Tensor:
    """The value term's per-sample ``max(...)`` into ``v_max_out`` and its gradient
    ``vf_coef * d(0.5 mean(v_max)) / d v`` (see the categorical version's docstring)."""
    n = newvalue.shape[0]
    diff = newvalue - returns
    v_unclipped = diff.square()
    if coefs.clip_vloss:
        delta = newvalue - oldvalues
        diff_clipped = (oldvalues + delta.clamp(-coefs.clip_coef, coefs.clip_coef)) - returns
        v_clipped = diff_clipped.square()
        torch.maximum(v_unclipped, v_clipped, out=v_max_out)
        clipped_grad = diff_clipped.masked_fill_(delta.abs_() > coefs.clip_coef, 0.0)
        grad_value = torch.where(v_unclipped >= v_clipped, diff, clipped_grad, out=grad_value_out)
    else:
        v_max_out.copy_(v_unclipped)
        grad_value = diff if grad_value_out is None else grad_value_out.copy_(diff)
    return grad_value.mul_(coefs.vf_coef / n)


# Figures finalize_supervised_stats reports: the stats vector's slots 0-2 hold the cross-entropy,
# the value term and the entropy during the supervised phase (slots 3-4 stay 0).
SUPERVISED_STATS = ("loss", "cross_entropy", "v_loss", "entropy")


def supervised_loss(
    teacher_logprob: torch.Tensor,
    entropy: torch.Tensor,
    newvalue: torch.Tensor,
    returns: torch.Tensor,
    oldvalues: torch.Tensor,
    coefs: LossCoefs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Action-supervised loss: cross-entropy to the teacher's actions plus the critic's loss.

    ``loss = mean(-log pi(a_teacher | obs)) + vf_coef * v_loss``, the value term exactly as in
    :func:`ppo_loss` (clipped if ``clip_vloss``) on the GAE returns of the executed actions; no
    policy-gradient term and no entropy bonus (the teacher's actions are the target).

    Args:
        teacher_logprob: (B,) log-probability of the teacher's action under the student;
            entropy, newvalue, returns, oldvalues: (B,).

    Returns:
        The scalar loss and the (5,) stats vector (cross-entropy, value term before the 0.5,
        entropy, 0, 0): the layout of :data:`STAT_NAMES`, so the trainer sums it the same way.
    """
    cross_entropy = -teacher_logprob
    if coefs.clip_vloss:
        v_clipped = oldvalues + torch.clamp(newvalue - oldvalues, -coefs.clip_coef, coefs.clip_coef)
        v_max = torch.max((newvalue - returns) ** 2, (v_clipped - returns) ** 2)
    else:
        v_max = (newvalue - returns) ** 2
    loss = cross_entropy.mean() + coefs.vf_coef * 0.5 * v_max.mean()
    with torch.no_grad():
        zeros = torch.zeros_like(cross_entropy)
        stats = torch.stack((cross_entropy, v_max, entropy, zeros, zeros)).mean(1)
    return loss, stats


def finalize_supervised_stats(stat_means: list[float], coefs: LossCoefs) -> dict[str, float]:
    """Host-side figures of a supervised iteration (see :func:`supervised_loss`)."""
    cross_entropy, v_max, entropy = stat_means[:3]
    v_loss = 0.5 * v_max
    loss = cross_entropy + coefs.vf_coef * v_loss
    return dict(zip(SUPERVISED_STATS, (loss, cross_entropy, v_loss, entropy), strict=True))
