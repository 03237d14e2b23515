"""Telemetry: CPU, memory and NVIDIA GPU use of a training run, sampled in the background.

A daemon thread reads, every ``interval_s`` seconds:

- the trainer process: CPU use (``cpu_pct``, percent of one core as ``top`` shows it, so two
  busy threads read 200) and resident memory (``rss_mb``);
- each worker process: the trainer's child processes (``psutil.Process.children(recursive=True)``:
  a process backend's env workers, torch.compile's compile workers; not multiprocessing's
  forkserver and resource tracker, see :func:`multiprocessing_service_pids`), plus any pid given
  explicitly; the same two figures each, and their sum (``workers_total``). Children are looked
  for at the start and then every ``scan_s`` seconds, not at every sample: psutil finds them by
  reading every process's ``/proc/<pid>/stat`` (2.5 ms with 80 processes on the development box,
  proportionally more on a busy workstation), while reading a known worker costs ~0.1 ms;
- the machine: CPU use over all cores (``cpu_pct``, 0-100) and memory in use (``mem_used_pct``);
  on a shared machine this is how one sees that the run is not alone;
- with NVML (``pip install 'rlperf[gpu]'``: the maintained ``nvidia-ml-py`` binding, imported as
  ``pynvml``), every NVIDIA GPU: utilisation (``util_pct``, NVML's share of the last sample
  period a kernel ran) and memory in use (``mem_used_mb``, all processes).

Without NVML or without a GPU there are no GPU fields, and ``note`` says why, once: in the first
block a run hands out and in the whole-run summary.

A reading of a process's CPU use is its CPU time since the previous reading over the wall time
between them, so the first reading of a process only starts its clock and carries no CPU figure.

Blocks (:meth:`Telemetry.row_fields` for a metrics row, :meth:`Telemetry.summary_fields` for the
run) give the mean and the max of each figure over the samples they cover::

    "telemetry": {"samples": 3, "interval_s": 1.0,
                  "trainer": {"pid": 41, "cpu_pct_mean": 187.0, "cpu_pct_max": 196.0,
                              "rss_mb_mean": 402.1, "rss_mb_max": 402.5},
                  "workers": [{"pid": 57, "cpu_pct_mean": ..., ...}, ...],
                  "workers_total": {"cpu_pct_mean": ..., ...},     # only with workers
                  "machine": {"cpu_pct_mean": 98.0, ..., "mem_used_pct_max": 41.0},
                  "gpus": [{"index": 0, "name": "NVIDIA H100", "mem_total_mb": 81559.0,
                            "util_pct_mean": ..., "mem_used_mb_max": ...}],  # only with NVML
                  "note": "no GPU telemetry: ..."}                 # once, only without NVML

A row covers the samples taken since the previous row; at the default 1 s interval most rows of
a fast run (tens of iterations a second) have none and get no block. The summary's block also
says what the sampling cost: ``sample_cpu_ms_mean``, the CPU time of the sampling thread per
sample (``time.thread_time``: not the time it waited for the GIL).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

import psutil

MB = 1024 * 1024
INSTALL_HINT = "pip install 'rlperf[gpu]'"
# stop() takes a closing sample only this long after the last one (or when there is none): CPU
# shares are counted in the kernel's 10 ms ticks since the previous read, so a tail of a few ms
# reads 0%, 50% or 100% of a core, and in a short run that one sample moves the mean.
MIN_CLOSING_SAMPLE_S = 0.25
TRAINER, MACHINE, WORKERS_TOTAL = "trainer", "machine", "workers_total"
WORKER_PREFIX, GPU_PREFIX = "worker:", "gpu:"

# (group, field) -> value; groups: TRAINER, MACHINE, WORKERS_TOTAL, "worker:<pid>", "gpu:<i>".
Reading = dict[tuple[str, str], float]


class Accumulator:
    """Count, sum and max of each figure over the readings added."""

    def __init__(self) -> None:
        self.samples = 0
        self.figures: dict[tuple[str, str], list[float]] = {}  # key -> [count, sum, max]

    def add(self, reading: Reading) -> None:
        self.samples += 1
        for key, value in reading.items():
            figure = self.figures.get(key)
            if figure is None:
                self.figures[key] = [1, value, value]
            else:
                figure[0] += 1
                figure[1] += value
                figure[2] = max(figure[2], value)

    def groups(self) -> dict[str, dict[str, float]]:
        """group -> {"<field>_mean": ..., "<field>_max": ...}."""
        out: dict[str, dict[str, float]] = {}
        for (group, field), (count, total, peak) in self.figures.items():
            fields = out.setdefault(group, {})
            fields[f"{field}_mean"] = total / count
            fields[f"{field}_max"] = peak
        return out


class NvmlReader:
    """Utilisation and memory of every NVIDIA GPU through NVML (``nvidia-ml-py``).

    :meth:`open` returns None when the GPUs can be read, else the note saying why not.
    """

    def __init__(self) -> None:
        self._nvml: Any = None
        self._handles: list[Any] = []
        self.devices: list[dict[str, Any]] = []  # index, name, mem_total_mb
        # Why NVML could not be opened, kept: a missing package or driver stays missing, and
        # looking again costs ~0.3 ms (a failed import walks sys.path, a failed dlopen the
        # library path) at every start, which a benchmark calling train() repeatedly pays.
        self._unavailable: str | None = None

    def open(self) -> str | None:
        if self._unavailable is not None:
            return self._unavailable
        self._unavailable = self._open()
        return self._unavailable

    def _open(self) -> str | None:
        self._handles, self.devices = [], []
        try:
            import pynvml  # the module of the nvidia-ml-py package
        except ImportError:
            return (
                "no GPU telemetry: nvidia-ml-py is not installed "
                f"({INSTALL_HINT} on a machine with an NVIDIA GPU)"
            )
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as e:
            return f"no GPU telemetry: NVML is not available here ({e})"
        try:
            count = pynvml.nvmlDeviceGetCount()
            for index in range(count):
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                name = pynvml.nvmlDeviceGetName(handle)
                total = pynvml.nvmlDeviceGetMemoryInfo(handle).total
                self._handles.append(handle)
                self.devices.append(
                    {
                        "index": index,
                        "name": name.decode() if isinstance(name, bytes) else str(name),
                        "mem_total_mb": total / MB,
                    }
                )
        except pynvml.NVMLError as e:
            pynvml.nvmlShutdown()
            return f"no GPU telemetry: NVML could not list the GPUs ({e})"
        if not self._handles:
            pynvml.nvmlShutdown()
            return "no GPU telemetry: NVML found no GPU"
        self._nvml = pynvml
        return None

    def read(self, reading: Reading) -> str | None:
        """Add every GPU's figures to ``reading``; a note (and no more reads) if NVML fails."""
        if self._nvml is None:
            return None
        nvml = self._nvml
        try:
            for index, handle in enumerate(self._handles):
                group = f"{GPU_PREFIX}{index}"
                reading[group, "util_pct"] = float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
                reading[group, "mem_used_mb"] = nvml.nvmlDeviceGetMemoryInfo(handle).used / MB
        except nvml.NVMLError as e:
            self.close()
            return f"GPU telemetry stopped: NVML failed during the run ({e})"
        return None

    def close(self) -> None:
        if self._nvml is not None:
            self._nvml.nvmlShutdown()
            self._nvml = None


