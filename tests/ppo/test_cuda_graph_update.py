"""The minibatch step a CUDA graph records (ppo/cuda_graphs.py), held on the CPU: free of host
syncs and graph breaks, and with its static inputs and tensor learning rate equal to the eager
step over several annealed iterations. The capture and replay themselves need a GPU (the GPU
check runs them); FlatAdam's tensor learning rate on the CPU is the same fused kernel's
``tensor_lr`` overload, so ``capturable`` needs no CUDA here."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from rlperf.config import Config
from rlperf.distributed.group import SINGLE
from rlperf.envs.spec import ActionSpec, EnvSpec
from rlperf.policies.cnn import CNNActorCritic
from rlperf.policies.mlp import MLPActorCritic
from rlperf.ppo.cuda_graphs import (
    GraphedMinibatchStep,
    MinibatchStep,
    StaticMinibatchStep,
    cuda_graphs_off_reason,
    make_minibatch_step,
    minibatch_updates,
    static_minibatch,
)
from rlperf.ppo.samplers import Minibatch
from rlperf.ppo.update import AnalyticUpdate, AutogradUpdate
from rlperf.timing.sections import Profiler

ROWS = 64
requires_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU (benchmarks/gpu_check.py runs it)"
)
# What reads a device tensor back to the host (a sync on CUDA): item/bool/float, data-dependent
# shapes, comparisons answered on the host.
SYNC_OPS = {"aten._local_scalar_dense", "aten.nonzero", "aten.is_nonzero", "aten.equal",
            "aten.masked_select", "aten.item", "aten._unique2"}  # fmt: skip


class OpLog(TorchDispatchMode):
    """Every aten op run inside, forward and backward."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        self.ops.add(str(func.overloadpacket))
        return func(*args, **(kwargs or {}))


def _minibatch(policy: torch.nn.Module, gen: torch.Generator, packed: bool) -> Minibatch:
    """A random (1, ROWS) minibatch for ``policy`` (flat MLP observations or images), on the
    policy's device (drawn on the CPU)."""
    param = next(policy.parameters())
    dtype, device = param.dtype, param.device
    if isinstance(policy, CNNActorCritic):
        obs = torch.randint(0, 255, (1, ROWS, 2, 9, 9), generator=gen).to(torch.uint8)
    else:
        obs = torch.randn(1, ROWS, policy.obs_dim, generator=gen, dtype=dtype)
    continuous = isinstance(policy, MLPActorCritic) and policy.continuous
    if continuous:
        actions = torch.randn(1, ROWS, policy.action_dim, generator=gen, dtype=dtype)
    else:
        actions = torch.randint(0, 2, (1, ROWS), generator=gen)
    logprobs, values, advantages, returns = (
        torch.randn(4, 1, ROWS, generator=gen, dtype=dtype) * 0.5
    ).unbind(0)
    logprobs = logprobs - (1.5 if continuous else 0.7)
    rows = tuple(t[0].to(device) for t in (obs, actions, logprobs, values, advantages, returns))
    fields = [r.unsqueeze(0) for r in rows]
    return Minibatch(*fields, rows=rows if packed else None)


