"""How many torch threads training runs on: as many as the machine has free now, not assumed.

On an idle 2-core machine a second intra-op thread makes the update up to 1.7x faster (CartPole,
1024 envs). Beside other busy processes (a CI runner, a laptop with a browser open) the same
second thread makes every phase 10-190x slower: each of torch's parallel regions ends at a
barrier where one thread spins while the other waits for the scheduler to give it a core back,
a slice of milliseconds per region (``docs/performance.md``, "On a shared machine"). Load comes
and goes during a run, so no count chosen at start holds. :class:`ThreadGovernor` chooses as
the run goes:

- at the start of each iteration, once at least ``SHARE_WINDOW_S`` has passed since it last
  looked, it reads the cores this process could have had in that window: the idle time of
  the CPUs it may run on plus the CPU time of this process and its children (env workers),
  per second (:class:`CoreShare`). Alone on 2 cores that reads about 2, beside two busy
  processes about 0.7. The count for the next window is that share, rounded, between 1 and
  ``--threads``;
- inside a phase run on more than one thread it checks, after each unit of work (a rollout
  step, a minibatch), the time spent so far against that count's recent time per unit; at
  ``STALL_RATIO`` times that (plus ``STALL_SLACK_S``) the rest of the phase runs on one thread,
  and so does everything until the next look: load that arrives mid-window costs one slow unit,
  not a window of them.

Other designs measured on the same box (``docs/performance.md``): OpenMP's passive wait
(``OMP_WAIT_POLICY=PASSIVE``) still left 2 threads at 0.4x of one thread beside two busy
processes, and racing the two counts against each other by timing probe runs flip-flopped on
an idle machine's ±20% noise (0.84-0.89x of today's 2 threads) where the share is steady.

``--threads 1`` or ``--no-adapt-threads`` fix the count. On CUDA the trainer builds none.
"""

from __future__ import annotations

import os
import statistics
import time
import warnings
from collections import deque
from typing import Any

import psutil
import torch

SHARE_WINDOW_S = 0.25  # shortest window a share is read over (/proc/stat ticks are 10 ms)
STALL_RATIO = 3.0  # a unit this many times the count's recent median is a stall ...
STALL_SLACK_S = 0.003  # ... once past this (a team wakes in ~0.1 ms; a stall is a 3+ ms slice)
WINDOW = 5  # recent runs per phase and count whose median is the time per unit


class CoreShare:
    """Cores this process could have used lately: the idle time of the CPUs it may run on plus
    the CPU time of this process and its children (env workers), per second of wall time,
    since the previous :meth:`read`. Linux only (``/proc/stat``); elsewhere :meth:`read` is
    None and the governor keeps ``--threads`` (its stall check still applies)."""

    def __init__(self) -> None:
        self._cpus = (
            {f"cpu{c}" for c in os.sched_getaffinity(0)}
            if hasattr(os, "sched_getaffinity") and os.path.exists("/proc/stat")
            else set()
        )
        self._ticks_per_s = os.sysconf("SC_CLK_TCK") if self._cpus else 100
        self._me = psutil.Process()
        self._last = self._totals()

    def _totals(self) -> tuple[float, float, float] | None:
        """(wall s, idle CPU s over our CPUs, CPU s of this process and its children)."""
        if not self._cpus:
            return None
        idle_ticks = 0
        with open("/proc/stat") as f:
            for line in f:
                name, _, rest = line.partition(" ")
                if name in self._cpus:
                    fields = rest.split()
                    idle_ticks += int(fields[3]) + int(fields[4])  # idle + iowait
        own = time.process_time()
        try:
            for child in self._me.children(recursive=True):
                times = child.cpu_times()
                own += times.user + times.system
        except psutil.Error:  # a child exited while read: this window's figure is a bit low
            pass
        return time.perf_counter(), idle_ticks / self._ticks_per_s, own

    @property
    def readable(self) -> bool:
        """Whether this OS lets the share be read (Linux's ``/proc/stat``)."""
        return bool(self._cpus)

    def age_s(self) -> float:
        """Seconds since the window began."""
        return time.perf_counter() - self._last[0] if self._last is not None else 0.0

    def read(self) -> float | None:
        """Cores' worth of share since the previous read (which starts the next window), or
        None where it cannot be read."""
        now, last = self._totals(), self._last
        if now is None or last is None:
            return None
        self._last = now
        wall = max(now[0] - last[0], 1e-9)
        return ((now[1] - last[1]) + max(now[2] - last[2], 0.0)) / wall