def machine_cpu_pct(before: Any, after: Any) -> float:
    """The busy share of all cores between two ``psutil.cpu_times()`` reads, percent, as
    ``psutil.cpu_percent`` computes it: idle and iowait are not busy, guest time is already in
    user time on Linux, a field that went backwards counts 0. Kept here with the sampler's own
    last read because psutil keeps its last read per thread: primed on the main thread, the
    sampling thread's first ``cpu_percent(None)`` had nothing to compare with and returned 0.0,
    a fake idle sample in every run (half the samples of a 2-sample run)."""
    delta = {f: max(0.0, getattr(after, f) - getattr(before, f)) for f in after._fields}
    total = sum(delta.values()) - delta.get("guest", 0.0) - delta.get("guest_nice", 0.0)
    busy = total - delta["idle"] - delta.get("iowait", 0.0)
    return round(100.0 * busy / total, 1) if total > 0 else 0.0


def multiprocessing_service_pids() -> set[int]:
    """The pids of multiprocessing's own servers this process started: the forkserver (the
    parent of every env worker) and the resource tracker. Children, but no one's workers: they
    sleep, and counting them made two env workers read "4 workers"."""
    from multiprocessing import forkserver, resource_tracker

    # Private attributes (CPython 3.8-3.13); absent ones just count as no server.
    pids = (
        getattr(forkserver._forkserver, "_forkserver_pid", None),
        getattr(resource_tracker._resource_tracker, "_pid", None),
    )
    return {pid for pid in pids if pid is not None}


