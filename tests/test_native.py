"""The checked boundary to the C kernels (``rlperf/native/``): a tensor the kernel cannot read
(dtype, device, layout, shape, storage moved) is a Python exception before any C runs."""

from __future__ import annotations

import copy
import dataclasses
import gc

import pytest
import torch

from rlperf import native
from rlperf.native import CompiledNet, CompiledStep, KernelArgumentError, NetWeights, StorageMoved
from rlperf.ppo.loss import LossCoefs, discrete_ppo_loss_and_head_grads


def weights(hidden: int = 6, widths: tuple[int, ...] = (3, 5), n_out: int = 3) -> NetWeights:
    gen = torch.Generator().manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen) * 0.3

    encoder = [(rand(o, i), rand(o)) for i, o in zip(widths[:-1], widths[1:], strict=True)]
    return NetWeights(
        encoder, rand(4 * hidden, widths[-1]), rand(4 * hidden, hidden), rand(4 * hidden),
        rand(n_out, hidden), rand(n_out),
    )  # fmt: skip


def net_inputs(t_len: int = 4, batch: int = 5, hidden: int = 6, obs_dim: int = 3):
    return (
        torch.randn(t_len, batch, obs_dim), torch.ones(t_len, batch),
        torch.zeros(batch, hidden), torch.zeros(batch, hidden),
    )  # fmt: skip


@pytest.mark.kernel("lstm")
def test_the_limits_are_the_kernels_own() -> None:
    assert native.LSTM_LIMITS == native.LSTMLimits(1024, 4096, 8)
    assert native.LSTM_LIMITS.network_fits([4096] * 9, 1024)
    assert not native.LSTM_LIMITS.network_fits([4096] * 10, 1024), "nine layers"
    assert not native.LSTM_LIMITS.network_fits([4097, 8], 1024)
    assert not native.LSTM_LIMITS.network_fits([8], 1025)


@pytest.mark.kernel("loss")
def test_the_loss_kernels_limit_is_its_own() -> None:
    assert native.MAX_ACTIONS == 4096


@pytest.mark.kernel("lstm")
@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda x, k, h, c, w: (x.double(), k, h, c, w), "xproj: .*float32.*got torch.float64"),
        (lambda x, k, h, c, w: (x, k[:, :-1], h, c, w), r"keep: .*shape \(2, 3\)"),
        (lambda x, k, h, c, w: (x, k, h[:, :-1], c, w), r"h0: .*shape \(3, 4\)"),
        (lambda x, k, h, c, w: (x, k, h, c.to("meta"), w), "c0: .*CPU tensor.*on meta"),
        (lambda x, k, h, c, w: (x, k, h, c, w[:, :-1]), r"w_hh: .*shape \(4, 16\)"),
    ],
    ids=["dtype", "keep-shape", "h0-shape", "device", "w_hh-shape"],
)
def test_the_recurrence_refuses_a_tensor_it_cannot_read(bad, match: str) -> None:
    args = bad(torch.zeros(2, 3, 16), torch.ones(2, 3), torch.zeros(3, 4), torch.zeros(3, 4),
               torch.zeros(16, 4))  # fmt: skip
    with pytest.raises(KernelArgumentError, match=match):
        native.recurrence_forward(*args)


@pytest.mark.kernel("lstm")
def test_the_network_refuses_bad_inputs_per_call() -> None:
    net = CompiledNet(4, 5, 3, weights())
    obs, keep, h0, c0 = net_inputs()
    net.forward(obs, keep, h0, c0)  # the right ones pass
    with pytest.raises(KernelArgumentError, match="obs: .*shape"):
        net.forward(torch.randn(4, 6, 3), keep, h0, c0)
    with pytest.raises(KernelArgumentError, match="keep: .*float32"):
        net.forward(obs, keep.double(), h0, c0)
    with pytest.raises(KernelArgumentError, match="h0: .*shape"):
        net.forward(obs, keep, torch.zeros(5, 7), c0)
    with pytest.raises(KernelArgumentError, match="one gradient per weight"):
        CompiledNet(4, 5, 3, weights(), [torch.zeros(2)] * 9)
    with pytest.raises(KernelArgumentError, match=r"grad of encoder.0.weight: .*shape \(5, 3\)"):
        CompiledNet(4, 5, 3, weights(), [torch.zeros(2)] * 7)
    step = CompiledStep(5, 3, weights())
    with pytest.raises(KernelArgumentError, match="noise: .*shape"):
        step(obs[0], keep[0], h0, c0, torch.ones(5, 3))


