"""``--preset atari``'s policy is CleanRL's ``ppo_atari.py`` agent: the Nature CNN (32 8x8/4,
64 4x4/2, 64 3x3/1, 512 features, ReLU), orthogonal init (sqrt 2, actor 0.01, critic 1, zero
biases), inputs /255 inside the network; held here against CleanRL's ``nn.Sequential`` written
as CleanRL writes it, with the same weights: the same outputs, the same PPO loss and the same
gradients, in float64."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.distributions.categorical import Categorical

from rlperf.config import preset
from rlperf.envs.spec import ActionSpec, EnvSpec
from rlperf.policies.cnn import CNNActorCritic
from rlperf.policies.registry import make_policy
from rlperf.ppo.loss import LossCoefs, normalize_advantages, ppo_loss

ACTIONS = 4  # Breakout's
FRAMES = (4, 84, 84)


def atari_policy() -> CNNActorCritic:
    spec = EnvSpec(8, FRAMES, np.dtype(np.uint8), ActionSpec("discrete", (ACTIONS,), 1))
    policy = make_policy(preset("atari").policy, spec)
    assert isinstance(policy, CNNActorCritic)
    return policy


class CleanRLAgent(nn.Module):
    """CleanRL ``ppo_atari.py``'s ``Agent``, its initialisation left to the copy below."""

    def __init__(self) -> None:
        super().__init__()
        self.network = nn.Sequential(
            nn.Conv2d(4, 32, 8, stride=4), nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(),
            nn.Flatten(),
            nn.Linear(64 * 7 * 7, 512), nn.ReLU(),
        )  # fmt: skip
        self.actor = nn.Linear(512, ACTIONS)
        self.critic = nn.Linear(512, 1)

    def get_action_and_value(
        self, x: torch.Tensor, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        hidden = self.network(x / 255.0)
        logits = self.actor(hidden)
        probs = Categorical(logits=logits)
        return logits, probs.log_prob(action), probs.entropy(), self.critic(hidden)


def pairs(
    policy: CNNActorCritic, agent: CleanRLAgent, grad: bool = False
) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """(name, rlperf's parameter, CleanRL's counterpart) for every weight and bias, or with
    ``grad`` their gradients; the heads are one ``Linear`` in rlperf (actor rows, then the
    critic's)."""

    def get(t: torch.Tensor) -> torch.Tensor:
        return t.grad if grad else t  # type: ignore[return-value]

    ours = [m for m in policy.encoder.modules() if isinstance(m, nn.Conv2d | nn.Linear)]
    theirs = [m for m in agent.network if isinstance(m, nn.Conv2d | nn.Linear)]
    out = []
    for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        out += [(f"layer{i}.weight", get(a.weight), get(b.weight)),
                (f"layer{i}.bias", get(a.bias), get(b.bias))]  # fmt: skip
    w, b = get(policy.out.linear.weight), get(policy.out.linear.bias)
    out += [("actor.weight", w[:ACTIONS], get(agent.actor.weight)),
            ("actor.bias", b[:ACTIONS], get(agent.actor.bias)),
            ("critic.weight", w[ACTIONS:], get(agent.critic.weight)),
            ("critic.bias", b[ACTIONS:], get(agent.critic.bias))]  # fmt: skip
    return out


def twin() -> tuple[CNNActorCritic, CleanRLAgent]:
    torch.manual_seed(0)
    policy, agent = atari_policy().double(), CleanRLAgent().double()
    with torch.no_grad():
        for _, ours, theirs in pairs(policy, agent):
            theirs.copy_(ours)
    return policy, agent


def batch(n: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    frames = torch.randint(0, 256, (n, *FRAMES), dtype=torch.uint8, generator=g)
    return frames, torch.randint(0, ACTIONS, (n,), generator=g)


def test_the_preset_builds_the_nature_cnn() -> None:
    policy = atari_policy()
    convs = [m for m in policy.encoder.convs if isinstance(m, nn.Conv2d)]
    geometry = [(c.in_channels, c.out_channels, c.kernel_size, c.stride, c.padding) for c in convs]
    assert geometry == [(4, 32, (8, 8), (4, 4), (0, 0)), (32, 64, (4, 4), (2, 2), (0, 0)),
                        (64, 64, (3, 3), (1, 1), (0, 0))]  # fmt: skip
    fc = policy.encoder.fc[0]
    assert isinstance(fc, nn.Linear) and (fc.in_features, fc.out_features) == (64 * 7 * 7, 512)
    assert policy.out.linear.weight.shape == (ACTIONS + 1, 512)
    relus = [m for m in policy.encoder.modules() if isinstance(m, nn.ReLU)]
    assert len(relus) == 4


def test_initialisation_is_cleanrls() -> None:
    """Orthogonal rows (or columns, for a wide matrix) scaled by CleanRL's gains; zero biases."""
    policy, agent = twin()
    gains = {"actor.weight": 0.01, "critic.weight": 1.0}
    for name, ours, _ in pairs(policy, agent):
        if name.endswith("bias"):
            assert not ours.any(), name
            continue
        w = ours.detach().flatten(1)
        gram = w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w
        gain = gains.get(name, math.sqrt(2))
        eye = gain**2 * torch.eye(len(gram), dtype=w.dtype)
        torch.testing.assert_close(gram, eye, rtol=0, atol=1e-5 * gain**2, msg=name)  # float32 init


def test_same_outputs_as_cleanrls_agent() -> None:
    """uint8 frames in, /255 inside: logits, log-probabilities, entropies and values equal."""
    policy, agent = twin()
    frames, actions = batch()
    out, value = policy.heads(frames)
    logits, logprob, entropy, critic = agent.get_action_and_value(frames.double(), actions)
    ours_logprob, ours_entropy, ours_value = policy.evaluate(frames[None], actions[None], (), None)
    tight = {"rtol": 1e-12, "atol": 1e-12}
    torch.testing.assert_close(out, logits, **tight)
    torch.testing.assert_close(value, critic.view(-1), **tight)
    torch.testing.assert_close(ours_logprob[0], logprob, **tight)
    torch.testing.assert_close(ours_entropy[0], entropy, **tight)
    torch.testing.assert_close(ours_value[0], critic.view(-1), **tight)


@pytest.mark.parametrize("shift", [0.0, 0.3], ids=["on-policy", "clipped"])
def test_same_loss_and_gradients_as_cleanrl(shift: float) -> None:
    """CleanRL's minibatch loss (its lines, clip 0.1 as the preset) and rlperf's ``ppo_loss`` on
    the same batch: equal loss, equal gradient in every parameter. ``shift`` moves the old
    log-probabilities and values so that the clipped branches are taken too."""
    policy, agent = twin()
    frames, actions = batch()
    g = torch.Generator().manual_seed(2)
    n = len(actions)
    old_logprob = agent.get_action_and_value(frames.double(), actions)[1].detach()
    old_logprob += shift * torch.randn(n, generator=g, dtype=torch.float64)
    old_values = shift * torch.randn(n, generator=g, dtype=torch.float64)
    advantages = torch.randn(n, generator=g, dtype=torch.float64)
    returns = torch.randn(n, generator=g, dtype=torch.float64)
    cfg = preset("atari").ppo
    clip_coef, ent_coef, vf_coef = cfg.clip_coef, cfg.ent_coef, cfg.vf_coef

    # CleanRL's update, as ppo_atari.py writes it.
    _, newlogprob, entropy, newvalue = agent.get_action_and_value(frames.double(), actions)
    logratio = newlogprob - old_logprob
    ratio = logratio.exp()
    mb_advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    pg_loss1 = -mb_advantages * ratio
    pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
    pg_loss = torch.max(pg_loss1, pg_loss2).mean()
    newvalue = newvalue.view(-1)
    v_loss_unclipped = (newvalue - returns) ** 2
    v_clipped = old_values + torch.clamp(newvalue - old_values, -clip_coef, clip_coef)
    v_loss_clipped = (v_clipped - returns) ** 2
    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
    loss = pg_loss - ent_coef * entropy.mean() + v_loss * vf_coef
    loss.backward()

    ours_logprob, ours_entropy, ours_value = policy.evaluate(frames[None], actions[None], (), None)
    coefs = LossCoefs(clip_coef, cfg.clip_vloss, ent_coef, vf_coef)
    adv = normalize_advantages(advantages)
    ours, stats = ppo_loss(ours_logprob[0], ours_entropy[0], ours_value[0], old_logprob, adv,
                           returns, old_values, coefs)  # fmt: skip
    ours.backward()
    torch.testing.assert_close(ours, loss, rtol=1e-12, atol=1e-12)
    if shift:
        assert stats[4] > 0  # some ratios were clipped
    for name, mine, theirs in pairs(policy, agent, grad=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-9, atol=1e-12, msg=name)
