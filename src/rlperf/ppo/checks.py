"""The checks a run passes before any work: the env's spaces, the sizes, the policy's fit.

``Trainer(cfg)`` makes them as it builds the run; :func:`check_config` makes the same ones
without training or starting a process (``rlperf train`` before it launches ranks, ``rlperf
ablate`` before a sweep), so a bad command is one line and exit 2 before anything runs.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from rlperf.config import Config, ConfigError
from rlperf.envs import check_env_name, make_env
from rlperf.envs.spec import EnvSpec, UnsupportedSpaceError
from rlperf.policies.registry import check_policy_fit, policy_entry
from rlperf.ppo.build import make_normalizer
from rlperf.ppo.supervised import make_teacher_phase
from rlperf.timing.sections import Profiler


def check_recurrent_sizes(cfg: Config, rows: int) -> None:
    """ConfigError unless a recurrent policy's minibatches of whole segments divide evenly.

    Args:
        rows: the rollout's rows, ``env.num_envs`` (one per environment, or per agent of a
            multi-agent env: the grid's rows are maps x agents, not ``cfg.env.num_envs``).
    """
    ppo = cfg.ppo
    if ppo.bptt_horizon and ppo.num_steps % ppo.bptt_horizon:
        raise ConfigError(
            f"num_steps {ppo.num_steps} must be divisible by bptt_horizon {ppo.bptt_horizon}"
        )
    horizon = ppo.bptt_horizon or ppo.num_steps
    per_row = ppo.num_steps // horizon
    segments = per_row * rows
    if segments % ppo.num_minibatches:
        raise ConfigError(
            f"policy {cfg.policy.kind!r} is recurrent: its minibatches are whole segments, so "
            f"its {segments} segments ({rows} rows x {per_row} of {horizon} steps) must be "
            f"divisible by num_minibatches {ppo.num_minibatches}"
        )


def check_total_steps(cfg: Config, rows: int, world_size: int) -> None:
    """ConfigError unless ``total_steps`` covers one rollout at least: ``rows`` x ``num_steps``
    steps on each of ``world_size`` ranks (``rows`` as in :func:`check_recurrent_sizes`)."""
    steps_per_iteration = rows * cfg.ppo.num_steps * world_size
    if cfg.run.total_steps < steps_per_iteration:
        raise ConfigError(
            f"total_steps {cfg.run.total_steps} is less than one rollout "
            f"({rows} rows x {cfg.ppo.num_steps} steps x {world_size} ranks "
            f"= {steps_per_iteration})"
        )


def env_spec(cfg: Config, env: Any, reset_infos: dict[str, Any]) -> EnvSpec:
    """The spec of ``env`` just reset (``reset_infos``: its reset's infos); ConfigError when
    rlperf cannot take its spaces."""
    try:
        return EnvSpec.from_env(env, reset_infos)
    except UnsupportedSpaceError as e:
        raise ConfigError(f"env {cfg.env.env!r}: {e}") from e


def check_fit(cfg: Config, spec: EnvSpec, rows: int, world_size: int) -> None:
    """ConfigError unless the policy, the sizes and ``total_steps`` fit the env: ``rows`` rows
    of observations ``spec`` on each of ``world_size`` ranks."""
    if policy_entry(cfg.policy.kind).recurrent:
        check_recurrent_sizes(cfg, rows)
    check_total_steps(cfg, rows, world_size)
    check_policy_fit(cfg.policy.kind, spec)
    if cfg.ppo.lr_kl_target < 0:
        raise ConfigError(f"--lr-kl-target must be >= 0 (0: off), got {cfg.ppo.lr_kl_target}")
    final_std, start_std = cfg.ppo.final_std, math.exp(cfg.policy.init_log_std)
    if final_std < 0 or final_std >= start_std:
        raise ConfigError(
            f"--final-std must be 0 (off) or in (0, {start_std:.4g}), below the starting std "
            f"exp(--init-log-std), got {final_std}"
        )
    if not 0.0 <= cfg.ppo.final_std_from < 1.0:
        raise ConfigError(
            f"--final-std-from must be a share of the run in [0, 1), got {cfg.ppo.final_std_from}"
        )
    if cfg.ppo.normalize_value and not cfg.ppo.norm_adv:
        # The advantages are divided by the returns' std after GAE (ppo/value_norm.py): only a
        # per-minibatch normalisation makes that leave the policy loss as it was.
        raise ConfigError("--normalize-value needs --norm-adv (the advantages are rescaled)")
    on_wall = cfg.ppo.anneal_with_wall and cfg.run.max_wall_s
    if world_size > 1 and on_wall and (cfg.ppo.anneal_lr or cfg.ppo.final_std):
        raise ConfigError(
            "--anneal-with-wall needs one rank: each rank's clock would give its Adam a "
            "learning rate (or its Gaussian a std ceiling) of its own (--no-anneal-with-wall "
            "anneals over the steps)"
        )


def check_config(cfg: Config, world_size: int = 1) -> None:
    """Every check ``Trainer(cfg)`` makes before any work, without training or starting a
    process: ConfigError, UnknownEnvError or EnvOptionError (one line) on the first problem.

    The env is built here in this process (the serial backend where workers would step it: the
    same rows and spaces, no worker started) to check the policy, the sizes and the teacher
    against it. Checks that depend on the machine rather than on the command are left out:
    whether CUDA is here, and the cores ``--num-workers`` may use (``--oversubscribe`` is
    assumed).

    Args:
        world_size: ranks of the run (``--nproc`` x ``--nnodes``).
    """
    cfg = Config.from_dict(cfg.to_dict())  # a copy: the caller's config stays as it was
    cfg.env.oversubscribe = True
    cfg.validate()
    check_env_name(cfg.env.env)
    cfg.env.validate_backend()
    if cfg.env.backend == "multiprocess":  # the workers' env, checked in this process
        cfg.env.backend, cfg.env.num_workers, cfg.env.env_batch_size = "serial", 1, 0
        cfg.env.inline_worker, cfg.env.pin_workers, cfg.env.worker_spin_us = False, False, -1
    env = make_env(cfg.env, cfg.run.seed)
    try:
        _, reset_infos = env.reset(seed=cfg.run.seed)
        spec = env_spec(cfg, env, reset_infos)
        check_fit(cfg, spec, int(env.num_envs), world_size)
        make_normalizer(cfg, spec)
        make_teacher_phase(env, cfg.env.env, spec, cfg.teacher, torch.device("cpu"), Profiler())
    finally:
        env.close()


def precision_note(cfg: Config, device: torch.device) -> str | None:
    """A start line where ``--precision bf16`` runs on a CPU that does not compute bf16
    natively (no AVX512-BF16 or AMX-BF16, no Arm BF16: ``rlperf/cpu_features.py``), where bf16
    autocast converts every operand and runs slower than float32; None elsewhere."""
    from rlperf.cpu_features import cpu_computes_bf16

    if cfg.ppo.precision != "bf16" or device.type != "cpu" or cpu_computes_bf16() is not False:
        return None
    return (
        "--precision bf16 on a CPU without native bf16 (no AVX512-BF16 or AMX-BF16): autocast "
        "converts every operand to float32 and back, slower than float32 itself: "
        "--precision fp32 is the faster choice on this machine"
    )