@pytest.mark.kernel("lstm")
def test_weights_whose_storage_moved_are_never_passed() -> None:
    w = weights()
    grads = [torch.zeros_like(t) for _, t in w.named()]
    net = CompiledNet(4, 5, 3, w, grads)
    obs, keep, h0, c0 = net_inputs()
    net.backward(net.forward(obs, keep, h0, c0))
    w.w_ih.data = w.w_ih.data.clone()  # what flatten_parameters or .to() do to a Parameter
    with pytest.raises(StorageMoved, match="w_ih moved"):
        net.forward(obs, keep, h0, c0)
    fresh = CompiledNet(4, 5, 3, w, grads)
    fw = fresh.forward(obs, keep, h0, c0)
    grads[0].data = grads[0].data.clone()
    with pytest.raises(StorageMoved, match="grad of encoder.0.weight moved"):
        fresh.backward(fw)
    with pytest.raises(KernelArgumentError, match="another CompiledNet"):
        CompiledNet(4, 5, 3, w, grads).backward(fw)


@pytest.mark.kernel("lstm")
def test_a_deep_copy_of_a_network_does_not_write_into_the_originals_buffers() -> None:
    net = CompiledNet(4, 5, 3, weights())
    twin = copy.deepcopy(net)  # buffers copied, so every pointer bound at construction is stale
    with pytest.raises(StorageMoved):
        twin.forward(*net_inputs())


@pytest.mark.kernel("lstm")
def test_weights_of_another_layout_are_refused_when_bound() -> None:
    w = weights()
    with pytest.raises(KernelArgumentError, match="w_head: .*contiguous.*not contiguous"):
        CompiledNet(4, 5, 3, dataclasses.replace(w, w_head=w.w_head.T.contiguous().T))
    with pytest.raises(KernelArgumentError, match=r"w_ih: .*shape \(24, 5\)"):
        CompiledStep(5, 3, dataclasses.replace(w, w_ih=torch.zeros(24, 4)))


@pytest.mark.kernel("loss")
def test_the_loss_refuses_mismatched_rows_and_dtypes() -> None:
    n, k = 6, 3
    logits, value = torch.randn(n, k), torch.randn(n)
    actions, rest = torch.zeros(n, dtype=torch.int64), [torch.randn(n) for _ in range(4)]
    coefs = LossCoefs()
    discrete_ppo_loss_and_head_grads(logits, value, actions, *rest, coefs)  # the right ones pass
    short = [rest[0], rest[1][:-1], *rest[2:]]
    with pytest.raises(KernelArgumentError, match=r"advantages: .*shape \(6,\)"):
        discrete_ppo_loss_and_head_grads(logits, value, actions, *short, coefs)
    with pytest.raises(KernelArgumentError, match="actions: .*torch.int64"):
        discrete_ppo_loss_and_head_grads(logits, value, actions.int(), *rest, coefs)
    with pytest.raises(KernelArgumentError, match="newvalue: .*float32"):
        discrete_ppo_loss_and_head_grads(logits, value.double(), actions, *rest, coefs)
    with pytest.raises(KernelArgumentError, match=r"grad_logits: .*shape \(6, 3\)"):
        discrete_ppo_loss_and_head_grads(
            logits, value, actions, *rest, coefs, grad_logits_out=torch.empty(6, 2)
        )


@pytest.mark.kernel("lstm")
def test_a_network_keeps_alive_every_buffer_it_passes() -> None:
    """Scratch only the binding refers to (the transposed weights, the backward's buffers)
    must live as long as it: freed, its memory is reused by the next allocations, and a
    forward reads or writes someone else's tensors."""
    w = weights()
    grads = [torch.zeros_like(t) for _, t in w.named()]
    net = CompiledNet(4, 5, 3, w, grads)
    obs, keep, h0, c0 = net_inputs()
    gc.collect()
    churn = [torch.full((4096,), 7.0) for _ in range(64)]  # reuses any freed block
    fw = net.forward(obs, keep, h0, c0)
    fw.grad_out.copy_(torch.ones_like(fw.grad_out))
    net.backward(fw)
    reference = CompiledNet(4, 5, 3, w, [torch.zeros_like(g) for g in grads])
    ref = reference.forward(obs, keep, h0, c0)
    assert torch.equal(fw.out, ref.out)
    assert all(bool((c == 7.0).all()) for c in churn), "a kernel wrote into freed memory"


@pytest.mark.parametrize(
    "first", ["rlperf.native", "rlperf.policies.lstm", "rlperf.ppo.fused_rollout", "rlperf.cli"]
)
def test_every_import_order_loads_every_kernel_the_trainer_sees(first: str) -> None:
    """Loading a kernel imports its package, which must not need names of a module still being
    imported: native's loader lets only "not built" pass, so a cycle fails loudly here."""
    import json
    import subprocess
    import sys

    code = (f"import json, importlib; importlib.import_module({first!r}); "
            "import rlperf.native as n; first = n.status(); import rlperf.ppo.trainer; "
            "print(json.dumps([first, n.status()]))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    first_status, after = json.loads(done.stdout)
    assert first_status == after
