"""A convolutional actor-critic for ``(C, H, W)`` image observations (feed-forward).

Shared torso (``policies/encoders.py``: uint8 scaled to [0, 1] on the device, convolutions,
one linear layer), then the actor and critic heads as one matmul, as CleanRL's
``ppo_atari.py``. Trained by the autograd update.
"""

from __future__ import annotations

import contextlib

import torch

from rlperf.envs.spec import EnvSpec
from rlperf.policies.base import ActorCriticHeads, FeedForwardActorCritic
from rlperf.policies.encoders import CNNEncoder


class CNNActorCritic(FeedForwardActorCritic):
    """Args: spec (image observations), channels per conv layer, width of the linear layer."""

    def __init__(
        self, spec: EnvSpec, channels: tuple[int, ...] = (32, 64, 64), features: int = 256
    ) -> None:
        super().__init__(spec)
        self.encoder = CNNEncoder(spec.obs_shape, channels, features)
        self.out = ActorCriticHeads(features, spec)

    def acting(self) -> contextlib.AbstractContextManager:
        """The encoder's stretch of unchanged filters (``CNNEncoder.acting``)."""
        return self.encoder.acting()

    def heads(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.out(self.encoder(obs))

    def logstd(self) -> torch.Tensor | None:
        return self.out.logstd
