"""Memory peaks per section (``rlperf profile --memory``), sampled at section boundaries.

Per section, two figures in MB, both measured *above what was in use when the section was
entered* (the section's own footprint at its worst moment):

- ``cpu_peak_mb``: process resident memory (psutil RSS). RSS is read at every section boundary,
  including the boundaries of nested sections, so a leaf section is sampled only when it starts
  and ends: an allocation freed before the section ends is missed. The absolute figure is not used
  per section because every process that has imported torch holds hundreds of MB, which would
  make every section look like a memory problem.
- ``gpu_peak_mb`` (CUDA only): allocated device memory. Exact, not sampled: the CUDA allocator's
  peak counter is read and reset at every boundary, so short-lived tensors are counted. This
  resets ``torch.cuda.max_memory_allocated`` for the rest of the program, which code that reads
  that counter itself should know.

A parent's peak includes its children's. The whole process's high-water marks (RSS from the
kernel, peak allocated device memory) are reported separately by :meth:`MemoryTracker.totals`.

Cost: one RSS read per boundary and, on CUDA, two allocator calls; only paid when ``--memory`` is
given. On Linux RSS is read straight from ``/proc/self/statm`` through a file descriptor kept open
(about 2 us on the 2-core test box, against about 18 us for ``psutil.Process().memory_info()``,
which is used elsewhere); the hook time is charged to the enclosing section's ``other`` row.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import psutil

MB = 1024 * 1024


def rss_reader() -> Callable[[], int]:
    """A function returning this process's resident memory in bytes, as cheaply as possible."""
    if sys.platform.startswith("linux"):
        try:
            fd = os.open("/proc/self/statm", os.O_RDONLY)
        except OSError:
            fd = -1
        if fd >= 0:
            page_b = os.sysconf("SC_PAGE_SIZE")
            # statm: "size resident shared ..." in pages; pread at 0 re-reads it fresh.
            return lambda: int(os.pread(fd, 128, 0).split()[1]) * page_b
    process = psutil.Process()
    return lambda: process.memory_info().rss


class _Frame:
    __slots__ = ("path", "cpu_entry", "cpu_peak", "gpu_entry", "gpu_peak")

    def __init__(self, path: str, cpu: int, gpu: int) -> None:
        self.path = path
        self.cpu_entry = self.cpu_peak = cpu
        self.gpu_entry = self.gpu_peak = gpu


class MemoryTracker:
    """Profiler hooks recording per-section memory peaks.

    Args:
        cuda: also track allocated CUDA memory (needs a CUDA device).
    """

    def __init__(self, cuda: bool = False) -> None:
        self._rss = rss_reader()
        self._cuda = cuda
        self._stack: list[_Frame] = []
        self._cpu_peak_b: dict[str, int] = {}
        self._gpu_peak_b: dict[str, int] = {}
        self._process_cpu_peak_b = 0
        if cuda:
            import torch

            self._torch_cuda = torch.cuda
            self._torch_cuda.reset_peak_memory_stats()
            self._process_gpu_peak_b = 0

    def _sample(self) -> tuple[int, int]:
        """(current RSS, CUDA peak since the last sample) in bytes; folds both into the top."""
        rss = self._rss()
        if rss > self._process_cpu_peak_b:
            self._process_cpu_peak_b = rss
        gpu_peak = 0
        if self._cuda:
            gpu_peak = self._torch_cuda.max_memory_allocated()
            self._process_gpu_peak_b = max(self._process_gpu_peak_b, gpu_peak)
            self._torch_cuda.reset_peak_memory_stats()
        if self._stack:
            top = self._stack[-1]
            top.cpu_peak = max(top.cpu_peak, rss)
            top.gpu_peak = max(top.gpu_peak, gpu_peak)
        return rss, gpu_peak

    def on_enter(self, path: str) -> None:
        rss, _ = self._sample()
        allocated = self._torch_cuda.memory_allocated() if self._cuda else 0
        self._stack.append(_Frame(path, rss, allocated))

    def on_exit(self, path: str) -> None:
        self._sample()
        frame = self._stack.pop()
        self._cpu_peak_b[frame.path] = max(
            self._cpu_peak_b.get(frame.path, 0), frame.cpu_peak - frame.cpu_entry
        )
        self._gpu_peak_b[frame.path] = max(
            self._gpu_peak_b.get(frame.path, 0), frame.gpu_peak - frame.gpu_entry
        )
        if self._stack:  # the parent's peak includes this child's
            parent = self._stack[-1]
            parent.cpu_peak = max(parent.cpu_peak, frame.cpu_peak)
            parent.gpu_peak = max(parent.gpu_peak, frame.gpu_peak)

    def attach(self, profiler: Any) -> None:
        profiler.add_hooks(self.on_enter, self.on_exit)

    def detach(self, profiler: Any) -> None:
        profiler.remove_hooks(self.on_enter, self.on_exit)

    def peaks_mb(self) -> dict[str, tuple[float | None, float | None]]:
        """Section path -> (cpu_peak_mb, gpu_peak_mb); gpu is None without CUDA."""
        return {
            path: (cpu / MB, self._gpu_peak_b.get(path, 0) / MB if self._cuda else None)
            for path, cpu in self._cpu_peak_b.items()
        }

    def totals(self) -> dict[str, float | None]:
        """Process-wide high-water marks in MB: RSS (kernel's peak) and allocated CUDA memory."""
        self._sample()
        cpu_peak_b = self._process_cpu_peak_b
        try:
            import resource

            # ru_maxrss is the kernel's own peak (KiB on Linux, bytes on macOS): it also sees
            # peaks between section boundaries.
            unit = 1 if sys.platform == "darwin" else 1024
            cpu_peak_b = max(cpu_peak_b, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * unit)
        except ImportError:  # not on Windows
            pass
        return {
            "cpu_peak_rss_mb": cpu_peak_b / MB,
            "gpu_peak_allocated_mb": self._process_gpu_peak_b / MB if self._cuda else None,
        }
