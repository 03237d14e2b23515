"""A one-line progress bar on stderr: steps, SPS and mean episodic return.

On a terminal it redraws in place at most every ``interval_s``; elsewhere (CI logs) it prints a
plain line at every 10% of progress so logs stay short, and the last state at :meth:`close`
where that was not the last line printed (a run stopped by ``--max-wall-s`` or Ctrl-C).

The return is the mean over the last 100 episodes (``EpisodeLog.mean_return``), the figure the
run's summary prints as ``mean return (last 100)``: the last line and the summary agree.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    def __init__(
        self,
        total: int,
        enabled: bool = True,
        stream: TextIO | None = None,
        interval_s: float = 0.25,
    ) -> None:
        self.total = max(total, 1)
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.interval_s = interval_s
        self._last_draw = 0.0
        self._last_decile = -1
        self._unprinted = ""  # the last state's line where it was not printed (not a terminal)

    def update(self, step: int, sps: float, mean_return: float | None) -> None:
        if not self.enabled:
            return
        frac = min(step / self.total, 1.0)
        ret = "   n/a" if mean_return is None else f"{mean_return:6.1f}"
        text = (
            f"{frac:4.0%} {step:>10,}/{self.total:,} steps | {sps:>9,.0f} SPS | "
            f"mean return (last 100) {ret}"
        )
        if self.tty:
            now = time.perf_counter()
            if now - self._last_draw < self.interval_s and step < self.total:
                return
            self._last_draw = now
            width = 20
            filled = int(frac * width)
            self.stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {text}")
            self.stream.flush()
        else:
            decile = int(frac * 10)
            self._unprinted = text
            if decile > self._last_decile:
                self._last_decile = decile
                self._unprinted = ""
                self.stream.write(text + "\n")
                self.stream.flush()

    def write(self, text: str, stream: TextIO | None = None) -> None:
        """Print ``text`` (to stdout by default) without mangling the bar: on a terminal the
        bar's line is cleared first and redrawn at the next update."""
        if self.enabled and self.tty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._last_draw = 0.0
        out = stream or sys.stdout
        out.write(text + "\n")
        out.flush()

    def close(self) -> None:
        """End the bar: a terminal's line is kept; elsewhere the last state is printed where
        the last line printed was an earlier one."""
        if not self.enabled:
            return
        if self.tty:
            self.stream.write("\n")
        elif self._unprinted:
            self.stream.write(self._unprinted + "\n")
            self._unprinted = ""
        self.stream.flush()
