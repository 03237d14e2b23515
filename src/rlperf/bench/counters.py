"""Hardware and software event counters of this thread, read from Python through
``perf_event_open`` (Linux; ctypes, no dependency): instructions and cycles where the kernel
exposes a PMU, the kernel's task clock everywhere.

Instructions retired per sample are nearly independent of the machine's load (a neighbour on
the other core changes the time a sample takes, its caches, not the instructions it executes),
which is why they are a candidate signal for the gate beside busy processes. Many virtual
machines expose no PMU: ``perf stat -e instructions true`` says ``<not supported>`` and
``perf_event_open`` fails with ENOENT; :func:`unavailable` then says why in one line.

Counters count user-space events of the calling thread (``exclude_kernel``: what
``perf_event_paranoid`` 2, the common default, allows), and of threads it starts after the
counter opened (``inherit``), not of threads that already exist (torch's OpenMP pool): read
single-threaded work, as the gate's cases are (``threads=1``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from dataclasses import dataclass
from pathlib import Path

# perf_event_attr.type and .config (linux/perf_event.h).
PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE = 0, 1
EVENTS = {
    "instructions": (PERF_TYPE_HARDWARE, 1),  # PERF_COUNT_HW_INSTRUCTIONS
    "cycles": (PERF_TYPE_HARDWARE, 0),  # PERF_COUNT_HW_CPU_CYCLES
    "task_clock": (PERF_TYPE_SOFTWARE, 1),  # PERF_COUNT_SW_TASK_CLOCK, nanoseconds
}
HARDWARE = ("instructions", "cycles")
# The syscall's number per architecture (asm/unistd.h).
SYSCALL = {"x86_64": 298, "aarch64": 241}
# attr.flags bits: disabled 0, inherit 1, exclude_kernel 5, exclude_hv 6.
INHERIT, EXCLUDE_KERNEL, EXCLUDE_HV = 1 << 1, 1 << 5, 1 << 6
# read_format: the value, then the time enabled and the time running (multiplexing).
FORMAT_TIMES = 1 | 2


class PerfEventAttr(ctypes.Structure):
    """``struct perf_event_attr`` up to PERF_ATTR_SIZE_VER5 (112 bytes); unions by their first
    member, bitfields as one ``flags`` word."""

    _fields_ = [
        ("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64), ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64), ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32), ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64), ("config2", ctypes.c_uint64),
        ("branch_sample_type", ctypes.c_uint64), ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32), ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64), ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16), ("reserved_2", ctypes.c_uint16),
    ]  # fmt: skip


class CountersUnavailable(OSError):
    """The kernel will not count this event here; the message says why, in one line."""


def paranoid_level() -> int | None:
    """``/proc/sys/kernel/perf_event_paranoid`` (None where there is none)."""
    try:
        return int(Path("/proc/sys/kernel/perf_event_paranoid").read_text())
    except (OSError, ValueError):
        return None


def _why(event: str, err: int) -> str:
    text = f"perf_event_open({event}): {errno.errorcode.get(err, err)} ({os.strerror(err)})"
    if err == errno.ENOENT and event in HARDWARE:
        return f"{text}: no hardware PMU exposed here (a virtual machine without a virtual PMU?)"
    if err in (errno.EACCES, errno.EPERM):
        return f"{text}: kernel.perf_event_paranoid is {paranoid_level()}"
    return text


def open_fd(event: str) -> int:
    """A counter of ``event`` (a key of :data:`EVENTS`) for this thread, counting from now;
    CountersUnavailable naming why it cannot be opened."""
    number = SYSCALL.get(platform.machine())
    if platform.system() != "Linux" or number is None:
        raise CountersUnavailable(
            f"perf_event_open: not on {platform.system()} {platform.machine()}"
        )
    kind, config = EVENTS[event]
    attr = PerfEventAttr(type=kind, size=ctypes.sizeof(PerfEventAttr), config=config)
    attr.read_format, attr.flags = FORMAT_TIMES, INHERIT | EXCLUDE_KERNEL | EXCLUDE_HV
    libc = ctypes.CDLL(None, use_errno=True)
    # pid 0: this thread; cpu -1: on any CPU; group -1: its own; flags 0.
    fd = libc.syscall(number, ctypes.byref(attr), 0, -1, -1, 0)
    if fd < 0:
        raise CountersUnavailable(_why(event, ctypes.get_errno()))
    return int(fd)


@dataclass
class Counters:
    """Open counters of several events; :meth:`read` gives each one's count so far."""

    fds: dict[str, int]

    @classmethod
    def open(cls, events: tuple[str, ...]) -> Counters:
        """All of ``events``, or CountersUnavailable (for the first that fails; none is left
        open)."""
        fds: dict[str, int] = {}
        try:
            for event in events:
                fds[event] = open_fd(event)
        except CountersUnavailable:
            for fd in fds.values():
                os.close(fd)
            raise
        return cls(fds)

    def read(self) -> dict[str, float]:
        """Each event's count since it opened (scaled up where the kernel multiplexed it, as
        ``perf stat`` does)."""
        counts = {}
        for event, fd in self.fds.items():
            value, enabled, running = struct.unpack("QQQ", os.read(fd, 24))
            counts[event] = value * enabled / running if 0 < running < enabled else float(value)
        return counts

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}


def unavailable(events: tuple[str, ...] = HARDWARE) -> str | None:
    """Why ``events`` cannot be counted here, in one line, or None when they can."""
    try:
        Counters.open(events).close()
    except CountersUnavailable as e:
        return str(e)
    return None
