"""The CNN encoder's channels-last layout (the Nature stack's on the CPU) computes the same
network as the plain NCHW convolutions: outputs and gradients in float64, on the Nature stack
and on an image whose size leaves rows and columns the first convolution never reads; the small
3x3 stacks keep NCHW."""

from __future__ import annotations

import pytest
import torch

from rlperf.policies.encoders import CNNEncoder


@pytest.mark.parametrize("shape", [(4, 84, 84), (3, 66, 71)])
def test_channels_last_gives_the_plain_network(shape: tuple[int, int, int]) -> None:
    torch.manual_seed(0)
    plain = CNNEncoder(shape, (32, 64, 64), 64).double()
    nhwc = CNNEncoder(shape, (32, 64, 64), 64).double()
    nhwc.load_state_dict(plain.state_dict())
    assert nhwc.channels_last
    plain.channels_last = False
    frames = torch.randint(0, 256, (5, *shape), dtype=torch.uint8)
    outs = []
    for enc in (plain, nhwc):
        enc.zero_grad()
        y = enc(frames)
        (y * torch.linspace(-1, 1, y.numel(), dtype=y.dtype).view_as(y)).sum().backward()
        outs.append((y.detach(), [p.grad.clone() for p in enc.parameters()]))
    (y0, g0), (y1, g1) = outs
    torch.testing.assert_close(y1, y0, rtol=1e-12, atol=1e-12)
    for a, b in zip(g1, g0, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("shape", [(9, 11, 11), (8, 8, 8), (1, 10, 5)])
def test_small_stacks_stay_nchw(shape: tuple[int, int, int]) -> None:
    assert not CNNEncoder(shape, (16,), 32).channels_last


def test_acting_with_kept_channels_last_filters_gives_the_autograd_forward() -> None:
    """Inside ``acting()`` the forward without autograd runs on channels-last copies of the
    filters made once for the stretch: the same outputs, to the bit, as the autograd forward;
    a new stretch sees the parameters as they are then, and outside one nothing is kept."""
    torch.manual_seed(0)
    enc = CNNEncoder((4, 84, 84), (32, 64, 64), 512)
    frames = torch.randint(0, 256, (4, 4, 84, 84), dtype=torch.uint8)
    for _ in range(2):
        reference = enc(frames).detach()
        with torch.inference_mode(), enc.acting():
            first, again = enc(frames), enc(frames)
            kept = enc._acting
            assert kept and kept[0][1].is_contiguous(memory_format=torch.channels_last)
        assert torch.equal(first, reference) and torch.equal(again, reference)
        assert enc._acting is None
        with torch.no_grad():  # the optimizer's step, between two rollouts
            for p in enc.parameters():
                p.add_(0.01)
