"""How busy the GPU was during a row: from a torch.profiler trace where the row is rlperf's (the
union of its kernels, copies and sets over the traced iterations' wall time), and from NVML's
utilisation samples where it is another program's (PureJaxRL, LeanRL, CleanRL: their code is
not ours to trace). NVML's figure is the share of each sample period in which any kernel ran,
the same question at a coarser grain (a sixth of a second to a second a sample)."""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

# Trace event categories of work on the GPU, and of the host calls that start it.
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaGraphLaunch",
            "cudaMemcpyAsync")  # fmt: skip
STEP = re.compile(r"^ProfilerStep#\d+$")  # torch.profiler's annotation of one traced iteration


def union_us(spans: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Length of the union of ``spans`` ((start, end) in us) clipped to [lo, hi]: time when at
    least one of them ran (two streams at once count once)."""
    total, reach = 0.0, lo
    for start, end in sorted(spans):
        start, end = max(start, reach), min(end, hi)
        if end > start:
            total += end - start
            reach = end
    return total


def trace_activity(path: Path) -> dict[str, Any]:
    """A torch.profiler (Chrome) trace's events by category, its CUDA kernels by time, and the
    GPU's busy share of the traced iterations (``busy_pct``; None where the trace has no
    ``ProfilerStep`` annotation to bound them)."""
    events = json.loads(path.read_text()).get("traceEvents", [])
    cats = Counter(e.get("cat") for e in events)
    kernels: Counter[str] = Counter()
    for e in events:
        if e.get("cat") == "kernel":
            kernels[e.get("name", "?")] += e.get("dur", 0)
    steps = [e for e in events if STEP.match(str(e.get("name", ""))) and "dur" in e]
    out: dict[str, Any] = {
        "mb": round(path.stat().st_size / 2**20, 2),
        "events": dict(cats),
        "kernels": cats.get("kernel", 0),
        "memcpy": cats.get("gpu_memcpy", 0),
        "launches": sum(1 for e in events if e.get("name") in LAUNCHES),
        "iterations": len(steps),
        "top_kernels_us": dict(kernels.most_common(10)),
        "busy_pct": None,
    }
    if steps:
        lo = min(e["ts"] for e in steps)
        hi = max(e["ts"] + e["dur"] for e in steps)
        gpu = [(e["ts"], e["ts"] + e.get("dur", 0)) for e in events if e.get("cat") in GPU_CATS]
        busy = union_us(gpu, lo, hi)
        out.update(
            window_ms=round((hi - lo) / 1e3, 2),
            busy_ms=round(busy / 1e3, 2),
            busy_pct=round(100 * busy / (hi - lo), 1) if hi > lo else None,
        )
    return out


class Nvml:
    """GPU 0's utilisation sampled by a background thread every ``interval_s`` while the check
    runs: ``mean_pct(t0, t1)`` over a row's window. Where nvidia-ml-py or a GPU is missing,
    ``why`` says so and every mean is None."""

    def __init__(self, interval_s: float = 0.2) -> None:
        self.samples: list[tuple[float, int]] = []
        self.why: str | None = None
        self._stop = threading.Event()
        try:
            import pynvml  # nvidia-ml-py: in the GPU image, an optional extra here

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception as e:  # no library, no driver or no GPU: the rows say which
            self.why = f"no NVML samples ({type(e).__name__}: {e})"
            return

        def sample() -> None:
            while not self._stop.wait(interval_s):
                with contextlib.suppress(Exception):  # one missed sample is not a finding
                    util = pynvml.nvmlDeviceGetUtilizationRates(handle).gpu
                    self.samples.append((time.monotonic(), int(util)))

        threading.Thread(target=sample, daemon=True, name="gpu_check_nvml").start()

    def mean_pct(self, t0: float | None, t1: float) -> dict[str, Any]:
        """The mean utilisation of the samples taken in [t0, t1] (monotonic seconds)."""
        if self.why or t0 is None:
            return {"source": "nvml", "pct": None, "why": self.why or "no measured window"}
        window = [u for t, u in self.samples if t0 <= t <= t1]
        pct = round(sum(window) / len(window), 1) if window else None
        return {"source": "nvml", "pct": pct, "samples": len(window)}

    def close(self) -> None:
        self._stop.set()


class LogWatch:
    """When a process's log first showed ``pattern`` (its first measured figure: the window a
    row's NVML mean covers starts there), polled with the process."""

    def __init__(self, log: Path, pattern: re.Pattern[str]) -> None:
        self.log, self.pattern, self.seen_at = log, pattern, None
        self._offset = 0

    def poll(self) -> float | None:
        if self.seen_at is None and self.log.exists():
            with open(self.log, "rb") as f:
                f.seek(self._offset)
                data = f.read()
            if self.pattern.search(data.decode(errors="replace")):
                self.seen_at = time.monotonic()
            # Read on from 200 bytes back next time: a line may have been half written.
            self._offset += max(len(data) - 200, 0)
        return self.seen_at
