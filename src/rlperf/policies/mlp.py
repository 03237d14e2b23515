"""Actor-critic MLP with actor and critic stacked so each layer is one batched matmul.

The network is the one of the PPO literature (and CleanRL's ``ppo.py``): separate actor and
critic, each ``obs -> 64 -> 64`` with Tanh, orthogonal init (gain sqrt(2) for hidden layers,
0.01 for the policy head, 1 for the value head), zero biases. Actor and critic have the same
hidden widths, so every hidden layer is stored stacked, shape ``(2, in, out)`` (index 0 is the
actor, 1 the critic), and evaluated for both with one ``baddbmm``. The output layer is stacked
too, and stored transposed, ``(2, K, last)`` with ``K = action_dim`` (bias ``(2, K, 1)``), because
it is evaluated transposed (see :meth:`MLPActorCritic._forward`); the critic uses row 0 only. Its
unused rows start at zero, always get a zero gradient and so stay zero under Adam: they cost a
few multiply-adds per sample and save two matmuls and a concatenation per pass.

All parameters live in one flat tensor ``flat`` (and their gradients in ``flat.grad``): gradient
clipping is one norm over one tensor and Adam one fused kernel over one tensor. The layer
weights are views into it.

Where the time goes (CPU, AVX2): ``torch.tanh`` runs at ~3 ns per float, three times slower than
``torch.sigmoid``, and at 64x64 layers it was the largest single cost of a PPO update. The fast
paths compute ``tanh(z) = 2 * sigmoid(2 z) - 1``: the factor 2 is folded into the matmul's
alpha/beta, the rest is one in-place sigmoid and one fused add. The result differs from
``torch.tanh`` by at most ~1.2e-7 absolute (float32 rounding around sigmoid's 0.5).

It implements the policy protocol of ``policies/base.py`` (feed-forward: the state is ``()``)
and, for one unmasked categorical action or a Box action (a diagonal Gaussian with a
state-independent log-std), its :class:`~rlperf.policies.base.AnalyticPolicy`.
Two ways to get gradients, the same math:
- :meth:`evaluate` runs under autograd with ``torch.tanh`` (used for MultiDiscrete actions,
  masked actions, bf16 autocast and ``--compile``, and as the reference in tests);
- :meth:`forward_train` + :meth:`backward` (the analytic path) compute the gradient from the
  gradient of the loss with respect to the network outputs (see ``ppo/loss.py``). Without
  autograd's graph bookkeeping an update issues far fewer operations, which is what dominates
  at small batches.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch
from torch import nn

from rlperf.envs.spec import ActionSpec, EnvSpec
from rlperf.policies import distributions
from rlperf.policies.base import FeedForwardActorCritic, State, clip_grad_norm
from rlperf.policies.split_linear import batched_linear, split_block_rows, weight_grad


@dataclass
class Workspace:
    """Buffers for one batch size, allocated once and reused by every pass.

    Why: a (2, 8192, 64) float tensor is 4 MiB, above glibc's mmap threshold, so a fresh one per
    op is a fresh mapping whose first touch page-faults: at 1024 envs x 32 steps that doubled
    the time of an update (forward 8.3 -> 3.9 ms, backward 11.0 -> 6.0 ms per 8192 samples, 2
    threads, measured with benchmarks reusing memory vs not).
    """

    hidden: list[torch.Tensor]  # (2, B, width) per hidden layer: tanh outputs
    out_t: torch.Tensor  # (2, action_dim, B): actor outputs, critic value in row 0
    grad_out_t: torch.Tensor  # (2, action_dim, B): zero except what the loss writes
    grad_h: list[torch.Tensor]  # (2, B, width) per hidden layer: d loss / d h, then d / d z
    # Rows per block of the weight gradients' reduction (policies/split_linear.py): 0, one
    # GEMM, except for long minibatches on CUDA.
    split_rows: int = 0


@dataclass
class TrainCache:
    """One training forward pass, kept for :meth:`MLPActorCritic.backward`: its input and the
    workspace holding its activations (``ws.hidden``) and output gradients (``ws.grad_out_t``)."""

    obs: torch.Tensor  # (B, obs_dim)
    ws: Workspace


MAX_WORKSPACES = 4


class MLPActorCritic(FeedForwardActorCritic):
    """Stacked actor-critic MLP for flat observations; any action space of ``EnvSpec``.

    Args:
        spec: the environment's spec (flat observations).
        hidden_sizes: widths of the hidden layers (shared by actor and critic).
    """

    def __init__(self, spec: EnvSpec, hidden_sizes: tuple[int, ...] = (64, 64)) -> None:
        super().__init__(spec)
        obs_dim = int(np.prod(spec.obs_shape))
        action_dim = spec.action.num_outputs
        continuous = not spec.action.discrete
        self.obs_dim = obs_dim
        self.action_dim = action_dim
        self.hidden_sizes = tuple(hidden_sizes)
        self.continuous = continuous
        # The closed-form head gradients (ppo/loss.py): one unmasked categorical, or the
        # diagonal Gaussian of a Box action.
        self._analytic = spec.action.kind in ("discrete", "box") and not spec.has_mask
        self.num_layers = len(self.hidden_sizes) + 1
        dims = (obs_dim, *self.hidden_sizes, action_dim)
        self._shapes: list[tuple[str, tuple[int, ...]]] = []
        for i in range(self.num_layers - 1):
            self._shapes.append((f"w{i}", (2, dims[i], dims[i + 1])))
            self._shapes.append((f"b{i}", (2, 1, dims[i + 1])))
        last = self.num_layers - 1  # the output layer, stored transposed: (2, out, in)
        self._shapes.append((f"w{last}", (2, action_dim, dims[last])))
        self._shapes.append((f"b{last}", (2, action_dim, 1)))
        if continuous:
            self._shapes.append(("actor_logstd", (action_dim,)))
        numel = sum(math.prod(s) for _, s in self._shapes)
        self.flat = nn.Parameter(torch.zeros(numel))
        self.flat.grad = torch.zeros(numel)
        self._workspaces: dict[tuple, Workspace] = {}
        self._init_weights()

    @staticmethod
    def from_sizes(
        obs_dim: int,
        action_dim: int,
        hidden_sizes: tuple[int, ...] = (64, 64),
        continuous: bool = False,
    ) -> MLPActorCritic:
        """An MLP for a flat ``obs_dim`` observation and Discrete(action_dim) or a Box action."""
        if continuous:
            action = ActionSpec("box", (), action_dim, (-1.0,) * action_dim, (1.0,) * action_dim)
        else:
            action = ActionSpec("discrete", (action_dim,), 1)
        spec = EnvSpec(1, (obs_dim,), np.dtype(np.float32), action)
        return MLPActorCritic(spec, hidden_sizes)

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
        last = self.num_layers - 1
        out: dict[str, torch.Tensor] = {}
        for i in range(self.num_layers):
            for k, net in enumerate(("actor", "critic")):
                if i < last:
                    w, b = p[f"w{i}"][k].T, p[f"b{i}"][k, 0]
                else:  # already (out, in); the critic's value is row 0
                    w, b = p[f"w{i}"][k], p[f"b{i}"][k, :, 0]
                    if net == "critic":
                        w, b = w[:1], b[:1]
                out[f"{net}.{2 * i}.weight"] = w
                out[f"{net}.{2 * i}.bias"] = b
        if self.continuous:
            out["actor_logstd"] = p["actor_logstd"]
        return out

    @property
    def analytic(self) -> bool:
        return self._analytic

    def _apply(
        self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True
    ) -> MLPActorCritic:
        # Moving the module (.to(device)) replaces `flat`; rebuild the cached views after.
        super()._apply(fn, recurse)
        if self.flat.grad is None or self.flat.grad.device != self.flat.device:
            self.flat.grad = torch.zeros_like(self.flat)
        self._bind_views()
        return self

    def _bind_views(self) -> None:
        """Cache the parameter/gradient views and constants the no-grad passes use."""
        self._p = self.views(self.flat.detach())
        self._g = self.views(cast(torch.Tensor, self.flat.grad))  # _apply made it
        self._neg_one = torch.tensor(-1.0, device=self.flat.device, dtype=self.flat.dtype)
        self._dtype = self.flat.dtype
        self._workspaces.clear()

    def _init_weights(self) -> None:
        last = self.num_layers - 1
        layers = self.named_layers()  # (out, in) views, as nn.Linear would hold them
        for i in range(self.num_layers):
            for net in ("actor", "critic"):
                gain = math.sqrt(2) if i < last else (0.01 if net == "actor" else 1.0)
                w = layers[f"{net}.{2 * i}.weight"]
                init = torch.empty(w.shape)
                nn.init.orthogonal_(init, gain)
                w.copy_(init)
        self._bind_views()

    # -- forward passes ------------------------------------------------------------------
    def workspace(self, n: int) -> Workspace:
        """The reusable buffers for batch size ``n`` (created on first use)."""
        flat = self.flat
        key = (n, flat.dtype, flat.device)
        ws = self._workspaces.get(key)
        if ws is None:
            if len(self._workspaces) >= MAX_WORKSPACES:  # sizes keep changing: don't hoard
                self._workspaces.clear()

            def new(*shape: int) -> torch.Tensor:
                # Normal tensors even when first needed inside inference_mode (act() during a
                # rollout): the same batch size may later train, and inference tensors cannot
                # be written in place outside inference mode.
                with torch.inference_mode(False):
                    return torch.zeros(*shape, dtype=flat.dtype, device=flat.device)

            widths = self.hidden_sizes
            ws = self._workspaces[key] = Workspace(
                hidden=[new(2, n, w) for w in widths],
                out_t=new(2, self.action_dim, n),
                grad_out_t=new(2, self.action_dim, n),
                grad_h=[new(2, n, w) for w in widths],
                split_rows=split_block_rows(n, flat.device),
            )
        return ws

    def _forward(
        self, obs: torch.Tensor, ws: Workspace, out_t: torch.Tensor | None
    ) -> torch.Tensor:
        """Stacked outputs, transposed, (2, action_dim, B) into ``out_t``; activations into
        ``ws.hidden``.

        The output layer is evaluated transposed, ``W^T @ h^T``, with ``W^T`` stored
        contiguous: with only action_dim (2 for CartPole) outputs, ``h @ W`` is a skinny matmul
        that MKL runs slowly, and so is ``W^T @ h^T`` with ``W^T`` a transposed view (B=8192,
        2 threads: 0.68 and 0.44 ms, against 0.15 ms with ``W^T`` contiguous). The transposed
        result makes the value row contiguous and the logits a strided (B, A) view.
        """
        p = self._p
        x = obs.unsqueeze(0).expand(2, *obs.shape)
        for i, h in enumerate(ws.hidden):
            # tanh(z) = 2 * sigmoid(2z) - 1, with 2z = 2*b + 2*(x @ w) from baddbmm itself.
            torch.baddbmm(p[f"b{i}"], x, p[f"w{i}"], beta=2.0, alpha=2.0, out=h).sigmoid_()
            x = torch.add(self._neg_one, h, alpha=2.0, out=h)
        last = self.num_layers - 1
        return torch.baddbmm(p[f"b{last}"], p[f"w{last}"], x.transpose(1, 2), out=out_t)

    def _as_float(self, obs: torch.Tensor) -> torch.Tensor:
        """Observations in the parameters' dtype (uint8 or float64 ones are converted)."""
        dtype = self._dtype
        return obs if obs.dtype == dtype else obs.to(dtype)

    @torch.no_grad()
    def value(
        self, obs: torch.Tensor, state: State = (), done: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Critic value of each observation (B, obs_dim), shape (B,)."""
        p, x = self._p, self._as_float(obs)
        for i in range(self.num_layers - 1):
            x = torch.addmm(p[f"b{i}"][1], x, p[f"w{i}"][1]).tanh_()
        last = self.num_layers - 1
        return torch.addmm(p[f"b{last}"][1, :1, 0], x, p[f"w{last}"][1, :1].T).view(-1)

    @torch.no_grad()
    def act(
        self,
        obs: torch.Tensor,
        state: State = (),
        done: torch.Tensor | None = None,
        action_mask: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, State]:
        """Sample actions for a batch of observations (B, obs_dim).

        Returns:
            actions (B,) int64 / (B, k) int64 / (B, action_dim) float, their log-probabilities
            (B,), values (B,), and ``state`` unchanged.
        """
        obs = self._as_float(obs)
        # A fresh (small) output: callers keep values and log-probs across calls.
        out_t = self._forward(obs, self.workspace(obs.shape[0]), None)
        actor_out, value = out_t[0].T, out_t[1, 0]
        if self._analytic and not self.continuous and action_mask is None:
            # distributions.sample's ops for one unmasked categorical, without its dispatch:
            # CartPole's whole rollout step is ~0.1 ms, so a few microseconds show.
            logp = torch.log_softmax(actor_out, dim=-1)
            e = torch.empty_like(logp).exponential_(generator=generator)
            actions = (logp - e.log_()).argmax(-1)
            return actions, logp.gather(1, actions.unsqueeze(1)).view(-1), value, state
        actions, logprob = distributions.sample(
            self.spec.action, actor_out, action_mask, self.logstd(), generator
        )
        return actions, logprob, value, state

    def logstd(self) -> torch.Tensor | None:
        return self._p["actor_logstd"] if self.continuous else None

    def logstd_grad(self) -> torch.Tensor:
        """Where a Box action's log-std gradient lives in ``flat.grad`` (D,): the analytic
        update's loss writes it there, :meth:`backward` leaves it and clips it with the rest."""
        return self._g["actor_logstd"]

    def heads(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Actor output (B, action_dim) and value (B,) under autograd, with ``torch.tanh``."""
        p = self.views(self.flat)
        obs = self._as_float(obs)
        x = obs.unsqueeze(0).expand(2, *obs.shape)
        split = split_block_rows(obs.shape[0], obs.device)  # 0 (plain baddbmm) on the CPU
        for i in range(self.num_layers - 1):
            x = batched_linear(x, p[f"w{i}"], p[f"b{i}"], split).tanh()
        last = self.num_layers - 1
        w_t, b_t = p[f"w{last}"].transpose(1, 2), p[f"b{last}"].transpose(1, 2)
        out = batched_linear(x, w_t, b_t, split)
        return out[0], out[1, :, 0]

    def evaluate(
        self,
        obs_seq: torch.Tensor,
        actions_seq: torch.Tensor,
        state0: State = (),
        dones_seq: torch.Tensor | None = None,
        mask_seq: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Log-probability, entropy and value (T, B) of given actions, under autograd.

        The log-std (Box actions) is read from ``flat`` itself, so its gradient flows too.
        """
        t, b = obs_seq.shape[:2]
        out, value = self.heads(obs_seq.reshape(t * b, -1))
        logstd = self.views(self.flat)["actor_logstd"] if self.continuous else None
        mask = mask_seq.flatten(0, 1) if mask_seq is not None else None
        logprob, entropy = distributions.log_prob_entropy(
            self.spec.action, out, actions_seq.flatten(0, 1), mask, logstd
        )
        return logprob.view(t, b), entropy.view(t, b), value.view(t, b)

    # -- the analytic path (AnalyticPolicy, policies/base.py) ---------------------------------
    @torch.no_grad()
    def forward_train(
        self, obs_seq: torch.Tensor, state0: State = (), dones_seq: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, TrainCache]:
        """Logits (N, A) and values (N,) of observations (T, B, obs_dim), ``N = T * B`` rows,
        with the activations :meth:`backward` needs (``state0`` and ``dones_seq`` are unused:
        the MLP has no state).

        All three live in this batch size's workspace: valid until the next call with a batch
        of the same size.
        """
        obs = self._as_float(obs_seq.flatten(0, 1))
        ws = self.workspace(obs.shape[0])
        out_t = self._forward(obs, ws, ws.out_t)
        return out_t[0].T, out_t[1, 0], TrainCache(obs, ws)

    @staticmethod
    def output_grad_views(cache: TrainCache) -> tuple[torch.Tensor, torch.Tensor]:
        """Where :meth:`backward` reads d(loss)/d(outputs) for ``cache``'s batch: (N, A), (N,).

        Views of the workspace's transposed output gradient; the critic's unused output rows
        stay zero: nothing writes them.
        """
        grad_out_t = cache.ws.grad_out_t
        return grad_out_t[0].T, grad_out_t[1, 0]

    @torch.no_grad()
    def backward(self, cache: TrainCache, max_grad_norm: float = 0.0) -> None:
        """Write d(loss)/d(parameters) into ``flat.grad`` from the output gradients in
        :meth:`output_grad_views`, then clip it to ``max_grad_norm`` (if > 0)."""
        p, g, ws = self._p, self._g, cache.ws
        n = cache.obs.shape[0]
        grad_out_t = ws.grad_out_t
        last = self.num_layers - 1
        hidden = ws.hidden
        h_last = hidden[-1] if last > 0 else cache.obs.unsqueeze(0).expand(2, n, -1)
        split = ws.split_rows  # 0: each weight gradient one bmm, as on the CPU
        # Output layer, transposed as in _forward: dW^T = dOut^T @ h, db = sum over the batch.
        weight_grad(grad_out_t.transpose(1, 2), h_last, split, out=g[f"w{last}"])
        torch.sum(grad_out_t, 2, keepdim=True, out=g[f"b{last}"])
        if last > 0:
            grad_h = torch.bmm(grad_out_t.transpose(1, 2), p[f"w{last}"], out=ws.grad_h[last - 1])
        for i in reversed(range(last)):
            # grad_h * (1 - h^2), fused, in place: one buffer per layer keeps the working set
            # (and the memory traffic) small.
            dz = torch.ops.aten.tanh_backward.grad_input(grad_h, hidden[i], grad_input=grad_h)
            below = hidden[i - 1] if i > 0 else cache.obs.unsqueeze(0).expand(2, n, -1)
            weight_grad(below, dz, split, out=g[f"w{i}"])
            torch.sum(dz, 1, keepdim=True, out=g[f"b{i}"])
            if i > 0:
                grad_h = torch.bmm(dz, p[f"w{i}"].transpose(1, 2), out=ws.grad_h[i - 1])
        clip_grad_norm(cast(torch.Tensor, self.flat.grad), max_grad_norm)
