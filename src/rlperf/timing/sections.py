"""Named, nested timing sections: the one timing primitive the trainer and user code share.

A section is entered with ``with profiler.section("env_step"):``. Names nest: a section opened
inside ``rollout`` is recorded as ``rollout/env_step``. Each full name keeps its call count and
total, min and max wall time in nanoseconds.

Why it is cheap: a section handle is created once per (parent, name) pair and reused, so entering
a section costs one dict lookup, one ``perf_counter_ns`` call and a list push; leaving it, one
clock read and four integer updates. Disabled, ``section()`` returns a shared no-op context.

CUDA: GPU work is asynchronous, so the host clock alone would charge a kernel to whichever
section happens to wait for it. With ``cuda_sync=True`` every section boundary calls
``torch.cuda.synchronize()`` before reading the clock, so each section is charged the GPU work it
launched. That costs some overlap between host and device; ``cuda_sync=False`` keeps the overlap
and then times only the launches (documented in docs/profiling.md).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator, Sequence
from typing import ParamSpec, TypeVar

from rlperf.timing.breakdown import build_rows, render
from rlperf.timing.stats import SectionStats

P = ParamSpec("P")
R = TypeVar("R")

_perf_ns = time.perf_counter_ns
# Receives a section's full path and spans timed outside the profiler (Profiler.set_span_sink).
SpanSink = Callable[[str, Sequence[tuple[int, int]]], None]


class _Section:
    """Context manager for one full section name; created once and reused."""

    __slots__ = ("_profiler", "stats", "path", "_starts")

    def __init__(self, profiler: Profiler, stats: SectionStats) -> None:
        self._profiler = profiler
        self.stats = stats
        self.path = stats.name
        self._starts: list[int] = []

    def __enter__(self) -> _Section:
        prof = self._profiler
        if prof._sync is not None:
            prof._sync()
        prof._stack.append(self)
        for hook in prof._enter_hooks:
            hook(self.path)
        self._starts.append(_perf_ns())
        return self

    def __exit__(self, *exc: object) -> None:
        prof = self._profiler
        if prof._sync is not None:
            prof._sync()
        elapsed = _perf_ns() - self._starts.pop()
        prof._stack.pop()
        for hook in prof._exit_hooks:
            hook(self.path)
        s = self.stats
        if s.calls == 0 or elapsed < s.min_ns:
            s.min_ns = elapsed
        if elapsed > s.max_ns:
            s.max_ns = elapsed
        s.calls += 1
        s.total_ns += elapsed


class _NullSection:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


NULL_SECTION = _NullSection()


class Profiler:
    """Collects nested section timings.

    Args:
        enabled: when False, :meth:`section` returns a shared no-op context (near-zero cost).
        cuda_sync: call ``torch.cuda.synchronize()`` at every section boundary (see module doc).
    """

    def __init__(self, enabled: bool = True, cuda_sync: bool = False) -> None:
        self.enabled = enabled
        self._handles: dict[tuple[str | None, str], _Section] = {}
        self._stats: dict[str, SectionStats] = {}
        self._stack: list[_Section] = []
        self._sync: Callable[[], None] | None = None
        # Hooks called with the full section path on enter/exit (record_function ranges,
        # memory sampling). Empty in the common case, so the loops above cost nothing.
        self._enter_hooks: list[Callable[[str], None]] = []
        self._exit_hooks: list[Callable[[str], None]] = []
        # Where the spans of :meth:`record` go (a torch.profiler window being recorded).
        self._span_sink: SpanSink | None = None
        self.set_cuda_sync(cuda_sync)

    # -- control -------------------------------------------------------------------------
    def enable(self) -> None:
        self.enabled = True

    def disable(self) -> None:
        self.enabled = False

    def reset(self) -> None:
        """Forget all recorded timings (open sections keep running and record on exit)."""
        for s in self._stats.values():
            s.calls = s.total_ns = s.min_ns = s.max_ns = 0

    def set_cuda_sync(self, on: bool) -> None:
        if on:
            import torch

            self._sync = torch.cuda.synchronize if torch.cuda.is_available() else None
        else:
            self._sync = None

    def add_hooks(
        self,
        on_enter: Callable[[str], None] | None = None,
        on_exit: Callable[[str], None] | None = None,
    ) -> None:
        """Register callbacks run with the section's full path when it is entered / left."""
        if on_enter is not None:
            self._enter_hooks.append(on_enter)
        if on_exit is not None:
            self._exit_hooks.append(on_exit)

    def remove_hooks(
        self,
        on_enter: Callable[[str], None] | None = None,
        on_exit: Callable[[str], None] | None = None,
    ) -> None:
        if on_enter in self._enter_hooks:
            self._enter_hooks.remove(on_enter)
        if on_exit in self._exit_hooks:
            self._exit_hooks.remove(on_exit)

    def set_span_sink(self, sink: SpanSink | None) -> None:
        """Where the spans handed to :meth:`record` go, called with the section's full path
        and its (start ns, end ns) pairs on the ``perf_counter_ns`` clock; None: nowhere. While
        one is set, :attr:`wants_spans` holds and the C kernels log their phases' spans."""
        self._span_sink = sink

    @property
    def wants_spans(self) -> bool:
        """Whether a caller of :meth:`record` should hand over each span (a span sink is set:
        a torch.profiler trace is recording), not only the totals."""
        return self.enabled and self._span_sink is not None

    # -- recording -----------------------------------------------------------------------
    def section(self, name: str) -> _Section | _NullSection:
        """Context manager timing ``name`` nested under the currently open section."""
        if not self.enabled:
            return NULL_SECTION
        parent = self._stack[-1].path if self._stack else None
        key = (parent, name)
        handle = self._handles.get(key)
        if handle is None:
            handle = self._new_handle(parent, name)
        return handle

    def _new_handle(self, parent: str | None, name: str) -> _Section:
        path = f"{parent}/{name}" if parent else name
        stats = self._stats.get(path)
        if stats is None:
            stats = self._stats[path] = SectionStats(path, parent)
        handle = self._handles[(parent, name)] = _Section(self, stats)
        return handle

    def record(
        self,
        name: str,
        total_ns: int,
        calls: int,
        min_ns: int,
        max_ns: int,
        spans: Sequence[tuple[int, int]] = (),
    ) -> None:
        """Add spans timed elsewhere (inside a C kernel) to ``name``, nested under the currently
        open section as :meth:`section` would nest it: ``calls`` spans of ``total_ns`` in all,
        the shortest ``min_ns``, the longest ``max_ns``. Enter/exit hooks are not called; the
        spans themselves, (start ns, end ns) on the ``perf_counter_ns`` clock where the caller
        logged them (:attr:`wants_spans`), go to the span sink."""
        if not self.enabled or calls <= 0:
            return
        parent = self._stack[-1].path if self._stack else None
        handle = self._handles.get((parent, name)) or self._new_handle(parent, name)
        s = handle.stats
        if s.calls == 0 or min_ns < s.min_ns:
            s.min_ns = min_ns
        s.max_ns = max(s.max_ns, max_ns)
        s.calls += calls
        s.total_ns += total_ns
        if spans and self._span_sink is not None:
            self._span_sink(handle.path, spans)

    def function(self, name: str | None = None) -> Callable[[Callable[P, R]], Callable[P, R]]:
        """Decorator timing every call of a function as a section (default name: qualname)."""

        def wrap(fn: Callable[P, R]) -> Callable[P, R]:
            label = name or fn.__qualname__

            @functools.wraps(fn)
            def timed(*args: P.args, **kwargs: P.kwargs) -> R:
                with self.section(label):
                    return fn(*args, **kwargs)

            return timed

        return wrap

    # -- reading -------------------------------------------------------------------------
    @property
    def current_path(self) -> str | None:
        return self._stack[-1].path if self._stack else None

    def stats(self) -> Iterator[SectionStats]:
        """Sections with at least one call, in first-seen order (parents before children)."""
        return (s for s in self._stats.values() if s.calls)

    def totals_s(self) -> dict[str, float]:
        """Section full name -> total seconds."""
        return {s.name: s.total_ns / 1e9 for s in self.stats()}

    def snapshot_ns(self) -> dict[str, int]:
        """Section full name -> total ns so far; subtract two snapshots for a window."""
        return {name: s.total_ns for name, s in self._stats.items()}

    def report(self, wall_s: float | None = None, title: str | None = None) -> str:
        """The nested breakdown table of everything recorded so far.

        Args:
            wall_s: seconds of the span the sections ran in (percentages and the ``untimed``
                row are relative to it); default: the sum of the top-level sections.
            title: optional first line.
        """
        stats = list(self.stats())
        if wall_s is None:
            wall_s = sum(s.total_ns for s in stats if s.parent is None) / 1e9
        return render(build_rows(stats, wall_s), wall_s, title)


_GLOBAL = Profiler()


def get_profiler() -> Profiler:
    """The process-wide profiler used by :func:`profile` and :func:`profile_function`."""
    return _GLOBAL


def profile(name: str) -> _Section | _NullSection:
    """``with rlperf.profile("my_step"):`` times a block in the process-wide profiler."""
    return _GLOBAL.section(name)


def profile_function(name: str | None = None) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """``@rlperf.profile_function("name")`` times every call of the decorated function."""
    return _GLOBAL.function(name)
