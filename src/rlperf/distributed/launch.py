"""Starting the ranks of a run, and reporting how they ended.

``rlperf train --nproc N`` is ``torchrun --nproc-per-node N -m rlperf train``: this module hands
the same command line to torch.distributed's elastic agent
(:func:`torch.distributed.launcher.api.elastic_launch`), which starts N processes, runs the
rendezvous (c10d: rank 0's machine hosts a TCP store), watches them, stops every one when one
fails, and with ``--max-restarts K`` starts them all again. A restarted rank continues from the
run directory's last checkpoint (:func:`continue_after_restart`), so a restart loses at most
``--checkpoint-every`` iterations.

Each rank writes why it failed to the file the agent names in ``TORCHELASTIC_ERROR_FILE``
(:func:`rank_errors`), marking errors that came out of a collective: those are the consequence
of another rank's failure (its peer closed the connection or timed out), not the cause. The
launcher then prints one line naming the rank that failed first and its error, or the signal
that killed it (:func:`describe_failure`).
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from rlperf.cores import usable_cores
from rlperf.distributed.group import (
    BACKENDS,
    DEFAULT_TIMEOUT_S,
    GLOO_IO_PRIORITIES,
    GRAD_EXCHANGES,
    grad_exchange_problem,
    is_collective_error,
    launched_rank,
    resolve_backend,
)

EXIT_FAILED, EXIT_USAGE = 1, 2
# What each rank runs after the interpreter, before the command line: the package's entry point.
# (Tests point it at a script that injects faults before calling the same ``main``.)
RANK_ENTRY: tuple[str, ...] = ("-m", "rlperf")
ERROR_FILE_ENV = "TORCHELASTIC_ERROR_FILE"
RESTART_COUNT_ENV = "TORCHELASTIC_RESTART_COUNT"
# Set by rlperf's launcher for its ranks: a rank stopped by Ctrl-C or SIGTERM exits 0 under it
# (see run()).
LAUNCHER_ENV = "RLPERF_LAUNCHER"


def add_launch_flags(parser: argparse.ArgumentParser) -> None:
    """The ``--nproc`` family (``train`` and ``profile``)."""
    group = parser.add_argument_group(
        "several processes (torch.distributed; under torchrun, torchrun's flags decide instead)"
    )
    group.add_argument(
        "--nproc", type=int, default=1, metavar="N",
        help="ranks on this machine, each with its own --num-envs environments and --threads "
        "threads; gradients are averaged over all ranks (default: 1)",
    )  # fmt: skip
    group.add_argument(
        "--nnodes", type=int, default=1, metavar="M",
        help="machines; start the same command on each with the same --rdzv-endpoint",
    )  # fmt: skip
    group.add_argument("--rdzv-backend", default="c10d", help="rendezvous backend (default: c10d)")
    group.add_argument(
        "--rdzv-endpoint", default="", metavar="HOST:PORT",
        help="where the ranks meet (default: a free port on this machine, one machine only)",
    )  # fmt: skip
    group.add_argument(
        "--rdzv-id", default="", metavar="ID", help="run id shared by every machine's launcher"
    )
    group.add_argument(
        "--max-restarts", type=int, default=0, metavar="K",
        help="restart every rank up to K times after a failure, from the last checkpoint",
    )  # fmt: skip
    group.add_argument(
        "--dist-backend", default="auto", choices=BACKENDS,
        help="collectives: auto = gloo on the CPU, nccl on CUDA",
    )  # fmt: skip
    group.add_argument(
        "--dist-timeout-s", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
        help="how long a rank waits for the others in a collective before the run stops "
        f"(default: {DEFAULT_TIMEOUT_S:g})",
    )  # fmt: skip
    group.add_argument(
        "--gloo-io", default="idle", choices=GLOO_IO_PRIORITIES,
        help="idle: where the gradient goes through gloo, its I/O threads give way to any "
        "other thread, which cuts the exchange's tail where the ranks fill the cores; normal: "
        "on a machine busy with other work (default: idle)",
    )  # fmt: skip
    group.add_argument(
        "--grad-exchange", default="auto", choices=GRAD_EXCHANGES,
        help="how gloo ranks sum each minibatch's gradient. auto: shared memory between ranks "
        "of one machine, else send and receive between two ranks, else all-reduce; shm, "
        "sendrecv, allreduce: that one (default: auto)",
    )  # fmt: skip


def requested(args: argparse.Namespace) -> bool:
    """Whether this command should start ranks (and not train itself)."""
    return not launched_rank() and (args.nproc != 1 or args.nnodes != 1)


def available_slots(device: str) -> tuple[int, str]:
    """How many ranks this machine runs without sharing a core (CPU) or a GPU (CUDA)."""
    if device.startswith("cuda"):
        import torch

        return torch.cuda.device_count(), "GPUs"
    return usable_cores(), "cores"


def check_flags(args: argparse.Namespace, device: str, saved_world_size: int | None) -> str | None:
    """The first problem with the launch flags (one line), or None.

    Args:
        device: the run's device (``cpu`` or ``cuda``).
        saved_world_size: the resumed checkpoint's number of ranks (None: not resuming).
    """
    import torch

    if args.nproc < 1:
        return f"--nproc must be at least 1, got {args.nproc}"
    if args.nnodes < 1:
        return f"--nnodes must be at least 1, got {args.nnodes}"
    if args.max_restarts < 0:
        return f"--max-restarts must be at least 0, got {args.max_restarts}"
    if not args.dist_timeout_s > 0:
        return f"--dist-timeout-s must be positive, got {args.dist_timeout_s}"
    if args.dist_backend == "nccl" and not torch.cuda.is_available():
        return "--dist-backend nccl needs CUDA, which this machine does not have (use gloo)"
    world_size = args.nproc * args.nnodes
    if device == "auto" and world_size > 1:  # each rank would probe, and might choose apart
        return "--device auto probes one process: name cpu or cuda for --nproc runs"
    backend = resolve_backend(args.dist_backend, device)
    problem = grad_exchange_problem(args.grad_exchange, backend, world_size)
    if problem:
        return problem
    if args.grad_exchange == "shm" and args.nnodes > 1:
        return "--grad-exchange shm needs every rank on one machine; --nnodes is above 1"
    slots, what = available_slots(device)
    if args.nproc > slots and not getattr(args, "oversubscribe", False):
        return (
            f"--nproc {args.nproc} is more than the {slots} {what} this process may use: "
            "ranks would share them and each run slower (give --oversubscribe to do it anyway)"
        )
    if args.nnodes > 1 and not args.rdzv_endpoint:
        return "--nnodes above 1 needs --rdzv-endpoint HOST:PORT, the same on every machine"
    if saved_world_size is not None and saved_world_size != world_size:
        return (
            f"mismatched --resume: the run was made by {saved_world_size} rank(s), the command "
            f"line gives {world_size} (--nproc x --nnodes); resume it with "
            f"--nproc {saved_world_size}"
        )
    return None


# -- the launcher side ---------------------------------------------------------------------
# The signals the launcher passes on to its ranks (forwarded_stops) instead of the agent's
# handling; the agent keeps the rest of its default set (SIGHUP, SIGQUIT).
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM)
AGENT_SIGNALS = "SIGHUP,SIGQUIT"


def run(args: argparse.Namespace, argv: list[str]) -> int:
    """Start ``python -m rlperf <argv>`` on ``args.nproc`` ranks (here; ``args.nnodes``
    machines in all) and wait; on failure print one line and return 1 (2 for bad input)."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    # The agent's own logging (every signal it sends, every exit) would bury the one line.
    agent_log = logging.getLogger("torch.distributed.elastic")
    agent_log.addHandler(logging.NullHandler())
    agent_log.propagate = False
    endpoint = args.rdzv_endpoint or "localhost:0"
    config = LaunchConfig(
        min_nodes=args.nnodes,
        max_nodes=args.nnodes,
        nproc_per_node=args.nproc,
        run_id=args.rdzv_id or f"rlperf-{uuid.uuid4().hex[:8]}",
        rdzv_backend=args.rdzv_backend,
        rdzv_endpoint=endpoint,
        rdzv_configs={"timeout": int(max(args.dist_timeout_s, 30))},
        max_restarts=args.max_restarts,
        monitor_interval=0.1,
        start_method="spawn",
        **agent_signal_options(LaunchConfig),
    )
    with forwarded_stops() as stops:
        try:
            elastic_launch(config, sys.executable)(*RANK_ENTRY, *argv)
        except KeyboardInterrupt:  # before any rank started (forwarded_stops)
            print("\nrlperf: interrupted before the ranks started; nothing written",
                  file=sys.stderr)  # fmt: skip
            return stops.status()
        except ChildFailedError as e:
            # A second signal stopped the ranks mid-iteration, or one stopped a rank before its
            # training began: no one's fault.
            if stops.count:
                return stops.status()
            line, code = describe_failure(e.failures)
            if line is not None:
                print(f"rlperf: error: {line}", file=sys.stderr)
            return code
    return stops.status() if stops.count else 0