class Telemetry:
    """Samples the trainer process, its workers and the GPUs in a background thread.

    Args:
        interval_s: seconds between samples.
        worker_pids: processes to sample besides the trainer's children (e.g. workers that a
            backend started through a server process).
        scan_s: seconds between two looks for new child processes.
        pid: the trainer process (default: this one).

    Use as ``with Telemetry() as telemetry: ...`` or :meth:`start` / :meth:`stop`.
    """

    def __init__(
        self,
        interval_s: float = 1.0,
        worker_pids: Iterable[int] = (),
        scan_s: float = 10.0,
        pid: int | None = None,
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"telemetry interval must be positive, got {interval_s}")
        self.interval_s = interval_s
        self.trainer = psutil.Process(pid)
        self.worker_pids = set(worker_pids)
        self.scan_s = scan_s
        self._gpu = NvmlReader()
        self.note: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # The processes found by the last look for children, kept across restarts: a look
        # costs ~1.5 ms, which a benchmark that calls train() on 512 steps would pay in every
        # call (~5% of it); within scan_s of the last look the known processes are read.
        self._scanned_at = -float("inf")
        self._workers: dict[int, psutil.Process] = {}  # kept: cpu_percent() needs the last read
        self._cpu_times = psutil.cpu_times()  # the machine's, at the last sample (or start)
        self._clear()

    def _clear(self) -> None:
        """Forget every sample (a new start)."""
        self._since_row, self._run = Accumulator(), Accumulator()
        self._latest: Reading = {}
        self._sample_s = 0.0
        self._last_sample_at: float | None = None  # time.monotonic() of the last sample
        self._note_given = False

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> Telemetry:
        """Open NVML, start every CPU clock and the sampling thread. A stopped sampler starts
        afresh: the blocks after a new start cover only what follows it."""
        if self._thread is not None:
            raise RuntimeError("telemetry is already running")
        self._stop.clear()
        self._clear()
        self.note = self._gpu.open()
        self.trainer.cpu_percent(None)
        self._cpu_times = psutil.cpu_times()
        self._sample_processes({})  # starts the workers' clocks; the reading is dropped
        self._thread = threading.Thread(target=self._loop, name="rlperf-telemetry", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread, take a last sample (a run shorter than the interval gets one; see
        :data:`MIN_CLOSING_SAMPLE_S`), and close NVML. Idempotent."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        last = self._last_sample_at
        if last is None or time.monotonic() - last >= MIN_CLOSING_SAMPLE_S:
            self.sample()
        self._gpu.close()

    def __enter__(self) -> Telemetry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- sampling ------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        """Take one sample now (the thread calls this every ``interval_s``)."""
        t0 = time.thread_time()
        reading: Reading = {}
        try:
            with self.trainer.oneshot():
                reading[TRAINER, "cpu_pct"] = self.trainer.cpu_percent(None)
                reading[TRAINER, "rss_mb"] = self.trainer.memory_info().rss / MB
        except psutil.Error:
            return  # the trainer is gone (sampling another pid that exited)
        now = psutil.cpu_times()
        reading[MACHINE, "cpu_pct"] = machine_cpu_pct(self._cpu_times, now)
        self._cpu_times = now
        reading[MACHINE, "mem_used_pct"] = psutil.virtual_memory().percent
        self._sample_processes(reading)
        note = self._gpu.read(reading)
        with self._lock:
            if note is not None:
                self.note, self._note_given = note, False
            self._since_row.add(reading)
            self._run.add(reading)
            self._latest = reading
            self._sample_s += time.thread_time() - t0
            self._last_sample_at = time.monotonic()

    def _sample_processes(self, reading: Reading) -> None:
        """Add each worker's figures and their sum; forget workers that exited."""
        new: list[psutil.Process] = []
        now = time.monotonic()
        if now - self._scanned_at >= self.scan_s:
            self._scanned_at = now
            skip = self._workers.keys() | multiprocessing_service_pids()
            try:
                new = [p for p in self.trainer.children(recursive=True) if p.pid not in skip]
            except psutil.Error:
                pass
            for pid in self.worker_pids - self._workers.keys():
                try:
                    new.append(psutil.Process(pid))
                except psutil.Error:
                    continue
        total_cpu, total_rss, counted = 0.0, 0.0, 0
        for proc in [*self._workers.values(), *new]:
            known = proc.pid in self._workers
            try:
                cpu = proc.cpu_percent(None)  # a new worker's first read only starts its clock
                rss = proc.memory_info().rss / MB
            except psutil.Error:
                self._workers.pop(proc.pid, None)  # exited
                continue
            self._workers[proc.pid] = proc
            group = f"{WORKER_PREFIX}{proc.pid}"
            reading[group, "rss_mb"] = rss
            total_rss += rss
            if known:
                reading[group, "cpu_pct"] = cpu
                total_cpu += cpu
                counted += 1
        if self._workers:
            reading[WORKERS_TOTAL, "rss_mb"] = total_rss
            if counted:
                reading[WORKERS_TOTAL, "cpu_pct"] = total_cpu

    # -- blocks --------------------------------------------------------------------------
    def row_fields(self) -> dict[str, Any]:
        """``{"telemetry": block}`` over the samples since the previous call (for a metrics
        row), or ``{}`` when no sample was taken since. The note goes in the first block only."""
        with self._lock:
            taken, self._since_row = self._since_row, Accumulator()
            if not taken.samples:
                return {}
            block = self._block(taken, with_note=not self._note_given)
            self._note_given = True
        return {"telemetry": block}

    def summary_fields(self) -> dict[str, Any]:
        """``{"telemetry": block}`` over the whole run, with the sampler's own cost."""
        with self._lock:
            block = self._block(self._run, with_note=True)
            block["sample_cpu_ms_mean"] = (
                1e3 * self._sample_s / self._run.samples if self._run.samples else None
            )
        return {"telemetry": block}

    def latest(self) -> dict[str, Any]:
        """The last sample as a block (``samples`` 1, mean = max = the reading), ``{}`` before
        the first; for a live view."""
        with self._lock:
            if not self._latest:
                return {}
            one = Accumulator()
            one.add(self._latest)
            return self._block(one, with_note=True)

    def _block(self, acc: Accumulator, with_note: bool) -> dict[str, Any]:
        groups = acc.groups()
        block: dict[str, Any] = {"samples": acc.samples, "interval_s": self.interval_s}
        block[TRAINER] = {"pid": self.trainer.pid, **groups.get(TRAINER, {})}
        workers = sorted(
            (int(group.removeprefix(WORKER_PREFIX)), fields)
            for group, fields in groups.items()
            if group.startswith(WORKER_PREFIX)
        )
        block["workers"] = [{"pid": pid, **fields} for pid, fields in workers]
        if WORKERS_TOTAL in groups:
            block[WORKERS_TOTAL] = groups[WORKERS_TOTAL]
        block[MACHINE] = groups.get(MACHINE, {})
        gpus = [
            {**device, **groups[f"{GPU_PREFIX}{device['index']}"]}
            for device in self._gpu.devices
            if f"{GPU_PREFIX}{device['index']}" in groups
        ]
        if gpus:
            block["gpus"] = gpus
        if with_note and self.note is not None:
            block["note"] = self.note
        return block


def describe(block: dict[str, Any]) -> str:
    """One line for a telemetry block: trainer, workers, machine and GPU figures, or the note."""

    def figure(fields: dict[str, Any], key: str, unit: str) -> str:
        mean, peak = fields.get(f"{key}_mean"), fields.get(f"{key}_max")
        return "n/a" if mean is None else f"{mean:,.0f}{unit} mean, {peak:,.0f}{unit} max"

    trainer = block.get(TRAINER, {})
    parts = [
        f"trainer CPU {figure(trainer, 'cpu_pct', '%')}, RSS {figure(trainer, 'rss_mb', ' MB')}"
    ]
    if WORKERS_TOTAL in block:
        workers = block[WORKERS_TOTAL]
        parts.append(
            f"{len(block['workers'])} workers CPU {figure(workers, 'cpu_pct', '%')}, "
            f"RSS {figure(workers, 'rss_mb', ' MB')}"
        )
    parts.append(f"machine CPU {figure(block.get(MACHINE, {}), 'cpu_pct', '%')}")
    for gpu in block.get("gpus", []):
        parts.append(
            f"GPU {gpu['index']} {figure(gpu, 'util_pct', '%')}, "
            f"memory {figure(gpu, 'mem_used_mb', ' MB')}"
        )
    if "note" in block:
        parts.append(block["note"])
    n = block["samples"]
    head = f"telemetry ({n} sample{'' if n == 1 else 's'} every {block['interval_s']:g}s): "
    return head + "; ".join(parts)


# Other processes' mean CPU use, in cores, from which a run is called slowed by contention.
CONTENDED_CORES = 0.5


def contention_line(block: dict[str, Any], cores: int) -> str | None:
    """One line saying the run shared the machine, with what to do, or None: the machine's
    mean CPU use less the trainer's and its workers' is ``CONTENDED_CORES`` cores or more.

    Args:
        block: a whole-run telemetry block (:meth:`Telemetry.summary_fields`).
        cores: the cores the run could use (``cores.usable_cores()``).
    """
    machine = block.get(MACHINE, {}).get("cpu_pct_mean")
    ours = block.get(TRAINER, {}).get("cpu_pct_mean")
    if machine is None or ours is None:
        return None
    ours += block.get(WORKERS_TOTAL, {}).get("cpu_pct_mean") or 0.0
    # The machine's figure covers every core; ours may have run on fewer (affinity).
    others = machine / 100.0 * (psutil.cpu_count() or cores) - ours / 100.0
    if others < CONTENDED_CORES:
        return None
    return (
        f"rlperf: other processes kept {others:.1f} of {cores} cores busy during this run, so "
        "its SPS is not an idle machine's: compare runs with `rlperf compare` (interleaved and "
        "paired) or on a quiet machine"
    )
