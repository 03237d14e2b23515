"""Which device a run trains on: ``--device cpu``, ``cuda`` or ``auto`` (:func:`choose_device`).

A GPU is not faster for every PPO workload. The first GPU run (issue 57, docs/performance.md
"On a GPU") measured CartPole at 4 envs and ``--preset mujoco`` (8 envs), both with the 64x64
MLP, at 1/35 and 1/25 of the same work on this project's 2-core CPU: at a few rows a step every
kernel is a launch the GPU waits for, and every step a copy each way. At 4,096 envs the GPU is
ahead. Where the line falls depends on the machine, so ``auto`` measures it:

- ``--device auto``: where CUDA is available, a short probe of the real workload on each
  device (:func:`probe_sps`: a trainer built from the run's config, one warm-up iteration,
  then :data:`PROBE_ITERATIONS` timed ones) and the faster one trains; where it is not, the
  CPU, without probing. One line says which and why. A probe costs a few iterations of each
  device's time at the start of the run, which is why ``auto`` is asked for, not the default.
- ``--device cuda`` is never changed: a user who names the GPU gets it. Probing the CPU behind
  their back would cost those iterations on every run, so instead a cheap heuristic
  (:func:`small_workload_note`) adds one line where the workload is of the kind measured
  faster on the CPU, pointing at ``--device auto``.

The device chosen is the trainer's ``device`` and the run summary's ``device`` field.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from rlperf.config import Config, ConfigError
from rlperf.ppo.build import resolve_device
from rlperf.timing.sections import Profiler

# Timed iterations per device, after one warm-up iteration (first-call costs: CUDA context,
# cuBLAS handles, the CUDA graph's capture).
PROBE_ITERATIONS = 3
# Envs a step at or below which an explicit --device cuda with a flat-observation network is
# noted: the measured CPU wins were at 4 and 8 envs, the GPU win at 4,096 (issue 57). The line
# between them is the probe's to find; this only decides whether a note is worth printing.
SMALL_WORKLOAD_ENVS = 256
SMALL_NETWORKS = ("mlp", "lstm")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()  # the GPU's queued work belongs to the timed iterations


def probe_iteration(trainer: Any) -> None:
    """One PPO iteration of ``trainer`` as :meth:`~rlperf.ppo.trainer.Trainer.train` runs it:
    rollout and GAE with the policy acting, then the update; no logging, no checkpoint."""
    trainer.iteration += 1
    with trainer.policy.acting():
        trainer.collect()
        trainer.compute_advantages()
    trainer.update()


def probe_sps(
    cfg: Config,
    device: str,
    make_trainer: Callable[[Config, Profiler], Any],
    iterations: int = PROBE_ITERATIONS,
    timer: Callable[[], float] = time.perf_counter,
) -> float:
    """Env steps per second of ``cfg``'s workload on ``device``.

    Args:
        make_trainer: builds a trainer from a config and a profiler (the Trainer class, passed
            in: this module sits below the trainer, which calls it); the probe's sections go to
            a profiler of its own.
        iterations: iterations timed after one warm-up iteration.
        timer: seconds (``time.perf_counter``; a fake one in the tests), read twice.
    """
    probe = Config.from_dict(cfg.to_dict())
    probe.run.device = device
    probe.run.telemetry = probe.run.progress = False
    probe.ppo.anneal_lr = False  # the probe's iterations may run past the config's count
    trainer = make_trainer(probe, Profiler())
    try:
        probe_iteration(trainer)
        _sync(trainer.device)
        start_s = timer()
        for _ in range(iterations):
            probe_iteration(trainer)
        _sync(trainer.device)
        elapsed_s = timer() - start_s
    finally:
        trainer.env.close()
    return iterations * trainer.steps_per_iteration / max(elapsed_s, 1e-9)


def small_workload_note(cfg: Config) -> str | None:
    """A note for an explicit ``--device cuda`` whose workload looks like those measured faster
    on the CPU (a flat-observation MLP or LSTM at <= :data:`SMALL_WORKLOAD_ENVS` envs), else
    None. A heuristic: it never changes the device."""
    if cfg.policy.kind not in SMALL_NETWORKS or cfg.env.num_envs > SMALL_WORKLOAD_ENVS:
        return None
    return (
        f"note: --device cuda with a small network ({cfg.policy.kind}, {cfg.env.num_envs} envs): "
        "workloads this size measured faster on the CPU (launch-bound on a GPU); "
        "--device auto times both and takes the faster"
    )


def choose_device(
    cfg: Config,
    world_size: int,
    make_trainer: Callable[[Config, Profiler], Any],
    devices: Sequence[str] | None = None,
    timer: Callable[[], float] = time.perf_counter,
) -> tuple[torch.device, str | None]:
    """The run's device and the line to print about it (None: nothing to say).

    Args:
        cfg: the run's config; ``cfg.run.device`` is ``cpu``, ``cuda[:N]`` or ``auto``.
        world_size: ranks of the run (``auto`` takes one: ranks could choose apart).
        make_trainer: builds a trainer for :func:`probe_sps`.
        devices: what ``auto`` chooses from (default: cpu, and cuda where available).
        timer: the probe's clock.

    Raises:
        ConfigError: CUDA named but unavailable, or ``auto`` with several ranks.
    """
    name = cfg.run.device
    if name != "auto":
        device = resolve_device(name)
        return device, small_workload_note(cfg) if device.type == "cuda" else None
    if world_size > 1:
        raise ConfigError("--device auto probes one process: name cpu or cuda for --nproc runs")
    if devices is None:
        devices = ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)
    if len(devices) == 1:
        return torch.device(devices[0]), f"--device auto: {devices[0]} (no CUDA device here)"
    sps = {d: probe_sps(cfg, d, make_trainer, timer=timer) for d in devices}
    best = max(sps, key=lambda d: sps[d])
    figures = ", ".join(f"{d} {v:,.0f}" for d, v in sps.items())
    note = f"--device auto: {best} (SPS over {PROBE_ITERATIONS} probe iterations: {figures})"
    return torch.device(best), note
