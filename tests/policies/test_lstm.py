"""The LSTM policy: its fused BPTT node against plain autograd and ``nn.LSTM``, and ``evaluate``
over a sequence against stepping ``act`` with the same resets."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
from torch import nn

from rlperf.envs.spec import ActionSpec, EnvSpec
from rlperf.policies.lstm import LSTMActorCritic, LSTMCore
from rlperf.ppo.optim import flatten_parameters

DISCRETE = ActionSpec("discrete", (4,), 1)


def spec(obs_shape=(3,), action=DISCRETE, dtype=np.float32) -> EnvSpec:
    return EnvSpec(5, obs_shape, np.dtype(dtype), action)


def nn_lstm_unroll(core: LSTMCore, x, state, dones):
    """CleanRL's ``get_states``: ``nn.LSTM`` one step at a time, state zeroed where done."""
    lstm = nn.LSTM(core.weight_ih.shape[1], core.hidden).to(x.dtype)
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(core.weight_ih)
        lstm.weight_hh_l0.copy_(core.weight_hh)
        lstm.bias_ih_l0.copy_(core.bias)
        lstm.bias_hh_l0.zero_()
    h, c = state[0].unsqueeze(0), state[1].unsqueeze(0)
    outs = []
    for t in range(x.shape[0]):
        keep = (1.0 - dones[t]).view(1, -1, 1)
        out, (h, c) = lstm(x[t].unsqueeze(0), (h * keep, c * keep))
        outs.append(out[0])
    return torch.stack(outs)


