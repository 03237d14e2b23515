"""The policy protocol: what every actor-critic the trainer can train implements.

Shapes: ``B`` environments (or samples), ``T`` steps. Observations arrive in their storage dtype
(``uint8`` images stay ``uint8`` until the policy scales them on the device).

- ``initial_state(num_envs)``: the recurrent state at the start of training, a tuple of tensors
  each with the environment dimension first (``()`` for a feed-forward policy).
- ``act(obs, state, done, action_mask, generator)``: one rollout step, no gradients.
  ``done`` (B,) float is 1 where ``obs`` is the first observation of a new episode; a recurrent
  policy zeroes its state there *before* using it. Returns actions, their log-probabilities
  (B,), values (B,) and the next state.
- ``value(obs, state, done)``: the critic alone (bootstrap values), (B,).
- ``acting()``: a context manager around a stretch of ``act`` / ``value`` calls during which
  the parameters do not change (the trainer's rollout). A policy may derive weights for fast
  inference once on entry (the LSTM's fused rollout step); outside it ``act`` stays correct,
  deriving them per call. The default does nothing.
- ``evaluate(obs_seq, actions_seq, state0, dones_seq, mask_seq)``: log-probabilities, entropies
  and values, each (T, B), under autograd, for ``(T, B, ...)`` sequences. A feed-forward policy
  sees ``T * B`` independent rows; a recurrent one unrolls from ``state0`` over T, resetting its
  state where ``dones_seq`` is set, exactly as ``act`` does step by step.

A policy that can also compute its gradients without autograd (the MLP) sets ``analytic`` and
offers ``forward_train`` / ``backward`` / ``output_grad_views`` / ``flat`` (see ``ppo/update.py``).
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from rlperf.envs.spec import EnvSpec
from rlperf.policies import distributions
from rlperf.timing.sections import Profiler

State = tuple[torch.Tensor, ...]


class ActorCritic(nn.Module):
    """Base class of every policy; see the module docstring for the protocol."""

    recurrent: bool = False
    analytic: bool = False

    def __init__(self, spec: EnvSpec) -> None:
        super().__init__()
        self.spec = spec
        # Where a policy that times its own stages (the ConvLSTM) records them: the trainer sets
        # its profiler here, so they nest under rollout/policy_forward and update/loss; None
        # means the process-wide one (a policy used outside a trainer).
        self.profiler: Profiler | None = None

    def initial_state(self, num_envs: int) -> State:
        return ()

    def acting(self) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def act(
        self,
        obs: torch.Tensor,
        state: State,
        done: torch.Tensor | None,
        action_mask: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, State]:
        raise NotImplementedError

    def value(self, obs: torch.Tensor, state: State, done: torch.Tensor | None) -> torch.Tensor:
        raise NotImplementedError

    def evaluate(
        self,
        obs_seq: torch.Tensor,
        actions_seq: torch.Tensor,
        state0: State,
        dones_seq: torch.Tensor | None,
        mask_seq: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        raise NotImplementedError


class FeedForwardActorCritic(ActorCritic):
    """A stateless policy defined by ``heads(obs) -> (actor_out (B, K), value (B,))``."""

    def heads(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def logstd(self) -> torch.Tensor | None:
        """The Gaussian log-std for Box actions (None for discrete actions)."""
        return None

    @torch.no_grad()
    def act(self, obs, state, done, action_mask=None, generator=None):  # type: ignore[no-untyped-def]
        out, value = self.heads(obs)
        actions, logprob = distributions.sample(
            self.spec.action, out, action_mask, self.logstd(), generator
        )
        return actions, logprob, value, state

    @torch.no_grad()
    def value(self, obs, state, done):  # type: ignore[no-untyped-def]
        return self.heads(obs)[1]

    def evaluate(self, obs_seq, actions_seq, state0, dones_seq, mask_seq=None):  # type: ignore[no-untyped-def]
        t, b = obs_seq.shape[:2]
        out, value = self.heads(obs_seq.flatten(0, 1))
        mask = mask_seq.flatten(0, 1) if mask_seq is not None else None
        logprob, entropy = distributions.log_prob_entropy(
            self.spec.action, out, actions_seq.flatten(0, 1), mask, self.logstd()
        )
        return logprob.view(t, b), entropy.view(t, b), value.view(t, b)


def orthogonal_(layer: nn.Linear | nn.Conv2d, gain: float) -> nn.Module:
    """Orthogonal weights with ``gain`` and zero bias, the PPO literature's initialisation."""
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class ActorCriticHeads(nn.Module):
    """Actor and critic output layers over shared features, as one ``Linear`` (one matmul).

    Rows ``[:K]`` are the actor's (orthogonal init, gain 0.01: a near-uniform initial policy),
    row ``K`` the critic's (gain 1), as in CleanRL. Box actions add a state-independent log-std.
    """

    def __init__(self, features: int, spec: EnvSpec) -> None:
        super().__init__()
        k = spec.action.num_outputs
        self.num_outputs = k
        self.linear = nn.Linear(features, k + 1)
        with torch.no_grad():
            actor, critic = nn.Linear(features, k), nn.Linear(features, 1)
            orthogonal_(actor, 0.01)
            orthogonal_(critic, 1.0)
            self.linear.weight.copy_(torch.cat([actor.weight, critic.weight]))
            self.linear.bias.zero_()
        self.logstd = None if spec.action.discrete else nn.Parameter(torch.zeros(k))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Actor output (B, K) and value (B,) of features (B, features)."""
        out = self.linear(x)
        return out[:, : self.num_outputs], out[:, self.num_outputs]

    def value(self, x: torch.Tensor) -> torch.Tensor:
        """The critic row alone, (B,)."""
        k = self.num_outputs
        return torch.addmm(self.linear.bias[k:], x, self.linear.weight[k:].T).view(-1)
