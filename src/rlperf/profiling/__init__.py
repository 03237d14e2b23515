"""Profiling tools built on the timing sections: reports, analysis, comparison, traces.

The timing primitive itself lives in :mod:`rlperf.timing`; it is re-exported here because
``rlperf.profiling.Profiler`` is how earlier scripts reach it.
"""

from rlperf.timing import Profiler, SectionStats, get_profiler, profile, profile_function

__all__ = ["Profiler", "SectionStats", "get_profiler", "profile", "profile_function"]
