"""The worker process: builds its share of the envs and steps it whenever the parent says.

One loop, ``run``: wait for the next command (optionally spin on the shared sequence number,
then block reading one byte from the command pipe), execute it on the whole share in numpy, write
the results into the shared block, then report with one byte on the done pipe and the new
sequence number. Every command and every result is paired with exactly one byte, so neither
pipe ever fills and no wake-up is lost. The byte is written before the number is stored, so a
side that spins on the number finds the byte there when it sees the number and never blocks on
it; a side woken by the byte does not look at the number (``docs/workers.md`` has the
measurements behind blocking on pipes rather than spinning or semaphores, and behind this
order).

A worker never outlives its parent: the command pipe reads end-of-file as soon as the parent is
gone (whatever killed it), and on Linux the kernel also sends SIGKILL when the worker's parent
process dies (``PR_SET_PDEATHSIG``). An exception in the env is reported to the parent (type,
message, where) over the control connection, then the worker exits.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, cast

import numpy as np

from rlperf.envs.spec import ACTION_MASK_KEY
from rlperf.envs.workers.layout import (
    GET_STATE,
    HAS_EPISODE,
    HAS_EXTRA,
    HAS_FINAL_INFO,
    HAS_FINAL_OBS,
    HAS_FINAL_OBS_ROWS,
    PROMOTED_KEY,
    RENDER,
    RESET,
    SET_STATE,
    STEP,
    TEACHER,
    EnvShape,
    InfoField,
    Layout,
    assemble,
    leaf_name,
    leaf_of,
)

PR_SET_PDEATHSIG = 1
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
DONE, FAILED = b"d", b"e"


@dataclass
class WorkerArgs:
    """Everything a worker needs, pickled once at start (connections travel as descriptors)."""

    index: int
    env_name: str
    factory: Any  # the registered factory (pickled by reference: a worker may not have run the
    # registration, e.g. an env registered by a user's script); None for gym:<id>
    num_envs: int  # this worker's share, in the env's own units (grid: maps)
    rows: tuple[int, int]  # first and one-past-last row of the shared arrays
    options: dict[str, Any]
    layout: Layout
    shape: EnvShape  # the probe's: spaces, declared infos
    buffer: Any  # the shared RawArray
    commands: Connection  # read end: one byte per command; EOF when the parent is gone
    results: Connection  # write end: one byte per result
    control: Connection  # duplex: payloads of rare commands, errors
    spin_s: float
    core: int | None = None  # the core to pin this worker to (None: the scheduler chooses)


class LocalControl:
    """One end of an in-process control channel with the :class:`Connection` methods the loop
    uses (``send``/``recv``/``poll``): the inline worker's (``MultiprocessVecEnv(inline=True)``),
    whose payloads must not go through a socket that one thread would both fill and drain."""

    def __init__(self, inbox: deque[Any], outbox: deque[Any]) -> None:
        self._inbox, self._outbox = inbox, outbox

    def send(self, obj: Any) -> None:
        self._outbox.append(obj)

    def recv(self) -> Any:
        return self._inbox.popleft()

    def poll(self) -> bool:
        return bool(self._inbox)


def local_control_pair() -> tuple[LocalControl, LocalControl]:
    """The parent's and the inline worker's ends of one in-process control channel."""
    to_worker: deque[Any] = deque()
    to_parent: deque[Any] = deque()
    return LocalControl(to_parent, to_worker), LocalControl(to_worker, to_parent)


def describe_error(error: BaseException) -> dict[str, str]:
    """Type, first message line and innermost frame (``file:line in function``) of ``error``."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else "?"
    text = str(error).strip()
    return {
        "type": type(error).__name__,
        "message": text.splitlines()[0] if text else "",
        "where": where,
        "traceback": "".join(traceback.format_exception(error)),
    }


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (elsewhere: the pipe EOF only)."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _one_thread() -> None:
    """Env code runs on one thread: a worker per core is the parallelism, nested pools only
    oversubscribe the cores (and torch must never inherit the trainer's thread count)."""
    for name in THREAD_VARS:
        os.environ[name] = "1"
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def run(args: WorkerArgs) -> None:
    """The worker's main function (the ``Process`` target)."""
    ppid = os.getppid()
    _die_with_parent()
    if os.getppid() != ppid:  # the parent died before the death signal was armed
        return
    # Ctrl-C reaches the whole process group, and so does a job's SIGTERM (timeout, SLURM, a
    # launcher's killpg); the trainer finishes its iteration, which needs the workers, and
    # then closes them.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _one_thread()
    if args.core is not None:
        os.sched_setaffinity(0, {args.core})
    views = args.layout.views(args.buffer)
    try:
        loop = WorkerLoop(args, views)
    except Exception as e:  # the env could not be built: same report as a failed step
        args.control.send(describe_error(e))
        return
    args.control.send(None)  # ready
    loop.run()


