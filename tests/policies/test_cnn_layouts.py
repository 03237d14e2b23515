"""The CNN encoder's CPU layouts compute the same network: channels-last (the default on the
CPU) and the first convolution folded into space-to-depth form (``fold_stride``, opt-in) give
the outputs and gradients of the plain NCHW convolutions, in float64, on the Nature stack and
on an image whose size leaves rows and columns the first convolution never reads."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rlperf.policies.encoders import CNNEncoder, fold_stride


@pytest.mark.parametrize("shape", [(4, 84, 84), (3, 66, 71)])
@pytest.mark.parametrize("channels_last, fold", [(True, False), (False, True), (True, True)])
def test_layouts_give_the_plain_network(
    shape: tuple[int, int, int], channels_last: bool, fold: bool
) -> None:
    torch.manual_seed(0)
    plain = CNNEncoder(shape, (32, 64, 64), 64).double()
    other = CNNEncoder(shape, (32, 64, 64), 64).double()
    other.load_state_dict(plain.state_dict())
    plain.channels_last = False
    other.channels_last = channels_last
    other.fold = fold_stride(other.convs[0]) if fold else 0
    assert other.fold == (4 if fold else 0)
    frames = torch.randint(0, 256, (5, *shape), dtype=torch.uint8)
    outs = []
    for enc in (plain, other):
        enc.zero_grad()
        y = enc(frames)
        (y * torch.linspace(-1, 1, y.numel(), dtype=y.dtype).view_as(y)).sum().backward()
        outs.append((y.detach(), [p.grad.clone() for p in enc.parameters()]))
    (y0, g0), (y1, g1) = outs
    torch.testing.assert_close(y1, y0, rtol=1e-12, atol=1e-12)
    for a, b in zip(g1, g0, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


def test_fold_applies_only_where_it_is_the_same_convolution() -> None:
    assert fold_stride(nn.Conv2d(4, 32, 8, 4)) == 4
    assert fold_stride(nn.Conv2d(4, 32, 3, 1)) == 0  # stride 1: nothing to fold
    assert fold_stride(nn.Conv2d(4, 32, 6, 4)) == 0  # the stride does not divide the kernel
    assert fold_stride(nn.Conv2d(4, 32, 8, 4, padding=1)) == 0
    assert fold_stride(nn.Conv2d(4, 32, (8, 4), (4, 4))) == 0
