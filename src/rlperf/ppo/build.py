"""The parts a run is built from, chosen once from what the policy and the env declare.

The trainer never asks which policy or env it has: the choices that depend on them are made
here, when the run starts, from declared capabilities (``policy.recurrent``, ``policy.analytic``
of the :class:`~rlperf.policies.base.AnalyticPolicy` protocol, the buffer's layout) and the
config.

- The **update**: :class:`~rlperf.ppo.update.AnalyticUpdate` (closed-form gradients, no autograd
  graph) where the policy offers it and nothing needs autograd (fp32, no ``--compile``, no
  supervised loss, ``--analytic`` on), as :class:`~rlperf.ppo.update.NativeMLPUpdate` (one C
  kernel) for the MLP on the CPU where that kernel is built;
  :class:`~rlperf.ppo.update.AutogradUpdate` otherwise.
- The **env step**: ``rollout/env_step``, or for env workers (``envs/workers/``) the send of
  the actions (``rollout/env_send``) and the wait for the workers (``rollout/env_recv``), so the
  breakdown shows whether the trainer waits on the workers or the workers on the trainer; then
  the observation/reward normalisation where the run asks for it (``rollout/normalize``).
- The **collectors**: a whole rollout in one go where one applies (env workers' asynchronous
  batches, ``ppo/async_rollout.py``; a torch env's rollout on the device,
  ``ppo/device_rollout.py``; the fused CartPole rollout of the MLP or the LSTM,
  ``ppo/fused_rollout.py``), and for the trainer's own step loop the policy's part of a step:
  the fused step (the analytic MLP on any env) or ``policy.act``
  (:class:`~rlperf.ppo.rollout.PolicyStep`, the reference). The trainer's loop names neither.
- The **sampler**: whole BPTT segments for a recurrent policy
  (:class:`~rlperf.ppo.samplers.SegmentSampler`), one packed float table where the buffer fits
  one (:class:`~rlperf.ppo.samplers.PackedTableSampler`), else rows gathered per field
  (:class:`~rlperf.ppo.samplers.RowSampler`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch
from gymnasium.vector import VectorEnv

from rlperf import openmp
from rlperf.config import Config, ConfigError
from rlperf.distributed.group import Ranks
from rlperf.envs.device import DeviceVecEnv
from rlperf.envs.normalize import Normalizer
from rlperf.envs.spec import EnvSpec
from rlperf.envs.workers import MultiprocessVecEnv
from rlperf.policies.base import ActorCritic, FeedForwardActorCritic, State
from rlperf.ppo.async_rollout import AsyncCollector
from rlperf.ppo.cuda_graphs import graph_rollout_step
from rlperf.ppo.device_rollout import DeviceRollout, device_rollout_applies
from rlperf.ppo.fused_rollout import FusedStep, make_fused
from rlperf.ppo.rollout import PolicyStep, RolloutBuffer
from rlperf.ppo.samplers import PackedTableSampler, RowSampler, SegmentSampler
from rlperf.ppo.update import (
    AnalyticUpdate,
    AutogradUpdate,
    NativeMLPUpdate,
    analytic_update_applies,
    native_update_applies,
)
from rlperf.run.allocator import keep_freed_memory
from rlperf.run.episode_log import EpisodeLog
from rlperf.timing import names
from rlperf.timing.sections import Profiler, get_profiler

StepResult = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]
Update = NativeMLPUpdate | AnalyticUpdate | AutogradUpdate
# The native update is one thread: at 1024x32 (8192-sample minibatches) the analytic update's
# torch matmuls on 2 threads beat it (312k against 202k SPS, paired medians of 4 rounds,
# docs/journal/performance.md, 2026-11-26); at 512 samples (64x32) it is 1.12x ahead. Where the
# update has one thread anyway it is ahead at 8192 samples too (1.11x the analytic update's
# SPS at 1024x32, --threads 1, 3 interleaved rounds, 2026-11-26), so the limit is for 2+.
NATIVE_UPDATE_MAX_SAMPLES = 2048
Sampler = PackedTableSampler | RowSampler | SegmentSampler


def resolve_device(name: str) -> torch.device:
    """The torch device for ``name``, or ConfigError when it is not available here."""
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} requested but CUDA is not available on this machine")
    return torch.device(name)


def setup_process(cfg: Config, device: torch.device, profiler: Profiler | None) -> Profiler:
    """What a run sets in its process before building anything: torch's threads
    (``--threads``), the allocator (``--keep-freed-memory``), and the profiler's CUDA
    synchronisation on CUDA (``--cuda-sync``). Returns the profiler to record into: ``profiler``
    or the process-wide one."""
    prof = profiler if profiler is not None else get_profiler()
    if device.type == "cuda":
        prof.set_cuda_sync(cfg.run.cuda_sync)
    if cfg.run.threads > 0:
        torch.set_num_threads(cfg.run.threads)
    if cfg.run.keep_freed_memory:
        keep_freed_memory()
    return prof


def phase_threads(cfg: Config, device: torch.device) -> tuple[int, int]:
    """The most torch threads the update and the rollout may take (call after
    ``torch.set_num_threads(--threads)``; it may lower torch's count for the run).

    With env workers, or EnvPool stepping batches beside the trainer, the cores beside the
    trainer's are theirs while they step: the rollout runs the policy on one thread, the update
    (the envs idle) on ``--threads``. Two threads in the rollout took a worker's core (0.61x
    serial's SPS); one thread for the whole run left a core idle through every update
    (docs/workers.md, openmp.py).
    """
    workers = cfg.env.steps_beside_trainer
    if workers and device.type == "cpu" and torch.get_num_threads() > 1:
        problem = openmp.long_spin_problem()
        if problem:  # the update's spare thread would spin into every rollout
            warnings.warn(f"{problem}; the update runs on 1 thread", stacklevel=3)
            torch.set_num_threads(1)
    update = torch.get_num_threads()
    return update, 1 if workers else update


def make_update(
    policy: ActorCritic, cfg: Config, minibatch_size: int, supervised_phase: bool
) -> Update:
    """The update for ``policy``: analytic where it applies (see the module docstring); the
    native one for minibatches of up to :data:`NATIVE_UPDATE_MAX_SAMPLES` rows, or any size
    where torch has one thread (call it after ``torch.set_num_threads``).

    Args:
        minibatch_size: rows of one minibatch (the analytic update sizes its scratch once).
        supervised_phase: the run has a supervised phase, whose loss only autograd takes.
    """
    ppo = cfg.ppo
    if cfg.policy.analytic and not supervised_phase and analytic_update_applies(policy, ppo):
        one_thread = torch.get_num_threads() == 1  # the update's threads, set by now
        native_size = one_thread or minibatch_size <= NATIVE_UPDATE_MAX_SAMPLES
        if native_update_applies(policy, ppo) and native_size:
            return NativeMLPUpdate(policy, ppo, minibatch_size)
        return AnalyticUpdate(policy, ppo, minibatch_size)
    return AutogradUpdate(policy, ppo, ppo.precision, ppo.compile)


def whole_update(update: Update, buffer: RolloutBuffer) -> NativeMLPUpdate | None:
    """``update`` where it can run a rollout's every epoch in one kernel call
    (:meth:`~rlperf.ppo.update.NativeMLPUpdate.takes_rollout`; set ``grad_allreduce`` first),
    else None: the trainer then goes through the sampler's minibatches."""
    if isinstance(update, NativeMLPUpdate) and update.takes_rollout(buffer):
        return update
    return None


class WholeRollout(Protocol):
    """A collector that fills a whole rollout its own way (env workers' asynchronous batches,
    a fused kernel's rollout) where :meth:`applies`; the trainer's step loop otherwise."""

    def applies(self, supervised: bool) -> bool: ...

    def collect(self, state: State, generator: torch.Generator) -> State: ...


def make_collectors(
    cfg: Config,
    env: VectorEnv,
    spec: EnvSpec,
    policy: ActorCritic,
    buffer: RolloutBuffer,
    teacher: bool,
    prof: Profiler,
    episodes: EpisodeLog,
) -> tuple[WholeRollout | None, FusedStep | PolicyStep]:
    """How the run fills its rollout buffer, chosen once (see the module docstring): a whole
    rollout in one go where one applies, and the policy's part of each step of the trainer's
    own loop (the reference :class:`~rlperf.ppo.rollout.PolicyStep`, or the fused step).

    Args:
        teacher: the run has a supervised phase (the fused paths leave its rollouts alone).
    """
    if cfg.env.asynchronous:
        return AsyncCollector(buffer, policy, env, spec, prof, episodes), PolicyStep(buffer, policy)
    if device_rollout_applies(cfg, env, spec, policy, teacher):
        assert isinstance(env, DeviceVecEnv) and isinstance(policy, FeedForwardActorCritic)
        rollout = DeviceRollout(buffer, env, policy, prof, episodes)
        graph_rollout_step(rollout, cfg)  # on CUDA, its step a CUDA graph (ppo/cuda_graphs.py)
        return rollout, PolicyStep(buffer, policy)
    whole, fused_step = make_fused(cfg, env, spec, policy, buffer, teacher, prof, episodes)
    return whole, fused_step if fused_step is not None else PolicyStep(buffer, policy)


def make_sampler(buffer: RolloutBuffer) -> Sampler:
    """The minibatch sampler for what ``buffer`` holds (see the module docstring)."""
    if buffer.recurrent:
        return SegmentSampler(buffer)
    if PackedTableSampler.fits(buffer):
        return PackedTableSampler(buffer)
    return RowSampler(buffer)


def make_normalizer(cfg: Config, spec: EnvSpec) -> Normalizer | None:
    """The run's observation/reward normalisation (``envs/normalize.py``), or None without
    ``--normalize-obs``/``--normalize-reward``; ConfigError for image observations."""
    env = cfg.env
    if not env.normalizes:
        return None
    if env.normalize_obs and np.dtype(spec.obs_dtype) == np.uint8:
        raise ConfigError(
            f"--normalize-obs takes float observations; env {env.env!r} gives "
            f"{spec.describe_obs()} images"
        )
    return Normalizer(
        spec.num_envs, spec.obs_shape, cfg.ppo.gamma, env.normalize_obs, env.normalize_reward,
        env.clip_obs, env.clip_reward, env.norm_per_env,
    )  # fmt: skip


def make_env_step(
    env: VectorEnv, prof: Profiler, normalizer: Normalizer | None = None
) -> Callable[[np.ndarray], StepResult]:
    """``step(actions) -> (obs, rewards, terminations, truncations, infos)``, timed, with the
    observations and rewards normalised by ``normalizer`` (section ``normalize``) when given.

    Env workers' arrays are views of their shared memory, valid until the next send: the
    rollout copies them into the buffer before it steps again.
    """
    sec = prof.section
    if isinstance(env, MultiprocessVecEnv):

        def step_raw(actions: np.ndarray) -> StepResult:
            with sec(names.ENV_SEND):
                env.send(actions)
            with sec(names.ENV_RECV):
                obs, rewards, terminations, truncations, infos, _ = env.recv()
            return obs, rewards, terminations, truncations, infos

    else:

        def step_raw(actions: np.ndarray) -> StepResult:
            with sec(names.ENV_STEP):
                return env.step(actions)

    if normalizer is None:
        return step_raw

    def step_normalized(actions: np.ndarray) -> StepResult:
        obs, rewards, terminations, truncations, infos = step_raw(actions)
        with sec(names.NORMALIZE):
            obs, rewards, infos = normalizer.step(obs, rewards, terminations, truncations, infos)
        return obs, rewards, terminations, truncations, infos

    return step_normalized


def worker_times(env: VectorEnv) -> list[dict[str, float]] | None:
    """Each env worker's busy and idle seconds so far; None without workers."""
    return env.worker_times() if isinstance(env, MultiprocessVecEnv) else None


def run_facts(
    cfg: Config, env: VectorEnv, update: Update, device: torch.device, ranks: Ranks
) -> dict[str, Any]:
    """What a run was built from and ran on, for its summary: the env, the policy, the update
    chosen here, the device, the env workers' busy and idle seconds so far and their spin
    (``--worker-spin-us`` as resolved; None without workers), the ranks and how they exchange
    gradients, the torch threads (the update's), OpenMP's spin count and torch's version.
    Call it at the end of the run."""
    return {
        "env": cfg.env.env,
        "policy": cfg.policy.kind,
        "update": type(update).__name__,
        "device": str(device),
        "env_workers": worker_times(env),
        "env_worker_spin_us": env.spin_us if isinstance(env, MultiprocessVecEnv) else None,
        "ranks": ranks.world_size,
        "num_envs_per_rank": cfg.env.num_envs,
        "threads": torch.get_num_threads(),
        # libgomp's idle spin as this process loaded it (rlperf/openmp.py; None: its default)
        "gomp_spincount": os.environ.get(openmp.SPIN_VAR),
        "torch": torch.__version__,
        "gloo_io": ranks.gloo_io,
        "grad_exchange": ranks.grad_exchange,
    }


def resolved_settings(trainer: Any) -> dict[str, Any]:
    """What a :class:`~rlperf.ppo.trainer.Trainer` runs with where the config leaves it to the
    machine or rounds it: the env backend (``--vec-backend auto``'s choice), the device, the
    torch threads of the update and of the rollout, and the steps: ``--total-steps`` rounded
    down to whole iterations (a rollout of every env's ``--num-steps`` on every rank), which
    is all PPO can run. ``config.json``'s ``resolved`` block; call it as the run starts."""
    from rlperf.envs.backends import resolve_backend

    cfg, per_iteration = trainer.cfg, int(trainer.steps_per_iteration)
    iterations = cfg.run.total_steps // per_iteration
    return {
        "vec_backend": resolve_backend(cfg.env, trainer.device),
        "device": str(trainer.device),
        "threads": trainer.update_threads,
        "rollout_threads": trainer.rollout_threads,
        "ranks": trainer.ranks.world_size,
        "steps_per_iteration": per_iteration,
        "iterations": iterations,
        "total_steps": iterations * per_iteration,
    }
