"""Ctrl-C during training: finish the iteration, checkpoint it, stop.

A KeyboardInterrupt raised wherever the signal lands leaves the iteration half done (environments
stepped, parameters not yet updated), which no checkpoint can describe: a resume would repeat up
to ``--checkpoint-every`` iterations. :class:`StopRequest` turns the first SIGINT into a request
that the trainer reads at the end of the iteration (the ranks of a distributed run agree on it in
the statistics' all-reduce, so every rank stops at the same iteration); a second SIGINT raises
KeyboardInterrupt at once, as Python's default handler would.

Installed only for the duration of ``Trainer.train``, only in the main thread (the only one
Python delivers signals to) and only over Python's default SIGINT handler: a handler the program
installed itself is left alone.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType


class StopRequest:
    """Context manager: ``requested`` turns True at the first SIGINT inside it."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: object = None
        self._installed = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:  # a second Ctrl-C: stop now, mid-iteration
            raise KeyboardInterrupt
        self.requested = True

    def __enter__(self) -> StopRequest:
        in_main = threading.current_thread() is threading.main_thread()
        if in_main and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)  # type: ignore[arg-type]
            self._installed = False
