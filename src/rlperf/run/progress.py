"""A one-line progress bar on stderr: steps, SPS and mean episodic return.

On a terminal it redraws in place at most every ``interval_s``; elsewhere (CI logs) it prints a
plain line at every 10% of progress so logs stay short.
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

    def update(self, step: int, sps: float, mean_return: float | None) -> None:
        if not self.enabled:
            return
        frac = min(step / self.total, 1.0)
        ret = "   n/a" if mean_return is None else f"{mean_return:6.1f}"
        text = f"{frac:4.0%} {step:>10,}/{self.total:,} steps | {sps:>9,.0f} SPS | return {ret}"
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
            if decile > self._last_decile:
                self._last_decile = decile
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
        if self.enabled and self.tty:
            self.stream.write("\n")
            self.stream.flush()
