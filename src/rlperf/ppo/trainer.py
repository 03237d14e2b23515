"""The PPO trainer: collect a rollout, compute advantages, update, log; every phase a section.

One iteration, as CleanRL's ``ppo.py`` and PufferLib's ``evaluate``/``train`` split:

    rollout                    collect num_steps x num_envs transitions (inference mode)
      policy_forward           actor + critic on the current observations, sample actions
      device_to_host           actions to the host for the environment (CUDA: one copy a step)
      env_step                 step every environment (autoreset, episode statistics)
      buffer_store             write the transition into the pre-allocated rollout storage
      truncation_bootstrap     critic on final observations of truncated episodes (rare)
    gae                        bootstrap value of the last observation, advantages, returns
    update
      minibatch_prep           pack the sample table, shuffle per epoch, normalise advantages
      loss                     forward pass and PPO loss (and, fast path, its output gradients)
      backward                 gradients of all parameters, gradient-norm clipping
      optimizer_step           Adam
    logging                    read the iteration's statistics (one host sync), write metrics
    checkpoint                 atomic checkpoint (every checkpoint_every iterations)

No ``.item()`` or other host sync happens inside ``rollout`` or ``update``: per-minibatch
statistics are summed on the device and read once, in ``logging``.

**Supervised-then-PPO** (``--supervised-steps N``, an environment with a scripted teacher, e.g.
``grid``): while fewer than N env steps are done, each rollout step also runs the teacher under
``rollout/teacher`` (``reshape``, ``device_to_host``, ``call``, ``to_device``: the observations
go to the host, the teacher's actions come back), an agent executes the teacher's action with
probability ``teacher_lead * (1 - step / N)`` (linear anneal, updated once per rollout), and the
update minimises the cross-entropy to the teacher's actions plus the value loss
(``ppo/loss.py``). From the first rollout at or after N steps on, plain PPO: the teacher is
never called again. Env steps count agent rows: a multi-agent env's rows are its agents.

The trainer knows policies only through their protocol (``policies/base.py``) and environments
through their :class:`~rlperf.envs.spec.EnvSpec`: a recurrent policy's state is carried from
step to step, reset where episodes end, recorded at BPTT segment starts and checkpointed; action
masks go from the environment to ``act`` and into the buffer; observations are stored in their
own dtype. The update is :class:`~rlperf.ppo.update.AnalyticUpdate` when the policy offers it
(the MLP on unmasked discrete actions, fp32, no compile) and
:class:`~rlperf.ppo.update.AutogradUpdate` otherwise.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlperf.config import Config, ConfigError
from rlperf.envs import check_env_name, make_vec
from rlperf.envs.spec import EnvSpec, UnsupportedSpaceError, read_action_mask
from rlperf.policies.registry import make_policy, policy_entry
from rlperf.ppo.gae import gae
from rlperf.ppo.loss import (
    STAT_NAMES,
    finalize_stats,
    finalize_supervised_stats,
    normalize_advantages,
)
from rlperf.ppo.rollout import RolloutBuffer
from rlperf.ppo.samplers import PackedTableSampler, RowSampler, SegmentSampler
from rlperf.ppo.update import AnalyticUpdate, AutogradUpdate
from rlperf.run.checkpoint import (
    CHECKPOINT_NAME,
    CheckpointError,
    first_line,
    save_checkpoint,
    to_numpy,
    to_tensors,
)
from rlperf.run.progress import ProgressBar
from rlperf.run.rollout_timing import RolloutTimer, render_block
from rlperf.run.run_dir import RunDir
from rlperf.run.throughput import Throughput
from rlperf.timing import names
from rlperf.timing.sections import Profiler, get_profiler

RECENT_EPISODES = 100
SUPERVISED, PPO = "supervised", "ppo"


def _seconds_since(before_ns: dict[str, int], now_ns: dict[str, int]) -> dict[str, float]:
    """Seconds each section ran between two profiler snapshots (sections that ran only)."""
    return {
        name: (total - before_ns.get(name, 0)) / 1e9
        for name, total in now_ns.items()
        if total > before_ns.get(name, 0)
    }


def _cpu(tensor: torch.Tensor | None) -> torch.Tensor | None:
    return None if tensor is None else tensor.cpu()


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or infinite; training stopped before saving that iteration."""


