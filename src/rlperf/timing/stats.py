"""Accumulated timings of one named section: the record the profiler and breakdown share."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SectionStats:
    """Accumulated timings of one section (times in nanoseconds)."""

    name: str
    parent: str | None
    calls: int = 0
    total_ns: int = 0
    min_ns: int = 0
    max_ns: int = 0

    @property
    def total_s(self) -> float:
        return self.total_ns / 1e9

    @property
    def mean_ms(self) -> float:
        return self.total_ns / self.calls / 1e6 if self.calls else 0.0
