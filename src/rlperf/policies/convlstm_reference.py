"""The ConvLSTM actor-critic of :mod:`rlperf.policies.convlstm`, written the obvious way.

The same network and the same function of the same parameters, as one would first write it:
the fence channel concatenated to every frame, one ``nn.Conv2d`` per gate and per input (the
encoded input, the layer below's h, the layer's own h, the broadcast pooled vector), the pooled
vector actually broadcast over the grid and convolved, and every stage run step by step, the
encoder included. No fusion, no folding, no sections.

It is the slow, obviously-right side of the tests (:func:`load_from_fast` copies a fast
policy's parameters into it; outputs and gradients must match) and the eager baseline of
``benchmarks/convlstm_speed.py`` (registered there as a policy kind, not in the default
registry).
"""

from __future__ import annotations

from typing import cast

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from rlperf.envs.spec import EnvSpec
from rlperf.policies import distributions
from rlperf.policies.base import ActorCritic, State
from rlperf.policies.convlstm import ConvLSTMActorCritic, encoder_stride

GATES = ("i", "f", "g", "o")


def _gate_convs(channels: int, bias: bool) -> nn.ModuleList:
    return nn.ModuleList(nn.Conv2d(channels, channels, 3, padding=1, bias=bias) for _ in GATES)


class ReferenceConvLSTMCell(nn.Module):
    """One ConvLSTM layer: gate = sum of four 3x3 convs (input, h below, own h, pooled own h)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.input_convs = _gate_convs(channels, bias=True)
        self.below_convs = _gate_convs(channels, bias=False)
        self.hidden_convs = _gate_convs(channels, bias=False)
        self.pool_convs = _gate_convs(channels, bias=False)
        self.pool_project = nn.Linear(2 * channels, channels, bias=False)

    def forward(
        self, x: torch.Tensor, below: torch.Tensor, h: torch.Tensor, c: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        mean = h.mean(dim=(2, 3))
        peak = h.amax(dim=(2, 3))
        pooled = self.pool_project(torch.cat([mean, peak], dim=1))
        pooled_map = pooled[:, :, None, None].expand_as(h)
        pre = []
        for k in range(len(GATES)):
            pre.append(
                self.input_convs[k](x)
                + self.below_convs[k](below)
                + self.hidden_convs[k](h)
                + self.pool_convs[k](pooled_map)
            )
        i = torch.sigmoid(pre[0])
        f = torch.sigmoid(pre[1])
        g = torch.tanh(pre[2])
        o = torch.sigmoid(pre[3])
        c = f * c + i * g
        h = o * torch.tanh(c)
        return h, c


class ReferenceConvLSTMActorCritic(ActorCritic):
    """Args as :class:`~rlperf.policies.convlstm.ConvLSTMActorCritic` (no sections)."""

    recurrent = True

    def __init__(
        self,
        spec: EnvSpec,
        channels: int = 32,
        layers: int = 2,
        ticks: int = 1,
        features: int = 256,
        head: str = "pool",
    ) -> None:
        super().__init__(spec)
        c_in, height, width = spec.obs_shape
        self.head = head
        self.stride = encoder_stride(height, width)
        self.grid = (height // self.stride, width // self.stride)
        self.channels, self.ticks = channels, ticks
        self.encoder = nn.Sequential(
            nn.Conv2d(c_in + 1, channels, self.stride, stride=self.stride),
            nn.ReLU(),
            nn.Conv2d(channels, channels, 3, padding=1),
            nn.ReLU(),
        )
        self.cells = nn.ModuleList(ReferenceConvLSTMCell(channels) for _ in range(layers))
        head_width = 4 * channels if head == "pool" else channels * self.grid[0] * self.grid[1]
        self.projection = nn.Linear(head_width, features)
        self.actor = nn.Linear(features, spec.action.num_outputs)
        self.critic = nn.Linear(features, 1)
        k = spec.action.num_outputs
        self.log_std = None if spec.action.discrete else nn.Parameter(torch.zeros(k))

    def logstd(self) -> torch.Tensor | None:
        return self.log_std

    def initial_state(self, num_envs: int) -> State:
        weight = self.critic.weight
        shape = (num_envs, self.channels, *self.grid)
        return tuple(weight.new_zeros(shape) for _ in range(2 * len(self.cells)))

    def fence(self, obs: torch.Tensor) -> torch.Tensor:
        """(B, 1, H, W): 1 on every pixel of a border cell of the core grid."""
        b, _, height, width = obs.shape
        s, (grid_h, grid_w) = self.stride, self.grid
        fence = torch.zeros(height, width, dtype=torch.float32, device=obs.device)
        fence[:s, :] = 1.0
        fence[(grid_h - 1) * s :, :] = 1.0
        fence[:, :s] = 1.0
        fence[:, (grid_w - 1) * s :] = 1.0
        return fence.expand(b, 1, height, width)

    def step(
        self, obs: torch.Tensor, state: State, done: torch.Tensor | None
    ) -> tuple[torch.Tensor, State]:
        """Features (B, features) of one step and the next state."""
        x = obs.to(self.critic.weight.dtype)
        if obs.dtype == torch.uint8:
            x = x / 255.0
        x = torch.cat([x, self.fence(obs).to(x.dtype)], dim=1)
        encoded = self.encoder(x)
        hs = list(state[0::2])
        cs = list(state[1::2])
        if done is not None:
            keep = (1.0 - done).view(-1, 1, 1, 1)
            hs = [h * keep for h in hs]
            cs = [c * keep for c in cs]
        for _ in range(self.ticks):
            below = hs[-1]  # layer 0 reads the top layer's h of the previous tick
            for layer, cell in enumerate(self.cells):
                hs[layer], cs[layer] = cell(encoded, below, hs[layer], cs[layer])
                below = hs[layer]
        top = hs[-1]
        if self.head == "pool":
            head_in = torch.cat(
                [top.mean(dim=(2, 3)), encoded.mean(dim=(2, 3)),
                 top.amax(dim=(2, 3)), encoded.amax(dim=(2, 3))],
                dim=1,
            )  # fmt: skip
        else:
            head_in = (top + encoded).flatten(1)
        features = F.relu(self.projection(head_in))
        new_state: list[torch.Tensor] = []
        for h, c in zip(hs, cs, strict=True):
            new_state += [h, c]
        return features, tuple(new_state)

    @torch.no_grad()
    def act(
        self,
        obs: torch.Tensor,
        state: State,
        done: torch.Tensor | None,
        action_mask: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, State]:
        features, state = self.step(obs, state, done)
        actions, logprob = distributions.sample(
            self.spec.action, self.actor(features), action_mask, self.log_std, generator
        )
        return actions, logprob, self.critic(features).view(-1), state

    @torch.no_grad()
    def value(self, obs: torch.Tensor, state: State, done: torch.Tensor | None) -> torch.Tensor:
        features, _ = self.step(obs, state, done)
        return self.critic(features).view(-1)

    def evaluate(
        self,
        obs_seq: torch.Tensor,
        actions_seq: torch.Tensor,
        state0: State,
        dones_seq: torch.Tensor | None,
        mask_seq: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        state = state0
        logprobs, entropies, values = [], [], []
        for t in range(obs_seq.shape[0]):
            done = None if dones_seq is None else dones_seq[t]
            features, state = self.step(obs_seq[t], state, done)
            mask = None if mask_seq is None else mask_seq[t]
            logprob, entropy = distributions.log_prob_entropy(
                self.spec.action, self.actor(features), actions_seq[t], mask, self.log_std
            )
            logprobs.append(logprob)
            entropies.append(entropy)
            values.append(self.critic(features).view(-1))
        return torch.stack(logprobs), torch.stack(entropies), torch.stack(values)


def parameter_map(
    fast: ConvLSTMActorCritic,
) -> dict[str, tuple[torch.Tensor, tuple[int | slice, ...]]]:
    """Each reference parameter's name -> (the fast policy's parameter, index into it): the
    fused weights split back into one conv per gate and input. Used to load parameters and to
    compare gradients."""
    ch, k = fast.channels, fast.out.num_outputs
    whole = (slice(None),)
    head = fast.out.linear
    # The fast policy's convolutions are all built with a bias.
    embed_bias, conv_bias, skip_bias = (
        cast(torch.Tensor, conv.bias) for conv in (fast.embed, fast.conv, fast.skip)
    )
    mapping: dict[str, tuple[torch.Tensor, tuple[int | slice, ...]]] = {
        "encoder.0.weight": (fast.embed.weight, whole),
        "encoder.0.bias": (embed_bias, whole),
        "encoder.2.weight": (fast.conv.weight, whole),
        "encoder.2.bias": (conv_bias, whole),
        "projection.weight": (fast.proj.weight, whole),
        "projection.bias": (fast.proj.bias, whole),
        "actor.weight": (head.weight, (slice(0, k),)),
        "actor.bias": (head.bias, (slice(0, k),)),
        "critic.weight": (head.weight, (slice(k, k + 1),)),
        "critic.bias": (head.bias, (slice(k, k + 1),)),
    }
    if fast.out.logstd is not None:
        mapping["log_std"] = (fast.out.logstd, whole)
    for layer in range(fast.layers):
        cell = f"cells.{layer}."
        for g in range(len(GATES)):
            rows = (slice(layer * 4 * ch + g * ch, layer * 4 * ch + (g + 1) * ch),)
            gate = slice(g * ch, (g + 1) * ch)
            mapping[f"{cell}input_convs.{g}.weight"] = (fast.skip.weight, rows)
            mapping[f"{cell}input_convs.{g}.bias"] = (skip_bias, rows)
            mapping[f"{cell}below_convs.{g}.weight"] = (
                fast.hidden_weight,
                (layer, gate, slice(0, ch)),
            )
            mapping[f"{cell}hidden_convs.{g}.weight"] = (
                fast.hidden_weight,
                (layer, gate, slice(ch, 2 * ch)),
            )
            mapping[f"{cell}pool_convs.{g}.weight"] = (fast.inject_weight, (layer, gate))
        mapping[f"{cell}pool_project.weight"] = (fast.pool_weight, (layer,))
    return mapping


@torch.no_grad()
def load_from_fast(reference: ReferenceConvLSTMActorCritic, fast: ConvLSTMActorCritic) -> None:
    """Copy ``fast``'s parameters into ``reference`` (same sizes): both then compute the same
    function."""
    mapping = parameter_map(fast)
    names = {name for name, _ in reference.named_parameters()}
    if names != set(mapping):
        raise ValueError(f"parameters differ: {sorted(names ^ set(mapping))}")
    for name, param in reference.named_parameters():
        source, index = mapping[name]
        param.copy_(source[index])


def reference_from(fast: ConvLSTMActorCritic) -> ReferenceConvLSTMActorCritic:
    """A reference policy with ``fast``'s sizes, dtype, device and parameters."""
    weight = fast.skip.weight
    reference = ReferenceConvLSTMActorCritic(
        fast.spec, fast.channels, fast.layers, fast.ticks, fast.proj.out_features, fast.head
    ).to(device=weight.device, dtype=weight.dtype)
    load_from_fast(reference, fast)
    return reference
