"""The ConvLSTM policy: the encoder's stride rule, shapes and state resets, ``evaluate`` over a
sequence against stepping ``act``, outputs and gradients against the plain eager reference,
the Trainer building it, its stage sections, and its config errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F  # noqa: N812

from rlperf.config import Config, ConfigError
from rlperf.envs.spec import ActionSpec, EnvSpec
from rlperf.policies.convlstm import (
    ConvLSTMActorCritic,
    encoder_stride,
    fence_map,
)
from rlperf.policies.convlstm_reference import parameter_map, reference_from
from rlperf.policies.registry import make_policy
from rlperf.ppo.trainer import Trainer
from rlperf.timing import names
from rlperf.timing.sections import Profiler, get_profiler

DISCRETE = ActionSpec("discrete", (3,), 1)
CATCH = (1, 10, 5)


def spec(obs_shape=CATCH, action=DISCRETE) -> EnvSpec:
    return EnvSpec(5, obs_shape, np.dtype(np.uint8), action)


def policy(env_spec: EnvSpec, channels=4, layers=2, ticks=2, features=16, seed=0, head="pool"):
    """A small policy in float64 with non-zero biases (every gate and path exercised)."""
    torch.manual_seed(seed)
    net = ConvLSTMActorCritic(env_spec, channels, layers, ticks, features, head=head).double()
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return net


def random_inputs(env_spec: EnvSpec, net, t_len: int, batch: int, p_done: float, seed: int = 1):
    gen = torch.Generator().manual_seed(seed)
    obs = torch.randint(0, 256, (t_len, batch, *env_spec.obs_shape), dtype=torch.uint8,
                        generator=gen)  # fmt: skip
    dones = (torch.rand(t_len, batch, generator=gen) < p_done).double()
    state0 = tuple(torch.randn(s.shape, dtype=torch.float64, generator=gen)
                   for s in net.initial_state(batch))  # fmt: skip
    return obs, dones, state0


# -- the encoder's stride rule and the fence ----------------------------------------------------
@pytest.mark.parametrize(
    "height, width, stride",
    [(64, 64, 8), (10, 5, 1), (8, 8, 1), (16, 16, 1), (17, 40, 2), (32, 32, 4), (84, 84, 10)],
)
def test_encoder_stride_reads_large_images_into_an_8_cell_grid(height, width, stride) -> None:
    assert encoder_stride(height, width) == stride
    net = ConvLSTMActorCritic(spec((3, height, width)), channels=2, layers=1, features=4)
    assert net.grid == (height // stride, width // stride)


def test_the_fence_covers_the_pixels_of_the_border_cells() -> None:
    fence = fence_map(64, 64, 8)
    inner = torch.zeros(64, 64)
    inner[8:56, 8:56] = 1.0
    torch.testing.assert_close(fence, 1.0 - inner)
    small = fence_map(4, 3, 1)
    assert small.tolist() == [[1, 1, 1], [1, 0, 1], [1, 0, 1], [1, 1, 1]]


def test_the_pool_injection_matrix_is_the_conv_of_a_broadcast_map() -> None:
    net = policy(spec((2, 6, 4)), channels=3, layers=2)
    pooled = torch.randn(5, 3, dtype=torch.float64)
    kmats = net.inject_matrices()
    for layer in range(2):
        conv = F.conv2d(pooled[:, :, None, None].expand(5, 3, 6, 4),
                        net.inject_weight[layer], padding=1)  # fmt: skip
        torch.testing.assert_close((pooled @ kmats[layer]).view_as(conv), conv)


# -- the protocol -------------------------------------------------------------------------------
def test_shapes_of_act_value_evaluate_and_state() -> None:
    env_spec = spec((3, 32, 32))
    net = policy(env_spec, channels=4, layers=3, ticks=1)
    state = net.initial_state(6)
    assert len(state) == 6 and all(s.shape == (6, 4, 8, 8) for s in state)
    obs = torch.randint(0, 256, (6, 3, 32, 32), dtype=torch.uint8)
    actions, logprob, value, next_state = net.act(obs, state, torch.zeros(6))
    assert actions.shape == (6,) and logprob.shape == (6,) and value.shape == (6,)
    assert [s.shape for s in next_state] == [s.shape for s in state]
    assert net.value(obs, state, None).shape == (6,)
    seq = torch.randint(0, 256, (7, 6, 3, 32, 32), dtype=torch.uint8)
    out = net.evaluate(seq, torch.zeros(7, 6, dtype=torch.long), state, torch.zeros(7, 6))
    assert [o.shape for o in out] == [(7, 6)] * 3
    assert net.recurrent and not net.analytic


def test_act_resets_the_state_where_done() -> None:
    net = policy(spec())
    obs = torch.randint(0, 256, (5, *CATCH), dtype=torch.uint8)
    zeros = tuple(s.double() for s in net.initial_state(5))
    busy = tuple(torch.randn_like(s) for s in zeros)
    done = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0], dtype=torch.float64)
    _, _, value, state = net.act(obs, busy, done)
    _, _, fresh_value, fresh_state = net.act(obs, zeros, None)
    _, _, busy_value, busy_state = net.act(obs, busy, None)
    rows = done.bool()
    torch.testing.assert_close(value[rows], fresh_value[rows])
    torch.testing.assert_close(value[~rows], busy_value[~rows])
    for s, fresh, kept in zip(state, fresh_state, busy_state, strict=True):
        torch.testing.assert_close(s[rows], fresh[rows])
        torch.testing.assert_close(s[~rows], kept[~rows])
    assert not torch.allclose(fresh_value[~rows], busy_value[~rows])


@pytest.mark.parametrize(
    "obs_shape, action",
    [
        (CATCH, DISCRETE),
        ((3, 32, 32), DISCRETE),
        ((2, 8, 8), ActionSpec("multidiscrete", (2, 3), 2)),
    ],
    ids=["catch", "rgb-stride-4", "planes-multidiscrete"],
)
def test_evaluate_over_a_sequence_equals_stepping_act(obs_shape, action) -> None:
    env_spec = spec(obs_shape, action)
    net = policy(env_spec)
    t_len, batch = 8, 4
    obs, dones, state0 = random_inputs(env_spec, net, t_len, batch, p_done=0.3)
    gen = torch.Generator().manual_seed(2)
    masks = torch.rand(t_len, batch, action.num_outputs, generator=gen) < 0.7
    for first in np.cumsum((0, *action.nvec[:-1])):
        masks[..., first] = True  # at least one valid choice per component
    state, steps = state0, []
    for t in range(t_len):
        actions, logprob, value, state = net.act(obs[t], state, dones[t], masks[t], gen)
        steps.append((actions, logprob, value))
    actions = torch.stack([a for a, _, _ in steps])
    logprob, entropy, value = net.evaluate(obs, actions, state0, dones, masks)
    torch.testing.assert_close(logprob, torch.stack([lp for _, lp, _ in steps]))
    torch.testing.assert_close(value, torch.stack([v for _, _, v in steps]))
    assert (entropy >= 0).all()


@pytest.mark.parametrize(
    "obs_shape, layers, ticks, t_len, batch, p_done, head",
    [
        (CATCH, 1, 1, 1, 1, 0.0, "pool"),
        (CATCH, 2, 2, 6, 3, 0.3, "pool"),
        ((3, 32, 32), 2, 1, 5, 2, 1.0, "pool"),
        ((2, 8, 8), 3, 3, 4, 3, 0.2, "pool"),
        ((3, 20, 36), 1, 2, 3, 2, 0.5, "pool"),  # stride 2, unread remainder rows and columns
        (CATCH, 2, 2, 6, 3, 0.3, "flatten"),
        ((3, 64, 64), 2, 1, 4, 2, 0.4, "flatten"),  # the robots board's geometry
    ],
    ids=[
        "catch-1x1",
        "catch-2x2",
        "rgb-always-reset",
        "planes-drc-3x3",
        "remainder",
        "flatten-catch",
        "flatten-rgb-64",
    ],
)
def test_outputs_and_gradients_match_the_eager_reference(
    obs_shape, layers, ticks, t_len, batch, p_done, head
) -> None:
    env_spec = spec(obs_shape)
    fast = policy(env_spec, layers=layers, ticks=ticks, head=head)
    reference = reference_from(fast)
    obs, dones, state0 = random_inputs(env_spec, fast, t_len, batch, p_done)
    actions = torch.randint(0, 3, (t_len, batch))
    weights = torch.randn(3, t_len, batch, dtype=torch.float64)
    grads = {}
    for name, net in (("fast", fast), ("reference", reference)):
        start = tuple(s.clone().requires_grad_() for s in state0)
        outs = net.evaluate(obs, actions, start, dones)
        sum((w * o).sum() for w, o in zip(weights, outs, strict=True)).backward()
        grads[name] = (outs, [s.grad for s in start])
    (fast_outs, fast_state_grads), (ref_outs, ref_state_grads) = grads["fast"], grads["reference"]
    for got, expected in zip(fast_outs, ref_outs, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-11)
    for got, expected in zip(fast_state_grads, ref_state_grads, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-11)
    mapping = parameter_map(fast)
    for name, param in reference.named_parameters():
        source, index = mapping[name]
        torch.testing.assert_close(source.grad[index], param.grad, rtol=1e-9, atol=1e-11,
                                   msg=name)  # fmt: skip


def test_act_and_value_match_the_reference_step_by_step() -> None:
    env_spec = spec((3, 32, 32))
    fast = policy(env_spec)
    reference = reference_from(fast)
    obs, dones, state0 = random_inputs(env_spec, fast, 4, 3, p_done=0.4)
    fast_state = ref_state = state0
    for t in range(4):
        gens = [torch.Generator().manual_seed(t) for _ in range(2)]
        *fast_out, fast_state = fast.act(obs[t], fast_state, dones[t], None, gens[0])
        *ref_out, ref_state = reference.act(obs[t], ref_state, dones[t], None, gens[1])
        for got, expected in zip((*fast_out, *fast_state), (*ref_out, *ref_state), strict=True):
            torch.testing.assert_close(got, expected)
        torch.testing.assert_close(fast.value(obs[t], fast_state, None),
                                   reference.value(obs[t], ref_state, None))  # fmt: skip


def test_channels_last_computes_the_same_function() -> None:
    env_spec = spec((3, 32, 32))
    net = policy(env_spec)
    nhwc = ConvLSTMActorCritic(env_spec, 4, 2, 2, 16, channels_last=True).double()
    nhwc.load_state_dict(net.state_dict())
    obs, dones, state0 = random_inputs(env_spec, net, 5, 3, p_done=0.3)
    actions = torch.randint(0, 3, (5, 3))
    for got, expected in zip(nhwc.evaluate(obs, actions, state0, dones),
                             net.evaluate(obs, actions, state0, dones), strict=True):  # fmt: skip
        torch.testing.assert_close(got, expected)


def test_bf16_autocast_evaluate_is_close_to_fp32() -> None:
    env_spec = spec((3, 32, 32))
    net = policy(env_spec).float()
    obs, dones, state0 = random_inputs(env_spec, net, 4, 3, p_done=0.3)
    state0 = tuple(s.float() for s in state0)
    actions = torch.randint(0, 3, (4, 3))
    full = net.evaluate(obs, actions, state0, dones.float())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        half = net.evaluate(obs, actions, state0, dones.float())
    for got, expected in zip(half, full, strict=True):
        torch.testing.assert_close(got.float(), expected, rtol=0.05, atol=0.05)


# -- through the trainer ------------------------------------------------------------------------
NUM_ENVS, NUM_STEPS = 8, 16
BATCH = NUM_ENVS * NUM_STEPS
SMALL = {"policy__kind": "convlstm", "env__env": "catch", "policy__convlstm_channels": 4,
         "policy__cnn_features": 16}  # fmt: skip


def config(iterations: int, **overrides) -> Config:
    """A short CPU run: 8 envs x 16 steps, 4 minibatches x 2 epochs, one thread."""
    cfg = Config()
    cfg.env.num_envs, cfg.ppo.num_steps, cfg.ppo.update_epochs = NUM_ENVS, NUM_STEPS, 2
    cfg.run.total_steps, cfg.run.threads, cfg.run.progress, cfg.run.seed = (
        iterations * BATCH, 1, False, 3,
    )  # fmt: skip
    for dotted, value in {**SMALL, **overrides}.items():
        section, name = dotted.split("__")
        setattr(getattr(cfg, section), name, value)
    return cfg.validate()


def test_the_trainer_builds_the_convlstm_for_images() -> None:
    trainer = Trainer(config(1), profiler=Profiler())
    assert isinstance(trainer.policy, ConvLSTMActorCritic) and trainer.policy.recurrent
    assert trainer.policy.profiler is trainer.prof, "stage sections go to the trainer's profiler"


# Training every parameter on catch, the sampler and update it gets, bf16, and resume
# reproducing an uninterrupted run (whole rollout and BPTT 4) are tested with every policy kind
# in tests/ppo/test_trainer_policies.py.


# -- sections -----------------------------------------------------------------------------------
def sections_of_a_run(on: bool, head: str = "pool") -> set[str]:
    """Section paths recorded by a 1-iteration run in the trainer's own profiler (the stages
    go there, not to the process-wide one)."""
    prof = Profiler()
    get_profiler().reset()
    Trainer(config(1, policy__convlstm_sections=on, policy__convlstm_layers=2,
                   policy__convlstm_ticks=2, policy__convlstm_head=head),
            profiler=prof).train()  # fmt: skip
    assert not list(get_profiler().stats()), "nothing leaked into the process-wide profiler"
    return set(prof.totals_s())


@pytest.mark.parametrize(
    "head, absent",
    [("pool", names.CONVLSTM_FLATTEN), ("flatten", names.CONVLSTM_GLOBAL_POOL)],
)
def test_stage_sections_nest_under_policy_forward_and_loss_when_on(head, absent) -> None:
    recorded = sections_of_a_run(on=True, head=head)
    for parent in (names.path(names.ROLLOUT, names.POLICY_FORWARD),
                   names.path(names.UPDATE, names.LOSS)):  # fmt: skip
        base = names.path(parent, names.CONVLSTM)
        assert base in recorded
        for child in names.CONVLSTM_CHILDREN:
            if child != absent:  # the other head's stage
                assert names.path(base, child) in recorded, (parent, child)
        assert names.path(base, absent) not in recorded
        inject = names.path(base, names.CONVLSTM_LAYERS, names.CONVLSTM_POOL_INJECT)
        assert inject in recorded


def test_stage_sections_are_absent_when_off() -> None:
    recorded = sections_of_a_run(on=False)
    assert names.path(names.ROLLOUT, names.POLICY_FORWARD) in recorded
    assert not [name for name in recorded if names.CONVLSTM in name.split("/")]


# -- bad input ----------------------------------------------------------------------------------
def test_flat_observations_are_a_one_line_config_error() -> None:
    cfg = Config()
    cfg.policy.kind = "convlstm"
    flat = EnvSpec(5, (4,), np.dtype(np.float32), ActionSpec("discrete", (2,), 1))
    with pytest.raises(ConfigError, match=r"'convlstm' takes \(C, H, W\) image") as err:
        make_policy(cfg.policy, flat)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="takes .C, H, W. image observations"):
        Trainer(config(1, env__env="cartpole"), profiler=Profiler())


@pytest.mark.parametrize("field", ["convlstm_channels", "convlstm_layers", "convlstm_ticks"])
@pytest.mark.parametrize("value", [0, -1])
def test_non_positive_sizes_are_config_errors(field: str, value: int) -> None:
    cfg = Config()
    setattr(cfg.policy, field, value)
    with pytest.raises(ConfigError, match=f"{field} must be positive, got {value}") as err:
        cfg.validate()
    assert "\n" not in str(err.value)


def test_an_unknown_head_is_a_one_line_error() -> None:
    cfg = Config()
    cfg.policy.convlstm_head = "flat"
    with pytest.raises(ConfigError, match="convlstm_head must be one of pool, flatten") as err:
        cfg.validate()
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="ConvLSTM head must be one of pool, flatten"):
        ConvLSTMActorCritic(spec(), head="flat")
