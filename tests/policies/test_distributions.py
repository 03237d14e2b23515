"""Action heads: masked actions are never sampled and have probability exactly 0; MultiDiscrete
and Box log-probabilities and entropies equal torch.distributions' own."""

from __future__ import annotations

import torch

from rlperf.envs.spec import ActionSpec
from rlperf.policies.distributions import log_prob_entropy, sample

DISCRETE = ActionSpec("discrete", (5,), 1)
MULTI = ActionSpec("multidiscrete", (3, 4), 2)
BOX = ActionSpec("box", (), 2, (-1.0, -1.0), (1.0, 1.0))


def test_masked_actions_are_never_sampled_and_have_zero_probability() -> None:
    gen = torch.Generator().manual_seed(0)
    n = 4000
    logits = torch.randn(n, 5, generator=gen) * 3.0
    logits[:, 1] += 20.0  # the favourite action is masked in half the rows
    mask = torch.rand(n, 5, generator=gen) < 0.5
    mask[:, 4] = True  # at least one allowed action per row
    actions, logprob = sample(DISCRETE, logits, mask, generator=gen)
    assert mask[torch.arange(n), actions].all(), "a masked action was sampled"
    lp, _ = log_prob_entropy(DISCRETE, logits, actions, mask)
    torch.testing.assert_close(lp, logprob)
    # Probability of every action under the mask: exactly 0 where masked, sums to 1.
    every = torch.arange(5).repeat(n, 1).T  # (5, n)
    probs = torch.stack([log_prob_entropy(DISCRETE, logits, a, mask)[0].exp() for a in every], 1)
    assert torch.all(probs[~mask] == 0.0)
    torch.testing.assert_close(probs.sum(1), torch.ones(n))
    # The entropy is that of the renormalised allowed actions, finite everywhere.
    _, entropy = log_prob_entropy(DISCRETE, logits, actions, mask)
    allowed = torch.distributions.Categorical(logits=logits.masked_fill(~mask, float("-inf")))
    torch.testing.assert_close(entropy, allowed.entropy())


def test_masked_entropy_has_finite_gradients() -> None:
    logits = torch.randn(6, 5, requires_grad=True)
    mask = torch.tensor([[1, 0, 1, 0, 0]] * 6, dtype=torch.bool)
    actions = torch.zeros(6, dtype=torch.int64)
    logprob, entropy = log_prob_entropy(DISCRETE, logits, actions, mask)
    (logprob.sum() + entropy.sum()).backward()
    assert torch.isfinite(logits.grad).all()
    assert torch.all(logits.grad[:, 1] == 0) and torch.all(logits.grad[:, 3:] == 0)


def test_a_row_with_no_allowed_action_is_treated_as_all_allowed() -> None:
    logits = torch.zeros(2, 5)
    mask = torch.tensor([[False] * 5, [True, False, False, False, False]])
    actions, logprob = sample(DISCRETE, logits, mask)
    assert torch.isfinite(logprob).all() and actions[1] == 0
    torch.testing.assert_close(logprob[0], torch.tensor(-torch.log(torch.tensor(5.0)).item()))


def test_multidiscrete_is_independent_categoricals_with_per_component_masks() -> None:
    gen = torch.Generator().manual_seed(1)
    n = 3000
    logits = torch.randn(n, 7, generator=gen)
    mask = torch.ones(n, 7, dtype=torch.bool)
    mask[:, 0] = False  # component 0: choice 0 forbidden
    mask[:, 3 + 2] = False  # component 1: choice 2 forbidden
    actions, logprob = sample(MULTI, logits, mask, generator=gen)
    assert actions.shape == (n, 2) and actions.dtype == torch.int64
    assert (actions[:, 0] != 0).all() and (actions[:, 1] != 2).all()
    lp, entropy = log_prob_entropy(MULTI, logits, actions, mask)
    torch.testing.assert_close(lp, logprob)
    masked = logits.masked_fill(~mask, float("-inf"))
    a = torch.distributions.Categorical(logits=masked[:, :3])
    b = torch.distributions.Categorical(logits=masked[:, 3:])
    torch.testing.assert_close(lp, a.log_prob(actions[:, 0]) + b.log_prob(actions[:, 1]))
    torch.testing.assert_close(entropy, a.entropy() + b.entropy())


def test_box_matches_a_diagonal_normal() -> None:
    gen = torch.Generator().manual_seed(2)
    mean = torch.randn(50, 2, generator=gen)
    logstd = torch.tensor([-0.5, 0.3])
    actions, logprob = sample(BOX, mean, None, logstd, gen)
    normal = torch.distributions.Normal(mean, logstd.exp())
    torch.testing.assert_close(logprob, normal.log_prob(actions).sum(-1))
    lp, entropy = log_prob_entropy(BOX, mean, actions, None, logstd)
    torch.testing.assert_close(lp, logprob)
    torch.testing.assert_close(entropy, normal.entropy().sum(-1))


def test_sampled_frequencies_follow_the_masked_softmax() -> None:
    gen = torch.Generator().manual_seed(3)
    n = 20000
    logits = torch.tensor([[0.5, 2.0, -1.0, 1.0, 0.0]]).repeat(n, 1)
    mask = torch.tensor([[True, False, True, True, True]]).repeat(n, 1)
    actions, _ = sample(DISCRETE, logits, mask, generator=gen)
    counts = torch.bincount(actions, minlength=5).double()
    expected = torch.softmax(logits[0].masked_fill(~mask[0], float("-inf")), 0).double() * n
    assert counts[1] == 0
    allowed = mask[0]
    chi2 = ((counts[allowed] - expected[allowed]) ** 2 / expected[allowed]).sum()
    assert chi2 < 16.27, f"chi-square {chi2:.1f} over 3 dof exceeds the 99.9% quantile"