class PhaseThreads:
    """One phase's runs (the rollout, the update): sets the governor's count at ``begin()``
    and watches for a stall while ``watching`` (call ``unit_done()`` after each unit), then
    ``end(units)``. Each call costs well under a microsecond; ``unit_done`` reads the clock."""

    def __init__(self, governor: ThreadGovernor, name: str, most: int) -> None:
        self.governor, self.name, self.most = governor, name, most
        self.per_unit_s: dict[int, deque[float]] = {}
        self.units_at: dict[int, int] = {}
        self.stalls = 0
        self.watching = False
        self._count = 1
        self._limit_per_unit = 0.0
        self._start = 0.0
        self._done = 0
        self._stalled = False

    def begin(self) -> int:
        """Set torch's threads for this run of the phase; returns the count."""
        count = min(self.governor.count, self.most)
        self._count, self._done, self._stalled = count, 0, False
        recent = self.per_unit_s.get(count)
        self.watching = count > 1 and bool(recent) and self.governor.adapt
        if self.watching:
            self._limit_per_unit = STALL_RATIO * statistics.median(recent)  # type: ignore[arg-type]
        if torch.get_num_threads() != count:
            torch.set_num_threads(count)
        self._start = time.perf_counter()
        return count

    def unit_done(self) -> None:
        """One unit of the run finished: on a stall, one thread from here on (module doc)."""
        self._done += 1
        spent = time.perf_counter() - self._start
        if spent > self._done * self._limit_per_unit + STALL_SLACK_S:
            self.units_at[self._count] = self.units_at.get(self._count, 0) + self._done
            self._count, self._stalled, self.watching = 1, True, False
            self.stalls += 1
            self.governor.stalled()
            torch.set_num_threads(1)

    def end(self, units: int) -> None:
        """The run finished after ``units`` units of work."""
        self.watching = False
        if units <= 0:
            return
        if self._stalled:
            units -= self._done
        else:
            per_unit = (time.perf_counter() - self._start) / units
            self.per_unit_s.setdefault(self._count, deque(maxlen=WINDOW)).append(per_unit)
        self.units_at[self._count] = self.units_at.get(self._count, 0) + units

    def summary(self) -> dict[str, Any]:
        """Units of work run per thread count, and stalls that sent the run to one thread."""
        return {
            "units_at_threads": {str(c): n for c, n in sorted(self.units_at.items())},
            "stalls": self.stalls,
        }


class ThreadGovernor:
    """The thread count of a training run (module docstring): :meth:`next_iteration` at the
    start of each iteration, a :class:`PhaseThreads` per phase.

    Args:
        most: ``--threads``, the largest count (the update's; ``0`` resolved by the caller).
        adapt: ``--adapt-threads``; False runs each phase on its largest count throughout.
        rollout_most: the rollout's largest count (1 with env workers: their cores are theirs).
    """

    def __init__(self, most: int, adapt: bool, rollout_most: int) -> None:
        self.most = most
        self.adapt = adapt and most > 1
        self.share = CoreShare() if self.adapt else None
        if self.share is not None and not self.share.readable:
            warnings.warn(
                "rlperf: this OS has no /proc/stat to read free cores from: the run keeps one "
                f"thread; --no-adapt-threads runs --threads {most} throughout",
                stacklevel=3,
            )
        # One thread until the first window is read: one never stalls.
        self.count = 1 if self.adapt else most
        self.changes = 0
        self.shares: list[float] = []
        self.rollout = PhaseThreads(self, "rollout", rollout_most)
        self.update = PhaseThreads(self, "update", most)

    def next_iteration(self) -> None:
        """Look at the machine if the window is long enough, and set the count from it."""
        if self.share is None or self.share.age_s() < SHARE_WINDOW_S:
            return
        share = self.share.read()
        if share is None:
            return
        self.shares.append(share)
        count = max(1, min(self.most, int(share + 0.5)))
        if count != self.count:
            self.changes += 1
            self.count = count

    def stalled(self) -> None:
        """A phase stalled on several threads: one thread until the next look."""
        if self.count != 1:
            self.changes += 1
            self.count = 1

    def summary(self) -> dict[str, Any]:
        """What the run ran on (``summary.json``'s ``threads_used``)."""
        shares = sorted(self.shares)
        return {
            "adaptive": self.adapt,
            "changes": self.changes,
            "core_share_median": round(shares[len(shares) // 2], 2) if shares else None,
            "rollout": self.rollout.summary(),
            "update": self.update.summary(),
        }
