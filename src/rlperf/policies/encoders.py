"""Observation encoders shared by the policies: an MLP for flat vectors, a CNN for images.

Image observations arrive as ``uint8`` ``(B, C, H, W)`` (the rollout buffer keeps them that
way: a quarter of the memory and of the host-to-device traffic of float32) and are scaled to
[0, 1] here, on the training device.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

from rlperf.envs.spec import EnvSpec
from rlperf.policies.base import orthogonal_

# Images at least this large get the Nature-DQN stack (8x8/4, 4x4/2, 3x3/1); smaller ones
# (grid windows, small boards) get 3x3 convolutions that keep every cell.
NATURE_MIN_SIZE = 36


class MLPEncoder(nn.Sequential):
    """``Linear + Tanh`` per hidden width; ``features`` is the last width."""

    def __init__(self, in_dim: int, hidden_sizes: tuple[int, ...]) -> None:
        layers: list[nn.Module] = []
        for width in hidden_sizes:
            layers += [orthogonal_(nn.Linear(in_dim, width), math.sqrt(2)), nn.Tanh()]
            in_dim = width
        super().__init__(*layers)
        self.features = in_dim
        self.linears = [m for m in layers if isinstance(m, nn.Linear)]

    def _input(self, obs: torch.Tensor) -> torch.Tensor:
        # Without layers (``hidden_sizes=()``) the observation goes on as it is.
        x = obs.flatten(1)
        return x.to(self.linears[0].weight.dtype) if self.linears else x

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return super().forward(self._input(obs))

    @torch.no_grad()
    def infer(self, obs: torch.Tensor) -> torch.Tensor:
        """:meth:`forward` without autograd or module-call overhead (one rollout step: the
        ``nn.Sequential`` calls cost more than the 64-wide matmuls themselves)."""
        x = self._input(obs)
        for linear in self.linears:
            x = torch.addmm(linear.bias, x, linear.weight.T).tanh_()
        return x


class CNNEncoder(nn.Module):
    """Convolutions + ReLU, flattened, then one ``Linear + ReLU`` to ``features`` units.

    Args:
        obs_shape: ``(C, H, W)``.
        channels: output channels of each convolution (3 for the Nature stack; any number of
            3x3 layers for small images).
        features: width of the final linear layer.
    """

    def __init__(
        self, obs_shape: tuple[int, ...], channels: tuple[int, ...], features: int
    ) -> None:
        super().__init__()
        c, h, w = obs_shape
        convs: list[nn.Module] = []
        if min(h, w) >= NATURE_MIN_SIZE:
            if len(channels) != 3:
                raise ValueError(f"the image CNN takes 3 conv layers, got channels {channels}")
            geometry: tuple[tuple[int, int, int], ...] = ((8, 4, 0), (4, 2, 0), (3, 1, 0))
        else:
            geometry = tuple((3, 1, 1) for _ in channels)
        for out, (k, stride, pad) in zip(channels, geometry, strict=True):
            convs += [orthogonal_(nn.Conv2d(c, out, k, stride, pad), math.sqrt(2)), nn.ReLU()]
            c = out
        self.convs = nn.Sequential(*convs, nn.Flatten())
        with torch.no_grad():
            flat = self.convs(torch.zeros(1, *obs_shape)).shape[1]
        self.fc = nn.Sequential(orthogonal_(nn.Linear(flat, features), math.sqrt(2)), nn.ReLU())
        self.features = features
        # On the CPU the Nature stack's frames go to the convolutions channels-last (NHWC), so
        # oneDNN runs every convolution and its gradients in NHWC: 1.19x on the Atari update,
        # the first convolution's weight gradient 2.3x (docs/atari.md "Near the limit"). The
        # small 3x3 stacks stay NCHW: NHWC measured 0.97x on the grid preset's update, 0.95x on
        # robots', 1.01x on catch's. The parameters keep their layout; Flatten copies the last
        # maps back to (C, H, W) order.
        self.channels_last = min(h, w) >= NATURE_MIN_SIZE
        # In acting(): each convolution with its channels-last filters.
        self._acting: list[tuple[nn.Conv2d, torch.Tensor]] | None = None

    def scale(self, obs: torch.Tensor) -> torch.Tensor:
        """The observation as the first convolution takes it: in the parameters' dtype, uint8
        scaled to [0, 1], and on the CPU channels-last where :attr:`channels_last` (one pass
        over the frames)."""
        dtype = cast(nn.Linear, self.fc[0]).weight.dtype
        if self.channels_last and obs.is_cpu:
            # Permuted while still uint8 (a quarter of the bytes), then converted in place
            # order: ~20% less than one converting, permuting copy.
            obs = obs.contiguous(memory_format=torch.channels_last)
        x = obs.to(dtype)
        return x.mul_(1.0 / 255.0) if obs.dtype == torch.uint8 else x

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = self.scale(obs)
        if self._acting is not None and x.is_cpu and not torch.is_grad_enabled():
            return self._forward_acting(x)
        return self.fc(self.convs(x))

    infer = forward  # convolutions dominate; the module calls are noise here

    @contextlib.contextmanager
    def acting(self) -> Iterator[None]:
        """A stretch of forwards without autograd and with unchanged parameters (the policy's
        ``acting()``, the trainer's rollout): on the CPU with :attr:`channels_last`, the
        filters are copied to channels-last once for the stretch. Given NCHW filters, oneDNN
        copies each on every call: 6 copies, ~0.14 ms of a 1.4 ms forward of 4 frames on one
        thread. The parameters keep their layout (their gradients' layout contract,
        checkpoints); a stretch inside another is the outer one."""
        if self._acting is not None or not self.channels_last:
            yield
            return
        self._acting = []
        try:
            yield
        finally:
            self._acting = None

    def _forward_acting(self, x: torch.Tensor) -> torch.Tensor:
        layers = cast(list[tuple[nn.Conv2d, torch.Tensor]], self._acting)
        if not layers:  # the stretch's first forward
            layers += [(m, m.weight.detach().contiguous(memory_format=torch.channels_last))
                       for m in self.convs if isinstance(m, nn.Conv2d)]  # fmt: skip
        for conv, w in layers:
            x = F.conv2d(x, w, conv.bias, conv.stride, conv.padding).relu_()
        return self.fc(x.flatten(1))


def make_encoder(
    spec: EnvSpec,
    hidden_sizes: tuple[int, ...],
    cnn_channels: tuple[int, ...],
    cnn_features: int,
) -> MLPEncoder | CNNEncoder:
    """A CNN for (C, H, W) observations, an MLP for flat ones."""
    if spec.image_obs:
        return CNNEncoder(spec.obs_shape, cnn_channels, cnn_features)
    return MLPEncoder(math.prod(spec.obs_shape), hidden_sizes)