def agent_signal_options(launch_config: type) -> dict[str, Any]:
    """``LaunchConfig``'s argument that keeps the agent off :data:`FORWARDED_SIGNALS`
    (``signals_to_handle``, torch 2.10 on), where this torch's ``LaunchConfig`` takes it.

    Below pyproject's torch floor it does not (torch 2.9: a TypeError that ended every
    ``--nproc`` run): there the launch goes on, and the agent, which then installs its handler
    on every signal when it starts the ranks, handles Ctrl-C and SIGTERM its own way (it
    passes the signal on, kills the ranks after its shutdown timeout and ends in a traceback).
    """
    if "signals_to_handle" in inspect.signature(launch_config).parameters:
        return {"signals_to_handle": AGENT_SIGNALS}
    return {}


class _Stops:
    """Which signal (SIGINT, SIGTERM) the launcher passed on to its ranks, and how often."""

    def __init__(self) -> None:
        self.count = 0
        self.signum = int(signal.SIGINT)

    def status(self) -> int:
        """The launcher's exit status: 128 + the first signal (130 Ctrl-C, 143 SIGTERM)."""
        return 128 + self.signum


@contextmanager
def forwarded_stops() -> Iterator[_Stops]:
    """Inside: Ctrl-C or SIGTERM reaches the ranks as the same signal, and nothing else happens.

    The agent starts each rank in a session of its own, so the terminal's Ctrl-C, or a SIGTERM
    from a job scheduler, reaches only the launcher; the agent's own handler (left off these
    signals by :func:`agent_signal_options`) would raise SignalException, send the signal to the
    ranks, kill them after its shutdown timeout and end in a traceback. Instead, each such signal
    is passed on to the ranks (the first makes them finish the iteration, checkpoint it and stop;
    a second stops them at once) and the agent sees them end: a rank stopped so exits 0 under
    this launcher (:func:`interrupted_status`), so the agent neither restarts it
    (``--max-restarts``) nor reports a failure, and :func:`run` returns 130 (Ctrl-C) or 143
    (SIGTERM).
    """
    import psutil

    state = _Stops()
    me = psutil.Process()

    def forward(signum: int, frame: Any) -> None:
        ranks = [p for p in me.children() if _own_session(p.pid)]
        if not state.count:
            state.signum = signum
        if not ranks:  # still in the rendezvous: nothing to finish
            raise KeyboardInterrupt
        state.count += 1
        for rank in ranks:
            with suppress(ProcessLookupError):
                os.kill(rank.pid, signum)

    saved_env = os.environ.get(LAUNCHER_ENV)
    os.environ[LAUNCHER_ENV] = "1"
    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED_SIGNALS}
    try:
        yield state
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if saved_env is None:
            os.environ.pop(LAUNCHER_ENV, None)
        else:
            os.environ[LAUNCHER_ENV] = saved_env


