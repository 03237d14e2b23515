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
- ``actor_output(obs, state, done)``: the actor's raw output (B, num_outputs) and the next
  state, as ``act`` computes them before sampling; ``act_mode`` turns it into the
  distribution's most likely actions (deterministic evaluation, ``rlperf eval``).
- ``acting()``: a context manager around a stretch of ``act`` / ``value`` calls during which
  the parameters do not change (the trainer's rollout). A policy may derive weights for fast
  inference once on entry (the LSTM's fused rollout step); outside it ``act`` stays correct,
  deriving them per call. The default does nothing.
- ``evaluate(obs_seq, actions_seq, state0, dones_seq, mask_seq)``: log-probabilities, entropies
  and values, each (T, B), under autograd, for ``(T, B, ...)`` sequences. A feed-forward policy
  sees ``T * B`` independent rows; a recurrent one unrolls from ``state0`` over T, resetting its
  state where ``dones_seq`` is set, exactly as ``act`` does step by step.

**The analytic update.** A policy whose PPO gradient can be had without autograd implements
:class:`AnalyticPolicy` as well (the MLP and the LSTM): the loss's gradient with respect to the
heads' outputs in closed form (``ppo/loss.py``), backpropagated by the policy itself. At the
sizes PPO runs on CPUs autograd's graph bookkeeping costs more than the arithmetic, so this
path issues a fraction of the operations (``ppo/update.py``'s ``AnalyticUpdate`` runs it;
``evaluate`` under autograd stays the reference it is tested against). Its ``analytic``
property says whether it applies to the policy as built and where its parameters now live
(one unmasked categorical action; the LSTM also: a flat observation, float32 on the CPU, the
kernel built). The update adds its own conditions: fp32 without autocast, no
``torch.compile`` (:func:`rlperf.ppo.update.analytic_update_applies`).
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol, TypeVar, runtime_checkable

import torch
from torch import nn

from rlperf.envs.spec import EnvSpec
from rlperf.policies import distributions
from rlperf.timing.sections import Profiler

State = tuple[torch.Tensor, ...]
_Layer = TypeVar("_Layer", nn.Linear, nn.Conv2d)


class ActorCritic(nn.Module):
    """Base class of every policy; see the module docstring for the protocol."""

    recurrent: bool = False

    @property
    def analytic(self) -> bool:
        """Whether the :class:`AnalyticPolicy` path applies to this policy now (False unless
        it implements it)."""
        return False

    def __init__(self, spec: EnvSpec) -> None:
        super().__init__()
        self.spec = spec
        # Where a policy that times its own stages (the ConvLSTM) records them: the trainer sets
        # its profiler here, so they nest under rollout/policy_forward and update/loss; None
        # means the process-wide one (a policy used outside a trainer).
        self.profiler: Profiler | None = None

    def logstd(self) -> torch.Tensor | None:
        """The Gaussian log-std (K,) for Box actions, the parameter itself (None for discrete
        actions)."""
        return None

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

    def actor_output(
        self, obs: torch.Tensor, state: State, done: torch.Tensor | None
    ) -> tuple[torch.Tensor, State]:
        """The actor's raw output (B, num_outputs) for ``obs`` (B, ...), and the next state,
        as :meth:`act` computes them before sampling (``done`` as ``act``'s); no gradients."""
        raise NotImplementedError(f"{type(self).__name__} does not give its actor output")

    @torch.no_grad()
    def act_mode(
        self,
        obs: torch.Tensor,
        state: State,
        done: torch.Tensor | None,
        action_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, State]:
        """The most likely actions and the next state: :meth:`act` without sampling, for
        deterministic evaluation (``rlperf eval --deterministic``). Actions as ``act``'s: the
        Gaussian's mean (Box, unclipped), the argmax of the allowed logits (Discrete; per
        component for MultiDiscrete); see :func:`~rlperf.policies.distributions.mode`."""
        out, state = self.actor_output(obs, state, done)
        return distributions.mode(self.spec.action, out, action_mask), state

    def evaluate(
        self,
        obs_seq: torch.Tensor,
        actions_seq: torch.Tensor,
        state0: State,
        dones_seq: torch.Tensor | None,
        mask_seq: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        raise NotImplementedError


@runtime_checkable
class AnalyticPolicy(Protocol):
    """A policy that computes its PPO gradients without autograd (see the module docstring).

    The three calls of one minibatch, in order: ``forward_train``; the loss writes d loss /
    d outputs into ``output_grad_views(cache)``; ``backward(cache, max_grad_norm)``. Shapes:
    ``T`` steps of ``B`` environments (``T = 1`` for a feed-forward policy), ``N = T * B`` rows,
    ``K`` actions.
    """

    @property
    def analytic(self) -> bool:
        """Whether this path applies to the policy as built (see the module docstring)."""
        ...

    def forward_train(
        self, obs_seq: torch.Tensor, state0: State, dones_seq: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, Any]:
        """Logits (N, K) and values (N,) of the ``(T, B, ...)`` observations, without autograd,
        and the cache ``backward`` reads; arguments as ``evaluate``'s. The outputs and the
        cache may be the policy's reusable buffers: valid until its next ``forward_train`` of
        the same shape."""
        ...

    def output_grad_views(self, cache: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Where ``backward`` reads d loss / d logits (N, K) and d loss / d values (N,): the
        loss writes there (no copy)."""
        ...

    def backward(self, cache: Any, max_grad_norm: float) -> None:
        """Write d loss / d parameters into the parameters' ``.grad`` (overwritten, not
        accumulated) from the gradients in ``output_grad_views(cache)``, then with
        ``max_grad_norm > 0`` clip them all together to that norm, as
        :func:`clip_grad_norm` does."""
        ...


def clip_grad_norm(grad: torch.Tensor, max_norm: float) -> None:
    """``clip_grad_norm_``'s arithmetic on one flat gradient, without reading the norm on the
    host: scaled by ``min(1, max_norm / (norm + 1e-6))``; nothing with ``max_norm <= 0``."""
    if max_norm > 0:
        norm = torch.linalg.vector_norm(grad)
        grad.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0))


class FeedForwardActorCritic(ActorCritic):
    """A stateless policy defined by ``heads(obs) -> (actor_out (B, K), value (B,))``."""

    def heads(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    @torch.no_grad()
    def act(
        self,
        obs: torch.Tensor,
        state: State,
        done: torch.Tensor | None,
        action_mask: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, State]:
        out, value = self.heads(obs)
        actions, logprob = distributions.sample(
            self.spec.action, out, action_mask, self.logstd(), generator
        )
        return actions, logprob, value, state

    @torch.no_grad()
    def value(self, obs: torch.Tensor, state: State, done: torch.Tensor | None) -> torch.Tensor:
        return self.heads(obs)[1]

    @torch.no_grad()
    def actor_output(
        self, obs: torch.Tensor, state: State, done: torch.Tensor | None
    ) -> tuple[torch.Tensor, State]:
        return self.heads(obs)[0], state

    def evaluate(
        self,
        obs_seq: torch.Tensor,
        actions_seq: torch.Tensor,
        state0: State,
        dones_seq: torch.Tensor | None,
        mask_seq: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        t, b = obs_seq.shape[:2]
        out, value = self.heads(obs_seq.flatten(0, 1))
        mask = mask_seq.flatten(0, 1) if mask_seq is not None else None
        logprob, entropy = distributions.log_prob_entropy(
            self.spec.action, out, actions_seq.flatten(0, 1), mask, self.logstd()
        )
        return logprob.view(t, b), entropy.view(t, b), value.view(t, b)


def orthogonal_(layer: _Layer, gain: float) -> _Layer:
    """Orthogonal weights with ``gain`` and zero bias, the PPO literature's initialisation."""
    nn.init.orthogonal_(layer.weight, gain)
    if layer.bias is not None:
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
