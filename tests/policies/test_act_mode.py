"""``act_mode``, every policy's most likely action (``rlperf eval --deterministic``), against the
distribution ``evaluate`` trains: the action of highest log-probability among every allowed
one (Discrete, MultiDiscrete, with and without masks), the point of highest density (Box);
a recurrent policy's next state is ``act``'s."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from rlperf.envs.spec import ActionSpec, EnvSpec
from rlperf.policies import distributions
from rlperf.policies.base import ActorCritic, FeedForwardActorCritic
from rlperf.policies.cnn import CNNActorCritic
from rlperf.policies.convlstm import ConvLSTMActorCritic
from rlperf.policies.lstm import LSTMActorCritic
from rlperf.policies.mlp import MLPActorCritic

B = 6
DISCRETE = ActionSpec("discrete", (4,), 1)
MULTI = ActionSpec("multidiscrete", (2, 3), 2)
BOX = ActionSpec("box", (), 2, (-1.0, -1.0), (1.0, 1.0))
FLAT = ((5,), np.dtype(np.float32))
IMAGE = ((2, 8, 8), np.dtype(np.uint8))


def build(kind: str, action: ActionSpec, has_mask: bool) -> ActorCritic:
    """A small policy of ``kind`` with random (not initial) parameters: the initial actor
    layer's gain of 0.01 makes every logit almost equal."""
    obs_shape, dtype = IMAGE if kind in ("cnn", "convlstm") else FLAT
    spec = EnvSpec(B, obs_shape, dtype, action, has_mask)
    torch.manual_seed(0)
    policy: ActorCritic
    if kind == "mlp":
        policy = MLPActorCritic(spec, (16, 16))
    elif kind == "lstm":
        policy = LSTMActorCritic(spec, (16,), 16)
    elif kind == "cnn":
        policy = CNNActorCritic(spec, (4, 4), 16)
    else:
        policy = ConvLSTMActorCritic(spec, channels=4, layers=1, features=16)
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(0.5 * torch.randn_like(p))
    return policy


def inputs(policy: ActorCritic, seed: int = 1):
    """Observations (B, ...), a state, episode starts (B,) and a mask with one allowed choice
    at least per component."""
    spec = policy.spec
    gen = torch.Generator().manual_seed(seed)
    if spec.obs_dtype == np.uint8:
        obs = torch.randint(0, 256, (B, *spec.obs_shape), dtype=torch.uint8, generator=gen)
    else:
        obs = torch.randn(B, *spec.obs_shape, generator=gen)
    state = tuple(torch.randn(s.shape, generator=gen) for s in policy.initial_state(B))
    done = (torch.rand(B, generator=gen) < 0.5).float()
    mask = None
    if spec.has_mask:
        parts = []
        for n in spec.action.nvec:
            part = torch.rand(B, n, generator=gen) < 0.5
            part[torch.arange(B), torch.randint(0, n, (B,), generator=gen)] = True
            parts.append(part)
        mask = torch.cat(parts, dim=1)
    return obs, state, done, mask


def log_prob(policy, obs, state, done, mask, actions):
    """``evaluate``'s log-probability (B,) of ``actions`` as a one-step sequence."""
    seq_mask = None if mask is None else mask.unsqueeze(0)
    with torch.no_grad():
        logprob, _, _ = policy.evaluate(
            obs.unsqueeze(0), actions.unsqueeze(0), state, done.unsqueeze(0), seq_mask
        )
    return logprob[0]


CASES = [
    (kind, action, masked)
    for kind in ("mlp", "lstm", "cnn", "convlstm")
    for action, masked in ((DISCRETE, False), (DISCRETE, True), (MULTI, False), (MULTI, True))
] + [(kind, BOX, False) for kind in ("mlp", "lstm", "cnn")]


@pytest.mark.parametrize(
    "kind, action, masked",
    CASES,
    ids=[f"{k}-{a.kind}{'-masked' if m else ''}" for k, a, m in CASES],
)
def test_act_mode_is_the_most_likely_action(kind, action, masked) -> None:
    policy = build(kind, action, masked)
    obs, state, done, mask = inputs(policy)
    actions, next_state = policy.act_mode(obs, state, done, mask)
    if action.discrete:
        # Every joint action, scored by the distribution training uses.
        joint = list(itertools.product(*(range(n) for n in action.nvec)))
        scores = []
        for a in joint:
            each = torch.tensor([a] * B)  # (B, components)
            each = each[:, 0] if action.kind == "discrete" else each
            scores.append(log_prob(policy, obs, state, done, mask, each))
        best = torch.tensor(joint)[torch.stack(scores).argmax(0)]
        expected = best[:, 0] if action.kind == "discrete" else best
        assert actions.dtype == torch.int64
        torch.testing.assert_close(actions, expected, rtol=0, atol=0)
        if mask is not None:  # never a masked choice, even where its logit is the largest
            offsets = np.cumsum((0, *action.nvec[:-1]))
            picked = actions.view(B, -1) + torch.tensor(offsets)
            assert mask.gather(1, picked).all()
    else:
        # The Gaussian's density peaks at its mean: z = 0 in every component.
        feed_forward = isinstance(policy, FeedForwardActorCritic)
        logstd = policy.logstd() if feed_forward else policy.out.logstd
        peak = -(logstd.sum() + action.dim * distributions.LOG_SQRT_2PI)
        got = log_prob(policy, obs, state, done, mask, actions)
        torch.testing.assert_close(got, peak.expand(B).detach(), rtol=0, atol=1e-5)
        assert actions.shape == (B, action.dim)
    if policy.recurrent:  # the state moves on as act moves it
        _, _, _, act_state = policy.act(obs, state, done, mask, torch.Generator())
        for got_s, want_s in zip(next_state, act_state, strict=True):
            torch.testing.assert_close(got_s, want_s, rtol=0, atol=0)
    else:
        assert next_state == state


def test_mode_of_a_distribution() -> None:
    """``distributions.mode`` on hand-made outputs: argmax, per component, masks, the mean."""
    logits = torch.tensor([[0.0, 3.0, 1.0], [2.0, 0.0, 5.0]])
    assert distributions.mode(ActionSpec("discrete", (3,), 1), logits).tolist() == [1, 2]
    mask = torch.tensor([[True, False, True], [True, True, False]])
    assert distributions.mode(ActionSpec("discrete", (3,), 1), logits, mask).tolist() == [2, 0]
    multi = ActionSpec("multidiscrete", (1, 2), 2)
    assert distributions.mode(multi, logits).tolist() == [[0, 0], [0, 1]]
    mean = torch.tensor([[0.3, -2.0]])
    assert torch.equal(distributions.mode(BOX, mean), mean)  # unclipped: the env clips
