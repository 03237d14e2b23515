"""torch.profiler capture for ``rlperf profile --torch-profiler``.

The profiler runs on torch's ``schedule(wait, warmup, active, repeat)`` and is stepped once per
training iteration (from ``trainer.callbacks``). Every rlperf section is also a
``record_function`` range with its full path (``rollout/env_step``), so the trace timeline shows
the same phases as the breakdown, with torch operators nested inside them.

Traces are written by ``tensorboard_trace_handler`` as ``<host>_<pid>.<ns>.pt.trace.json`` in the
trace directory: TensorBoard's profiler plugin reads that directory as a run
(``tensorboard --logdir DIR``) and Perfetto (https://ui.perfetto.dev) or ``chrome://tracing`` open
any one file.

A trace is exported at the end of each active window. The first one therefore needs
``wait + warmup + active`` iterations; a run that stops earlier leaves none, which
:meth:`TorchTrace.stop` reports plainly. Stopping inside an active window (Ctrl-C, or the last
iteration) exports what was recorded so far.

The profiler's own work (stepping, processing and exporting a window, stopping) is measurement,
not training: it is timed in the ``measurement/torch_profiler`` section of the rlperf profiler
it was started with, so it is neither hidden in ``untimed`` nor ranked as a bottleneck. That
section gets no ``record_function`` range: torch.profiler cannot trace its own export.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.autograd.profiler import record_function

from rlperf.timing import names
from rlperf.timing.sections import Profiler


@dataclass
class TraceSchedule:
    """torch.profiler schedule in training iterations (``repeat=0``: cycle until the end)."""

    wait: int = 5
    warmup: int = 2
    active: int = 3
    repeat: int = 1

    @property
    def first_trace_iteration(self) -> int:
        """Iterations that must complete before the first trace is written."""
        return self.wait + self.warmup + self.active

    def validate(self) -> TraceSchedule:
        if self.wait < 0 or self.warmup < 0 or self.repeat < 0:
            raise ValueError("--wait, --warmup and --repeat must be >= 0")
        if self.active < 1:
            raise ValueError(f"--active must be at least 1, got {self.active}")
        return self


class TorchTrace:
    """A scheduled torch.profiler session whose ranges follow the rlperf sections.

    Args:
        trace_dir: where ``*.pt.trace.json`` files go (created only when a trace is written).
        schedule: the wait/warmup/active/repeat schedule, in iterations.
        cuda: also record CUDA activity.
        record_shapes, profile_memory, with_stack: torch.profiler options (off by default:
            each makes traces larger and the profiled run slower; ``with_stack`` by far).
    """

    def __init__(
        self,
        trace_dir: str | Path,
        schedule: TraceSchedule,
        cuda: bool = False,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
    ) -> None:
        self.trace_dir = Path(trace_dir)
        self.schedule = schedule.validate()
        self.iterations = 0
        activities = [torch.profiler.ProfilerActivity.CPU]
        if cuda:
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self._cuda = cuda
        self._existing = set(self._trace_files())
        self._profile = torch.profiler.profile(
            activities=activities,
            schedule=torch.profiler.schedule(
                wait=schedule.wait,
                warmup=schedule.warmup,
                active=schedule.active,
                repeat=schedule.repeat,
            ),
            on_trace_ready=torch.profiler.tensorboard_trace_handler(str(self.trace_dir)),
            record_shapes=record_shapes,
            profile_memory=profile_memory,
            with_stack=with_stack,
        )
        self._ranges: list[record_function] = []
        self._running = False
        self._prof: Profiler | None = None

    # -- profiler hooks: one record_function range per section ----------------------------
    def on_enter(self, path: str) -> None:
        if names.is_measurement(path):
            return
        rf = record_function(path)
        rf.__enter__()
        self._ranges.append(rf)

    def on_exit(self, path: str) -> None:
        if names.is_measurement(path):
            return
        self._ranges.pop().__exit__(None, None, None)

    @contextmanager
    def _overhead(self) -> Iterator[None]:
        """Time the block as ``measurement/torch_profiler`` (untimed before :meth:`start`)."""
        if self._prof is None:
            yield
            return
        with self._prof.section(names.MEASUREMENT), self._prof.section(names.TORCH_PROFILER):
            yield

    # -- lifecycle ------------------------------------------------------------------------
    def start(self, profiler: Profiler) -> None:
        """Start the torch profiler and open a range for every section of ``profiler``; the
        profiler's own work is timed in ``profiler`` as ``measurement/torch_profiler``."""
        self._prof = profiler
        profiler.add_hooks(self.on_enter, self.on_exit)
        with self._overhead():
            self._profile.start()
        self._running = True

    def step(self, trainer: Any = None, row: Any = None) -> None:
        """Advance the schedule by one training iteration (a ``trainer.callbacks`` entry).

        At the end of an active window this processes and exports the trace: by far the
        profiler's largest cost, hence timed as measurement.
        """
        self.iterations += 1
        with self._overhead():
            self._profile.step()

    def stop(self, profiler: Profiler) -> list[Path]:
        """Stop (exporting a partly recorded window) and return the traces this run wrote."""
        profiler.remove_hooks(self.on_enter, self.on_exit)
        while self._ranges:  # only after an exception escaped a section
            self._ranges.pop().__exit__(None, None, None)
        if self._running:
            with self._overhead():
                self._profile.stop()
            self._running = False
        return self.traces()

    def _trace_files(self) -> list[Path]:
        if not self.trace_dir.is_dir():
            return []
        return sorted(self.trace_dir.glob("*.pt.trace.json"))

    def traces(self) -> list[Path]:
        """Trace files written by this session (not those already in the directory)."""
        return [p for p in self._trace_files() if p not in self._existing]

    def no_trace_message(self) -> str:
        """The plain explanation for a run that ended before its first trace."""
        s = self.schedule
        return (
            f"no torch.profiler trace was written: the run ended after {self.iterations} "
            f"iterations, but the first trace needs wait+warmup+active = {s.wait}+{s.warmup}+"
            f"{s.active} = {s.first_trace_iteration}; lower --wait/--warmup or raise "
            "--total-steps"
        )

    def summary_table(self, row_limit: int = 20) -> str:
        """Top operators by self time (device time on CUDA) from the last recorded window."""
        sort_by = "self_cuda_time_total" if self._cuda else "self_cpu_time_total"
        try:
            averages = self._profile.key_averages()
        except (AssertionError, RuntimeError):  # nothing was recorded
            return "(no torch.profiler data recorded)"
        return averages.table(sort_by=sort_by, row_limit=row_limit)
