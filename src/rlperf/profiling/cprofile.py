"""cProfile capture for ``rlperf profile --cprofile PATH``: Python-level hot spots.

The section breakdown says which phase is slow; cProfile says which Python functions inside it
(data plumbing, logging, env code). It slows Python-heavy code a lot (every call is hooked), so
its absolute times are inflated: read it for *where*, and the breakdown without it for *how much*.

Writes ``PATH`` (binary pstats, for ``python -m pstats PATH`` or snakeviz) and ``PATH.txt``, the
top functions by cumulative time as printed.
"""

from __future__ import annotations

import cProfile
import io
import pstats
from pathlib import Path

TOP_FUNCTIONS = 50


class CProfileCapture:
    """Wraps a ``cProfile.Profile`` around the training run."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._profile = cProfile.Profile()
        self._running = False

    def start(self) -> None:
        self._profile.enable()
        self._running = True

    def stop(self) -> None:
        if self._running:
            self._profile.disable()
            self._running = False

    def write(self, top: int = TOP_FUNCTIONS) -> str:
        """Write the .pstats and .txt files; return the top-``top`` table by cumulative time."""
        self.stop()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._profile.dump_stats(str(self.path))
        text = top_functions(self.path, top)
        Path(f"{self.path}.txt").write_text(text)
        return text


def top_functions(pstats_path: str | Path, top: int = TOP_FUNCTIONS) -> str:
    """The ``top`` functions of a .pstats file by cumulative time, as pstats prints them."""
    out = io.StringIO()
    stats = pstats.Stats(str(pstats_path), stream=out)
    stats.strip_dirs().sort_stats(pstats.SortKey.CUMULATIVE).print_stats(top)
    return out.getvalue()
