"""perf_event_open from Python (``rlperf.bench.counters``): the struct the kernel reads, the
task clock (a software event every Linux kernel counts) following the work done, and hardware
events either counted or refused in one line saying why."""

from __future__ import annotations

import ctypes
import platform

import pytest

from rlperf.bench import counters
from rlperf.bench.counters import Counters, CountersUnavailable, PerfEventAttr

linux = pytest.mark.skipif(
    platform.system() != "Linux" or platform.machine() not in counters.SYSCALL,
    reason="perf_event_open is Linux's (x86_64, aarch64 here)",
)


def busy(iterations: int) -> int:
    return sum(i * i for i in range(iterations))


def test_the_attr_struct_is_the_kernels_version_5() -> None:
    assert ctypes.sizeof(PerfEventAttr) == 112  # PERF_ATTR_SIZE_VER5
    assert PerfEventAttr.flags.offset == 40 and PerfEventAttr.clockid.offset == 92


@linux
def test_the_task_clock_counts_this_threads_work() -> None:
    try:
        clock = Counters.open(("task_clock",))
    except CountersUnavailable as e:
        pytest.skip(f"the kernel refuses software counters here: {e}")
    try:
        spent = []
        for iterations in (10_000, 1_000_000):
            before = clock.read()["task_clock"]
            busy(iterations)
            spent.append(clock.read()["task_clock"] - before)
    finally:
        clock.close()
    assert 0 < spent[0] < spent[1]  # nanoseconds, more for 100x the work
    assert clock.fds == {}


@linux
def test_hardware_counters_count_or_say_why_in_one_line() -> None:
    why = counters.unavailable(counters.HARDWARE)
    if why is not None:  # a VM without a PMU: the reason names the event and the error
        assert "\n" not in why and why.startswith("perf_event_open(instructions)")
        with pytest.raises(CountersUnavailable):
            Counters.open(("task_clock", "instructions"))
        return
    events = Counters.open(counters.HARDWARE)
    try:
        before = events.read()
        busy(100_000)
        after = events.read()
    finally:
        events.close()
    assert after["instructions"] - before["instructions"] > 100_000
    assert after["cycles"] > before["cycles"]