def _policy(kind: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if kind == "cnn":
        spec = EnvSpec(4, (2, 9, 9), np.dtype(np.uint8), ActionSpec("discrete", (2,), 1))
        return CNNActorCritic(spec, (8,), 16)
    # float64: the analytic update's loss then takes its torch ops, as on CUDA (the CPU's
    # float32 loss is a C loop, which neither dynamo nor a graph sees).
    return MLPActorCritic.from_sizes(4, 2, continuous=kind == "mlp-box").double()


def _update(kind: str, policy: torch.nn.Module, cfg: Config) -> AnalyticUpdate | AutogradUpdate:
    if kind.startswith("analytic"):
        return AnalyticUpdate(policy, cfg.ppo, ROWS)
    return AutogradUpdate(policy, cfg.ppo)


CASES = [("analytic", "mlp"), ("analytic", "mlp-box"), ("autograd", "mlp"),
         ("autograd", "mlp-box"), ("autograd", "cnn")]  # fmt: skip


@pytest.mark.parametrize(("update_kind", "policy_kind"), CASES, ids=lambda v: v)
def test_captured_step_reads_nothing_back_to_the_host(update_kind: str, policy_kind: str) -> None:
    """Every op of the step the graph records, backward included, stays on the device."""
    policy = _policy(policy_kind)
    step = StaticMinibatchStep(_update(update_kind, policy, Config()), Config().ppo)
    step.load(_minibatch(policy, torch.Generator().manual_seed(0), packed=True))
    with OpLog() as log:
        stats = step.step_static()
    assert stats.shape == (5,) and bool(torch.isfinite(stats).all())
    assert "aten._fused_adam_" in log.ops, "Adam is inside the recorded step"
    assert not log.ops & SYNC_OPS, f"host syncs in the captured step: {log.ops & SYNC_OPS}"


def test_analytic_step_compiles_as_one_graph() -> None:
    """torch.compile(fullgraph=True) of the analytic step succeeds: no graph break, no host
    sync in forward, loss, backward, clipping and Adam with its tensor learning rate. Dynamo
    traces neither the autograd update's ``backward()`` nor the Gaussian loss's writes into
    strided ``out=`` views (neither a sync; a CUDA graph records both): the op log above holds
    those."""
    torch._dynamo.reset()
    policy = _policy("mlp")
    step = StaticMinibatchStep(_update("analytic", policy, Config()), Config().ppo)
    step.load(_minibatch(policy, torch.Generator().manual_seed(0), packed=True))
    before = policy.flat.detach().clone()
    stats = torch.compile(step.step_static, fullgraph=True, backend="eager")()
    assert stats.shape == (5,) and not torch.equal(policy.flat.detach(), before)


def _train(step: MinibatchStep, batches: list[list[Minibatch]], lr: float) -> torch.Tensor:
    """Annealed iterations of minibatch steps, as the trainer runs them; the stats summed."""
    stats = torch.zeros(5, dtype=torch.float64, device=step.update.flat.device)
    for i, minibatches in enumerate(batches):
        step.update.lr = (1.0 - i / len(batches)) * lr
        for mb in minibatches:
            stats += step(mb, Profiler(enabled=False)).double()
    return stats


@pytest.mark.parametrize(("update_kind", "policy_kind"), CASES, ids=lambda v: v)
@pytest.mark.parametrize("packed", [True, False], ids=["packed", "rows"])
def test_static_tensor_lr_step_equals_the_eager_step(
    update_kind: str, policy_kind: str, packed: bool
) -> None:
    """Three annealed iterations of four minibatches: the static inputs and the device learning
    rate give the eager step's parameters, Adam state and statistics."""
    cfg = Config()
    gen = torch.Generator().manual_seed(1)
    policy = _policy(policy_kind)
    batches = [[_minibatch(policy, gen, packed) for _ in range(4)] for _ in range(3)]
    results = []
    for step_cls in (MinibatchStep, StaticMinibatchStep):
        policy = _policy(policy_kind)
        update = _update(update_kind, policy, cfg)
        stats = _train(step_cls(update, cfg.ppo), batches, cfg.ppo.learning_rate)
        opt = update.optimizer
        results.append((update.flat.detach().clone(), opt.exp_avg, opt.exp_avg_sq, stats))
    assert results[1][1].abs().sum() > 0, "Adam stepped"
    for eager, static in zip(*results, strict=True):
        torch.testing.assert_close(static, eager)


def test_static_minibatch_is_refilled_in_place() -> None:
    """A packed minibatch's fields are views of its rows: one copy fills both, in place."""
    policy = _policy("mlp")
    step = StaticMinibatchStep(_update("analytic", policy, Config()), Config().ppo)
    gen = torch.Generator().manual_seed(2)
    first, second = _minibatch(policy, gen, True), _minibatch(policy, gen, True)
    static = step.load(first)
    addresses = [t.data_ptr() for t in static.rows or ()]
    assert step.load(second) is static
    assert [t.data_ptr() for t in static.rows or ()] == addresses
    torch.testing.assert_close(static.obs, second.obs)
    torch.testing.assert_close(static.advantages, second.advantages)
    plain = static_minibatch(_minibatch(policy, gen, False))
    assert plain.rows is None and plain.obs.shape == (1, ROWS, 4)


def test_tensor_lr_follows_the_lr_setter() -> None:
    update = _update("analytic", _policy("mlp"), Config())
    update.optimizer.use_tensor_lr()
    update.lr = 1.25e-3
    assert update.optimizer.lr_tensor is not None
    assert update.optimizer.lr_tensor.item() == pytest.approx(1.25e-3)
    assert update.optimizer.state_dict()["lr"] == 1.25e-3


def test_graphs_apply_on_cuda_only_and_say_why_not() -> None:
    cfg = Config()
    policy = _policy("mlp")
    step, note = make_minibatch_step(cfg, _update("analytic", policy, cfg), SINGLE)
    assert type(step) is MinibatchStep and note is None, "the CPU path stays eager and silent"
    assert cuda_graphs_off_reason(cfg, False, 1) is None
    cfg.run.cuda_graphs = False
    assert cuda_graphs_off_reason(cfg, False, 1) == "--no-cuda-graphs"
    cfg.run.cuda_graphs, cfg.ppo.compile = True, True
    assert "--compile" in (cuda_graphs_off_reason(cfg, False, 1) or "")
    cfg.ppo.compile = False
    assert "ranks" in (cuda_graphs_off_reason(cfg, False, 2) or "")


def test_graphed_step_turns_autocast_caching_off() -> None:
    """torch.cuda.graphs: a captured region must not use autocast's weight cache. Built on the
    CPU (nothing CUDA happens before the first step), the step itself run eagerly in bf16."""
    cfg = Config()
    policy = _policy("mlp").float()
    update = AutogradUpdate(policy, cfg.ppo, precision="bf16")
    assert update.autocast_cache
    step = GraphedMinibatchStep(update, cfg.ppo)
    assert not update.autocast_cache and step.captured.graph is None
    step.load(_minibatch(policy, torch.Generator().manual_seed(3), packed=True))
    assert bool(torch.isfinite(StaticMinibatchStep.run(step)).all())


def test_cuda_graphs_flag() -> None:
    from rlperf.cli import build_parser
    from rlperf.ppo.commands import config_from_args

    def parsed(*flags: str) -> bool:
        return config_from_args(build_parser().parse_args(["train", *flags])).run.cuda_graphs

    assert parsed() is True
    assert parsed("--no-cuda-graphs") is False


class CountingStep(MinibatchStep):
    """The eager step, counting its minibatches."""

    calls = 0

    def __call__(self, mb: Minibatch, prof: Profiler, supervised: bool = False) -> torch.Tensor:
        self.calls += 1
        return super().__call__(mb, prof, supervised)


def test_minibatch_updates_runs_every_minibatch_of_every_epoch() -> None:
    """The trainer's epoch loop: a CPU trainer takes the eager step and prints nothing."""
    from rlperf.ppo.trainer import Trainer

    cfg = Config()
    cfg.env.num_envs, cfg.ppo.num_steps, cfg.run.total_steps = 4, 16, 64
    cfg.run.telemetry = cfg.run.progress = False
    trainer = Trainer(cfg, Profiler())
    assert trainer.notes == [] and type(trainer.minibatch_step) is MinibatchStep
    with trainer.policy.acting():
        trainer.collect()
        trainer.compute_advantages()
    step = CountingStep(trainer.update_impl, cfg.ppo)
    stats = minibatch_updates(step, trainer.sampler, trainer.shuffle_gen, Profiler(),
                              trainer.threads.update, False)  # fmt: skip
    assert step.calls == cfg.ppo.update_epochs * cfg.ppo.num_minibatches
    assert stats.shape == (5,) and bool(torch.isfinite(stats).all())


@requires_cuda
@pytest.mark.parametrize(("update_kind", "policy_kind"), CASES, ids=lambda v: v)
def test_graphed_step_equals_the_eager_step_on_cuda(update_kind: str, policy_kind: str) -> None:
    """Three annealed iterations of eight minibatches on the GPU: three eager minibatches, a
    capture, then replays give the eager step's parameters, Adam state and statistics."""
    cfg = Config()
    gen, template = torch.Generator().manual_seed(1), _policy(policy_kind).float().cuda()
    batches = [[_minibatch(template, gen, True) for _ in range(8)] for _ in range(3)]
    results = []
    for step_cls in (MinibatchStep, GraphedMinibatchStep):
        update = _update(update_kind, _policy(policy_kind).float().cuda(), cfg)
        step = step_cls(update, cfg.ppo)
        stats = _train(step, batches, cfg.ppo.learning_rate)
        opt = update.optimizer
        results.append((update.flat.detach().clone(), opt.exp_avg, opt.exp_avg_sq, stats))
    assert isinstance(step, GraphedMinibatchStep) and step.captured.graph is not None
    for eager, graphed in zip(*results, strict=True):
        torch.testing.assert_close(graphed.cpu(), eager.cpu(), rtol=1e-4, atol=1e-5)


@requires_cuda
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_graphed_autocast_step_equals_the_eager_step_on_cuda(precision: str) -> None:
    """Autocast inside the graph (its weight cache off) and fp16's loss scaling (scale, skip
    and growth all on the device): the eager step's parameters and scale after 24 steps."""
    cfg = Config()
    gen, template = torch.Generator().manual_seed(1), _policy("mlp").float().cuda()
    batches = [[_minibatch(template, gen, True) for _ in range(8)] for _ in range(3)]
    results = []
    for step_cls in (MinibatchStep, GraphedMinibatchStep):
        update = AutogradUpdate(_policy("mlp").float().cuda(), cfg.ppo, precision=precision)
        stats = _train(step_cls(update, cfg.ppo), batches, cfg.ppo.learning_rate)
        scale = update.scaler.scale if update.scaler is not None else torch.ones(())
        results.append((update.flat.detach().clone(), stats, scale))
    for eager, graphed in zip(*results, strict=True):
        torch.testing.assert_close(graphed.cpu(), eager.cpu(), rtol=1e-3, atol=1e-4)


@requires_cuda
def test_a_cuda_trainer_with_graphs_takes_the_eager_trainers_step() -> None:
    """One iteration of CartPole on the GPU (16 minibatches: 3 eager, a capture, 12 replays)
    from the same rollout: the parameters equal the eager trainer's within float tolerance."""
    from rlperf.ppo.device_choice import probe_iteration
    from rlperf.ppo.trainer import Trainer

    def one_iteration(graphs: bool) -> Trainer:
        cfg = Config()
        cfg.env.num_envs, cfg.ppo.num_steps, cfg.run.total_steps = 64, 32, 64 * 32 * 4
        cfg.run.device, cfg.run.cuda_graphs = "cuda", graphs
        cfg.run.telemetry = cfg.run.progress = False
        trainer = Trainer(cfg, Profiler())
        probe_iteration(trainer)
        return trainer

    eager, graphed = one_iteration(False), one_iteration(True)
    assert eager.notes[-1] == "CUDA graphs: off (--no-cuda-graphs)"
    assert graphed.notes[-1].startswith("CUDA graphs: on")
    step = graphed.minibatch_step
    assert isinstance(step, GraphedMinibatchStep) and step.captured.graph is not None
    timed = {name.rsplit("/", 1)[-1] for name in graphed.prof.totals_s()}
    assert "minibatch_graph" in timed and "optimizer_step" not in timed
    torch.testing.assert_close(
        graphed.update_impl.flat.detach().cpu(), eager.update_impl.flat.detach().cpu(),
        rtol=1e-4, atol=1e-5,
    )  # fmt: skip


def _device_rollout_trainer(device: str, graphs: bool = True) -> object:
    from rlperf.ppo.trainer import Trainer

    cfg = Config()
    cfg.env.backend, cfg.env.num_envs, cfg.ppo.num_steps = "torch", 64, 32
    cfg.run.total_steps, cfg.run.device, cfg.run.cuda_graphs = 64 * 32 * 2, device, graphs
    cfg.run.telemetry = cfg.run.progress = False
    return Trainer(cfg, Profiler())


def test_the_rollout_step_is_captured_on_cuda_only() -> None:
    from rlperf.ppo.device_rollout import DeviceRollout

    rollout = _device_rollout_trainer("cpu").whole_rollout  # type: ignore[attr-defined]
    assert isinstance(rollout, DeviceRollout)
    assert rollout.step_fn == rollout.step, "the CPU's device rollout steps eagerly"


@requires_cuda
def test_a_captured_rollout_step_gives_the_eager_rollout_on_cuda() -> None:
    """One rollout of 32 steps (3 eager, a capture, 28 replays) writes the eager rollout's
    buffer: the same draws, the same kernels."""
    trainers = [_device_rollout_trainer("cuda", graphs) for graphs in (False, True)]
    for trainer in trainers:
        with trainer.policy.acting():  # type: ignore[attr-defined]
            trainer.collect()  # type: ignore[attr-defined]
    eager, graphed = (t.buffer for t in trainers)  # type: ignore[attr-defined]
    rollout = trainers[1].whole_rollout  # type: ignore[attr-defined]
    assert rollout.step_fn != rollout.step
    for name in ("obs", "actions", "logprobs", "values"):
        torch.testing.assert_close(getattr(graphed, name).cpu(), getattr(eager, name).cpu())
    for got, want in zip(graphed.env_outputs(), eager.env_outputs(), strict=True):
        torch.testing.assert_close(got.cpu(), want.cpu())  # rewards, terminations, truncations
