"""Steps-per-second, windowed and cumulative, excluding warm-up, correct across a resume.

The first ``warmup_iters`` iterations of every process (allocator growth, lazy init, cold caches)
are left out of both figures. Cumulative SPS is steps over seconds measured after warm-up, plus
the steps and seconds carried over from before a resume: the global step counter alone would
credit a resumed process with steps it never ran.
"""

from __future__ import annotations

from collections import deque


class Throughput:
    """Tracks (time, step) at iteration ends.

    Args:
        window_s: length of the windowed SPS window, seconds.
        warmup_iters: iterations of this process not counted.
        prior_steps, prior_s: steps and seconds counted before a resume.
    """

    def __init__(
        self, window_s: float, warmup_iters: int, prior_steps: int = 0, prior_s: float = 0.0
    ) -> None:
        self.window_s = window_s
        self.warmup_iters = warmup_iters
        self.prior_steps, self.prior_s = prior_steps, prior_s
        self._iters = 0
        self._start: tuple[float, int] | None = None
        self._first: tuple[float, int] | None = None
        self._window: deque[tuple[float, int]] = deque()
        self._last: tuple[float, int] | None = None

    def start(self, now_s: float, step: int) -> None:
        """Mark the beginning of the first iteration of this process."""
        self._first = (now_s, step)

    def tick(self, now_s: float, step: int) -> None:
        """Record the end of an iteration at wall time ``now_s`` with global step ``step``."""
        self._iters += 1
        self._last = (now_s, step)
        if self._iters == self.warmup_iters:
            self._start = (now_s, step)
        if self._iters < self.warmup_iters:
            return
        if self._start is None:  # warmup_iters == 0
            self._start = self._first
        self._window.append((now_s, step))
        while len(self._window) > 2 and now_s - self._window[1][0] >= self.window_s:
            self._window.popleft()

    @property
    def counted_steps(self) -> int:
        """Steps counted in cumulative SPS, this process and before a resume."""
        if self._start is None or self._last is None:
            return self.prior_steps
        return self.prior_steps + self._last[1] - self._start[1]

    @property
    def counted_s(self) -> float:
        if self._start is None or self._last is None:
            return self.prior_s
        return self.prior_s + self._last[0] - self._start[0]

    @property
    def warmed_up(self) -> bool:
        return self.counted_s > 0

    def cumulative_sps(self) -> float:
        """Counted steps / counted seconds; before warm-up ends, the raw rate since start."""
        if self.warmed_up:
            return self.counted_steps / self.counted_s
        return self._raw_rate()

    def windowed_sps(self) -> float:
        """Rate over the last ``window_s`` seconds after warm-up (raw rate before)."""
        if len(self._window) >= 2:
            (t0, s0), (t1, s1) = self._window[0], self._window[-1]
            if t1 > t0:
                return (s1 - s0) / (t1 - t0)
        if self._start is not None and self._last is not None and self._last[0] > self._start[0]:
            return (self._last[1] - self._start[1]) / (self._last[0] - self._start[0])
        return self._raw_rate()

    def _raw_rate(self) -> float:
        if self._first is None or self._last is None or self._last[0] <= self._first[0]:
            return 0.0
        return (self._last[1] - self._first[1]) / (self._last[0] - self._first[0])
