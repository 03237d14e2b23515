"""The split weight-gradient reduction (policies/split_linear.py) against the plain product and
autograd, and the MLP's gradients with it forced on (on the CPU, where it is otherwise off)."""

from __future__ import annotations

import pytest
import torch

from rlperf.policies import mlp as mlp_module
from rlperf.policies.mlp import MLPActorCritic
from rlperf.policies.split_linear import (
    SPLIT_BLOCK_ROWS,
    SPLIT_MIN_ROWS,
    batched_linear,
    split_block_rows,
    split_weight_grad,
)

# (groups, rows, in, out, block rows): rows divisible by the block, not divisible, shorter than
# one block, one row over a block.
SHAPES = [(2, 64, 4, 8, 16), (2, 100, 5, 7, 16), (1, 10, 3, 3, 16), (2, 17, 6, 4, 16),
          (2, 1000, 64, 64, 128)]  # fmt: skip


@pytest.mark.parametrize(("g", "n", "i", "o", "block"), SHAPES, ids=lambda v: str(v))
def test_split_weight_grad_equals_plain_product(g: int, n: int, i: int, o: int, block: int) -> None:
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(g, n, i, generator=gen, dtype=torch.float64)
    dz = torch.randn(g, n, o, generator=gen, dtype=torch.float64)
    expected = torch.bmm(x.transpose(1, 2), dz)
    torch.testing.assert_close(split_weight_grad(x, dz, block), expected)
    out = torch.full((g, i, o), float("nan"), dtype=torch.float64)
    assert split_weight_grad(x, dz, block, out=out) is out
    torch.testing.assert_close(out, expected)


def test_split_weight_grad_takes_an_expanded_input() -> None:
    """The MLP's first layer reads the observations expanded over actor and critic (stride 0)."""
    gen = torch.Generator().manual_seed(3)
    obs = torch.randn(70, 4, generator=gen, dtype=torch.float64)
    x = obs.unsqueeze(0).expand(2, 70, 4)
    dz = torch.randn(2, 70, 5, generator=gen, dtype=torch.float64)
    torch.testing.assert_close(split_weight_grad(x, dz, 16), torch.bmm(x.transpose(1, 2), dz))


@pytest.mark.parametrize(("n", "block"), [(64, 16), (50, 16), (8, 16)])
def test_split_linear_gradients_equal_autograd(n: int, block: int) -> None:
    gen = torch.Generator().manual_seed(n)
    x = torch.randn(2, n, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, 5, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, 1, 3, generator=gen, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(2, n, 3, generator=gen, dtype=torch.float64)

    split = batched_linear(x, w, b, block)
    plain = torch.baddbmm(b, x, w)
    torch.testing.assert_close(split, plain)
    grads_split = torch.autograd.grad((split * weights).sum(), (x, w, b))
    grads_plain = torch.autograd.grad((plain * weights).sum(), (x, w, b))
    for got, want in zip(grads_split, grads_plain, strict=True):
        torch.testing.assert_close(got, want)
    torch.autograd.gradcheck(lambda x, w, b: batched_linear(x, w, b, block), (x, w, b))


def test_split_applies_only_to_long_minibatches_on_cuda() -> None:
    assert split_block_rows(1 << 20, torch.device("cpu")) == 0, "the CPU path never splits"
    assert split_block_rows(SPLIT_MIN_ROWS - 1, torch.device("cuda")) == 0
    assert split_block_rows(SPLIT_MIN_ROWS, torch.device("cuda")) == SPLIT_BLOCK_ROWS


def _mlp_gradients(policy: MLPActorCritic, obs: torch.Tensor, weights: torch.Tensor) -> tuple:
    """The flat gradient of a weighted sum of the heads, by autograd and by the analytic
    backward (whose output gradient is the same weights)."""
    policy.flat.grad = None
    actor, value = policy.heads(obs)
    ((actor * weights[:, :2]).sum() + (value * weights[:, 2]).sum()).backward()
    autograd_grad = policy.flat.grad.clone()
    policy.flat.grad = torch.zeros_like(policy.flat)
    policy._bind_views()
    logits, values, cache = policy.forward_train(obs.unsqueeze(0))
    grad_logits, grad_value = policy.output_grad_views(cache)
    grad_logits.copy_(weights[:, :2])
    grad_value.copy_(weights[:, 2])
    policy.backward(cache)
    return autograd_grad, policy.flat.grad.clone()


def test_mlp_gradients_with_split_forced_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The MLP's two paths (autograd heads, analytic backward) with every weight gradient split
    (rows not divisible by the block) equal the same paths unsplit."""
    torch.manual_seed(0)
    policy = MLPActorCritic.from_sizes(4, 2).double()
    gen = torch.Generator().manual_seed(1)
    obs = torch.randn(90, 4, generator=gen, dtype=torch.float64)
    weights = torch.randn(90, 3, generator=gen, dtype=torch.float64)
    plain = _mlp_gradients(policy, obs, weights)
    monkeypatch.setattr(mlp_module, "split_block_rows", lambda rows, device: 16)
    policy._workspaces.clear()  # made with split_rows 0 above
    split = _mlp_gradients(policy, obs, weights)
    assert policy.workspace(90).split_rows == 16
    for got, want in zip(split, plain, strict=True):
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(plain[0], plain[1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the GPU check)")
def test_split_on_cuda_equals_the_plain_product_and_the_cpu() -> None:
    """On the GPU, where it applies: CartPole's 32,768-row minibatch (and 100 rows more, not a
    whole block), float64 for an exact comparison; the MLP's gradients split on CUDA equal the
    same gradients unsplit on the CPU."""
    gen = torch.Generator().manual_seed(5)
    for n in (32768, 32868):
        x = torch.randn(2, n, 64, generator=gen, dtype=torch.float64)
        dz = torch.randn(2, n, 64, generator=gen, dtype=torch.float64)
        got = split_weight_grad(x.cuda(), dz.cuda(), split_block_rows(n, torch.device("cuda")))
        torch.testing.assert_close(got.cpu(), torch.bmm(x.transpose(1, 2), dz))
    torch.manual_seed(0)
    policy = MLPActorCritic.from_sizes(4, 2).double()
    obs = torch.randn(SPLIT_MIN_ROWS + 50, 4, generator=gen, dtype=torch.float64)
    weights = torch.randn(SPLIT_MIN_ROWS + 50, 3, generator=gen, dtype=torch.float64)
    on_cpu = _mlp_gradients(policy, obs, weights)
    policy = policy.cuda()
    on_cuda = _mlp_gradients(policy, obs.cuda(), weights.cuda())
    assert policy.workspace(SPLIT_MIN_ROWS + 50).split_rows == SPLIT_BLOCK_ROWS
    for got, want in zip(on_cuda, on_cpu, strict=True):
        torch.testing.assert_close(got.cpu(), want)
