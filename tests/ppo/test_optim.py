"""FlatAdam is torch.optim.Adam(fused=True) without the Python wrapper: same numbers."""

from __future__ import annotations

import torch

from rlperf.ppo.optim import FlatAdam


def _pair(seed: int) -> tuple[torch.nn.Parameter, torch.nn.Parameter]:
    torch.manual_seed(seed)
    a = torch.nn.Parameter(torch.randn(1000))
    return a, torch.nn.Parameter(a.detach().clone())


def test_flat_adam_equals_fused_torch_adam_bit_for_bit_with_annealing() -> None:
    ref_param, param = _pair(0)
    ref = torch.optim.Adam([ref_param], lr=1e-3, eps=1e-5, fused=True)
    ours = FlatAdam(param, lr=1e-3, eps=1e-5)
    for i in range(50):
        grad = torch.randn(1000)
        ref_param.grad, param.grad = grad.clone(), grad.clone()
        ref.param_groups[0]["lr"] = ours.lr = 1e-3 * (1 - i / 50)
        ref.step()
        ours.step()
        assert torch.equal(ref_param, param), f"step {i}"


def test_state_dict_round_trip_continues_identically() -> None:
    _, a = _pair(1)
    b = torch.nn.Parameter(a.detach().clone())
    opt_a = FlatAdam(a, lr=3e-4)
    for _ in range(5):
        a.grad = torch.randn(1000)
        opt_a.step()
    b.data.copy_(a.data)
    opt_b = FlatAdam(b, lr=1.0)
    opt_b.load_state_dict(opt_a.state_dict())
    assert opt_b.lr == opt_a.lr
    for _ in range(5):
        g = torch.randn(1000)
        a.grad, b.grad = g.clone(), g.clone()
        opt_a.step()
        opt_b.step()
    assert torch.equal(a, b)
