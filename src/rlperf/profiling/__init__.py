"""Profiling: named sections (the timing seam), reports, analysis and comparison."""

from rlperf.profiling.sections import (
    Profiler,
    SectionStats,
    get_profiler,
    profile,
    profile_function,
)

__all__ = ["Profiler", "SectionStats", "get_profiler", "profile", "profile_function"]
