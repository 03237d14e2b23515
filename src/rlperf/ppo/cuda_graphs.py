"""The PPO minibatch step, eager (the reference) or as a CUDA graph captured once and replayed.

On a GPU a small network's minibatch step is a few hundred short kernels, each launched from
Python: the first GPU run found the GPU busy 12-27% of the wall (issue 57). A CUDA graph records
one step's launches once and replays them with one call. What that takes, as LeanRL's scripts
(``leanrl/ppo_continuous_action_torchcompile.py``: ``CudaGraphModule`` over ``update``) and
``torch.cuda.graphs``' documentation have it:

- every input at a fixed address: each minibatch is copied into static tensors first (section
  ``update/minibatch_prep``) and the graph reads only those;
- nothing read back to the host inside the step: the loss statistics stay on the device (the
  updates never sync, ``ppo/update.py``), and the step's sections are not timed inside it (a
  section's clock, or its CUDA synchronisation, cannot be recorded);
- what changes between replays in device memory: Adam's step count is a device tensor already,
  the learning rate becomes one (:meth:`~rlperf.ppo.optim.FlatAdam.use_tensor_lr`, annealed in
  place), the fused kernel's equivalent of ``torch.optim.Adam(capturable=True)``;
- a few eager steps on a side stream before capture (cuBLAS handles, autograd's buffers and the
  policy's workspaces are made outside it). These are real minibatches, not repeats: the
  parameters follow the eager path's.

:class:`MinibatchStep` is the eager step: normalise the advantages, gradients, Adam.
:class:`StaticMinibatchStep` runs the same step on static inputs with the tensor learning rate,
eagerly, anywhere: the function the graph records, tested on the CPU. :class:`GraphedMinibatchStep`
adds the CUDA part, :class:`CapturedCall`: :data:`WARMUP_STEPS` eager minibatches, then capture
and replay, timed as one section, ``update/minibatch_graph`` (loss, backward and Adam are no
longer apart in the breakdown). :func:`make_minibatch_step` picks one and says why;
:func:`minibatch_updates` runs a rollout's epochs through it. :func:`graph_rollout_step` replays
a ``--vec-backend torch`` rollout's step (``ppo/device_rollout.py``, built to be captured) the
same way.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any, cast

import torch

from rlperf.config import Config, PPOConfig
from rlperf.distributed.group import Ranks
from rlperf.policies.base import ActorCritic
from rlperf.ppo.device_rollout import DeviceRollout
from rlperf.ppo.loss import STAT_NAMES, normalize_advantages
from rlperf.ppo.samplers import Minibatch, PackedTableSampler, RowSampler, SegmentSampler
from rlperf.ppo.update import AnalyticUpdate, AutogradUpdate, NativeMLPUpdate
from rlperf.threads import PhaseThreads
from rlperf.timing import names
from rlperf.timing.sections import Profiler

Update = NativeMLPUpdate | AnalyticUpdate | AutogradUpdate
# Eager calls on a side stream before the capture (torch.cuda.graphs' examples take 3).
WARMUP_STEPS = 3
COMPILE_REASON = "--compile (torch.compile's code is not captured here)"


class _Untimed(Profiler):
    """Sections that do nothing, as ``contextlib.nullcontext`` (which ``torch.compile`` traces,
    so the tests can hold the captured step free of graph breaks)."""

    def __init__(self) -> None:
        super().__init__(enabled=False)

    def section(self, name: str) -> Any:
        return contextlib.nullcontext()


UNTIMED = _Untimed()


class MinibatchStep:
    """One minibatch through the update, eagerly: advantages normalised (``--norm-adv``, section
    ``minibatch_prep``), gradients, Adam. The reference every other step is held to."""

    def __init__(self, update: Update, ppo: PPOConfig) -> None:
        self.update, self.ppo = update, ppo

    def __call__(self, mb: Minibatch, prof: Profiler, supervised: bool = False) -> torch.Tensor:
        """Update the parameters from ``mb``; returns its loss statistics (5,) on the device.
        With ``supervised``, the teacher phase's loss (``ppo/supervised.py``)."""
        with prof.section(names.MINIBATCH_PREP):
            adv = normalize_advantages(mb.advantages) if self.ppo.norm_adv else mb.advantages
        loss_kw = {"supervised": True} if supervised else {}
        stats = self.update.gradients(mb, adv, prof, **loss_kw)
        self.update.apply(prof)
        return stats


