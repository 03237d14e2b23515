"""Environment workers: a vector env whose envs step in worker processes over shared memory.

Modules: ``layout`` (the shared block), ``worker`` (the worker process's loop) and ``pool``
(:class:`MultiprocessVecEnv`, the parent's side, with ``probe``, ``processes``, ``signalling``,
``faults``, ``rows`` and ``round_trips``). ``docs/workers.md`` explains the choices.
"""

from rlperf.envs.workers.pool import (
    ApiUsageError,
    MultiprocessVecEnv,
    WorkerError,
    check_worker_sizes,
)

__all__ = ["ApiUsageError", "MultiprocessVecEnv", "WorkerError", "check_worker_sizes"]
