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

Sections a C kernel times itself (the fused rollout's ``policy_forward``, ``env_step``, ...,
the native update's ``loss``, ``backward``, ...) have no ``record_function`` range: they are
recorded after the kernel returns, and a range cannot be back-dated. While a window records,
the kernels log each phase's start and end on their clock (CLOCK_MONOTONIC, Python's
``perf_counter``; :class:`rlperf.native.SpanLog`), the profiler hands them here
(:meth:`Profiler.set_span_sink`), and when torch has written the window's trace
:func:`add_kernel_spans` adds them to it as ranges of the same names, on the trace's clock,
nested in their parent's range. ``TorchTrace(kernel_spans=False)`` leaves them out.

The profiler's own work (stepping, processing and exporting a window, stopping) is measurement,
not training: it is timed in the ``measurement/torch_profiler`` section of the rlperf profiler
it was started with, so it is neither hidden in ``untimed`` nor ranked as a bottleneck. That
section gets no ``record_function`` range: torch.profiler cannot trace its own export.
"""

from __future__ import annotations

import bisect
import json
import os
import time
from collections.abc import Iterator, Sequence
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
        kernel_spans: add the C kernels' phases to each trace (module docstring).
    """

    def __init__(
        self,
        trace_dir: str | Path,
        schedule: TraceSchedule,
        cuda: bool = False,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
        kernel_spans: bool = True,
    ) -> None:
        self.trace_dir = Path(trace_dir)
        self.kernel_spans = kernel_spans
        # The kernels' spans of the window being recorded: (section path, start, end) in ns.
        self._spans: list[tuple[str, int, int]] = []
        self._export = torch.profiler.tensorboard_trace_handler(str(self.trace_dir))
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
            on_trace_ready=self._trace_ready,
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

    # -- the kernels' spans -----------------------------------------------------------------
    def _keep_spans(self, path: str, spans: Sequence[tuple[int, int]]) -> None:
        self._spans.extend((path, start, end) for start, end in spans)

    def _follow_schedule(self) -> None:
        """Take the kernels' spans while torch.profiler records (not while it waits or warms
        up: those iterations are discarded)."""
        if self._prof is None or not self.kernel_spans:
            return
        recording = self._profile.current_action in (
            torch.profiler.ProfilerAction.RECORD,
            torch.profiler.ProfilerAction.RECORD_AND_SAVE,
        )
        self._prof.set_span_sink(self._keep_spans if recording else None)

    def _trace_ready(self, profile: torch.profiler.profile) -> None:
        """Export the window (torch's TensorBoard handler), then add the kernels' spans to the
        file it wrote."""
        before = set(self._trace_files())
        self._export(profile)
        spans, self._spans = self._spans, []
        for path in self._trace_files():
            if path not in before and spans:
                add_kernel_spans(path, spans)

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
        self._follow_schedule()

    def step(self, trainer: Any = None, row: Any = None) -> None:
        """Advance the schedule by one training iteration (a ``trainer.callbacks`` entry).

        At the end of an active window this processes and exports the trace: by far the
        profiler's largest cost, hence timed as measurement.
        """
        self.iterations += 1
        with self._overhead():
            self._profile.step()
        self._follow_schedule()

    def stop(self, profiler: Profiler) -> list[Path]:
        """Stop (exporting a partly recorded window) and return the traces this run wrote."""
        profiler.remove_hooks(self.on_enter, self.on_exit)
        if self.kernel_spans:
            profiler.set_span_sink(None)
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


def add_kernel_spans(
    trace: Path, spans: Sequence[tuple[str, int, int]], clock_offset_ns: int | None = None
) -> int:
    """Write the C kernels' spans into an exported Chrome trace as ranges: each ``(section path,
    start ns, end ns)`` on the ``perf_counter_ns`` clock becomes a complete event of that name
    (``cat`` ``user_annotation``, as ``record_function``'s ranges) on the thread of its parent
    section's range, moved to the trace's clock and kept inside that range. A span whose
    parent has no range in the trace (recorded outside the window) is left out. Returns how
    many were written.

    The trace's ``ts`` are microseconds after ``baseTimeNanoseconds`` on the Unix clock (0 in
    traces without it); perf_counter is put on that clock by ``clock_offset_ns``, by default
    the offset between ``time.time_ns`` and ``time.perf_counter_ns`` now (within a few
    microseconds of torch's own conversion; the clamp into the parent's range absorbs the
    rest).
    """
    with open(trace, encoding="utf-8") as f:
        data = json.load(f)
    events = data.get("traceEvents", [])
    base_ns = int(data.get("baseTimeNanoseconds", 0))
    # Section ranges by name, ordered by start: (start ns, end ns, pid, tid) after the base.
    ranges: dict[str, list[tuple[int, int, Any, Any]]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "user_annotation":
            start = round(float(e["ts"]) * 1e3)
            ranges.setdefault(e["name"], []).append(
                (start, start + round(float(e.get("dur", 0)) * 1e3), e.get("pid"), e.get("tid"))
            )
    for of_name in ranges.values():
        of_name.sort()
    starts = {name: [r[0] for r in rs] for name, rs in ranges.items()}
    if clock_offset_ns is None:
        clock_offset_ns = time.time_ns() - time.perf_counter_ns()
    offset_ns = clock_offset_ns - base_ns
    added = []
    for path, start_ns, end_ns in spans:
        parent = path.rpartition("/")[0]
        start, end = start_ns + offset_ns, end_ns + offset_ns
        mid = (start + end) // 2
        i = bisect.bisect_right(starts.get(parent, []), mid) - 1
        if i < 0 or mid > ranges[parent][i][1]:
            continue
        low, high, pid, tid = ranges[parent][i]
        start, end = max(start, low), min(end, high)
        added.append({
            "ph": "X", "cat": "user_annotation", "name": path, "pid": pid, "tid": tid,
            "ts": start / 1e3, "dur": (end - start) / 1e3,
            "args": {"source": "rlperf kernel clock"},
        })  # fmt: skip
    if added:
        events.extend(added)
        data["traceEvents"] = events
        tmp = trace.with_name(trace.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, trace)
    return len(added)