class WorkerLoop:
    """One worker's env and its rows of the shared arrays."""

    def __init__(self, args: WorkerArgs, views: dict[str, np.ndarray]) -> None:
        from rlperf.envs.gym_adapter import InfoTypes
        from rlperf.envs.registry import GYM_PREFIX, factory_of, make_vec, register
        from rlperf.envs.spec import read_action_mask

        self.args, self.read_mask = args, read_action_mask
        if args.factory is not None and factory_of(args.env_name) is not args.factory:
            register(args.env_name, args.factory)
        self.env = make_vec(args.env_name, args.num_envs, **args.options)
        # A gym: id's info entries as gymnasium would type them across all workers (the class).
        self.info_types = InfoTypes(self.env) if args.env_name.startswith(GYM_PREFIX) else None
        lo, hi = args.rows
        if self.env.num_envs != hi - lo:
            raise ValueError(f"env built {self.env.num_envs} rows, the layout expects {hi - lo}")
        rows = slice(lo, hi)
        shape = args.shape
        self.obs_leaves = [(path, views[leaf_name("obs", path)][rows])
                           for path, _ in shape.obs_leaves]  # fmt: skip
        self.final_obs_leaves = [(path, views[leaf_name("final_obs", path)][rows])
                                 for path, _ in shape.obs_leaves]  # fmt: skip
        self.action_leaves = [(path, views[leaf_name("actions", path)][rows])
                              for path, _ in shape.action_leaves]  # fmt: skip
        # A space that is one leaf (not a Tuple or Dict): the batch is that array itself.
        self.obs = views["obs"][rows] if "obs" in views else None
        named = {leaf_name("actions", path): v for path, v in self.action_leaves}
        self.actions = assemble(shape.action_space, named, "actions")
        self.rewards = views["rewards"][rows]
        self.terminations, self.truncations = (
            views["terminations"][rows],
            views["truncations"][rows],
        )
        self.final_flags = views["final_flags"][rows]
        self.episode = {k: views[f"episode_{k}"][rows] for k in ("r", "l", "t")}
        self.episode_flags = views["episode_flags"][rows]
        self.final_info_flags = views["final_info_flags"][rows]
        w = args.index
        self.info_fields = InfoRows(shape.infos, "info", views, rows, views["info_present"][w])
        self.final_info_fields = InfoRows(shape.final_infos, "final_info", views, rows,
                                          views["final_info_present"][w])  # fmt: skip
        # The infos keys this side writes into shared memory; any other goes on the control
        # channel (HAS_EXTRA).
        self.known = {"final_obs", "_final_obs", "final_info", "_final_info", "episode",
                      "_episode", *self.info_fields.keys}  # fmt: skip
        if shape.has_mask:
            self.known |= {ACTION_MASK_KEY, f"_{ACTION_MASK_KEY}"}
        if self.obs is not None and hasattr(self.env, "obs_out"):
            # the env writes its observations here (envs/spec.py)
            cast(Any, self.env).obs_out = self.obs
        self.mask = views["mask"][rows] if "mask" in views else None
        self.teacher_out = views["teacher"][rows] if "teacher" in views else None
        self.command, self.command_seq = (
            views["command"][w : w + 1],
            views["command_seq"][w : w + 1],
        )
        self.done_seq, self.has = views["done_seq"][w : w + 1], views["has"][w : w + 1]
        self.busy_s, self.idle_s = views["busy_s"][w : w + 1], views["idle_s"][w : w + 1]
        self._had = 0  # the HAS_* bits of the last write (their rows' flags to clear)
        self._teacher: Callable[[Any], np.ndarray] | None = None

    def _wait_command(self, seq: int) -> bool:
        """Wait for command ``seq``; False when the parent is gone (pipe at end of file)."""
        deadline = time.perf_counter() + self.args.spin_s
        while self.command_seq[0] < seq and time.perf_counter() < deadline:
            pass
        # The parent writes the byte before it stores the number: once the number is seen, this
        # read returns at once (blocking here instead let this core halt for ~25 us a step).
        return bool(os.read(self.args.commands.fileno(), 1))

    def run(self) -> None:
        results_fd = self.args.results.fileno()
        seq, idle_start = 0, time.perf_counter()
        while True:
            seq += 1
            if not self._wait_command(seq):
                break
            self.idle_s[0] += time.perf_counter() - idle_start
            code = self.execute(int(self.command[0]))
            idle_start = time.perf_counter()
            # The byte, then the number: a parent spinning on the number never blocks reading the
            # byte, and a parent woken by the byte reads the result without the number.
            os.write(results_fd, code)
            self.done_seq[0] = seq
            if code == FAILED:
                break
        self.env.close()

    def execute(self, command: int) -> bytes:
        """Run one command on this share and count its busy time; the result code (an env
        error is sent on the control channel). :meth:`run` calls it for each command of a
        process worker; the inline worker's parent calls it directly."""
        control, start = self.args.control, time.perf_counter()
        try:
            self._execute(command, control)
            code = DONE
        except Exception as e:
            control.send(describe_error(e))
            code = FAILED
        self.busy_s[0] += time.perf_counter() - start
        return code

    def _execute(self, command: int, control: Any) -> None:
        if command == STEP:
            self._write(*self.env.step(self.actions))
        elif command == RESET:
            seed, options = control.recv()
            obs, infos = self.env.reset(seed=seed, options=options)
            self._write(obs, 0.0, False, False, infos)
        elif command == GET_STATE:
            # The parent asks for state and the teacher only of an env whose probe has them
            # (EnvShape.has_state, has_teacher), beyond VectorEnv's API: hence Any.
            control.send(cast(Any, self.env).get_state())
        elif command == SET_STATE:
            cast(Any, self.env).set_state(control.recv())
        elif command == RENDER:
            # A frame that cannot be drawn (a missing pygame) or sent is the caller's error, not
            # the worker's end: the error is the reply, the worker stays, and the parent (which
            # reads the reply before the result byte) always gets exactly one.
            try:
                control.send((None, self.env.render()))  # pickled whole before it is written
            except Exception as e:
                control.send((describe_error(e), None))
        elif command == TEACHER:
            if self._teacher is None:
                self._teacher = cast(Any, self.env).make_teacher()
            cast(np.ndarray, self.teacher_out)[...] = self._teacher(self.obs)  # a teacher block
        else:
            raise ValueError(f"unknown worker command {command}")

    def _write(self, obs: Any, rewards: Any, terminations: Any, truncations: Any,
               infos: dict[str, Any]) -> None:  # fmt: skip
        if self.obs is not None:
            if obs is not self.obs:
                self.obs[...] = obs
        else:
            for path, out in self.obs_leaves:
                out[...] = leaf_of(obs, path)
        self.rewards[...] = rewards
        self.terminations[...] = terminations
        self.truncations[...] = truncations
        has, extra = 0, cast(dict[str, Any] | None, None)
        if infos:
            if "_final_obs" in infos:
                has |= HAS_FINAL_OBS
                flags = np.asarray(infos["_final_obs"], dtype=bool)
                self.final_flags[...] = flags
                finals = infos["final_obs"]
                if isinstance(finals, np.ndarray) and finals.dtype == object:
                    # gymnasium's array of rows (contract.py): for a Dict/Tuple space the parent
                    # gives that form back, as the serial env gives it; a space batched into one
                    # array is dense on workers, rlperf's contract (the trainer's critic takes it)
                    if self.obs is None:
                        has |= HAS_FINAL_OBS_ROWS
                    for i in np.flatnonzero(flags):
                        for path, out in self.final_obs_leaves:
                            out[i] = leaf_of(finals[i], path)
                else:
                    for path, out in self.final_obs_leaves:
                        out[flags] = np.asarray(leaf_of(finals, path))[flags]
            if "_episode" in infos:
                has |= HAS_EPISODE
                self.episode_flags[...] = infos["_episode"]
                for key, out in self.episode.items():
                    out[...] = infos["episode"][key]
            if "_final_info" in infos:
                has |= HAS_FINAL_INFO
                self.final_info_flags[...] = infos["_final_info"]
                rest = self.final_info_fields.write_final(infos["final_info"])
                if rest:
                    extra = {"final_info": rest}
            if not infos.keys() <= self.known:
                extra = extra or {}
                extra.update((k, v) for k, v in infos.items() if k not in self.known)
        if self.info_fields.keys:
            rest = self.info_fields.write(infos)
            if rest:
                extra = extra or {}
                extra.update(rest)
        # A part this write lacks, that the last one had: its rows as the serial env gives them
        # when another sub-env finished (flags False, episode and final_info values 0), since
        # another worker's rows may have it. final_obs rows that are not flagged are not part of
        # the contract (docs/workers.md): left as they are.
        lost = self._had & ~has
        if lost & HAS_FINAL_OBS:
            self.final_flags[...] = False
        if lost & HAS_EPISODE:
            self.episode_flags[...] = False
            for out in self.episode.values():
                out[...] = 0
        if lost & HAS_FINAL_INFO:
            self.final_info_flags[...] = False
            self.final_info_fields.write({})
        if self.mask is not None:
            self.mask[...] = self.read_mask(self.env, infos)
        promoted = self.info_types.take() if self.info_types is not None else None
        if promoted:
            extra = extra or {}
            extra[PROMOTED_KEY] = promoted
        if extra:
            # Last (nothing after it may fail and send an error instead), before the result
            # byte: the parent reads it when it sees HAS_EXTRA.
            self.args.control.send(extra)
            has |= HAS_EXTRA
        self._had = has
        self.has[0] = has


