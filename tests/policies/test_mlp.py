"""MLPActorCritic: the stacked network equals CleanRL's separate actor and critic, its sampling
follows the softmax, and its init is the PPO literature's orthogonal init."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from rlperf.policies.mlp import MLPActorCritic
from rlperf.ppo.loss import LossCoefs, ppo_loss


def evaluate_rows(policy, obs, actions):
    """``evaluate`` on B independent rows (a T = 1 sequence): logprob, entropy, value (B,)."""
    logprob, entropy, value = policy.evaluate(obs.unsqueeze(0), actions.unsqueeze(0))
    return logprob[0], entropy[0], value[0]


class CleanRLAgent(nn.Module):
    """The network of CleanRL's ``ppo.py``: separate actor and critic, Linear + Tanh."""

    def __init__(self, obs_dim: int, action_dim: int, hidden_sizes: tuple[int, ...]) -> None:
        super().__init__()
        dims = (obs_dim, *hidden_sizes)

        def trunk() -> list[nn.Module]:
            layers: list[nn.Module] = []
            for i in range(len(hidden_sizes)):
                layers += [nn.Linear(dims[i], dims[i + 1]), nn.Tanh()]
            return layers

        self.critic = nn.Sequential(*trunk(), nn.Linear(dims[-1], 1))
        self.actor = nn.Sequential(*trunk(), nn.Linear(dims[-1], action_dim))


def cleanrl_copy(policy: MLPActorCritic) -> CleanRLAgent:
    """A CleanRL agent holding the same weights as ``policy`` (same dtype)."""
    agent = CleanRLAgent(policy.obs_dim, policy.action_dim, policy.hidden_sizes)
    agent.to(policy.flat.dtype)
    layers = policy.named_layers()
    assert set(layers) == set(agent.state_dict()), "one entry per nn.Linear parameter"
    agent.load_state_dict({k: v.clone() for k, v in layers.items()})
    return agent


def sharpen(policy: MLPActorCritic, scale: float = 200.0) -> None:
    """Scale the 0.01-gain policy head so action probabilities are far from uniform."""
    head = f"actor.{2 * len(policy.hidden_sizes)}.weight"
    policy.named_layers()[head].mul_(scale)


@pytest.mark.parametrize(
    "obs_dim, action_dim, hidden",
    [(4, 2, (64, 64)), (6, 5, (32,)), (3, 3, (16, 24, 8))],
)
def test_same_outputs_and_gradients_as_cleanrl_agent(obs_dim, action_dim, hidden) -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    policy = MLPActorCritic.from_sizes(obs_dim, action_dim, hidden).double()
    sharpen(policy)
    agent = cleanrl_copy(policy)
    obs = torch.randn(50, obs_dim, dtype=torch.float64)
    actions = torch.randint(0, action_dim, (50,))

    logits, values, _ = policy.forward_train(obs.unsqueeze(0))
    torch.testing.assert_close(logits, agent.actor(obs))
    torch.testing.assert_close(values, agent.critic(obs).view(-1))
    torch.testing.assert_close(policy.value(obs), agent.critic(obs).view(-1))

    logprob, entropy, value = evaluate_rows(policy, obs, actions)
    dist = torch.distributions.Categorical(logits=agent.actor(obs))
    torch.testing.assert_close(logprob, dist.log_prob(actions))
    torch.testing.assert_close(entropy, dist.entropy())

    # The same loss through both networks gives the same gradient, parameter by parameter.
    gen = torch.Generator().manual_seed(1)
    extra = [torch.randn(50, generator=gen, dtype=torch.float64) for _ in range(3)]
    old_logprob, advantages, returns = logprob.detach() + 0.3 * extra[0], extra[1], extra[2]
    coefs = LossCoefs()
    policy.flat.grad.zero_()
    loss, _ = ppo_loss(
        logprob, entropy, value, old_logprob, advantages, returns, value.detach(), coefs
    )
    loss.backward()
    agent_loss, _ = ppo_loss(
        dist.log_prob(actions),
        dist.entropy(),
        agent.critic(obs).view(-1),
        old_logprob,
        advantages,
        returns,
        value.detach(),
        coefs,
    )
    agent_loss.backward()
    grads = policy.named_layers(policy.flat.grad)
    for name, param in agent.named_parameters():
        torch.testing.assert_close(grads[name], param.grad, msg=lambda m, n=name: f"{n}: {m}")