def _own_session(pid: int) -> bool:
    """Whether ``pid`` leads a process group of its own (a rank, as the agent starts it)."""
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False


def interrupted_status() -> int:
    """The exit status of a rank (or a run) stopped by Ctrl-C or SIGTERM: 130 or 143
    (:func:`~rlperf.run.interrupt.stop_status`), but 0 for a rank under rlperf's launcher,
    which reports the status itself (:func:`forwarded_stops`)."""
    from rlperf.run.interrupt import stop_status

    return 0 if os.environ.get(LAUNCHER_ENV) and launched_rank() else stop_status()


def describe_failure(failures: dict[int, Any]) -> tuple[str | None, int]:
    """One line for the rank whose failure caused the others' (None: that rank printed its
    own ``rlperf: error:`` line), and the exit status to return.

    Args:
        failures: global rank -> ``ProcessFailure`` (``ChildFailedError.failures``).
    """

    def order(item: tuple[int, Any]) -> tuple[int, float, int]:
        rank, failure = item
        data = failure.error_file_data.get("rlperf") or {}
        if data and not data.get("collective"):
            kind = 0  # an error of its own
        elif failure.exitcode < 0 and failure.exitcode != -signal.SIGTERM:
            kind = 1  # killed (SIGTERM is how the agent stops the rest)
        elif data:
            kind = 2  # a collective that failed because a peer did
        else:
            kind = 3
        return kind, float(data.get("time", failure.timestamp)), rank

    rank, failure = min(failures.items(), key=order)
    data = failure.error_file_data.get("rlperf") or {}
    if data:
        code = EXIT_USAGE if data.get("usage") else EXIT_FAILED
        line = None if data.get("reported") else f"rank {rank} failed: {data['message']}"
        return line, code
    if failure.exitcode < 0:
        return f"rank {rank} was killed by {failure.signal_name()}", EXIT_FAILED
    return f"rank {rank} exited with status {failure.exitcode}", EXIT_FAILED