def _clone(x: Any) -> Any:
    if isinstance(x, tuple):
        return tuple(t.clone() for t in x)
    return None if x is None else x.clone()


def static_minibatch(mb: Minibatch) -> Minibatch:
    """Tensors of ``mb``'s shapes to copy every minibatch into. A packed-table minibatch's
    fields are views of its rows, as the sampler makes them, so one copy fills both."""
    if mb.rows is not None:
        rows = tuple(r.clone() for r in mb.rows)
        obs, actions, logprobs, values, advantages, returns = (r.unsqueeze(0) for r in rows)
        return Minibatch(obs, actions, logprobs, values, advantages, returns, rows=rows)
    return Minibatch(**{f.name: _clone(getattr(mb, f.name)) for f in dataclasses.fields(mb)})


def _pairs(dst: Minibatch, src: Minibatch) -> list[tuple[torch.Tensor, torch.Tensor]]:
    if src.rows is not None:
        return list(zip(dst.rows or (), src.rows, strict=True))
    pairs: list[tuple[torch.Tensor, torch.Tensor]] = []
    for f in dataclasses.fields(src):
        d, s = getattr(dst, f.name), getattr(src, f.name)
        if isinstance(s, tuple):
            pairs.extend(zip(d, s, strict=True))
        elif s is not None:
            pairs.append((d, s))
    return pairs


class StaticMinibatchStep(MinibatchStep):
    """:class:`MinibatchStep` on static inputs (each minibatch copied in) with the learning
    rate read from a device tensor: what :class:`GraphedMinibatchStep` records, run eagerly
    here. The teacher phase's minibatches take the eager step."""

    def __init__(self, update: Update, ppo: PPOConfig) -> None:
        super().__init__(update, ppo)
        update.optimizer.use_tensor_lr()
        self.static: Minibatch | None = None

    def load(self, mb: Minibatch) -> Minibatch:
        """Copy ``mb`` into the static minibatch (made from the first one) and return it."""
        if self.static is None:
            self.static = static_minibatch(mb)
            return self.static
        for dst, src in _pairs(self.static, mb):
            dst.copy_(src)
        return self.static

    def step_static(self) -> torch.Tensor:
        """The step on the static minibatch, untimed: the function a CUDA graph records."""
        return MinibatchStep.__call__(self, self.static, UNTIMED)  # type: ignore[arg-type]

    def __call__(self, mb: Minibatch, prof: Profiler, supervised: bool = False) -> torch.Tensor:
        if supervised:
            return super().__call__(mb, prof, supervised)
        with prof.section(names.MINIBATCH_PREP):
            self.load(mb)
        with prof.section(names.MINIBATCH_GRAPH):
            return self.run()

    def run(self) -> torch.Tensor:
        """The step on the loaded static minibatch (eager here)."""
        return self.step_static()


class CapturedCall:
    """``fn()`` as a CUDA graph: the first ``warmup_steps`` calls eagerly on a side stream, the
    next one captured and replayed, every later one replayed. ``fn`` must read and write only
    tensors that outlive it, at fixed addresses, and return a tensor: the graph's output, which
    each replay rewrites. CUDA only."""

    def __init__(self, fn: Callable[[], torch.Tensor], warmup_steps: int = WARMUP_STEPS) -> None:
        self.fn, self.warmup_steps, self.eager_steps = fn, warmup_steps, 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.out: torch.Tensor | None = None

    def __call__(self) -> torch.Tensor:
        if self.graph is not None:
            self.graph.replay()
            return self.out  # type: ignore[return-value]
        current = torch.cuda.current_stream()
        if self.eager_steps < self.warmup_steps:
            self.eager_steps += 1
            side = torch.cuda.Stream()
            side.wait_stream(current)
            with torch.cuda.stream(side):
                out = self.fn()
            current.wait_stream(side)
            out.record_stream(current)  # made on the side stream, read on this one
            return out
        graph = torch.cuda.CUDAGraph()
        # thread_local: a CUDA call from another thread of the process must not void the capture.
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            self.out = self.fn()
        self.graph = graph
        graph.replay()  # capture records without running: this call's work runs now
        return self.out


