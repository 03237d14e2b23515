"""Where a training run's figures go, iteration by iteration.

:class:`TrainingLog` owns what the trainer reports besides the algorithm's own numbers: the SPS
meter, the seconds each section ran since the last row, the rollout timing block
(``--summary-every``), the progress line and the run directory's ``config.json``,
``metrics.jsonl`` and ``summary.json``. The trainer hands it the iteration's fields; it adds
the rest.

What the run resolved as it started (``--vec-backend auto``'s choice, the device, the threads,
``--total-steps`` rounded down to whole iterations: ``ppo/build.py``'s ``resolved_settings``)
goes into ``config.json`` as its ``resolved`` block, beside the settings as given, and with the
progress line on, into one line on stderr before the first iteration (:func:`start_line`).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from rlperf.config import Config
from rlperf.run.progress import ProgressBar
from rlperf.run.rollout_timing import RolloutTimer, render_block
from rlperf.run.run_dir import CHECKPOINT_NAME, RunDir
from rlperf.run.telemetry import Telemetry
from rlperf.run.throughput import Throughput
from rlperf.timing.sections import Profiler


def seconds_since(before_ns: dict[str, int], now_ns: dict[str, int]) -> dict[str, float]:
    """Seconds each section ran between two profiler snapshots (sections that ran only)."""
    return {
        name: (total - before_ns.get(name, 0)) / 1e9
        for name, total in now_ns.items()
        if total > before_ns.get(name, 0)
    }


class TrainingLog:
    """Metrics rows, SPS, the progress line and the run directory of one ``train`` call.

    Args:
        run_dir: the run directory to write (None: nothing is written).
        resumed: keep ``metrics.jsonl``'s rows up to ``iteration`` (a resumed run).
        prior_steps, prior_s: steps and seconds counted for SPS before a resume.
        resolved: what the run resolved as it starts (module docstring); its ``total_steps``,
            the steps the run will have made, is the progress line's 100%.
    """

    def __init__(
        self,
        cfg: Config,
        prof: Profiler,
        run_dir: str | Path | None,
        resumed: bool,
        iteration: int,
        prior_steps: int,
        prior_s: float,
        telemetry: Telemetry | None = None,
        resolved: dict[str, Any] | None = None,
    ) -> None:
        self.prof, self.telemetry = prof, telemetry
        self.out = RunDir(run_dir) if run_dir is not None else None
        self.cfg, self.resolved = cfg, resolved
        if self.out is not None:
            self.out.prepare()
            extra = {} if resolved is None else {"resolved": resolved}
            self.out.write_config({**cfg.to_dict(), **extra})
            self.out.open_metrics(keep_through_iteration=iteration if resumed else None)
        run = cfg.run
        self.meter = Throughput(run.sps_window_s, run.warmup_iters, prior_steps, prior_s)
        total = run.total_steps if resolved is None else resolved["total_steps"]
        self.bar = ProgressBar(total, enabled=run.progress)
        self.timer = RolloutTimer(prof, run.summary_every) if run.summary_every else None
        self.iteration = iteration
        self.max_wall_s = run.max_wall_s
        self.wall_s = 0.0  # at the last row

    @property
    def budget_spent(self) -> bool:
        """The wall-clock budget (``--max-wall-s``) ran out by the last row (never without one)."""
        return 0 < self.max_wall_s <= self.wall_s

    @property
    def checkpoint_path(self) -> Path | None:
        return None if self.out is None else Path(self.out.path) / CHECKPOINT_NAME

    def start(self, global_step: int) -> None:
        """Start the clocks (call right before the first iteration)."""
        if self.bar.enabled and self.resolved is not None:
            print(start_line(self.cfg, self.resolved), file=sys.stderr, flush=True)
        self.t_start = time.perf_counter()
        self.meter.start(self.t_start, global_step)
        # A resumed run starts at its checkpoint's step: this process ran only what follows.
        self.start_step = self.global_step = global_step
        # The profiler may be shared (the process-wide one): report this run's share only.
        self._sections_at_start = self._sections_logged = self.prof.snapshot_ns()
        if self.timer is not None:
            self.timer.start(self.iteration)
        if self.telemetry is not None:
            self.telemetry.start()

    def row(self, iteration: int, global_step: int, fields: dict[str, Any]) -> dict[str, Any]:
        """The iteration's metrics row: ``fields`` with SPS and section seconds, written out."""
        self.iteration, self.global_step = iteration, global_step
        now = time.perf_counter()
        self.meter.tick(now, global_step)
        self.wall_s = now - self.t_start
        now_sections = self.prof.snapshot_ns()
        row = {
            "iteration": iteration,
            "global_step": global_step,
            "wall_s": self.wall_s,
            "sps": self.meter.windowed_sps(),
            "sps_cumulative": self.meter.cumulative_sps(),
            **fields,
            "sections_s": seconds_since(self._sections_logged, now_sections),
        }
        self._sections_logged = now_sections
        if self.telemetry is not None:
            row.update(self.telemetry.row_fields())  # {} until the sampler's first reading
        if self.timer is not None and self.timer.due(iteration):
            timing_ms, span = self.timer.take(iteration)
            row["rollout_timing_ms"] = timing_ms
            phase = row.get("phase", "ppo")
            self.bar.write(render_block(timing_ms, span, global_step, phase))
        if self.out is not None:
            self.out.append_metrics(row)
        self.bar.update(global_step, row["sps"], row.get("mean_return"))
        return row

    def counted(self) -> tuple[int, float]:
        """Steps and seconds counted for SPS so far (saved in a checkpoint)."""
        return self.meter.counted_steps, self.meter.counted_s

    def close(self, fields: dict[str, Any]) -> dict[str, Any]:
        """The run's summary: ``fields`` with SPS, wall time, section totals and
        ``steps_this_run`` (the steps this process ran in that wall time: after a resume, the
        global step less the checkpoint's); written out."""
        self.bar.close()
        last_step = int(fields.get("global_step", self.global_step))
        summary = {
            "steps_this_run": last_step - self.start_step,
            "sps": self.meter.windowed_sps(),
            "sps_cumulative": self.meter.cumulative_sps(),
            "sps_counted_steps": self.meter.counted_steps,
            "sps_counted_s": self.meter.counted_s,
            "wall_s": time.perf_counter() - self.t_start,
            "max_wall_s": self.max_wall_s,
            "budget_spent": self.budget_spent,
            **fields,
            "sections": seconds_since(self._sections_at_start, self.prof.snapshot_ns()),
        }
        if self.telemetry is not None:
            self.telemetry.stop()  # takes a last reading
            summary.update(self.telemetry.summary_fields())
        if self.out is not None:
            self.out.write_summary(summary)
            self.out.close()
        return summary