# -- the rank side -------------------------------------------------------------------------
def record_failure(
    message: str, collective: bool = False, usage: bool = False, reported: bool = False
) -> None:
    """Write why this rank failed where the agent reads it (no-op outside a launched rank).

    Args:
        collective: the error came out of a collective (another rank's failure caused it).
        usage: bad input (the launcher exits with status 2).
        reported: this rank printed its own ``rlperf: error:`` line already.
    """
    path = os.environ.get(ERROR_FILE_ENV)
    if not path:
        return
    now = time.time()
    data = {"message": message, "collective": collective, "usage": usage,
            "reported": reported, "time": now}  # fmt: skip
    # "message" and "timestamp" are the agent's own fields (its summary prints the message).
    payload = {"message": message, "timestamp": int(now), "rlperf": data}
    Path(path).write_text(json.dumps(payload))


@contextmanager
def rank_errors(usage_errors: tuple[type[BaseException], ...]) -> Iterator[None]:
    """Record an exception raised inside a rank for the launcher, then let it go on; an error
    out of a collective ends the rank quietly (exit status 1): it is another rank's failure,
    which that rank reports. ``usage_errors`` are bad input (status 2)."""
    try:
        yield
    except usage_errors as e:
        # The rank prints it (``cli.fail``, rank 0 only): the launcher need not repeat it.
        record_failure(str(e), usage=True, reported=os.environ.get("RANK", "0") == "0")
        raise
    except Exception as e:
        collective = is_collective_error(e)
        record_failure(_one_line(e), collective=collective)
        if collective:
            raise SystemExit(EXIT_FAILED) from e
        raise


def _one_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0]}" if text else type(error).__name__


def continue_after_restart(args: argparse.Namespace, run_dir: Path | None) -> None:
    """After an elastic restart (``--max-restarts``), make ``args`` continue the run directory's
    checkpoint (``--resume``), or replace what the failed attempt wrote before its first one."""
    from rlperf.run.checkpoint import CHECKPOINT_NAME

    if int(os.environ.get(RESTART_COUNT_ENV, "0")) == 0 or not run_dir:
        return
    if (Path(run_dir) / CHECKPOINT_NAME).is_file():
        args.resume, args.overwrite = str(run_dir), False
    else:
        args.overwrite = True
