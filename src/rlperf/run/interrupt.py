"""Ctrl-C or SIGTERM during training: finish the iteration, checkpoint it, stop.

A KeyboardInterrupt raised wherever the signal lands leaves the iteration half done (environments
stepped, parameters not yet updated), which no checkpoint can describe: a resume would repeat up
to ``--checkpoint-every`` iterations. :class:`StopRequest` turns the first SIGINT or SIGTERM into
a request that the trainer reads at the end of the iteration (the ranks of a distributed run agree
on it in the statistics' all-reduce, so every rank stops at the same iteration); a second one
raises KeyboardInterrupt at once, as Python's default SIGINT handler would.

SIGTERM is how SLURM, Kubernetes and CI runners stop a job (then SIGKILL after a grace period):
it gets what Ctrl-C gets, and the exit status says which of the two it was
(:func:`stop_status`: 130 or 143, as a shell reports a process that a signal ended).

Installed only for the duration of ``Trainer.train``, only in the main thread (the only one
Python delivers signals to) and only over Python's default handlers (``default_int_handler`` for
SIGINT, ``SIG_DFL`` for SIGTERM): a handler the program installed itself is left alone.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType

# Each signal StopRequest takes over, and the handler it takes over only from.
STOP_SIGNALS = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
# The signal behind the last stop request in this process (None: none came through StopRequest;
# a KeyboardInterrupt outside training is Ctrl-C's).
_last_signal: int | None = None


def stop_status(default: int = signal.SIGINT) -> int:
    """The exit status of a run that stopped on request: 128 + the signal that asked (130 for
    Ctrl-C, 143 for SIGTERM); ``default`` where no stop request saw a signal."""
    return 128 + (_last_signal if _last_signal is not None else default)


class StopRequest:
    """Context manager: ``requested`` turns True at the first SIGINT or SIGTERM inside it,
    ``signum`` says which."""

    def __init__(self) -> None:
        self.requested = False
        self.signum: int | None = None
        self._previous: dict[int, object] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        global _last_signal
        if self.requested:  # a second one: stop now, mid-iteration
            raise KeyboardInterrupt
        self.requested, self.signum = True, signum
        _last_signal = signum

    def __enter__(self) -> StopRequest:
        global _last_signal
        _last_signal = None  # this run's own stop, not an earlier run's in the same process
        if threading.current_thread() is not threading.main_thread():
            return self
        for signum, default in STOP_SIGNALS.items():
            if signal.getsignal(signum) is default:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)  # type: ignore[arg-type]
        self._previous.clear()
