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
      loss                     forward pass and PPO loss (and, analytic update, its gradients)
      backward                 gradients of all parameters, gradient-norm clipping
      optimizer_step           Adam
    logging                    read the iteration's statistics (one host sync), write metrics
    checkpoint                 atomic checkpoint (every checkpoint_every iterations)

No ``.item()`` or other host sync happens inside ``rollout`` or ``update``: per-minibatch
statistics are summed on the device and read once, in ``logging``.

The trainer knows policies only through their protocol (``policies/base.py``) and environments
through their :class:`~rlperf.envs.spec.EnvSpec`; how a run fills its rollout (a whole-rollout
collector, the fused step or ``policy.act``), which update and which sampler it takes are decided
once, in ``ppo/build.py``, and :meth:`Trainer.collect`'s loop is the reference every fast path
is tested against. A supervised teacher phase (``ppo/supervised.py``) plugs in as
a hook on each step's actions and a choice of loss.

On several ranks (``distributed/group.py``) each runs this loop on its own environments: the weights
start as rank 0's, each minibatch's gradient is averaged over the ranks, the global step and
``total_steps`` count every rank's steps, and rank 0 writes the run directory.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlperf.config import Config
from rlperf.distributed.group import SINGLE, Ranks
from rlperf.envs import check_env_name, make_env
from rlperf.envs.spec import read_action_mask
from rlperf.policies.base import State
from rlperf.policies.registry import make_policy
from rlperf.ppo.build import (
    make_collectors,
    make_env_step,
    make_normalizer,
    make_sampler,
    make_update,
    phase_threads,
    resolved_settings,
    run_facts,
    setup_process,
    whole_update,
)
from rlperf.ppo.checks import check_fit, env_spec, precision_note
from rlperf.ppo.cuda_graphs import make_minibatch_step, minibatch_updates
from rlperf.ppo.device_choice import choose_device
from rlperf.ppo.gae import gae
from rlperf.ppo.loss import finalize_stats, finalize_supervised_stats
from rlperf.ppo.optim import annealed_lr, kl_adapted_lr, log_std_ceiling, run_progress
from rlperf.ppo.rollout import PolicyStep, RolloutBuffer, bootstrap_truncated
from rlperf.ppo.supervised import PPO, make_teacher_phase
from rlperf.ppo.trainer_state import load_trainer, save_trainer
from rlperf.ppo.value_norm import ValueNormalizer
from rlperf.run.episode_log import EpisodeLog
from rlperf.run.interrupt import StopRequest
from rlperf.run.run_dir import CHECKPOINT_NAME
from rlperf.run.telemetry import Telemetry
from rlperf.run.training_log import TrainingLog
from rlperf.threads import ThreadGovernor
from rlperf.timing import names
from rlperf.timing.sections import Profiler


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or infinite; training stopped before saving that iteration."""


class Trainer:
    """PPO on a vector environment, built from a validated :class:`Config`.

    Args:
        cfg: the run's configuration (validated here; ConfigError on bad values).
        profiler: sections are recorded here (default: the process-wide profiler, so user code
            timed with ``rlperf.profile`` inside an environment nests under ``rollout/env_step``).
        ranks: this process's place among the ranks of a distributed run (default: alone).
    """

    def __init__(
        self, cfg: Config, profiler: Profiler | None = None, ranks: Ranks = SINGLE
    ) -> None:
        cfg.validate()
        check_env_name(cfg.env.env)
        self.cfg, self.ranks = cfg, ranks
        self.device, device_note = choose_device(cfg, ranks.world_size, type(self))
        self.prof = setup_process(cfg, self.device, profiler)
        seed = ranks.seed(cfg.run.seed)
        torch.manual_seed(seed)
        np.random.seed(seed)

        self.update_threads, self.rollout_threads = phase_threads(cfg, self.device)
        self.threads = ThreadGovernor(
            self.update_threads,
            cfg.run.adapt_threads and self.device.type == "cpu",
            self.rollout_threads,
        )
        self.env = make_env(cfg.env, seed, self.rollout_threads, self.device)
        obs, reset_infos = self.env.reset(seed=seed)
        self.spec = env_spec(cfg, self.env, reset_infos)
        # Observation/reward normalisation after each step, over the batch (envs/normalize.py).
        self.normalizer = make_normalizer(cfg, self.spec)
        if self.normalizer is not None:
            obs = self.normalizer.reset(obs)
        # The critic's targets normalised (--normalize-value), around GAE (ppo/value_norm.py).
        self.value_norm = ValueNormalizer() if cfg.ppo.normalize_value else None
        self.step_env = make_env_step(self.env, self.prof, self.normalizer)
        # Rows of the batch: environments, or their agents for a multi-agent env.
        self.rows = int(self.env.num_envs)
        check_fit(cfg, self.spec, self.rows, ranks.world_size)
        self.batch_size = self.rows * cfg.ppo.num_steps
        self.steps_per_iteration = self.batch_size * ranks.world_size
        self.teacher_phase = make_teacher_phase(
            self.env, cfg.env.env, self.spec, cfg.teacher, self.device, self.prof
        )
        self.policy = make_policy(cfg.policy, self.spec).to(self.device)
        self.policy.profiler = self.prof
        ranks.broadcast_module(self.policy)
        teacher = self.teacher_phase is not None
        minibatch_size = self.batch_size // cfg.ppo.num_minibatches
        self.update_impl = make_update(self.policy, cfg, minibatch_size, supervised_phase=teacher)
        self.update_impl.grad_allreduce = ranks.grad_allreduce
        # On CUDA, the minibatch step as a CUDA graph where one applies (ppo/cuda_graphs.py).
        self.minibatch_step, graphs_note = make_minibatch_step(cfg, self.update_impl, ranks)
        self.notes = [n for n in (device_note, graphs_note, precision_note(cfg, self.device)) if n]
        self.state = self.policy.initial_state(self.rows)
        self.buffer = RolloutBuffer(cfg.ppo.num_steps, self.rows, self.spec, self.device,
                                    self.state, cfg.ppo.bptt_horizon, teacher=teacher)  # fmt: skip
        self.sampler = make_sampler(self.buffer)
        # The native MLP update of a flat rollout: every epoch in one call (ppo/update.py).
        self.whole_update = whole_update(self.update_impl, self.buffer)
        # Sampling on the device, shuffling on the host (randperm's generator must be CPU).
        self.sample_gen = torch.Generator(device=self.device).manual_seed(seed)
        self.shuffle_gen = torch.Generator().manual_seed(seed + 1)

        self.buffer.write_obs(self.buffer.num_steps, obs)
        if self.spec.has_mask:
            self.buffer.write_mask(self.buffer.num_steps, read_action_mask(self.env, reset_infos))
        self.iteration = 0
        self.global_step = 0
        self.episodes = EpisodeLog()
        # How the buffer is filled, chosen once (ppo/build.py): a whole rollout in one go where
        # one applies (env workers' asynchronous batches, a fused kernel's rollout), and the
        # policy's part of each step of collect()'s loop (policy.act, or the fused step).
        self.whole_rollout, self.policy_step = make_collectors(
            cfg, self.env, self.spec, self.policy, self.buffer, teacher, self.prof, self.episodes
        )
        self.reference_step = PolicyStep(self.buffer, self.policy)  # the teacher's rollouts
        self.prior_counted: tuple[int, float] = (0, 0.0)  # SPS steps and seconds before a resume
        self.telemetry = Telemetry(cfg.run.telemetry_interval_s) if cfg.run.telemetry else None
        self.callbacks: list[Callable[[Trainer, dict[str, Any]], None]] = []
        self.interrupted = False
        self.wall_start_s = time.perf_counter()  # train() restarts it
        # The iteration the run directory's checkpoint holds (0: none written by this run).
        self.checkpointed_iteration = 0

    @property
    def num_iterations(self) -> int:
        """Iterations of the whole run (read from the config each time: a benchmark or a
        resumed run may move ``total_steps`` on)."""
        return self.cfg.run.total_steps // self.steps_per_iteration

    @property
    def phase(self) -> str:
        """``supervised`` while a teacher trains the student, then (and without one) ``ppo``."""
        return self.teacher_phase.phase(self.global_step) if self.teacher_phase else PPO

    # -- one iteration's phases ----------------------------------------------------------
    def collect(self, supervised: bool = False) -> None:
        """Fill the rollout buffer with num_steps steps of every environment.

        With ``supervised``, the teacher phase sees each step's actions (and may replace them).
        """
        threads = self.threads.rollout
        threads.begin()
        whole = self.whole_rollout
        if whole is not None and whole.applies(supervised):
            self.state = whole.collect(self.state, self.sample_gen)
        else:
            self.state = self._step_loop(supervised)
        threads.end(self.buffer.num_steps)
        self.global_step += self.steps_per_iteration

    def _step_loop(self, supervised: bool) -> State:
        """CleanRL's rollout loop: act, step the envs, store; returns the policy state."""
        buf, env, sec, step_env = self.buffer, self.env, self.prof.section, self.step_env
        on_cpu, threads = self.device.type == "cpu", self.threads.rollout
        recurrent, has_mask = self.policy.recurrent, self.spec.has_mask
        to_env_actions = self.spec.action.to_env
        teacher = self.teacher_phase if supervised else None
        act = self.reference_step if supervised else self.policy_step
        act.start_rollout(self.sample_gen)
        buf.start_rollout()
        obs_t = buf.obs[0]
        done_t, mask_t = buf.done_slot(0), buf.mask_slot(0)
        state = self.state
        # The parameters do not change during a rollout: the policy may prepare for that.
        with torch.inference_mode(), self.policy.acting():
            for t in range(buf.num_steps):
                if recurrent:
                    buf.store_state(t, state)
                with sec(names.POLICY_FORWARD):
                    actions, state = act(t, obs_t, state, done_t, mask_t)
                if teacher is not None:
                    actions = teacher.step(obs_t, actions, buf.teacher_slot(t), self.sample_gen)
                with sec(names.DEVICE_TO_HOST):
                    # CUDA: the one device->host copy of a step (and its sync point).
                    actions_host = actions.numpy() if on_cpu else actions.cpu().numpy()
                    actions_host = to_env_actions(actions_host)
                next_obs, rewards, terminations, truncations, infos = step_env(actions_host)
                if infos and "_episode" in infos:
                    self.episodes.record(infos)
                with sec(names.BUFFER_STORE):
                    act.store(t, actions)
                    buf.store_env_step(t, rewards, terminations, truncations)
                    obs_t = buf.write_obs(t + 1, next_obs)
                    if recurrent:
                        done_t = buf.write_done(t + 1, terminations | truncations)
                    if has_mask:
                        mask_t = buf.write_mask(t + 1, read_action_mask(env, infos))
                if infos and "_final_obs" in infos and truncations.any():
                    with sec(names.TRUNCATION_BOOTSTRAP):
                        bootstrap_truncated(
                            buf, self.policy, t, None, infos, terminations, truncations, state
                        )
                if threads.watching:
                    threads.unit_done()
        return state

    def compute_advantages(self) -> None:
        """GAE over the buffer into ``buf.advantages`` (returns are advantages + values)."""
        buf, ppo = self.buffer, self.cfg.ppo
        with torch.inference_mode():
            last_value = self.policy.value(buf.next_obs, self.state, buf.next_done)
        inputs = buf.gae_inputs(last_value)
        if self.value_norm is not None:
            self.value_norm.denormalize(inputs)
        gae(**inputs, gamma=ppo.gamma, gae_lambda=ppo.gae_lambda)
        if self.value_norm is not None:
            self.value_norm.normalize_targets(inputs["values"], inputs["out"])
        buf.bootstrap_values.zero_()

    def update(self, supervised: bool = False) -> torch.Tensor:
        """update_epochs passes of minibatch updates; returns mean stats (STAT_NAMES layout).

        PPO, or with ``supervised`` the action-supervised loss on the teacher's actions.
        """
        ppo, impl = self.cfg.ppo, self.update_impl
        if not ppo.lr_kl_target:  # else the rate the last iteration's KL left (_adapt_lr)
            elapsed_s = time.perf_counter() - self.wall_start_s
            impl.lr = annealed_lr(self.cfg, self.iteration, self.num_iterations, elapsed_s)
        threads = self.threads.update
        threads.begin()
        if self.whole_update is not None and not supervised:  # one C call, one thread: no units
            stats_sum = self.whole_update.update_rollout(
                self.buffer, ppo.num_minibatches, self.shuffle_gen, self.prof
            )
        else:
            stats_sum = minibatch_updates(
                self.minibatch_step, self.sampler, self.shuffle_gen, self.prof, threads, supervised
            )
        units = ppo.update_epochs * ppo.num_minibatches
        threads.end(units)
        impl.report_times(self.prof)  # a native update's own phase timings, once per update
        self._cap_log_std()
        return stats_sum / units

    def _cap_log_std(self) -> None:
        """With ``--final-std``, the Gaussian's log-std clamped to the ceiling of the run's
        progress after this iteration, in place (a view of the flat parameter the native
        update and the fused rollout read)."""
        logstd = self.policy.logstd()
        if not self.cfg.ppo.final_std or logstd is None:
            return
        elapsed_s = time.perf_counter() - self.wall_start_s
        done = run_progress(self.cfg, self.iteration, self.num_iterations, elapsed_s)
        with torch.no_grad():
            logstd.clamp_(max=log_std_ceiling(self.cfg, done))

    # -- the loop ------------------------------------------------------------------------
    def train(self, run_dir: str | Path | None = None, resumed: bool = False) -> dict[str, Any]:
        """Train until ``total_steps``; writes the run directory if given; returns the summary.

        Ctrl-C (SIGINT, from the main thread) lets the iteration finish, checkpoints it and
        stops every rank at that iteration, so a resume repeats nothing; a second Ctrl-C stops at
        once, keeping the last checkpoint written (``run/interrupt.py``).

        Raises:
            NonFiniteLossError: the loss became NaN/inf (the last good checkpoint is kept).
            KeyboardInterrupt: after writing the summary (``interrupted: true``).
        """
        sec, every = self.prof.section, self.cfg.run.checkpoint_every
        log = TrainingLog(
            self.cfg, self.prof, run_dir if self.ranks.is_main else None, resumed,
            self.iteration, *self.prior_counted, self.telemetry, resolved_settings(self),
        )  # fmt: skip
        checkpoint_path = Path(run_dir) / CHECKPOINT_NAME if run_dir is not None else None
        log.start(self.global_step)
        self.wall_start_s = log.t_start  # the clock --max-wall-s is measured on
        stats_row: dict[str, float] = {}
        try:
            with StopRequest() as ctrl_c:
                while self.iteration < self.num_iterations:
                    self.iteration += 1
                    self.threads.next_iteration()
                    teacher = self.teacher_phase
                    supervised = teacher is not None and teacher.begin_rollout(self.global_step)
                    # The weights stay as they are from the first step to GAE's last value.
                    with self.policy.acting():
                        with sec(names.ROLLOUT):
                            self.collect(supervised)
                        with sec(names.GAE):
                            self.compute_advantages()
                    with sec(names.UPDATE):
                        stats = self.update(supervised)
                    with sec(names.LOGGING):
                        stats_row, interrupted = self._finalize(stats, supervised, ctrl_c.requested)
                        metrics = self._metrics(stats_row, supervised)
                        row = log.row(self.iteration, self.global_step, metrics)
                        if not supervised:
                            self._adapt_lr(stats_row)
                    # Every rank stops at the same iteration, or the others would wait forever.
                    stop = log.budget_spent
                    if self.cfg.run.max_wall_s and self.ranks.distributed:
                        stop = self.ranks.sum(float(stop)) > 0
                    self.interrupted = interrupted
                    stop = stop or interrupted
                    path = checkpoint_path  # every rank saves: rank 0 gathers the others' state
                    last = self.iteration == self.num_iterations or stop
                    if path is not None and ((every and self.iteration % every == 0) or last):
                        with sec(names.CHECKPOINT):
                            self.prior_counted = log.counted()
                            self.save(path)
                        self.checkpointed_iteration = self.iteration
                    for callback in self.callbacks:
                        callback(self, row)
                    if stop:
                        break
        except KeyboardInterrupt:  # a second Ctrl-C, mid-iteration: the last checkpoint stays
            self.interrupted = True
            raise
        finally:
            self.last_summary = log.close(self._summary_fields(stats_row))
        if self.interrupted:  # the first Ctrl-C, once its iteration is checkpointed
            raise KeyboardInterrupt
        return self.last_summary

    def _finalize(
        self, stats: torch.Tensor, supervised: bool, interrupted: bool
    ) -> tuple[dict[str, float], bool]:
        """The iteration's mean loss statistics, read from the device (the one host sync), and
        whether any rank was interrupted (Ctrl-C); averaged over the ranks, so all of them agree
        on stopping at a non-finite loss or an interrupt."""
        finalize = finalize_supervised_stats if supervised else finalize_stats
        # The interrupt flag rides on the statistics' all-reduce: no collective of its own.
        flag = stats.new_tensor([float(interrupted)])
        *means, any_interrupted = self.ranks.mean(torch.cat([stats, flag])).tolist()
        stats_row = finalize(means, self.update_impl.coefs)
        if not all(math.isfinite(v) for v in stats_row.values()):
            raise NonFiniteLossError(
                f"non-finite loss at iteration {self.iteration} "
                f"(global step {self.global_step}): "
                + ", ".join(f"{k}={v}" for k, v in stats_row.items())
            )
        return stats_row, any_interrupted > 0

    def _adapt_lr(self, stats_row: dict[str, float]) -> None:
        """With ``--lr-kl-target``, the next iteration's rate from this one's mean approx KL
        (every rank's: the statistics are averaged over ranks). Before the checkpoint, which
        keeps the rate in Adam's state, so a resume continues with it."""
        target = self.cfg.ppo.lr_kl_target
        if target:
            impl = self.update_impl
            impl.lr = kl_adapted_lr(impl.lr, stats_row["approx_kl"], target)

    def _metrics(self, stats_row: dict[str, float], supervised: bool) -> dict[str, Any]:
        """The algorithm's fields of a metrics row (the log adds SPS and section seconds)."""
        fields = {
            "mean_return": self.episodes.mean_return(),
            "episodes": self.episodes.count,
            "learning_rate": self.update_impl.lr,
            **stats_row,
        }
        if self.teacher_phase is not None:
            fields.update(self.teacher_phase.metrics(supervised, self.batch_size))
        return fields

    def _summary_fields(self, stats_row: dict[str, float]) -> dict[str, Any]:
        """The run's results and what it ran on (the log adds SPS, wall time and sections)."""
        teacher = self.teacher_phase
        return {
            "global_step": self.global_step,
            "iterations": self.iteration,
            "mean_return_last_100": self.episodes.mean_return(),
            "mean_length_last_100": self.episodes.mean_length(),
            "episodes": self.episodes.count,
            "phase": self.phase if teacher is not None else None,
            "teacher_calls": dict(teacher.calls) if teacher is not None else None,
            "final_stats": stats_row,
            "interrupted": self.interrupted,
            **run_facts(self.cfg, self.env, self.update_impl, self.device, self.ranks),
            # The most threads a phase could take, and what the governor gave each.
            "threads": self.update_threads,
            "rollout_threads": self.rollout_threads,
            "threads_used": self.threads.summary(),
        }

    # -- checkpoints ---------------------------------------------------------------------
    def save(self, path: Path) -> None:
        """Checkpoint this iteration's end (on every rank; see ``ppo/trainer_state.py``)."""
        save_trainer(self, path)

    def load(self, payload: dict[str, Any]) -> None:
        """Restore a checkpoint made by :meth:`save` into this (identically configured) trainer."""
        load_trainer(self, payload)
