"""Action distributions over the actor's raw output, with optional action masks.

Every policy ends in an actor output ``out`` of shape ``(B, spec.num_outputs)`` and hands it here:

- Discrete: ``out`` are logits. Sampling is Gumbel-max, ``argmax(log p - log E)``, E ~ Exp(1):
  an exact categorical sample in three ops, without ``torch.multinomial``'s per-call overhead.
- MultiDiscrete: ``out`` holds each component's logits side by side; the components are
  independent, so log-probabilities and entropies add up.
- Box: ``out`` is the Gaussian mean; the log-std is a state-independent parameter.

Masks: a boolean ``(B, mask_width)`` tensor, True where allowed. Masked logits are replaced by
:data:`MASKED_LOGIT` (as in Huang & Ontanon 2020): after the softmax their probability is exactly
0 in float32 (exp(-1e8) underflows), so they are never sampled, and unlike ``-inf`` the entropy's
``p * log p`` stays 0 rather than NaN. A row with no allowed action at all would be an
environment bug; it is treated as all-allowed so training does not turn into NaNs.
Half-precision logits are taken to float32 first, so the mask also holds under bf16/fp16 autocast.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

import torch

from rlperf.envs.spec import ActionSpec

MASKED_LOGIT = -1e8
LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)  # a Gaussian's log-density constant, per dim


def _full_precision(x: torch.Tensor) -> torch.Tensor:
    """float32 for autocast's half-precision outputs; float32/float64 unchanged."""
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


def _masked(logits: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    logits = _full_precision(logits)
    if mask is None:
        return logits
    allowed = mask | ~mask.any(-1, keepdim=True)
    return logits.masked_fill(~allowed, MASKED_LOGIT)


def _components(
    spec: ActionSpec, logits: torch.Tensor, mask: torch.Tensor | None
) -> Sequence[tuple[torch.Tensor, torch.Tensor | None]]:
    """(logits, mask) per discrete component: one at least."""
    if len(spec.nvec) == 1:
        return [(logits, mask)]
    parts = logits.split(spec.nvec, dim=-1)
    masks = mask.split(spec.nvec, dim=-1) if mask is not None else [None] * len(parts)
    return list(zip(parts, masks, strict=True))


@torch.no_grad()
def sample(
    spec: ActionSpec,
    out: torch.Tensor,
    mask: torch.Tensor | None = None,
    logstd: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sample actions from the actor output ``out`` (B, num_outputs).

    Returns:
        actions: (B,) int64 (Discrete), (B, k) int64 (MultiDiscrete) or (B, d) float (Box);
        logprob: (B,) log-probability of the sampled actions.
    """
    logprob: torch.Tensor | None  # None until the first discrete component's
    if not spec.discrete:
        logstd = cast(torch.Tensor, logstd)  # Box actions come with their log-std
        noise = torch.randn(out.shape, generator=generator, device=out.device)
        actions = _full_precision(out) + logstd.exp() * noise
        logprob = (-0.5 * noise.square() - logstd - LOG_SQRT_2PI).sum(-1)
        return actions, logprob
    actions_list: list[torch.Tensor] = []
    logprob = None
    for logits, m in _components(spec, out, mask):
        logp = torch.log_softmax(_masked(logits, m), dim=-1)
        e = torch.empty_like(logp).exponential_(generator=generator)
        a = (logp - e.log_()).argmax(-1)
        lp = logp.gather(1, a.unsqueeze(1)).view(-1)
        actions_list.append(a)
        logprob = lp if logprob is None else logprob + lp
    # _components yields one component at least, so logprob is a tensor now.
    logprob = cast(torch.Tensor, logprob)
    if spec.kind == "discrete":
        return actions_list[0], logprob
    return torch.stack(actions_list, dim=-1), logprob


@torch.no_grad()
def mode(spec: ActionSpec, out: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The most likely action of the distribution over the actor output ``out`` (B,
    num_outputs), as :func:`sample` reads it: the Gaussian's mean for Box actions, the argmax
    of the allowed logits for Discrete, each component's for MultiDiscrete (deterministic
    evaluation; ties go to the lowest index).

    Returns:
        (B,) int64 (Discrete), (B, k) int64 (MultiDiscrete) or (B, d) float (Box).
    """
    if not spec.discrete:
        return _full_precision(out)
    modes = [_masked(logits, m).argmax(-1) for logits, m in _components(spec, out, mask)]
    return modes[0] if spec.kind == "discrete" else torch.stack(modes, dim=-1)


def log_prob_entropy(
    spec: ActionSpec,
    out: torch.Tensor,
    actions: torch.Tensor,
    mask: torch.Tensor | None = None,
    logstd: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability (B,) of ``actions`` and entropy (B,) of the distribution, differentiable."""
    # None until the first discrete component's.
    logprob: torch.Tensor | None
    entropy: torch.Tensor | None
    if not spec.discrete:
        mean = _full_precision(out)
        logstd = cast(torch.Tensor, logstd).expand_as(mean)  # Box actions come with their log-std
        z = (actions - mean) * torch.exp(-logstd)
        logprob = (-0.5 * z.square() - logstd - LOG_SQRT_2PI).sum(-1)
        entropy = (0.5 + LOG_SQRT_2PI + logstd).sum(-1)
        return logprob, entropy
    if spec.kind == "discrete":
        actions = actions.unsqueeze(-1)
    logprob = entropy = None
    for k, (logits, m) in enumerate(_components(spec, out, mask)):
        logp = torch.log_softmax(_masked(logits, m), dim=-1)
        lp = logp.gather(-1, actions[..., k : k + 1].long()).squeeze(-1)
        ent = -(logp.exp() * logp).sum(-1)
        logprob = lp if logprob is None else logprob + lp
        entropy = ent if entropy is None else entropy + ent
    # _components yields one component at least, so both are tensors now.
    return cast(torch.Tensor, logprob), cast(torch.Tensor, entropy)
