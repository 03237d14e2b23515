"""The compiled CPU recurrence (``policies/_lstm_cpu.c``, called through ``rlperf/native/``)
against the torch recurrence in float64 (itself checked against plain autograd, ``nn.LSTM`` and
gradcheck in ``test_lstm.py``). Skipped, saying why, where the kernel is not built; the checks
of the native boundary are in ``tests/test_native.py``."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from rlperf import native
from rlperf.native import CompiledStep, NetWeights
from rlperf.policies import lstm_cpu
from rlperf.policies.lstm import TorchRecurrence

pytestmark = pytest.mark.kernel("lstm")


def inputs(t_len: int, batch: int, hidden: int, p_done: float, seed: int):
    gen = torch.Generator().manual_seed(seed)
    xproj = torch.randn(t_len, batch, 4 * hidden, generator=gen)
    keep = (torch.rand(t_len, batch, generator=gen) >= p_done).float()
    h0 = torch.randn(batch, hidden, generator=gen)
    c0 = torch.randn(batch, hidden, generator=gen)
    w_hh = torch.randn(4 * hidden, hidden, generator=gen) / hidden**0.5
    weights = torch.randn(t_len, batch, hidden, generator=gen)
    return xproj, keep, h0, c0, w_hh, weights


# Batches that are not whole 4-row tiles, widths that are not whole 16-column tiles, one step,
# every state reset, and the training and rollout shapes of position-only CartPole.
CASES = [
    (1, 1, 4, 0.0), (7, 5, 16, 0.3), (12, 3, 8, 1.0), (9, 13, 20, 0.2), (32, 16, 64, 0.05),
    (1, 64, 64, 0.1), (5, 64, 128, 0.1), (3, 6, 1, 0.5),
]  # fmt: skip


@pytest.mark.parametrize("t_len, batch, hidden, p_done", CASES)
def test_kernel_matches_the_torch_recurrence_and_its_gradients(t_len, batch, hidden, p_done):
    xproj, keep, h0, c0, w_hh, weights = inputs(t_len, batch, hidden, p_done, seed=batch)
    leaves = [t.clone().requires_grad_() for t in (xproj, h0, c0, w_hh)]
    hs = lstm_cpu.CompiledRecurrence.apply(leaves[0], keep, leaves[1], leaves[2], leaves[3])
    grads = torch.autograd.grad((hs * weights).sum(), leaves)

    ref_leaves = [t.double().requires_grad_() for t in (xproj, h0, c0, w_hh)]
    ref = TorchRecurrence.apply(
        ref_leaves[0], keep.double().unsqueeze(-1), ref_leaves[1], ref_leaves[2], ref_leaves[3]
    )
    ref_grads = torch.autograd.grad((ref * weights.double()).sum(), ref_leaves)

    torch.testing.assert_close(hs.double(), ref, rtol=0, atol=2e-6)
    for name, g, r in zip(("xproj", "h0", "c0", "w_hh"), grads, ref_grads, strict=True):
        torch.testing.assert_close(g.double(), r, rtol=1e-5, atol=2e-5, msg=name)


def test_forward_returns_the_gates_and_states_it_documents() -> None:
    xproj, keep, h0, c0, w_hh, _ = inputs(6, 7, 12, 0.3, seed=3)
    acts, cs, tcs, hs, hprev = native.recurrence_forward(xproj, keep, h0, c0, w_hh)
    hid = 12
    h, c = h0, c0
    for t in range(6):
        h, c = h * keep[t, :, None], c * keep[t, :, None]
        start = (hs[t - 1] if t else h0) * keep[t, :, None]  # the kernel's own h, reset
        torch.testing.assert_close(hprev[t], start, rtol=0, atol=0)
        z = xproj[t] + h @ w_hh.T
        i, f = z[:, :hid].sigmoid(), z[:, hid : 2 * hid].sigmoid()
        g, o = z[:, 2 * hid : 3 * hid].tanh(), z[:, 3 * hid :].sigmoid()
        c = f * c + i * g
        h = o * c.tanh()
        torch.testing.assert_close(acts[t], torch.cat((i, f, g, o), 1), rtol=0, atol=1e-6)
        torch.testing.assert_close(cs[t], c, rtol=0, atol=2e-6)
        torch.testing.assert_close(tcs[t], c.tanh(), rtol=0, atol=1e-6)
        torch.testing.assert_close(hs[t], h, rtol=0, atol=1e-6)


def test_results_do_not_depend_on_the_thread_count() -> None:
    """Threads split the rows, never a sum: one and two threads give the same bits."""
    xproj, keep, h0, c0, w_hh, weights = inputs(10, 24, 32, 0.1, seed=5)
    results = []
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            acts, cs, tcs, hs, hprev = native.recurrence_forward(xproj, keep, h0, c0, w_hh)
            back = native.recurrence_backward(weights, acts, keep, c0, w_hh, cs, tcs)
            results.append((acts, cs, tcs, hs, hprev, *back))
    finally:
        torch.set_num_threads(before)
    for one, two in zip(*results, strict=True):
        assert torch.equal(one, two)


@pytest.mark.parametrize("hidden", [64, 16, 20, 5])
def test_a_rows_results_do_not_depend_on_the_rows_beside_it(hidden: int) -> None:
    """One row runs its own register tile (gemm_row_acc), several the 4-row tile: row 0 alone
    and row 0 of a batch of five (a full tile and a partial one) give the same bits, forward
    and, for the same output gradient, backward. Widths of whole 64- and 16-column blocks, and
    ones that are not (which stay on the tile)."""
    xproj, keep, h0, c0, w_hh, weights = inputs(9, 5, hidden, 0.2, seed=7)
    whole = native.recurrence_forward(xproj, keep, h0, c0, w_hh)
    first = [x[:, :1].contiguous() for x in (xproj, keep, weights)]
    alone = native.recurrence_forward(first[0], first[1], h0[:1], c0[:1], w_hh)
    for a, b in zip(alone, whole, strict=True):
        assert torch.equal(a, b[:, :1])
    acts, cs, tcs = whole[0], whole[1], whole[2]
    back_whole = native.recurrence_backward(weights, acts, keep, c0, w_hh, cs, tcs)
    back_alone = native.recurrence_backward(first[2], alone[0], first[1], c0[:1], w_hh, alone[1],
                                            alone[2])  # fmt: skip
    for a, b in zip(back_alone, back_whole, strict=True):
        assert torch.equal(a, b[..., :1, :] if b.dim() == 3 else b[:1])


def test_an_lstm_wider_than_the_kernel_takes_is_refused() -> None:
    wide = native.LSTM_LIMITS.max_hidden + 1
    xproj = torch.zeros(1, 1, 4 * wide)
    h = torch.zeros(1, wide)
    w = torch.zeros(4 * wide, wide)
    with pytest.raises(ValueError, match="1 to 1024 units"):
        native.recurrence_forward(xproj, torch.ones(1, 1), h, h, w)


def test_usable_takes_float32_cpu_tensors_and_sizes_the_kernel_takes() -> None:
    w_hh = torch.zeros(16, 4)
    assert lstm_cpu.usable(w_hh, torch.zeros(2), torch.zeros(2, 3))
    assert not lstm_cpu.usable(w_hh, torch.zeros(2, dtype=torch.float64))
    assert not lstm_cpu.usable(w_hh.bfloat16())
    assert not lstm_cpu.usable(torch.zeros(4 * 1025, 1025))


@pytest.mark.parametrize("batch, features, hidden", [(64, 64, 64), (5, 2, 16), (13, 20, 20)])
def test_step_equals_projection_then_one_forward_step(batch, features, hidden) -> None:
    """The rollout step without an encoder (projection fused in) against the torch projection
    + :func:`native.recurrence_forward` over one step, with resets."""
    gen = torch.Generator().manual_seed(batch)
    x = torch.randn(batch, features, generator=gen)
    w_ih = torch.randn(4 * hidden, features, generator=gen) / features**0.5
    bias = torch.randn(4 * hidden, generator=gen)
    _, keep, h, c, w_hh, _ = inputs(1, batch, hidden, 0.3, seed=batch)
    heads = torch.randn(3, hidden, generator=gen), torch.randn(3, generator=gen)
    step = CompiledStep(batch, features, NetWeights([], w_ih, w_hh, bias, *heads))
    h1, c1, _, _, _ = step(x, keep[0], h, c, None)
    xproj = torch.addmm(bias, x, w_ih.T).unsqueeze(0)
    _, cs, _, hs, _ = native.recurrence_forward(xproj, keep, h, c, w_hh)
    torch.testing.assert_close(h1, hs[0], rtol=0, atol=1e-6)
    torch.testing.assert_close(c1, cs[0], rtol=0, atol=1e-6)


def net_forward(
    obs: torch.Tensor, keep: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, weights: NetWeights
) -> native.NetForward:
    """The forward of a :class:`native.CompiledNet` made for this one call."""
    t_len, b, obs_dim = obs.shape
    return native.CompiledNet(t_len, b, obs_dim, weights).forward(obs, keep, h0, c0)


def network(batch: int, t_len: int, widths=(3, 16, 12), hidden: int = 20, n_out: int = 5):
    """Random inputs and weights of the whole network: obs, keep, h0, c0, NetWeights."""
    gen = torch.Generator().manual_seed(batch)

    def rand(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=gen)

    encoder = [
        (rand(w_out, w_in, scale=w_in**-0.5), rand(w_out, scale=0.1))
        for w_in, w_out in zip(widths[:-1], widths[1:], strict=True)
    ]
    weights = NetWeights(
        encoder, rand(4 * hidden, widths[-1], scale=widths[-1] ** -0.5),
        rand(4 * hidden, hidden, scale=hidden**-0.5), rand(4 * hidden),
        rand(n_out, hidden, scale=0.3), rand(n_out),
    )  # fmt: skip
    obs = rand(t_len, batch, widths[0])
    keep = (torch.rand(t_len, batch, generator=gen) >= 0.2).float()
    return obs, keep, rand(batch, hidden), rand(batch, hidden), weights


@pytest.mark.parametrize(("widths", "hidden"), [((3, 16, 12), 20), ((2, 64, 64), 64)])
def test_the_whole_network_gives_a_row_the_same_bits_alone_and_in_a_batch(widths, hidden):
    """One environment alone (its steps' rows tiled together across time), and the same
    environment in a batch of 9 on one thread (tiled across time) and on two (each thread's
    rows tiled step by step): the same outputs, states and encoder activations in every bit."""
    obs, keep, h0, c0, weights = network(9, 11, widths, hidden)
    row = 4
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = net_forward(obs[:, row : row + 1].contiguous(), keep[:, row : row + 1].contiguous(),
                            h0[row : row + 1], c0[row : row + 1], weights)  # fmt: skip
        batches = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            batches.append(net_forward(obs, keep, h0, c0, weights))
    finally:
        torch.set_num_threads(before)
    t_len = obs.shape[0]
    for fw in batches:
        pairs = [(alone.out, fw.out), (alone.hs, fw.hs),
                 *zip(alone.layers, fw.layers, strict=True)]  # fmt: skip
        for mine, theirs in pairs:
            whole = theirs.reshape(t_len, 9, -1)[:, row]
            assert torch.equal(mine.reshape(t_len, -1), whole)


def test_the_whole_network_does_not_depend_on_the_thread_count() -> None:
    """Threads split the environments, and each weight gradient's rows: every sum runs over
    all rows in one thread, so one and two threads give the same bits."""
    obs, keep, h0, c0, weights = network(22, 7)
    grad_out = torch.randn(7 * 22, 5, generator=torch.Generator().manual_seed(1))
    results = []
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            fw = net_forward(obs, keep, h0, c0, weights)
            fw.grad_out.copy_(grad_out)
            grads = [torch.empty_like(w) for _, w in weights.named()]
            fw.net.backward(fw, 0.5, grads)
            noise = torch.rand(22, 4, generator=torch.Generator().manual_seed(2)) + 0.1
            step = CompiledStep(22, 3, weights)
            results.append(
                [fw.out, fw.hs, *fw.layers, *grads, *step(obs[0], keep[0], h0, c0, noise)]
            )
    finally:
        torch.set_num_threads(before)
    for one, two in zip(*results, strict=True):
        assert torch.equal(one, two)


def test_the_compiled_step_equals_the_first_step_of_net_forward() -> None:
    """The rollout step (encoder, fused projection, cell, heads) against step 0 of the
    training forward, which projects all rows first."""
    obs, keep, h0, c0, weights = network(13, 1)
    fw = net_forward(obs, keep, h0, c0, weights)
    step = CompiledStep(13, 3, weights)
    h, c, out, actions, logprob = step(obs[0], keep[0], h0, c0, None)
    assert actions is None and logprob is None
    torch.testing.assert_close(h, fw.hs[0], rtol=0, atol=1e-6)
    torch.testing.assert_close(c, fw.cs[0], rtol=0, atol=1e-6)
    torch.testing.assert_close(out, fw.out, rtol=0, atol=1e-5)


def test_a_network_with_too_many_layers_is_refused() -> None:
    obs, keep, h0, c0, weights = network(4, 2, widths=(3,))
    deep = dataclasses.replace(weights, encoder=[(torch.eye(3), torch.zeros(3))] * 9)
    with pytest.raises(ValueError, match="at most 8 encoder layers"):
        net_forward(obs, keep, h0, c0, deep)


def test_the_whole_network_refuses_tensors_it_cannot_read() -> None:
    obs, keep, h0, c0, weights = network(4, 2)
    with pytest.raises(ValueError, match="float32 CPU tensor .*, got torch.float64"):
        net_forward(obs, keep, h0, c0, dataclasses.replace(weights, w_ih=weights.w_ih.double()))
    head_t = torch.randn(20, 5).T  # (5, 20), the heads' shape, transposed memory
    with pytest.raises(ValueError, match="not contiguous"):
        net_forward(obs, keep, h0, c0, dataclasses.replace(weights, w_head=head_t))