class InfoRows:
    """One worker's rows of the numeric ``infos`` entries declared by the probe
    (:class:`~rlperf.envs.workers.layout.InfoField`), and which of them its last write had."""

    def __init__(self, fields: tuple[InfoField, ...], prefix: str,
                 views: dict[str, np.ndarray], rows: slice,
                 present: np.ndarray) -> None:  # fmt: skip
        self.fields = fields
        self.keys = {f.key for f in fields} | {f"_{f.key}" for f in fields if f.masked}
        self.values = [views[f"{prefix}:{f.key}"][rows] for f in fields]
        self.masks = [views[f"{prefix}:_{f.key}"][rows] if f.masked else None for f in fields]
        self.present = present

    def write(self, infos: dict[str, Any]) -> dict[str, Any]:
        """Write the declared entries of ``infos`` that fit (dtype, shape, mask as declared);
        returns the declared ones that do not, for the control channel, with any undeclared
        entry when these are a ``final_info`` (a top-level ``infos`` has its own)."""
        rest: dict[str, Any] = {}
        for i, f in enumerate(self.fields):
            value, mask, out = infos.get(f.key), infos.get(f"_{f.key}"), self.values[i]
            fits = (isinstance(value, np.ndarray) and value.dtype == out.dtype
                    and value.shape == out.shape and (mask is not None) == f.masked)  # fmt: skip
            if fits:
                out[...] = value
                if mask is not None:
                    cast(np.ndarray, self.masks[i])[...] = mask
            elif self.present[i]:  # absent here: zeros, as gymnasium's rows without the key
                out[...] = 0
                if f.masked:
                    cast(np.ndarray, self.masks[i])[...] = False
            self.present[i] = fits
            if value is not None and not fits:
                rest[f.key] = value
                if mask is not None:
                    rest[f"_{f.key}"] = mask
        return rest

    def write_final(self, final_info: dict[str, Any]) -> dict[str, Any]:
        rest = self.write(final_info)
        rest.update((k, v) for k, v in final_info.items() if k not in self.keys)
        return rest