def resolve_device(name: str) -> torch.device:
    """The torch device for ``name``, or ConfigError when it is not available here."""
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} requested but CUDA is not available on this machine")
    return torch.device(name)


def check_recurrent_sizes(cfg: Config) -> None:
    """ConfigError unless a recurrent policy's minibatches of whole env segments divide evenly."""
    ppo, num_envs = cfg.ppo, cfg.env.num_envs
    if num_envs % ppo.num_minibatches:
        raise ConfigError(
            f"policy {cfg.policy.kind!r} is recurrent: its minibatches are whole environments, "
            f"so num_envs {num_envs} must be divisible by num_minibatches {ppo.num_minibatches}"
        )
    if ppo.bptt_horizon and ppo.num_steps % ppo.bptt_horizon:
        raise ConfigError(
            f"num_steps {ppo.num_steps} must be divisible by bptt_horizon {ppo.bptt_horizon}"
        )


class Trainer:
    """PPO on a vector environment, built from a validated :class:`Config`.

    Args:
        cfg: the run's configuration (validated here; ConfigError on bad values).
        profiler: sections are recorded here (default: the process-wide profiler, so user code
            timed with ``rlperf.profile`` inside an environment nests under ``rollout/env_step``).
    """

    def __init__(self, cfg: Config, profiler: Profiler | None = None) -> None:
        cfg.validate()
        check_env_name(cfg.env.env)
        entry = policy_entry(cfg.policy.kind)
        if entry.recurrent:
            check_recurrent_sizes(cfg)
        self.cfg = cfg
        self.device = resolve_device(cfg.run.device)
        self.prof = profiler if profiler is not None else get_profiler()
        if self.device.type == "cuda":
            self.prof.set_cuda_sync(cfg.run.cuda_sync)
        if cfg.run.threads > 0:
            torch.set_num_threads(cfg.run.threads)
        torch.manual_seed(cfg.run.seed)
        np.random.seed(cfg.run.seed)

        self.env = make_vec(cfg.env.env, cfg.env.num_envs, seed=cfg.run.seed, **cfg.env.options)
        obs, reset_infos = self.env.reset(seed=cfg.run.seed)
        try:
            self.spec = EnvSpec.from_env(self.env, reset_infos)
        except UnsupportedSpaceError as e:
            raise ConfigError(f"env {cfg.env.env!r}: {e}") from e
        # Rows of the batch: environments, or their agents for a multi-agent env.
        self.rows = int(self.env.num_envs)
        self.batch_size = self.rows * cfg.ppo.num_steps
        if self.num_iterations < 1:
            raise ConfigError(
                f"total_steps {cfg.run.total_steps} is less than one rollout "
                f"({self.rows} rows x {cfg.ppo.num_steps} steps = {self.batch_size})"
            )
        self.teacher = self._make_teacher()
        self.policy = make_policy(cfg.policy, self.spec).to(self.device)
        if hasattr(self.policy, "profiler"):
            # A policy that times its own stages (the ConvLSTM) records them in this run's
            # profiler, under rollout/policy_forward and update/loss.
            self.policy.profiler = self.prof
        self.recurrent = self.policy.recurrent
        self.has_mask = self.spec.has_mask
        self.continuous = not self.spec.action.discrete
        self.update_impl: AnalyticUpdate | AutogradUpdate
        if (
            self.policy.analytic
            and self.teacher is None
            and cfg.policy.fast_update
            and cfg.ppo.precision == "fp32"
            and not cfg.ppo.compile
        ):
            self.update_impl = AnalyticUpdate(
                self.policy, cfg.ppo, self.batch_size // cfg.ppo.num_minibatches
            )
        else:
            self.update_impl = AutogradUpdate(
                self.policy, cfg.ppo, cfg.ppo.precision, cfg.ppo.compile
            )
        self.state = self.policy.initial_state(self.rows)
        self.buffer = RolloutBuffer(
            cfg.ppo.num_steps,
            self.rows,
            self.spec,
            self.device,
            self.state,
            cfg.ppo.bptt_horizon,
            teacher=self.teacher is not None,
        )
        if self.recurrent:
            self.sampler = SegmentSampler(self.buffer)
        elif (
            self.spec.flat_obs
            and self.buffer.obs.dtype == torch.float32
            and not self.has_mask
            and self.teacher is None
        ):
            self.sampler = PackedTableSampler(self.buffer)
        else:
            self.sampler = RowSampler(self.buffer)
        # Sampling on the device, shuffling on the host (randperm's generator must be CPU).
        self.sample_gen = torch.Generator(device=self.device).manual_seed(cfg.run.seed)
        self.shuffle_gen = torch.Generator().manual_seed(cfg.run.seed + 1)
        if self.continuous:
            self._action_low = np.asarray(self.spec.action.low, dtype=np.float32)
            self._action_high = np.asarray(self.spec.action.high, dtype=np.float32)

        self.buffer.write_obs(self.buffer.num_steps, obs)
        if self.has_mask:
            self.buffer.write_mask(self.buffer.num_steps, read_action_mask(self.env, reset_infos))
        self.iteration = 0
        self.global_step = 0
        self.episodes = 0
        self.recent_returns: deque[float] = deque(maxlen=RECENT_EPISODES)
        self.recent_lengths: deque[int] = deque(maxlen=RECENT_EPISODES)
        self._prior_steps, self._prior_s = 0, 0.0
        self.callbacks: list[Callable[[Trainer, dict[str, Any]], None]] = []
        self.interrupted = False
        # Teacher calls per phase (the PPO count must stay 0) and the student's agreement with
        # the teacher, summed on the device during the rollout and read in logging.
        self.teacher_calls = {SUPERVISED: 0, PPO: 0}
        self._agree = torch.zeros((), device=self.device)
        self.rollout_lead = 0.0  # the teacher lead of the last rollout (logged)
        self.timer = (
            RolloutTimer(self.prof, cfg.run.summary_every) if cfg.run.summary_every else None
        )

    def _make_teacher(self) -> Callable[[np.ndarray], np.ndarray] | None:
        """The environment's scripted teacher when a supervised phase is asked for."""
        if self.cfg.teacher.supervised_steps == 0:
            return None
        make_teacher = getattr(self.env, "make_teacher", None)
        if make_teacher is None:
            raise ConfigError(
                f"--supervised-steps needs an environment with a scripted teacher "
                f"(grid); env {self.cfg.env.env!r} has none"
            )
        if self.spec.action.kind != "discrete":
            raise ConfigError("--supervised-steps needs a Discrete action space")
        return make_teacher()

    @property
    def num_iterations(self) -> int:
        """Iterations of the whole run (read from the config each time: a benchmark or a
        resumed run may move ``total_steps`` on)."""
        return self.cfg.run.total_steps // self.batch_size

    @property
    def phase(self) -> str:
        """``supervised`` while the teacher trains the student, then ``ppo``."""
        if self.teacher is not None and self.global_step < self.cfg.teacher.supervised_steps:
            return SUPERVISED
        return PPO

    def teacher_lead_now(self) -> float:
        """Probability that an agent executes the teacher's action in this rollout."""
        if self.phase != SUPERVISED:
            return 0.0
        frac = self.global_step / self.cfg.teacher.supervised_steps
        return self.cfg.teacher.teacher_lead * (1.0 - frac)

    # -- one iteration's phases ----------------------------------------------------------
    def collect(self) -> None:
        """Fill the rollout buffer with num_steps steps of every environment."""
        buf, env, policy, sec = self.buffer, self.env, self.policy, self.prof.section
        on_cpu = self.device.type == "cpu"
        recurrent, has_mask = self.recurrent, self.has_mask
        buf.start_rollout()
        obs_t = buf.obs[0]
        done_t = buf.dones[0] if recurrent else None
        mask_t = buf.masks[0] if has_mask else None
        state = self.state
        supervised = self.phase == SUPERVISED
        lead = self.rollout_lead = self.teacher_lead_now()
        # The parameters do not change during a rollout: the policy may prepare for that.
        with torch.inference_mode(), policy.acting():
            for t in range(buf.num_steps):
                if recurrent:
                    buf.store_state(t, state)
                with sec(names.POLICY_FORWARD):
                    actions, logprobs, values, state = policy.act(
                        obs_t, state, done_t, mask_t, self.sample_gen
                    )
                if supervised:
                    with sec(names.TEACHER):
                        actions = self._teacher_step(t, obs_t, actions, lead)
                with sec(names.DEVICE_TO_HOST):
                    # CUDA: the one device->host copy of a step (and its sync point).
                    actions_host = actions.numpy() if on_cpu else actions.cpu().numpy()
                    if self.continuous:
                        actions_host = np.clip(actions_host, self._action_low, self._action_high)
                with sec(names.ENV_STEP):
                    next_obs, rewards, terminations, truncations, infos = env.step(actions_host)
                    if infos and "_episode" in infos:
                        self._record_episodes(infos)
                with sec(names.BUFFER_STORE):
                    buf.store_step(t, actions, logprobs, values, rewards, terminations, truncations)
                    obs_t = buf.write_obs(t + 1, next_obs)
                    if recurrent:
                        done_t = buf.write_done(t + 1, terminations | truncations)
                    if has_mask:
                        mask_t = buf.write_mask(t + 1, read_action_mask(env, infos))
                if infos and "_final_obs" in infos and truncations.any():
                    with sec(names.TRUNCATION_BOOTSTRAP):
                        self._bootstrap_truncated(t, infos, terminations, truncations, state)
        self.state = state
        self.global_step += buf.num_steps * buf.num_envs

    def _teacher_step(
        self, t: int, obs_t: torch.Tensor, actions: torch.Tensor, lead: float
    ) -> torch.Tensor:
        """Run the teacher on step ``t``'s observations; returns the actions to execute.

        The path of the guide's teacher, each part a section: the observations as the teacher
        reads them, to the host (on CUDA a copy and a sync point; on the CPU a view), the
        teacher's call, its actions back to the device (mixed there with the student's).
        """
        sec, buf = self.prof.section, self.buffer
        with sec(names.TEACHER_RESHAPE):
            # The teacher reads every agent row as one batch; a reshape, not a per-env split.
            obs_rows = obs_t.reshape(self.rows, *self.spec.obs_shape)
        with sec(names.TEACHER_DEVICE_TO_HOST):
            obs_host = obs_rows.numpy() if self.device.type == "cpu" else obs_rows.cpu().numpy()
        with sec(names.TEACHER_CALL):
            teacher_host = self.teacher(obs_host)
        with sec(names.TEACHER_TO_DEVICE):
            teacher_actions = torch.from_numpy(np.asarray(teacher_host, dtype=np.int64))
            teacher_actions = teacher_actions.to(self.device, non_blocking=True)
            buf.teacher_actions[t] = teacher_actions
            self._agree += (actions == teacher_actions).sum()
            if lead > 0.0:
                follow = torch.rand(self.rows, generator=self.sample_gen, device=self.device)
                actions = torch.where(follow < lead, teacher_actions, actions)
        self.teacher_calls[SUPERVISED] += 1
        return actions

    def _record_episodes(self, infos: dict[str, Any]) -> None:
        done = infos["_episode"]
        returns = infos["episode"]["r"][done]
        lengths = infos["episode"]["l"][done]
        self.recent_returns.extend(returns.tolist())
        self.recent_lengths.extend(lengths.tolist())
        self.episodes += len(returns)

    def _bootstrap_truncated(
        self,
        t: int,
        infos: dict[str, Any],
        terminations: np.ndarray,
        truncations: np.ndarray,
        state: tuple[torch.Tensor, ...],
    ) -> None:
        # V(final obs) of the truncated rows only: evaluating all N rows and masking cost
        # ~0.4 ms per step at 1024 envs (two tanh passes over 1024x64), for a handful of rows.
        # A recurrent policy sees the final observation with the state that followed the
        # step's own observation (not yet reset: the episode has not started over for it).
        rows = np.flatnonzero(truncations & ~terminations)
        if rows.size == 0:
            return
        final_obs = np.asarray(infos["final_obs"], dtype=self.spec.obs_dtype)
        obs_rows = torch.from_numpy(final_obs[rows]).to(self.device)
        index = torch.from_numpy(rows).to(self.device)
        state_rows = tuple(s[index] for s in state)
        self.buffer.bootstrap_values[t, index] = self.policy.value(obs_rows, state_rows, None)

    def compute_advantages(self) -> None:
        """GAE over the buffer into ``buf.advantages`` (returns are advantages + values)."""
        buf, ppo = self.buffer, self.cfg.ppo
        with torch.inference_mode():
            last_value = self.policy.value(buf.next_obs, self.state, buf.next_done)
        if self.device.type == "cpu":
            # numpy views of the same memory: the T-step recursion is ~4x cheaper per op.
            rewards, terminations, truncations = (
                buf.rewards_host, buf.terminations_host, buf.truncations_host
            )  # fmt: skip
            values, bootstrap = buf.values.numpy(), buf.bootstrap_values.numpy()
            last_value, out = last_value.numpy(), buf.advantages.numpy()
        else:
            rewards, terminations, truncations = buf.finish()  # one host->device copy each
            values, bootstrap, out = buf.values, buf.bootstrap_values, buf.advantages
        gae(
            rewards=rewards,
            values=values,
            last_value=last_value,
            terminations=terminations,
            truncations=truncations,
            bootstrap_values=bootstrap,
            gamma=ppo.gamma,
            gae_lambda=ppo.gae_lambda,
            out=out,
        )
        buf.bootstrap_values.zero_()

    def update(self, supervised: bool = False) -> torch.Tensor:
        """update_epochs passes of minibatch updates; returns mean stats (STAT_NAMES layout).

        PPO, or with ``supervised`` the action-supervised loss on the teacher's actions.
        """
        cfg, sec, impl = self.cfg, self.prof.section, self.update_impl
        ppo = cfg.ppo
        if ppo.anneal_lr:
            frac = 1.0 - (self.iteration - 1.0) / max(self.num_iterations, 1)
            impl.lr = frac * ppo.learning_rate
        stats_sum = torch.zeros(len(STAT_NAMES), device=self.device)
        with sec(names.MINIBATCH_PREP):
            self.sampler.prepare()
        for _ in range(ppo.update_epochs):
            with sec(names.MINIBATCH_PREP):
                minibatches = self.sampler.epoch(ppo.num_minibatches, self.shuffle_gen)
            for mb in minibatches:
                with sec(names.MINIBATCH_PREP):
                    adv = normalize_advantages(mb.advantages) if ppo.norm_adv else mb.advantages
                if supervised:
                    stats_sum += impl.gradients(mb, adv, self.prof, supervised=True)
                else:
                    stats_sum += impl.gradients(mb, adv, self.prof)
                impl.apply(self.prof)
        return stats_sum / (ppo.update_epochs * ppo.num_minibatches)

    # -- the loop ------------------------------------------------------------------------
    def mean_recent_return(self) -> float | None:
        return float(np.mean(self.recent_returns)) if self.recent_returns else None

    def train(self, run_dir: str | Path | None = None, resumed: bool = False) -> dict[str, Any]:
        """Train until ``total_steps``; writes the run directory if given; returns the summary.

        Raises:
            NonFiniteLossError: the loss became NaN/inf (the last good checkpoint is kept).
            KeyboardInterrupt: after writing the summary (``interrupted: true``).
        """
        cfg, sec = self.cfg, self.prof.section
        out = RunDir(run_dir) if run_dir is not None else None
        if out is not None:
            out.prepare()
            out.write_config(cfg.to_dict())
            out.open_metrics(keep_through_iteration=self.iteration if resumed else None)
        meter = Throughput(
            cfg.run.sps_window_s, cfg.run.warmup_iters, self._prior_steps, self._prior_s
        )
        bar = ProgressBar(cfg.run.total_steps, enabled=cfg.run.progress)
        t_start = time.perf_counter()
        meter.start(t_start, self.global_step)
        # The profiler may be shared (the process-wide one): report this run's share only.
        self._sections_at_start = last_sections = self.prof.snapshot_ns()
        if self.timer is not None:
            self.timer.start(self.iteration)
        stats_row: dict[str, float] = {}
        try:
            while self.iteration < self.num_iterations:
                self.iteration += 1
                phase = self.phase
                supervised = phase == SUPERVISED
                with sec(names.ROLLOUT):
                    self.collect()
                with sec(names.GAE):
                    self.compute_advantages()
                with sec(names.UPDATE):
                    stats = self.update(supervised)
                with sec(names.LOGGING):
                    # The one host sync of an iteration.
                    finalize = finalize_supervised_stats if supervised else finalize_stats
                    stats_row = finalize(stats.tolist(), self.update_impl.coefs)
                    if not all(math.isfinite(v) for v in stats_row.values()):
                        raise NonFiniteLossError(
                            f"non-finite loss at iteration {self.iteration} "
                            f"(global step {self.global_step}): "
                            + ", ".join(f"{k}={v}" for k, v in stats_row.items())
                        )
                    meter.tick(time.perf_counter(), self.global_step)
                    now_sections = self.prof.snapshot_ns()
                    row = {
                        "iteration": self.iteration,
                        "global_step": self.global_step,
                        "sps": meter.windowed_sps(),
                        "sps_cumulative": meter.cumulative_sps(),
                        "mean_return": self.mean_recent_return(),
                        "episodes": self.episodes,
                        "learning_rate": self.update_impl.lr,
                        **stats_row,
                        "sections_s": _seconds_since(last_sections, now_sections),
                    }
                    if self.teacher is not None:
                        row.update(self._teacher_row(phase))
                    if self.timer is not None and self.timer.due(self.iteration):
                        timing_ms, span = self.timer.take(self.iteration)
                        row["rollout_timing_ms"] = timing_ms
                        bar.write(render_block(timing_ms, span, self.global_step, phase))
                    last_sections = now_sections
                    if out is not None:
                        out.append_metrics(row)
                    bar.update(self.global_step, row["sps"], row["mean_return"])
                every = cfg.run.checkpoint_every
                if out is not None and (
                    (every and self.iteration % every == 0) or self.iteration == self.num_iterations
                ):
                    with sec(names.CHECKPOINT):
                        self._prior_steps, self._prior_s = meter.counted_steps, meter.counted_s
                        self.save(Path(out.path) / CHECKPOINT_NAME)
                for callback in self.callbacks:
                    callback(self, row)
        except KeyboardInterrupt:
            self.interrupted = True
            raise
        finally:
            bar.close()
            wall_s = time.perf_counter() - t_start
            summary = self._summary(meter, wall_s, stats_row)
            self.last_summary = summary
            if out is not None:
                out.write_summary(summary)
                out.close()
        return summary

    def _teacher_row(self, phase: str) -> dict[str, Any]:
        """Phase, teacher calls so far and (supervised) the student's agreement and lead."""
        row: dict[str, Any] = {"phase": phase, "teacher_calls": dict(self.teacher_calls)}
        if phase == SUPERVISED:
            steps = self.buffer.num_steps * self.rows
            row["teacher_agreement"] = float(self._agree) / steps
            row["teacher_lead"] = self.rollout_lead
            self._agree.zero_()
        return row

    def _summary(
        self, meter: Throughput, wall_s: float, stats_row: dict[str, float]
    ) -> dict[str, Any]:
        return {
            "sps": meter.windowed_sps(),
            "sps_cumulative": meter.cumulative_sps(),
            "sps_counted_steps": meter.counted_steps,
            "sps_counted_s": meter.counted_s,
            "global_step": self.global_step,
            "iterations": self.iteration,
            "wall_s": wall_s,
            "mean_return_last_100": self.mean_recent_return(),
            "mean_length_last_100": (
                float(np.mean(self.recent_lengths)) if self.recent_lengths else None
            ),
            "episodes": self.episodes,
            "phase": self.phase if self.teacher is not None else None,
            "teacher_calls": dict(self.teacher_calls),
            "final_stats": stats_row,
            "sections": _seconds_since(self._sections_at_start, self.prof.snapshot_ns()),
            "interrupted": self.interrupted,
            "env": self.cfg.env.env,
            "policy": self.cfg.policy.kind,
            "update": type(self.update_impl).__name__,
            "device": str(self.device),
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
        }

    # -- checkpoints ---------------------------------------------------------------------
    def save(self, path: Path) -> None:
        """Write everything needed to continue exactly where this iteration ended."""
        get_env_state = getattr(self.env, "get_state", None)
        save_checkpoint(
            path,
            {
                "config": self.cfg.to_dict(),
                "iteration": self.iteration,
                "global_step": self.global_step,
                "policy": self.policy.state_dict(),
                "optimizer": self.update_impl.state_dict(),
                "sample_rng": self.sample_gen.get_state(),
                "shuffle_rng": self.shuffle_gen.get_state(),
                "env": to_tensors(get_env_state()) if get_env_state else None,
                "next_obs": self.buffer.next_obs.cpu(),
                "next_done": _cpu(self.buffer.next_done),
                "next_mask": _cpu(self.buffer.next_mask),
                "policy_state": [s.cpu() for s in self.state],
                "episodes": self.episodes,
                "recent_returns": list(self.recent_returns),
                "recent_lengths": list(self.recent_lengths),
                "counted_steps": self._prior_steps,
                "counted_s": self._prior_s,
                "teacher_calls": dict(self.teacher_calls),
            },
        )

    def load(self, payload: dict[str, Any]) -> None:
        """Restore a checkpoint made by :meth:`save` into this (identically configured) trainer."""
        try:
            self.policy.load_state_dict(payload["policy"])
            self.update_impl.load_state_dict(payload["optimizer"])
            self.sample_gen.set_state(payload["sample_rng"])
            self.shuffle_gen.set_state(payload["shuffle_rng"])
            set_env_state = getattr(self.env, "set_state", None)
            if payload["env"] is not None and set_env_state is not None:
                set_env_state(to_numpy(payload["env"]))
                self.buffer.next_obs.copy_(payload["next_obs"])
                if self.buffer.next_mask is not None:
                    self.buffer.next_mask.copy_(payload["next_mask"])
                if self.recurrent:
                    self.buffer.next_done.copy_(payload["next_done"])
                    saved = payload["policy_state"]
                    if len(saved) != len(self.state):
                        raise ValueError("policy state does not match the policy")
                    self.state = tuple(s.to(self.device) for s in saved)
            self.iteration = int(payload["iteration"])
            self.global_step = int(payload["global_step"])
            self.episodes = int(payload["episodes"])
            self.recent_returns.extend(payload["recent_returns"])
            self.recent_lengths.extend(payload["recent_lengths"])
            self._prior_steps = int(payload["counted_steps"])
            self._prior_s = float(payload["counted_s"])
            self.teacher_calls.update(payload.get("teacher_calls", {}))
        except (KeyError, RuntimeError, ValueError) as e:
            raise CheckpointError(
                f"cannot resume: checkpoint does not fit this run ({first_line(e)})"
            ) from e
