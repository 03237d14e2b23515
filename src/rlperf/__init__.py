"""rlperf: a PPO training stack built to be measured."""

from rlperf.timing import get_profiler, profile, profile_function

__version__ = "0.1.0"

__all__ = ["__version__", "get_profiler", "profile", "profile_function"]
