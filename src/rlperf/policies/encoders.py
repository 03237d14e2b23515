"""Observation encoders shared by the policies: an MLP for flat vectors, a CNN for images.

Image observations arrive as ``uint8`` ``(B, C, H, W)`` (the rollout buffer keeps them that
way: a quarter of the memory and of the host-to-device traffic of float32) and are scaled to
[0, 1] here, on the training device.
"""

from __future__ import annotations

import itertools
import math
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
        # The first convolution on the CPU as its space-to-depth equivalent: off (0) unless set
        # to ``fold_stride(self.convs[0])``; measured 1.07x on the Atari update, below the bar
        # for a default (docs/atari.md "Near the limit").
        self.fold = 0
        # On the CPU the frames go to the convolutions channels-last (NHWC), so oneDNN runs
        # every convolution and its gradients in NHWC: 1.17x on the Atari update, the first
        # convolution's weight gradient 2.6x (docs/atari.md "Near the limit"). The parameters
        # stay as they are; Flatten copies the last maps back to (C, H, W) order.
        self.channels_last = True

    def scale(self, obs: torch.Tensor) -> torch.Tensor:
        """The observation as the first convolution takes it: in the parameters' dtype, uint8
        scaled to [0, 1], on the CPU channels-last (``channels_last``), and where ``fold``
        applies (on the CPU) each ``s x s`` block of pixels folded into channels:
        ``(B, C*s*s, H/s, W/s)``, cropped to the rows and columns the convolution reads. One
        pass over the frames in each case."""
        dtype = cast(nn.Linear, self.fc[0]).weight.dtype
        s = self.fold if obs.is_cpu else 0
        nhwc = (self.channels_last and obs.is_cpu) or (
            obs.is_contiguous(memory_format=torch.channels_last) and not obs.is_contiguous()
        )
        fmt = torch.channels_last if nhwc else torch.contiguous_format
        if s:
            b, c, h, w = obs.shape
            k = cast(nn.Conv2d, self.convs[0]).kernel_size[0]
            hb, wb = (h - k) // s + k // s, (w - k) // s + k // s
            blocks = obs[:, :, : hb * s, : wb * s].reshape(b, c, hb, s, wb, s)
            x = torch.empty((b, c * s * s, hb, wb), dtype=dtype, memory_format=fmt)
            x.view(b, c, s, s, hb, wb).copy_(blocks.permute(0, 1, 3, 5, 2, 4))
        else:
            x = obs.to(dtype, memory_format=fmt if nhwc else torch.preserve_format)
        return x.mul_(1.0 / 255.0) if obs.dtype == torch.uint8 else x

    def first_conv(self, x: torch.Tensor) -> torch.Tensor:
        """The first convolution (before its ReLU) of :meth:`scale`'s output."""
        conv = cast(nn.Conv2d, self.convs[0])
        s = self.fold
        if not (s and x.is_cpu):
            return conv(x)
        out, c, k, _ = conv.weight.shape
        m = k // s  # the folded kernel: m x m blocks of s x s pixels
        weight = conv.weight.view(out, c, m, s, m, s).permute(0, 1, 3, 5, 2, 4)
        return F.conv2d(x, weight.reshape(out, c * s * s, m, m), conv.bias)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = self.first_conv(self.scale(obs))
        for layer in itertools.islice(self.convs, 1, None):  # its ReLU, the others, Flatten
            x = layer(x)
        return self.fc(x)

    infer = forward  # convolutions dominate; the module calls are noise here


def fold_stride(conv: nn.Conv2d) -> int:
    """``s`` where ``conv`` (square kernel ``k``, stride ``s > 1``, ``s`` divides ``k``, no padding,
    dilation or groups) equals a stride-1 convolution with ``k/s`` x ``k/s`` kernels over the
    image folded into ``s x s`` blocks ("space to depth"), else 0.

    The same products and sums (float rounding aside), but oneDNN's CPU kernels run the folded
    weight gradient faster: the Nature stack's first convolution (4 channels, 8x8/4) becomes 64
    channels, 2x2/1, its backward ~2x faster on this CPU and its forward ~1.3x slower
    (benchmarks/atari_limit.py, docs/atari.md "Near the limit"). The parameters keep their
    shape; the folded weight is a view, reshaped each call.
    """
    (k, kw), (s, sw) = conv.kernel_size, conv.stride
    plain = conv.padding == (0, 0) and conv.dilation == (1, 1) and conv.groups == 1
    return s if plain and k == kw and s == sw and s > 1 and k % s == 0 else 0


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