def start_line(cfg: Config, resolved: dict[str, Any]) -> str:
    """What the run resolved, in one line: ``run: 97 iterations of 2,048 steps = 198,656
    steps (--total-steps 200,000 rounded down to whole iterations: each updates on a whole
    rollout, --num-steps 32 of every env) | env backend serial (--vec-backend auto) | device
    cpu | torch threads 2 (rollout 1)``."""
    total, per = resolved["total_steps"], resolved["steps_per_iteration"]
    iterations = f"{resolved['iterations']:,} iteration{'s' * (resolved['iterations'] != 1)}"
    steps = f"{iterations} of {per:,} steps = {total:,} steps"
    if total != cfg.run.total_steps:
        steps += (
            f" (--total-steps {cfg.run.total_steps:,} rounded down to whole iterations: each "
            f"updates on a whole rollout, --num-steps {cfg.ppo.num_steps} of every env)"
        )
    backend = resolved["vec_backend"]
    asked = f" (--vec-backend {cfg.env.backend})" if cfg.env.backend != backend else ""
    threads = f"torch threads {resolved['threads']}"
    if resolved["rollout_threads"] != resolved["threads"]:
        threads += f" (rollout {resolved['rollout_threads']})"
    return f"run: {steps} | env backend {backend}{asked} | device {resolved['device']} | {threads}"
