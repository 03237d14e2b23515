"""Starting and stopping env worker processes: the ``forkserver`` context they start from, and
the shutdown that leaves none behind.

Processes start with ``forkserver`` (``docs/workers.md``): never ``fork`` from a trainer whose
torch and OpenMP threads are running (a forked child inherits their locks, not the threads).
The server and every worker forked from it start with one OpenMP/BLAS thread and with SIGTERM
ignored: the trainer decides when they stop (:func:`shutdown`, at ``close()`` or when the pool
is collected).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any

from rlperf.envs.workers import worker

START_METHOD = "forkserver"
START_TIMEOUT_S = 120.0
JOIN_TIMEOUT_S = 1.0


def context() -> multiprocessing.context.BaseContext:
    """The forkserver context; its server is started with one OpenMP/BLAS thread so that the
    numpy it preloads (and every worker forked from it) never starts a thread pool, and with
    SIGTERM ignored (:func:`sigterm_ignored_in_children`)."""
    ctx = multiprocessing.get_context(START_METHOD)
    ctx.set_forkserver_preload(["rlperf.envs.workers.worker", "rlperf.envs"])
    saved = {name: os.environ.get(name) for name in worker.THREAD_VARS}
    os.environ.update({name: "1" for name in worker.THREAD_VARS})
    try:
        from multiprocessing import forkserver

        with sigterm_ignored_in_children():
            forkserver.ensure_running()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name)
            else:
                os.environ[name] = value
    return ctx


@contextmanager
def sigterm_ignored_in_children() -> Iterator[None]:
    """Inside: processes started here ignore SIGTERM, and this one loses none that arrives.

    The forkserver ignores SIGINT but not SIGTERM, which reaches the whole process group
    (``timeout``, SLURM, torch's agent): its death would end every worker's sentinel while the
    trainer finishes its iteration. An ignored signal stays ignored across exec (a blocked one
    does not: the server's mask is reset). Blocked here meanwhile, a SIGTERM arriving inside
    stays pending (Linux queues a blocked signal even while it is ignored) and reaches this
    process's own handler when the mask is restored.
    """
    if threading.current_thread() is not threading.main_thread():  # signal() is main-only
        yield
        return
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    handler = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def shutdown(processes: list[Any], commands: list[Connection], results: list[Connection],
              controls: list[Connection]) -> None:  # fmt: skip
    """Close the command pipes (each worker reads end-of-file and exits), then make sure.
    An inline worker's slots hold None (and a control that needs no closing)."""
    processes = [p for p in processes if p is not None]
    commands = [c for c in commands if c is not None]
    results = [c for c in results if c is not None]
    controls = [c for c in controls if isinstance(c, Connection)]
    for conn in commands:
        conn.close()
    deadline = time.monotonic() + JOIN_TIMEOUT_S
    for process in processes:
        process.join(max(deadline - time.monotonic(), 0.0))
    for process in processes:
        if process.is_alive():
            # Not terminate(): workers ignore SIGTERM (worker.run). SIGKILL cannot be ignored,
            # but the exit status comes through the forkserver: a bounded join, so that a
            # forkserver that is itself gone cannot hang close().
            process.kill()
            process.join(JOIN_TIMEOUT_S)
    for conn in (*results, *controls):
        conn.close()
