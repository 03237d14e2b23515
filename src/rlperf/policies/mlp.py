"""Actor-critic MLP with actor and critic stacked so each layer is one batched matmul.

The network is the one of the PPO literature (and CleanRL's ``ppo.py``): separate actor and
critic, each ``obs -> 64 -> 64`` with Tanh, orthogonal init (gain sqrt(2) for hidden layers,
0.01 for the policy head, 1 for the value head), zero biases. Actor and critic have the same
hidden widths, so every layer is stored stacked, shape ``(2, in, out)`` (index 0 is the actor,
1 the critic), and evaluated for both with one ``baddbmm``. The output layer is stacked too: it
is ``(2, last, K)`` with ``K = action_dim``; the critic uses column 0 only. Its unused columns
start at zero, always get a zero gradient and so stay zero under Adam: they cost a few multiply-
adds per sample and save two matmuls and a concatenation per pass.

All parameters live in one flat tensor ``flat`` (and their gradients in ``flat.grad``): gradient
clipping is one norm over one tensor and Adam one fused kernel over one tensor. The layer
weights are views into it.

Where the time goes (CPU, AVX2): ``torch.tanh`` runs at ~3 ns per float, three times slower than
``torch.sigmoid``, and at 64x64 layers it was the largest single cost of a PPO update. The fast
paths compute ``tanh(z) = 2 * sigmoid(2 z) - 1``: the factor 2 is folded into the matmul's
alpha/beta, the rest is one in-place sigmoid and one fused add. The result differs from
``torch.tanh`` by at most ~1.2e-7 absolute (float32 rounding around sigmoid's 0.5).

Two ways to get gradients, the same math:
- :meth:`evaluate` runs under autograd with ``torch.tanh`` (used for continuous actions, and as
  the reference in tests);
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
        self.num_layers = len(self.hidden_sizes) + 1
        dims = (obs_dim, *self.hidden_sizes, action_dim)
        self._shapes: list[tuple[str, tuple[int, ...]]] = []
        for i in range(self.num_layers):
            self._shapes.append((f"w{i}", (2, dims[i], dims[i + 1])))
            self._shapes.append((f"b{i}", (2, 1, dims[i + 1])))
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

    def named_layers(self, source: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """Weights as ``nn.Linear`` would hold them: ``actor.0.weight`` is (out, in), etc.

        For loading into (or comparing with) a plain actor/critic of ``nn.Linear`` layers.
        """
        p = self.views(self.flat.detach() if source is None else source)
        out: dict[str, torch.Tensor] = {}
        for i in range(self.num_layers):
            for k, net in enumerate(("actor", "critic")):
                w, b = p[f"w{i}"][k], p[f"b{i}"][k, 0]
                if net == "critic" and i == self.num_layers - 1:
                    w, b = w[:, :1], b[:1]
                out[f"{net}.{2 * i}.weight"] = w.T
                out[f"{net}.{2 * i}.bias"] = b
        if self.continuous:
            out["actor_logstd"] = p["actor_logstd"]
        return out

    def _apply(self, fn, recurse=True):  # type: ignore[no-untyped-def]
        # Moving the module (.to(device)) replaces `flat`; rebuild the cached views after.
        super()._apply(fn, recurse)
        if self.flat.grad is None or self.flat.grad.device != self.flat.device:
            self.flat.grad = torch.zeros_like(self.flat)
        self._p = self.views(self.flat.detach())
        self._g = self.views(self.flat.grad)
        self._neg_one = torch.tensor(-1.0, device=self.flat.device)
        return self

    def _init_weights(self) -> None:
        p = self.views(self.flat.detach())
        last = self.num_layers - 1
        for i in range(self.num_layers):
            for k in range(2):
                w = p[f"w{i}"][k]
                if i < last:
                    gain = math.sqrt(2)
                elif k == 0:
                    gain = 0.01
                else:  # critic head: one real output column, the rest stays zero
                    w = w[:, :1]
                    gain = 1.0
                init = torch.empty(w.shape[1], w.shape[0])
                nn.init.orthogonal_(init, gain)
                w.copy_(init.T)
        self._p = p
        self._g = self.views(self.flat.grad)
        self._neg_one = torch.tensor(-1.0)

    # -- forward passes ------------------------------------------------------------------
    def _forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Stacked outputs (2, B, action_dim) and hidden activations, no autograd."""
        p = self._p
        x = obs.unsqueeze(0).expand(2, *obs.shape)
        hidden = []
        for i in range(self.num_layers - 1):
            # tanh(z) = 2 * sigmoid(2z) - 1, with 2z = 2*b + 2*(x @ w) from baddbmm itself.
            h = torch.baddbmm(p[f"b{i}"], x, p[f"w{i}"], beta=2.0, alpha=2.0).sigmoid_()
            x = torch.add(self._neg_one, h, alpha=2.0, out=h)
            hidden.append(x)
        last = self.num_layers - 1
        return torch.baddbmm(p[f"b{last}"], x, p[f"w{last}"]), hidden

    @torch.no_grad()
    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """Critic value of each observation, shape (B,)."""
        p, x = self._p, obs
        for i in range(self.num_layers - 1):
            x = torch.addmm(p[f"b{i}"][1], x, p[f"w{i}"][1]).tanh_()
        last = self.num_layers - 1
        return torch.addmm(p[f"b{last}"][1, :, :1], x, p[f"w{last}"][1, :, :1]).view(-1)

    @torch.no_grad()
    def act(
        self, obs: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample actions for a batch of observations (B, obs_dim).

        Returns:
            actions (B,) int64 or (B, action_dim) float, their log-probabilities (B,), values (B,).
        """
        out, _ = self._forward(obs)
        actor_out, value = out[0], out[1, :, 0]
        if self.continuous:
            logstd = self._p["actor_logstd"]
            noise = torch.randn(actor_out.shape, generator=generator, device=obs.device)
            actions = actor_out + logstd.exp() * noise
            logprob = (-0.5 * noise.square() - logstd - 0.5 * math.log(2 * math.pi)).sum(-1)
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
        """Log-probability, entropy and value of given actions, under autograd (torch.tanh).

        Returns:
            newlogprob (B,), entropy (B,), value (B,); gradients flow into ``flat``.
        """
        p = self.views(self.flat)
        x = obs.unsqueeze(0).expand(2, *obs.shape)
        for i in range(self.num_layers - 1):
            x = torch.baddbmm(p[f"b{i}"], x, p[f"w{i}"]).tanh()
        last = self.num_layers - 1
        out = torch.baddbmm(p[f"b{last}"], x, p[f"w{last}"])
        actor_out, value = out[0], out[1, :, 0]
        if self.continuous:
            logstd = p["actor_logstd"].expand_as(actor_out)
            dist = torch.distributions.Normal(actor_out, logstd.exp())
            return dist.log_prob(actions).sum(-1), dist.entropy().sum(-1), value
        dist = torch.distributions.Categorical(logits=actor_out)
        return dist.log_prob(actions), dist.entropy(), value

    @torch.no_grad()
    def forward_train(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, TrainCache]:
        """Logits (B, A) and values (B,) with the activations :meth:`backward` needs."""
        out, hidden = self._forward(obs)
        return out[0], out[1, :, 0], TrainCache(obs, hidden)

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
        n = grad_logits.shape[0]
        grad_out = self._grad_out_buffer(n, grad_logits)
        # Skip the copies when the loss already wrote into output_grad_views().
        if grad_logits.data_ptr() != grad_out.data_ptr():
            grad_out[0] = grad_logits
        if grad_value.data_ptr() != grad_out[1].data_ptr():
            grad_out[1, :, 0] = grad_value
        dz = grad_out
        for i in reversed(range(self.num_layers)):
            below = cache.hidden[i - 1] if i > 0 else cache.obs.unsqueeze(0).expand(2, n, -1)
            torch.bmm(below.transpose(1, 2), dz, out=g[f"w{i}"])
            torch.sum(dz, 1, keepdim=True, out=g[f"b{i}"])
            if i == 0:
                break
            grad_h = torch.bmm(dz, p[f"w{i}"].transpose(1, 2))
            # grad_h * (1 - h^2) in one fused kernel (tanh's derivative from its output).
            dz = torch.ops.aten.tanh_backward(grad_h, cache.hidden[i - 1])

    def output_grad_views(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Where :meth:`backward` keeps d(loss)/d(outputs) for a batch of ``n``: (n, A), (n,).

        A loss that writes its gradients straight into these saves two copies per update.
        """
        buf = self._grad_out_buffer(n, self.flat)
        return buf[0], buf[1, :, 0]

    def _grad_out_buffer(self, n: int, like: torch.Tensor) -> torch.Tensor:
        # Zero-initialised once per batch size: the critic's unused output columns must get a
        # zero gradient, and only the used entries are overwritten on each call.
        buf = getattr(self, "_grad_out", None)
        if buf is None or buf.shape[1] != n or buf.device != like.device or buf.dtype != like.dtype:
            buf = self._grad_out = torch.zeros(
                2, n, self.action_dim, device=like.device, dtype=like.dtype
            )
        return buf
