"""The CNN policy: uint8 images scaled on the device, the convolution stack chosen by image
size, and ``evaluate`` on rows equal to ``act``'s log-probabilities and values."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from rlperf.envs.spec import ActionSpec, EnvSpec
from rlperf.policies.cnn import CNNActorCritic
from rlperf.policies.encoders import CNNEncoder


def image_spec(shape: tuple[int, int, int]) -> EnvSpec:
    return EnvSpec(4, shape, np.dtype(np.uint8), ActionSpec("discrete", (3,), 1))


@pytest.mark.parametrize(
    "shape, kernels", [((1, 10, 5), [3, 3, 3]), ((3, 84, 84), [8, 4, 3]), ((3, 64, 64), [8, 4, 3])]
)
def test_small_images_keep_every_cell_large_ones_get_the_nature_stack(shape, kernels) -> None:
    encoder = CNNEncoder(shape, (8, 16, 16), 32)
    convs = [m for m in encoder.convs if isinstance(m, nn.Conv2d)]
    assert [c.kernel_size[0] for c in convs] == kernels
    out = encoder(torch.randint(0, 256, (2, *shape), dtype=torch.uint8))
    assert out.shape == (2, 32)


def test_uint8_is_scaled_to_unit_range_inside_the_policy() -> None:
    encoder = CNNEncoder((1, 6, 6), (4,), 8)
    pixels = torch.randint(0, 256, (3, 1, 6, 6), dtype=torch.uint8)
    torch.testing.assert_close(encoder(pixels), encoder(pixels.float() / 255.0))


def test_evaluate_matches_act() -> None:
    torch.manual_seed(0)
    policy = CNNActorCritic(image_spec((2, 9, 9)), (8, 8), 16)
    obs = torch.randint(0, 256, (6, 2, 9, 9), dtype=torch.uint8)
    actions, logprob, value, state = policy.act(obs, (), None, None, torch.Generator())
    assert state == () and actions.shape == (6,)
    new_logprob, entropy, new_value = policy.evaluate(obs[None], actions[None], (), None)
    torch.testing.assert_close(new_logprob[0], logprob)
    torch.testing.assert_close(new_value[0], value)
    assert (entropy > 0).all()
