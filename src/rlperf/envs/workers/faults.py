"""What goes wrong with env workers, and how the parent says it: one line naming the worker, its
envs and the cause.

- A worker's env raised: the worker writes its error on its control channel and a failure byte
  on its result pipe; the parent raises :class:`WorkerError` on its next wait, with the env's
  error type, message and place.
- A worker died (killed, or crashed in C): its result pipe reads end-of-file and its process
  sentinel fires at once; the parent raises :class:`WorkerError` with the signal or exit code.
- A script that builds the env without an ``if __name__ == "__main__":`` guard: the worker
  re-importing it finds itself building an env and exits with :data:`MAIN_GUARD_EXIT`, which
  the parent turns into a message saying so.
- Calls out of order (``recv`` with nothing in flight, ``send`` twice) raise
  :class:`ApiUsageError`; a call on a closed env :class:`EnvClosedError`.

Every :class:`WorkerError` closes the pool first: the other workers are stopped, nothing hangs.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from gymnasium.error import ClosedEnvironmentError

from rlperf.envs.workers.processes import JOIN_TIMEOUT_S

# A worker's exit status when it finds itself building an env while re-importing the user's
# script: the script lacks its main guard (see exit_missing_main_guard).
MAIN_GUARD_EXIT = 86
MAIN_GUARD_MESSAGE = (
    "the script that builds MultiprocessVecEnv has no 'if __name__ == \"__main__\":' guard: "
    "each worker process (started with forkserver) imports the script again, and without the "
    "guard it builds the env again instead of stepping its share; put the code that builds and "
    "runs the env under that guard"
)


class WorkerError(RuntimeError):
    """A worker's env raised, or a worker died; the message is one line naming it."""


class ApiUsageError(RuntimeError):
    """``send``/``recv``/``step`` called out of order."""


class EnvClosedError(ApiUsageError, ClosedEnvironmentError):
    """A call on a closed env: gymnasium's error for it, and an :class:`ApiUsageError`."""


def exit_missing_main_guard() -> None:
    """In a worker that is importing the user's script (multiprocessing sets ``_inheriting``
    then) and reached a MultiprocessVecEnv: the script has no main guard. Say so on stderr and
    exit with :data:`MAIN_GUARD_EXIT`, which the parent turns into its error message (otherwise
    the worker would try to start workers of its own and die with exit 1)."""
    sys.stderr.write(f"rlperf env worker: {MAIN_GUARD_MESSAGE}\n")
    sys.stderr.flush()
    os._exit(MAIN_GUARD_EXIT)


class WorkerFaults:
    """The pool's fault handling (a mixin of :class:`~rlperf.envs.workers.pool.MultiprocessVecEnv`,
    whose attributes these are): each failure closes the pool and raises one line."""

    env_name: str
    envs_per_worker: int
    closed: bool
    _processes: list[Any]
    _local: Any  # worker.WorkerLoop when worker 0 runs inline, else None

    if TYPE_CHECKING:

        def close(self, **kwargs: Any) -> None: ...

    def _describe(self, w: int) -> str:
        lo = w * self.envs_per_worker
        where = "inline, " if w == 0 and self._local is not None else ""
        envs = f"envs {lo}..{lo + self.envs_per_worker - 1} of {self.env_name}"
        return f"env worker {w} ({where}{envs})"

    def _fail(self, w: int, error: dict[str, str], doing: str) -> None:
        self.close()
        raise WorkerError(
            f"{self._describe(w)} failed {doing}: {error['type']}: {error['message']} "
            f"(at {error['where']})"
        )

    def _fail_dead(self, w: int) -> None:
        process = self._processes[w]
        process.join(JOIN_TIMEOUT_S)
        code = process.exitcode
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit {code}"
        self.close()
        if code == MAIN_GUARD_EXIT:
            raise WorkerError(f"{self._describe(w)} died: {MAIN_GUARD_MESSAGE}")
        raise WorkerError(f"{self._describe(w)} died ({how})")

    def _check_open(self) -> None:
        if self.closed:
            raise EnvClosedError("the env is closed: build a new MultiprocessVecEnv")