@pytest.mark.parametrize(
    "t_len, batch, hidden, p_done",
    [(1, 1, 4, 0.0), (7, 5, 16, 0.3), (12, 3, 8, 1.0), (20, 16, 32, 0.05)],
)
def test_fused_unroll_matches_nn_lstm_and_its_gradients_match_autograd(
    t_len: int, batch: int, hidden: int, p_done: float
) -> None:
    torch.manual_seed(t_len)
    core = LSTMCore(6, hidden).double()
    with torch.no_grad():
        core.bias.normal_()  # non-zero biases exercise every gate
    x = torch.randn(t_len, batch, 6, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(batch, hidden, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(batch, hidden, dtype=torch.float64, requires_grad=True)
    dones = (torch.rand(t_len, batch) < p_done).double()
    weights = torch.randn(t_len, batch, hidden, dtype=torch.float64)
    inputs = (x, h0, c0, *core.parameters())

    fused = core.unroll(x, (h0, c0), dones)
    grads = torch.autograd.grad((fused * weights).sum(), inputs)
    reference, _ = core.unroll_reference(x, (h0, c0), dones)
    ref_grads = torch.autograd.grad((reference * weights).sum(), inputs)
    torch.testing.assert_close(fused, reference, rtol=0, atol=1e-12)
    for name, g, r in zip(("x", "h0", "c0", "w_ih", "w_hh", "b"), grads, ref_grads, strict=True):
        torch.testing.assert_close(g, r, rtol=1e-9, atol=1e-12, msg=name)
    with torch.no_grad():
        torch.testing.assert_close(fused, nn_lstm_unroll(core, x, (h0, c0), dones))


def test_fused_unroll_passes_gradcheck() -> None:
    torch.manual_seed(0)
    core = LSTMCore(3, 4).double()
    x = torch.randn(5, 2, 3, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    c0 = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    dones = torch.tensor([[0, 0], [1, 0], [0, 0], [0, 1], [0, 0]], dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda *a: core.unroll(a[0], (a[1], a[2]), dones),
                                    (x, h0, c0))  # fmt: skip


@pytest.mark.parametrize(
    "env_spec",
    [spec(), spec((2, 6, 6), dtype=np.uint8), spec(action=ActionSpec("multidiscrete", (2, 3), 2))],
    ids=["flat", "images", "multidiscrete"],
)
@pytest.mark.parametrize(
    "dtype", [torch.float64, torch.float32], ids=["f64-torch", "f32-compiled-kernel"]
)
def test_evaluate_over_a_sequence_equals_stepping_act(env_spec: EnvSpec, dtype) -> None:
    torch.manual_seed(1)
    policy = LSTMActorCritic(env_spec, (16,), 8, cnn_channels=(4,), cnn_features=16).to(dtype)
    t_len, batch = 9, 5
    gen = torch.Generator().manual_seed(2)
    if env_spec.image_obs:
        obs = torch.randint(0, 256, (t_len, batch, *env_spec.obs_shape), dtype=torch.uint8)
    else:
        obs = torch.randn(t_len, batch, *env_spec.obs_shape, dtype=dtype, generator=gen)
    dones = (torch.rand(t_len, batch, generator=gen) < 0.3).to(dtype)
    state0 = tuple(torch.randn_like(s.to(dtype)) for s in policy.initial_state(batch))
    state, steps = state0, []
    for t in range(t_len):
        actions, logprob, value, state = policy.act(obs[t], state, dones[t], None, gen)
        steps.append((actions, logprob, value))
    actions = torch.stack([a for a, _, _ in steps])
    logprob, entropy, value = policy.evaluate(obs, actions, state0, dones, None)
    torch.testing.assert_close(logprob, torch.stack([lp for _, lp, _ in steps]))
    torch.testing.assert_close(value, torch.stack([v for _, _, v in steps]))
    assert entropy.shape == (t_len, batch) and (entropy > 0).all()


def test_act_resets_the_state_where_done() -> None:
    policy = LSTMActorCritic(spec(), (8,), 6)
    obs = torch.randn(5, 3)
    zeros = policy.initial_state(5)
    busy = tuple(torch.randn_like(s) for s in zeros)
    done = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0])
    _, _, value, (h, _) = policy.act(obs, busy, done, None)
    _, _, fresh_value, (fresh_h, _) = policy.act(obs, zeros, None, None)
    rows = done.bool()
    torch.testing.assert_close(h[rows], fresh_h[rows])
    torch.testing.assert_close(value[rows], fresh_value[rows])
    assert not torch.allclose(h[~rows], fresh_h[~rows])


@pytest.mark.kernel("lstm")
@pytest.mark.parametrize(
    "hidden_sizes, batch", [((16,), 6), ((16, 12), 21), ((), 9)],
    ids=["one-layer", "two-layers-two-threads", "no-encoder"],
)  # fmt: skip
def test_act_through_the_compiled_kernel_equals_act_through_torch_ops(hidden_sizes, batch) -> None:
    """The rollout step in float32 (the compiled network and its sample) against the same
    policy in float64 (torch ops and ``distributions.sample``), over 20 steps with resets: the
    same actions, log-probabilities, values and states. 21 environments take two threads."""
    torch.manual_seed(3)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        _check_act_against_torch_ops(hidden_sizes, batch)
    finally:
        torch.set_num_threads(before)


def _check_act_against_torch_ops(hidden_sizes, batch) -> None:
    fast = LSTMActorCritic(spec(), hidden_sizes, 24)
    reference = LSTMActorCritic(spec(), hidden_sizes, 24).double()
    reference.load_state_dict(fast.state_dict())
    assert fast.analytic and not reference.analytic
    gen = torch.Generator().manual_seed(4)
    state32, state64 = fast.initial_state(batch), reference.initial_state(batch)
    state64 = tuple(s.double() for s in state64)
    for step in range(20):
        obs = torch.randn(batch, 3, generator=gen)
        done = (torch.rand(batch, generator=gen) < 0.2).float()
        seed = 100 + step
        a32, lp32, v32, state32 = fast.act(
            obs, state32, done, None, torch.Generator().manual_seed(seed)
        )
        a64, lp64, v64, state64 = reference.act(
            obs.double(), state64, done.double(), None, torch.Generator().manual_seed(seed)
        )
        assert torch.equal(a32, a64), step
        torch.testing.assert_close(lp32.double(), lp64, rtol=0, atol=1e-5)
        torch.testing.assert_close(v32.double(), v64, rtol=0, atol=1e-5)
        for s32, s64 in zip(state32, state64, strict=True):
            torch.testing.assert_close(s32.double(), s64, rtol=0, atol=1e-5)


def test_act_inside_acting_uses_the_weights_of_that_stretch_and_sees_later_changes() -> None:
    """``acting()`` derives the rollout step's weights once; the next stretch (after an update
    changed the weights) derives them again, and act outside any stretch agrees with both."""
    torch.manual_seed(5)
    policy = LSTMActorCritic(spec(), (8,), 12)
    obs, state = torch.randn(4, 3), policy.initial_state(4)
    for _ in range(2):
        with torch.no_grad(), policy.acting():
            _, lp_in, v_in, _ = policy.act(obs, state, None, None, torch.Generator().manual_seed(0))
        _, lp_out, v_out, _ = policy.act(obs, state, None, None, torch.Generator().manual_seed(0))
        torch.testing.assert_close(lp_in, lp_out, rtol=0, atol=0)
        torch.testing.assert_close(v_in, v_out, rtol=0, atol=0)
        with torch.no_grad():
            policy.lstm.weight_hh.mul_(1.5)  # as an optimizer step between rollouts would
            policy.lstm.weight_ih.mul_(3.0)
    with torch.no_grad(), policy.acting():
        _, _, v_after, _ = policy.act(obs, state, None, None, None)
    assert not torch.allclose(v_after, v_in)


@pytest.mark.kernel("lstm")
def test_a_deep_copy_of_the_policy_trains_its_own_parameters() -> None:
    """The compiled network caches raw pointers to the parameters and its buffers; a copy of
    the policy must not reuse them."""
    torch.manual_seed(0)
    policy = LSTMActorCritic(spec(), (8,), 12)
    flatten_parameters(policy)
    obs, dones = torch.randn(5, 8, 3), torch.zeros(5, 8)
    state = policy.initial_state(8)
    _, _, fw = policy.forward_train(obs, state, dones)
    twin = copy.deepcopy(policy)
    with torch.no_grad():
        twin.lstm.weight_hh.mul_(2.0)
    logits, _, twin_fw = twin.forward_train(obs, state, dones)
    assert twin_fw.net is not fw.net
    reference, _, _ = twin.evaluate(obs, torch.zeros(5, 8, dtype=torch.long), state, dones)
    expected = torch.log_softmax(logits, -1)[:, 0].view(5, 8)
    torch.testing.assert_close(expected, reference, rtol=0, atol=1e-5)


def test_a_nested_acting_stretch_keeps_the_outer_ones_compiled_step() -> None:
    """The trainer opens one stretch for the rollout and GAE's last value; the rollout's own
    stretch inside it must not drop the step the outer one laid out."""
    from rlperf import native

    if not native.lstm_available():
        pytest.skip("the LSTM kernel is not built here")
    spec = EnvSpec(4, (2,), np.dtype(np.float32), ActionSpec("discrete", (2,), 1))
    policy = LSTMActorCritic(spec, (16,), 16)
    with policy.acting():
        outer = policy.compiled_step(4, 2)
        with policy.acting():
            assert policy.compiled_step(4, 2) is outer
        assert policy.compiled_step(4, 2) is outer
    assert policy.compiled_step(4, 2) is not outer  # outside any stretch: made per call