class GraphedMinibatchStep(StaticMinibatchStep):
    """:class:`StaticMinibatchStep` as a CUDA graph (:class:`CapturedCall`): the first
    :data:`WARMUP_STEPS` minibatches eagerly, the next captured, every later one replayed."""

    def __init__(self, update: Update, ppo: PPOConfig, warmup_steps: int = WARMUP_STEPS) -> None:
        super().__init__(update, ppo)
        if isinstance(update, AutogradUpdate):
            update.autocast_cache = False  # torch.cuda.graphs: autocast's cache breaks capture
        self.captured = CapturedCall(self.step_static, warmup_steps)

    def run(self) -> torch.Tensor:
        return self.captured()


def graph_rollout_step(rollout: DeviceRollout, cfg: Config) -> bool:
    """Replay a device rollout's step as a CUDA graph (:class:`CapturedCall`) where CUDA graphs
    apply (CUDA, ``--cuda-graphs``, no ``--compile``); returns whether it does. The step
    (``ppo/device_rollout.py``) reads and writes only tensors the rollout allocated once and
    advances its step index ``rollout.t`` in place, so one graph replays every step of every
    rollout: ``collect`` calls ``step_fn(rollout.t)``, which this replaces."""
    if rollout.buffer.device.type != "cuda" or cuda_graphs_off_reason(cfg, False, 1):
        return False
    captured = CapturedCall(lambda: rollout.step(rollout.t))

    def replay(t: torch.Tensor) -> torch.Tensor:
        if t is not rollout.t:
            raise ValueError("the captured rollout step advances the rollout's own step index")
        return captured()

    rollout.step_fn = replay
    return True


def cuda_graphs_off_reason(cfg: Config, recurrent: bool, world_size: int) -> str | None:
    """Why a CUDA run's minibatch step is not captured (``recurrent``: the policy's), or None:
    it is."""
    if not cfg.run.cuda_graphs:
        return "--no-cuda-graphs"
    if cfg.ppo.compile:
        return COMPILE_REASON
    if world_size > 1:
        return "several ranks (the gradient all-reduce runs inside each minibatch step)"
    if recurrent:
        return "a recurrent policy (its segment minibatches are not captured yet)"
    return None


def make_minibatch_step(
    cfg: Config, update: Update, ranks: Ranks
) -> tuple[MinibatchStep, str | None]:
    """The run's minibatch step for ``update`` (built for its policy, where its parameters are)
    and its start line: on CUDA a :class:`GraphedMinibatchStep` unless
    :func:`cuda_graphs_off_reason` says why not (the line says which), elsewhere the eager
    :class:`MinibatchStep` and no line (``--cuda-graphs`` applies to CUDA only)."""
    if update.flat.device.type != "cuda":
        return MinibatchStep(update, cfg.ppo), None
    policy = cast(ActorCritic, update.policy)  # an analytic policy is an ActorCritic too
    reason = cuda_graphs_off_reason(cfg, policy.recurrent, ranks.world_size)
    if reason is not None:
        # --no-cuda-graphs and --compile: no graph; several ranks: a torch env's rollout still.
        whole = reason in ("--no-cuda-graphs", COMPILE_REASON)
        line = f"CUDA graphs: {'off' if whole else 'not for the update'} ({reason})"
        return MinibatchStep(update, cfg.ppo), line
    line = (
        f"CUDA graphs: on (the minibatch update, and a --vec-backend torch rollout's step, "
        f"captured after {WARMUP_STEPS} eager calls and replayed; --no-cuda-graphs for the "
        "eager path)"
    )
    return GraphedMinibatchStep(update, cfg.ppo), line


def minibatch_updates(
    step: MinibatchStep,
    sampler: PackedTableSampler | RowSampler | SegmentSampler,
    generator: torch.Generator,
    prof: Profiler,
    threads: PhaseThreads,
    supervised: bool,
) -> torch.Tensor:
    """``update_epochs`` shuffled passes of the sampler's minibatches through ``step``; their
    statistics summed (5,) on the device (no host sync)."""
    sec, ppo = prof.section, step.ppo
    stats_sum = torch.zeros(len(STAT_NAMES), device=sampler.buf.device)
    with sec(names.MINIBATCH_PREP):
        sampler.prepare()
    for _ in range(ppo.update_epochs):
        with sec(names.MINIBATCH_PREP):
            minibatches = sampler.epoch(ppo.num_minibatches, generator)
        for mb in minibatches:
            stats_sum += step(mb, prof, supervised)
            if threads.watching:
                threads.unit_done()
    return stats_sum
