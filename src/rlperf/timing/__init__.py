"""Timing: named, nested sections (the primitive the trainer and user code share) and their
breakdown table. Depends on nothing else in rlperf, so the trainer and the profiling tools that
import the trainer can both use it."""

from rlperf.timing.sections import Profiler, get_profiler, profile, profile_function
from rlperf.timing.stats import SectionStats

__all__ = ["Profiler", "SectionStats", "get_profiler", "profile", "profile_function"]
