"""Actor-critic MLP with actor and critic stacked so each layer is one batched matmul.

The network is the one of the PPO literature (and CleanRL's ``ppo.py``): separate actor and
critic, each ``obs -> 64 -> 64`` with Tanh, orthogonal init (gain sqrt(2) for hidden layers,
0.01 for the policy head, 1 for the value head), zero biases. Actor and critic have the same
hidden widths, so their hidden layers are stored stacked, shape ``(2, in, out)`` (index 0 is the
actor, 1 the critic), and evaluated together with ``baddbmm``: one call per layer instead of two.

All parameters live in one flat tensor ``flat`` (and their gradients in ``flat.grad``): gradient
clipping is one norm over one tensor and Adam one fused kernel over one tensor. The layer
weights are views into it.

Two ways to get gradients, the same math:
- :meth:`evaluate` runs under autograd (used for continuous actions, and as the reference in
  tests);
- :meth:`forward_train` + :meth:`backward` compute the gradient analytically from the gradient of
  the loss with respect to the network outputs (see ``ppo/loss.py``). Without autograd's graph
  bookkeeping an update issues far fewer operations, which is what dominates at small batches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class TrainCache:
    """Activations of one training forward pass, kept for :meth:`MLPActorCritic.backward`."""

    obs: torch.Tensor  # (B, obs_dim)
    hidden: list[torch.Tensor]  # each (2, B, width): tanh outputs of each stacked layer


class MLPActorCritic(nn.Module):
    """Stacked actor-critic MLP for a flat observation and Discrete or Box actions.

    Args:
        obs_dim: observation size.
        action_dim: number of discrete actions, or size of a continuous action.
        hidden_sizes: widths of the hidden layers (shared by actor and critic).
        continuous: Gaussian policy with a state-independent log-std instead of categorical.
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden_sizes: tuple[int, ...] = (64, 64),
        continuous: bool = False,
    ) -> None:
        super().__init__()
        self.obs_dim = obs_dim
        self.action_dim = action_dim
        self.hidden_sizes = tuple(hidden_sizes)
        self.continuous = continuous
        self._shapes: list[tuple[str, tuple[int, ...]]] = []
        dims = (obs_dim, *self.hidden_sizes)
        for i in range(len(self.hidden_sizes)):
            self._shapes.append((f"w{i}", (2, dims[i], dims[i + 1])))
            self._shapes.append((f"b{i}", (2, 1, dims[i + 1])))
        last = self.hidden_sizes[-1]
        self._shapes += [
            ("actor_w", (last, action_dim)),
            ("actor_b", (action_dim,)),
            ("critic_w", (last, 1)),
            ("critic_b", (1,)),
        ]
        if continuous:
            self._shapes.append(("actor_logstd", (action_dim,)))
        numel = sum(math.prod(s) for _, s in self._shapes)
        self.flat = nn.Parameter(torch.zeros(numel))
        self.flat.grad = torch.zeros(numel)
        self._init_weights()

    # -- parameter views -----------------------------------------------------------------
    def views(self, source: torch.Tensor) -> dict[str, torch.Tensor]:
        """Named views of ``source`` (the flat parameter, its grad, or a detached copy)."""
        out: dict[str, torch.Tensor] = {}
        offset = 0
        for name, shape in self._shapes:
            n = math.prod(shape)
            out[name] = source[offset : offset + n].view(shape)
            offset += n
        return out

    def _apply(self, fn, recurse=True):  # type: ignore[no-untyped-def]
        # Moving the module (.to(device)) replaces `flat`; rebuild the cached views after.
        super()._apply(fn, recurse)
        if self.flat.grad is None or self.flat.grad.device != self.flat.device:
            self.flat.grad = torch.zeros_like(self.flat)
        self._p = self.views(self.flat.detach())
        self._g = self.views(self.flat.grad)
        return self

    def _init_weights(self) -> None:
        p = self.views(self.flat.detach())
        for i in range(len(self.hidden_sizes)):
            for k in range(2):
                w = torch.empty(p[f"w{i}"].shape[2], p[f"w{i}"].shape[1])
                nn.init.orthogonal_(w, math.sqrt(2))
                p[f"w{i}"][k].copy_(w.T)
        for name, gain in (("actor_w", 0.01), ("critic_w", 1.0)):
            w = torch.empty(p[name].shape[1], p[name].shape[0])
            nn.init.orthogonal_(w, gain)
            p[name].copy_(w.T)
        self._p = p
        self._g = self.views(self.flat.grad)

    # -- forward passes ------------------------------------------------------------------
    def _trunk(self, obs: torch.Tensor, p: dict[str, torch.Tensor], inplace: bool) -> list:
        x = obs.unsqueeze(0).expand(2, *obs.shape)
        hidden = []
        for i in range(len(self.hidden_sizes)):
            z = torch.baddbmm(p[f"b{i}"], x, p[f"w{i}"])
            x = z.tanh_() if inplace else z.tanh()
            hidden.append(x)
        return hidden

    def _heads(
        self, h: torch.Tensor, p: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        actor_out = torch.addmm(p["actor_b"], h[0], p["actor_w"])
        value = torch.addmm(p["critic_b"], h[1], p["critic_w"]).view(-1)
        return actor_out, value

    @torch.no_grad()
    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Critic value of each observation, shape (B,)."""
        x = obs
        for i in range(len(self.hidden_sizes)):
            x = torch.addmm(self._p[f"b{i}"][1], x, self._p[f"w{i}"][1]).tanh_()
        return torch.addmm(self._p["critic_b"], x, self._p["critic_w"]).view(-1)

    @torch.no_grad()
    def act(
        self, obs: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample actions for a batch of observations (B, obs_dim).

        Returns:
            actions (B,) int64 or (B, action_dim) float, their log-probabilities (B,), values (B,).
        """
        hidden = self._trunk(obs, self._p, inplace=True)
        actor_out, value = self._heads(hidden[-1], self._p)
        if self.continuous:
            std = self._p["actor_logstd"].exp()
            noise = torch.randn(actor_out.shape, generator=generator, device=obs.device)
            actions = actor_out + std * noise
            logprob = (
                -0.5 * noise.square() - self._p["actor_logstd"] - 0.5 * math.log(2 * math.pi)
            ).sum(-1)
            return actions, logprob, value
        logp = torch.log_softmax(actor_out, dim=-1)
        # Gumbel-max sampling: argmax(logp - log(E)), E ~ Exp(1), is an exact categorical sample
        # in three ops, without torch.multinomial's per-call overhead.
        e = torch.empty_like(logp).exponential_(generator=generator)
        actions = (logp - e.log_()).argmax(-1)
        logprob = logp.gather(1, actions.unsqueeze(1)).view(-1)
        return actions, logprob, value

    def evaluate(
        self, obs: torch.Tensor, actions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Log-probability, entropy and value of given actions, under autograd.

        Returns:
            newlogprob (B,), entropy (B,), value (B,); gradients flow into ``flat``.
        """
        p = self.views(self.flat)
        hidden = self._trunk(obs, p, inplace=False)
        actor_out, value = self._heads(hidden[-1], p)
        if self.continuous:
            logstd = p["actor_logstd"].expand_as(actor_out)
            dist = torch.distributions.Normal(actor_out, logstd.exp())
            return dist.log_prob(actions).sum(-1), dist.entropy().sum(-1), value
        dist = torch.distributions.Categorical(logits=actor_out)
        return dist.log_prob(actions), dist.entropy(), value

    @torch.no_grad()
    def forward_train(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, TrainCache]:
        """Logits (B, A) and values (B,) with the activations :meth:`backward` needs."""
        hidden = self._trunk(obs, self._p, inplace=True)
        logits, value = self._heads(hidden[-1], self._p)
        return logits, value, TrainCache(obs, hidden)

    @torch.no_grad()
    def backward(
        self, cache: TrainCache, grad_logits: torch.Tensor, grad_value: torch.Tensor
    ) -> None:
        """Write d(loss)/d(parameters) into ``flat.grad`` given d(loss)/d(outputs).

        Args:
            grad_logits: (B, A) gradient of the loss with respect to the actor's output.
            grad_value: (B,) gradient of the loss with respect to the critic's output.
        """
        p, g = self._p, self._g
        h_last = cache.hidden[-1]
        torch.mm(h_last[0].T, grad_logits, out=g["actor_w"])
        torch.sum(grad_logits, 0, out=g["actor_b"])
        gv = grad_value.unsqueeze(1)
        torch.mm(h_last[1].T, gv, out=g["critic_w"])
        torch.sum(gv, 0, out=g["critic_b"])
        # d loss / d h_last, stacked (2, B, width): actor part from the logits, critic from value.
        grad_h = torch.stack(
            (torch.mm(grad_logits, p["actor_w"].T), torch.mm(gv, p["critic_w"].T))
        )
        for i in reversed(range(len(self.hidden_sizes))):
            h = cache.hidden[i]
            # tanh'(z) = 1 - h^2:  dz = grad_h - grad_h * h * h
            dz = torch.addcmul(grad_h, grad_h * h, h, value=-1.0)
            below = cache.hidden[i - 1] if i > 0 else None
            if below is not None:
                torch.bmm(below.transpose(1, 2), dz, out=g[f"w{i}"])
            else:
                x_t = cache.obs.T.unsqueeze(0).expand(2, *cache.obs.T.shape)
                torch.bmm(x_t, dz, out=g[f"w{i}"])
            torch.sum(dz, 1, keepdim=True, out=g[f"b{i}"])
            if below is not None:
                grad_h = torch.bmm(dz, p[f"w{i}"].transpose(1, 2))
