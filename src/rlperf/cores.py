"""The cores this process may run on: the one count behind every rule that fits processes to
cores (``--num-workers``, ``--nproc``, the automatic ``--worker-spin-us``), and the list of them
where a process can be pinned to one (``--pin-workers``, the gate's pairs)."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """CPUs in this process's affinity set: what ``taskset`` or a container's cpuset leaves it,
    which may be fewer than the machine has (``os.cpu_count()`` where the OS has no affinity
    call); at least 1."""
    if hasattr(os, "sched_getaffinity"):
        return max(len(os.sched_getaffinity(0)), 1)
    return os.cpu_count() or 1


def pinnable_cores() -> list[int]:
    """The CPUs in this process's affinity set, in order, where a process can be pinned to one
    (``os.sched_setaffinity``: Linux); empty elsewhere."""
    if not hasattr(os, "sched_setaffinity"):
        return []
    return sorted(os.sched_getaffinity(0))
