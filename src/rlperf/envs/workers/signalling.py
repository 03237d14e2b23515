"""How the parent and its workers hand over a step: a command word and a sequence number in
shared memory, and one byte on a pipe each way.

The parent writes the command, writes one byte on the worker's command pipe (before the
sequence number: a worker that is spinning on the number and one that is blocked on the pipe
both wake; ``worker.py`` says why in that order) and then bumps ``command_seq``. The worker
bumps ``done_seq`` and writes one result byte (``worker.DONE``, or ``worker.FAILED`` after its
error on the control channel). The parent spins on ``done_seq`` for ``spin_us`` and then blocks
on the result pipes and the processes' sentinels together, so that a dead worker is seen at
once (``faults.py``). An inline worker 0 is executed in the parent right after the others were
signalled, while they work on theirs.

Each worker is in exactly one of three states: in flight (sent, result not read), ready (result
read, not yet returned by ``recv``) or waiting (returned, awaiting actions).
"""

from __future__ import annotations

import os
import time
from multiprocessing.connection import wait
from typing import Any, cast

import numpy as np

from rlperf.envs.workers import worker
from rlperf.envs.workers.faults import WorkerFaults
from rlperf.envs.workers.layout import HAS_EXTRA, RESET, STEP

# Spin this long for a result (and, in a worker, for a command) before blocking on the pipe.
# 0: block at once. On 2 cores shared by the trainer and 2 workers any spin took a core from
# the process that had work (docs/workers.md); with spare cores a few microseconds may pay.
DEFAULT_SPIN_US = 0.0


class WorkerSignalling(WorkerFaults):
    """The pool's side of the hand-over (a mixin of
    :class:`~rlperf.envs.workers.pool.MultiprocessVecEnv`, whose attributes these are)."""

    _command: np.ndarray  # per worker: the command to execute
    _command_seq: np.ndarray  # per worker: the number of the last command sent
    _done_seq: np.ndarray  # per worker: the number of the last command done
    _has: np.ndarray  # per worker: HAS_* bits of its last result
    _sent: list[int]  # per worker: the last command number, as this process counts
    _command_fds: list[int]
    _result_fds: list[int]
    _results: list[Any]
    _controls: list[Any]
    _extras: list[dict[str, Any] | None]
    _local_code: bytes
    _spin_s: float
    _in_flight: list[int]
    _ready: list[int]

    def _signal(self, workers: list[int], command: int) -> None:
        local = self._local is not None and 0 in workers
        sent, fds = self._sent, self._command_fds
        for w in workers:
            self._command[w] = command
            sent[w] += 1
            if not (w == 0 and local):
                try:  # the byte before the number (see worker.py)
                    os.write(fds[w], b"c")
                except OSError:  # EPIPE: the worker is gone
                    self._fail_dead(w)
            self._command_seq[w] = sent[w]
        self._in_flight.extend(workers)
        if local:  # the others are at work: step the inline share meanwhile
            self._local_code = cast(worker.WorkerLoop, self._local).execute(command)
            self._done_seq[0] = self._sent[0]

    def _consume(self, w: int, doing: str) -> None:
        """Read worker ``w``'s result byte (there, or on its way) and check it."""
        if w == 0 and self._local is not None:
            code = self._local_code
        else:
            code = os.read(self._result_fds[w], 1)
        if code == worker.FAILED:
            self._fail(w, self._controls[w].recv(), doing)
        if not code:
            self._fail_dead(w)
        if self._has[w] & HAS_EXTRA and self._command[w] in (STEP, RESET):
            self._extras[w] = self._controls[w].recv()  # sent before the result byte
        else:
            self._extras[w] = None
        self._in_flight.remove(w)
        self._ready.append(w)

    def _wait(self, count: int, doing: str) -> list[int]:
        """Block until ``count`` in-flight workers are done; returns them, first done first."""
        ready: list[int] = []
        done_seq, sent = self._done_seq, self._sent
        deadline = time.perf_counter() + self._spin_s
        while True:
            for w in list(self._in_flight):
                if done_seq[w] >= sent[w]:
                    self._consume(w, doing)
                    ready.append(w)
            if len(ready) >= count or time.perf_counter() >= deadline:
                break
        while len(ready) < count:
            by_object: dict[Any, int] = {self._results[w]: w for w in self._in_flight}
            by_object.update({self._processes[w].sentinel: w for w in self._in_flight})
            for obj in wait(list(by_object)):
                w = by_object[obj]
                if w in self._in_flight:  # a worker's pipe and sentinel may both be ready
                    self._consume(w, doing)
                    ready.append(w)
        return ready