def test_act_samples_follow_the_softmax() -> None:
    """Chi-square goodness of fit of 60,000 sampled actions per observation, fixed seeds."""
    torch.set_num_threads(1)
    torch.manual_seed(3)
    action_dim, samples = 4, 60_000
    policy = MLPActorCritic.from_sizes(4, action_dim)
    sharpen(policy, 300.0)
    obs = torch.randn(3, 4)
    logits, _, _ = policy.forward_train(obs.unsqueeze(0))
    probs = torch.softmax(logits, -1)
    assert probs.max() > 0.4 and probs.min() > 0.02, "probabilities should be varied, not tiny"
    batch = obs.repeat_interleave(samples, 0)
    actions, logprobs, values = policy.act(batch, (), None, None, torch.Generator().manual_seed(0))[
        :3
    ]
    assert actions.dtype == torch.int64 and actions.shape == (3 * samples,)
    # 99.9% quantile of chi-square with 3 degrees of freedom.
    critical = 16.27
    for row in range(3):
        counts = torch.bincount(actions[row * samples : (row + 1) * samples], minlength=4)
        expected = probs[row] * samples
        chi2 = ((counts - expected) ** 2 / expected).sum().item()
        assert chi2 < critical, f"obs {row}: counts {counts.tolist()} vs {expected.tolist()}"
    log_softmax = torch.log_softmax(policy.forward_train(batch.unsqueeze(0))[0], -1)
    torch.testing.assert_close(logprobs, log_softmax.gather(1, actions[:, None]).view(-1))
    torch.testing.assert_close(values, policy.value(batch))


def test_act_is_reproducible_with_a_seeded_generator() -> None:
    torch.manual_seed(0)
    policy = MLPActorCritic.from_sizes(4, 3)
    sharpen(policy, 20.0)
    obs = torch.randn(256, 4)
    first = policy.act(obs, (), None, None, torch.Generator().manual_seed(7))[:3]
    second = policy.act(obs, (), None, None, torch.Generator().manual_seed(7))[:3]
    other = policy.act(obs, (), None, None, torch.Generator().manual_seed(8))[:3]
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)
    assert not torch.equal(first[0], other[0])
    assert not first[1].requires_grad and not first[2].requires_grad


def test_continuous_act_logprob_matches_normal_distribution() -> None:
    torch.manual_seed(0)
    policy = MLPActorCritic.from_sizes(3, 2, (16, 16), continuous=True)
    policy.views(policy.flat.detach())["actor_logstd"].copy_(torch.tensor([-0.5, 0.3]))
    obs = torch.randn(2000, 3)
    actions, logprob, values = policy.act(obs, (), None, None, torch.Generator().manual_seed(0))[:3]
    assert actions.shape == (2000, 2) and actions.dtype == torch.float32
    with torch.no_grad():
        eval_logprob, entropy, eval_values = evaluate_rows(policy, obs, actions)
    torch.testing.assert_close(logprob, eval_logprob)
    torch.testing.assert_close(values, eval_values)
    mean = policy.forward_train(obs.unsqueeze(0))[0]
    std = ((actions - mean).std(0)).tolist()
    assert std == pytest.approx([math.exp(-0.5), math.exp(0.3)], rel=0.05)
    expected_entropy = sum(0.5 + 0.5 * math.log(2 * math.pi) + s for s in (-0.5, 0.3))
    assert entropy[0].item() == pytest.approx(expected_entropy, rel=1e-5)


@pytest.mark.parametrize("hidden", [(64, 64), (8, 32, 4)])
def test_orthogonal_init_as_in_the_ppo_literature(hidden) -> None:
    """Gain sqrt(2) for hidden layers, 0.01 policy head, 1 value head, zero biases."""
    torch.manual_seed(0)
    policy = MLPActorCritic.from_sizes(4, 3, hidden)
    layers = policy.named_layers()
    head = 2 * len(hidden)
    for name, value in layers.items():
        if name.endswith("bias"):
            assert torch.all(value == 0), name
            continue
        index = int(name.split(".")[1])
        gain = math.sqrt(2) if index < head else (0.01 if name.startswith("actor") else 1.0)
        w = value  # (out, in): orthonormal rows or columns, whichever are fewer, times gain
        gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
        expected = gain**2 * torch.eye(len(gram))
        torch.testing.assert_close(gram, expected, atol=1e-5 * gain**2, rtol=0, msg=name)
    for i in range(0, head, 2):
        assert not torch.equal(layers[f"actor.{i}.weight"], layers[f"critic.{i}.weight"])


def test_flat_is_the_only_parameter_and_holds_every_layer() -> None:
    policy = MLPActorCritic.from_sizes(4, 2, (64, 64))
    assert list(policy.parameters()) == [policy.flat]
    assert policy.flat.grad is not None and policy.flat.grad.shape == policy.flat.shape
    layers = policy.named_layers()
    expected_shapes = {
        "actor.0.weight": (64, 4), "actor.2.weight": (64, 64), "actor.4.weight": (2, 64),
        "critic.0.weight": (64, 4), "critic.2.weight": (64, 64), "critic.4.weight": (1, 64),
    }  # fmt: skip
    for name, shape in expected_shapes.items():
        assert tuple(layers[name].shape) == shape, name
    # Every layer is a view of `flat`: writing through `flat` shows up in the layer.
    policy.flat.data.fill_(0.25)
    assert all(torch.all(v == 0.25) for v in policy.named_layers().values())
