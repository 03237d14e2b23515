"""``MultiprocessVecEnv``: any registered env (or ``gym:<id>``) stepped by worker processes.

    env = MultiprocessVecEnv("gym:CartPole-v1", num_envs=64, num_workers=2, seed=1)
    obs, infos = env.reset(seed=1)
    obs, rewards, terminations, truncations, infos = env.step(actions)     # synchronous

    env = MultiprocessVecEnv("grid", 16, num_workers=4, batch_size=8)      # asynchronous
    env.async_reset(seed=1)
    obs, rewards, terminations, truncations, infos, env_ids = env.recv()   # 8 maps' rows
    env.send(actions)                                                      # for those rows

Each worker builds ``num_envs / num_workers`` envs with the env's own factory (``make_vec``)
and steps them as one numpy batch; results land in shared memory (``layout.py``). By default
(``copy=True``, as gymnasium's ``AsyncVectorEnv``) ``reset``/``step``/``recv`` return fresh
arrays; with ``copy=False`` (the trainer's) they are views of the shared memory, valid until
those rows are sent their next actions. The contract is the serial envs' (``envs/cartpole.py``):
gymnasium's vector API, ``AutoresetMode.SAME_STEP``, ``infos["final_obs"]``/``"_final_obs"``
(dense, rows not flagged not part of the contract; for a Dict/Tuple observation space the form
the env gives serially: gymnasium's object array of rows for a ``gym:`` id or any env built on
gymnasium's ``SyncVectorEnv``), ``"final_info"``/``"_final_info"``,
``"episode"``/``"_episode"`` on steps where an episode ended, ``infos["action_mask"]`` for
masked envs, and every other key the env gives: numeric per-row entries the probe saw travel in
shared memory, anything else pickled on the worker's control channel on the steps it appears,
so that the infos equal those of the serial envs of the same rows. Observations and actions:
Box, Discrete, MultiDiscrete, MultiBinary and Tuple/Dict of those, batched as gymnasium's
``batch_space``; a batch of actions of the wrong shape or dtype raises ValueError/TypeError.

Seeds: worker ``w`` resets its share with ``seed + w * envs_per_worker``, the index of its
first env. A gymnasium id's sub-env ``i`` is then seeded ``seed + i`` exactly as in the serial
backend, so the two agree bit for bit; rlperf's own envs draw from one generator per vector env,
so with ``W`` workers they equal ``W`` serial envs seeded that way (one worker: the serial env).
``np_random_seed`` is the last reset's seed (for a gym id the sub-envs' seeds, as gymnasium's
``SyncVectorEnv`` and the serial backend give them).

Processes start with ``forkserver`` (``docs/workers.md``): never ``fork`` from a trainer whose
torch and OpenMP threads are running (a forked child inherits their locks, not the threads).
A failing worker raises :class:`WorkerError` in the parent on the next wait, naming the worker,
its envs and the env's error; a killed worker is seen at once through its process sentinel. A
script that builds the env without an ``if __name__ == "__main__":`` guard is named as such: the
worker re-importing it finds itself building an env and exits with :data:`MAIN_GUARD_EXIT`.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection, wait
from typing import Any, cast

import numpy as np
from gymnasium import spaces
from gymnasium.error import ClosedEnvironmentError
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rlperf.envs.contract import ActionCheck, final_obs_rows
from rlperf.envs.registry import GYM_PREFIX, check_env_name, factory_of, make_vec
from rlperf.envs.spec import ACTION_MASK_KEY, read_action_mask
from rlperf.envs.workers import worker
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
    Path,
    assemble,
    env_layout,
    leaf_name,
    leaf_of,
    space_leaves,
)

START_METHOD = "forkserver"
# Spin this long for a result (and, in a worker, for a command) before blocking on the pipe.
# 0: block at once. On 2 cores shared by the trainer and 2 workers any spin took a core from
# the process that had work (docs/workers.md); with spare cores a few microseconds may pay.
DEFAULT_SPIN_US = 0.0
START_TIMEOUT_S = 120.0
JOIN_TIMEOUT_S = 1.0
# A worker's exit status when it finds itself building an env while re-importing the user's
# script: the script lacks its main guard (see _exit_missing_main_guard).
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


def probe(env_name: str, options: dict[str, Any]) -> EnvShape:
    """Build one env in this process to learn its spaces, rows per env, capabilities and the
    numeric ``infos`` keys (and rewards dtype) of a reset and of one step of sampled actions.

    Raises:
        UnsupportedSpaceError: a space the shared block cannot hold (``layout.space_leaves``).
    """
    env = make_vec(env_name, 1, **options)
    try:
        _, reset_infos = env.reset(seed=0)
        space_leaves(env.single_observation_space, "observation")
        space_leaves(env.single_action_space, "action")
        env.action_space.seed(0)
        rows = int(env.num_envs)
        _, rewards, _, _, step_infos = env.step(env.action_space.sample())
        infos = _numeric_infos(reset_infos, rows)
        infos.update(_numeric_infos(step_infos, rows))  # a step's dtype where they differ
        final_infos = _numeric_infos(step_infos, rows)
        final_infos.update(_numeric_infos(step_infos.get("final_info", {}), rows))
        return EnvShape(
            rows_per_env=rows,
            observation_space=env.single_observation_space,
            action_space=env.single_action_space,
            has_mask=read_action_mask(env, reset_infos) is not None,
            has_teacher=callable(getattr(env, "make_teacher", None)),
            has_state=callable(getattr(env, "get_state", None)),
            rewards_dtype=np.asarray(rewards).dtype.str,
            infos=tuple(infos.values()),
            final_infos=tuple(final_infos.values()),
            render_mode=env.render_mode,
        )
    finally:
        env.close()


# infos keys the workers carry in their own arrays (or, for the mask, the env's mask array).
CONTRACT_KEYS = frozenset({"final_obs", "final_info", "episode", ACTION_MASK_KEY})


def _numeric_infos(infos: dict[str, Any], rows: int) -> dict[str, InfoField]:
    """The entries of ``infos`` with one number (or fixed-shape numeric array) per row, other
    than the contract's own keys and the ``_key`` masks."""
    fields = {}
    for key, value in infos.items():
        if key.startswith("_") or key in CONTRACT_KEYS or not isinstance(value, np.ndarray):
            continue
        if value.dtype.kind in "biuf" and value.ndim >= 1 and value.shape[0] == rows:
            fields[key] = InfoField(key, tuple(value.shape[1:]), value.dtype.str,
                                    f"_{key}" in infos)  # fmt: skip
    return fields


def _context() -> multiprocessing.context.BaseContext:
    """The forkserver context; its server is started with one OpenMP/BLAS thread so that the
    numpy it preloads (and every worker forked from it) never starts a thread pool, and with
    SIGTERM ignored (:func:`_sigterm_ignored_in_children`)."""
    ctx = multiprocessing.get_context(START_METHOD)
    ctx.set_forkserver_preload(["rlperf.envs.workers.worker", "rlperf.envs"])
    saved = {name: os.environ.get(name) for name in worker.THREAD_VARS}
    os.environ.update({name: "1" for name in worker.THREAD_VARS})
    try:
        from multiprocessing import forkserver

        with _sigterm_ignored_in_children():
            forkserver.ensure_running()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name)
            else:
                os.environ[name] = value
    return ctx


@contextmanager
def _sigterm_ignored_in_children() -> Iterator[None]:
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


class MultiprocessVecEnv(VectorEnv):
    """``num_envs`` copies of ``env_name`` in ``num_workers`` processes.

    Args:
        env_name: a registered env or ``gym:<id>``.
        num_envs: envs in the env's own units (the grid: maps); divisible by ``num_workers``.
        num_workers: worker processes.
        batch_size: envs per :meth:`recv` (0 or ``num_envs``: synchronous); a multiple of the
            envs per worker that divides ``num_envs``.
        seed: the first reset's seed (see the module docstring for the per-worker seeds).
        options: the env factory's keyword options.
        spin_us: microseconds to spin on shared memory before blocking on a pipe.
        pin_cores: pin worker ``w`` to the ``w``-th core of this process's affinity set
            (Linux; wrapping around when there are more workers than cores; ignored where
            the OS has no ``sched_setaffinity``). Pinned, two workers on 2 cores stepped
            5-18% more envs a second (medians) than left to the scheduler; a pinned worker
            cannot move to an idle core when its own is busy (docs/workers.md).
        inline: worker 0 runs in this process: ``num_workers - 1`` processes are started,
            and each command is executed on worker 0's share right after the other workers
            were signalled, while they execute theirs. A synchronous trainer otherwise sleeps
            through the step with a core idle; inline, it steps a share on that core and pays
            one process wake-up fewer (docs/workers.md, "Inline worker"). Same rows, seeds and
            results as ``inline=False``; an error in its envs is reported as a worker's. Its
            busy seconds are counted; its idle seconds stay 0 (between commands the trainer
            is doing its own work, not waiting).
        copy: return fresh arrays from ``reset``, ``step`` and ``recv`` (obs, rewards, flags,
            infos), as gymnasium's ``AsyncVectorEnv(copy=True)``. False: views of the shared
            block, valid until those rows are sent their next actions (the trainer's choice:
            it copies each step into its rollout buffer anyway).

    Attributes:
        num_envs: rows (the grid: agents), as every rlperf vector env counts them.
        num_workers, rows_per_worker, envs_per_worker.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(
        self,
        env_name: str,
        num_envs: int,
        num_workers: int,
        batch_size: int = 0,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
        spin_us: float = DEFAULT_SPIN_US,
        pin_cores: bool = False,
        inline: bool = False,
        copy: bool = True,
    ) -> None:
        if getattr(multiprocessing.current_process(), "_inheriting", False):
            _exit_missing_main_guard()
        check_env_name(env_name)
        options = dict(options or {})
        check_worker_sizes(num_envs, num_workers, batch_size)
        self.env_name, self.num_workers = env_name, num_workers
        self.envs_per_worker = num_envs // num_workers
        self.shape = shape = probe(env_name, options)
        self.rows_per_worker = self.envs_per_worker * shape.rows_per_env
        self.num_envs = self.rows_per_worker * num_workers
        self.workers_per_batch = (batch_size or num_envs) // self.envs_per_worker
        self.copy = copy
        self.single_observation_space = shape.observation_space
        self.single_action_space = shape.action_space
        self.render_mode = shape.render_mode
        if shape.render_mode is not None:
            self.metadata = {**self.metadata, "render_modes": [shape.render_mode]}
        self.observation_space = batch_space(shape.observation_space, self.num_envs)
        self.action_space = batch_space(shape.action_space, self.num_envs)

        ctx = _context()
        layout = env_layout(shape, self.num_envs, num_workers)
        self._buffer = ctx.RawArray("b", layout.nbytes)
        self._views = views = layout.views(self._buffer)
        self._command, self._command_seq = views["command"], views["command_seq"]
        self._done_seq, self._has = views["done_seq"], views["has"]
        self._info_present = views["info_present"]
        self._final_info_present = views["final_info_present"]
        self._extras: list[dict[str, Any] | None] = [None] * num_workers  # (worker.py, HAS_EXTRA)
        self._actions = ActionRows(shape.action_space, shape.action_leaves, views)
        self._gym = env_name.startswith(GYM_PREFIX)
        if shape.has_mask:
            self.action_mask = views["mask"]
        if shape.has_teacher:
            self.make_teacher = self._make_teacher
        if shape.has_state:
            self.get_state, self.set_state = self._get_state, self._set_state
        self._row_ids = np.arange(self.num_envs).reshape(num_workers, self.rows_per_worker)
        self._batches: dict[tuple[int, ...], RowBatch] = {}  # consecutive workers' (_batch)
        self._row_arrays = layout.row_arrays
        self._spin_s = spin_us * 1e-6
        can_pin = pin_cores and hasattr(os, "sched_getaffinity")
        self._cores = sorted(os.sched_getaffinity(0)) if can_pin else []

        # One slot per worker; an inline worker 0 has None for its process and pipes.
        self._processes: list[Any] = []
        self._commands: list[Any] = []
        self._results: list[Any] = []
        self._controls: list[Any] = []
        # The pipes' descriptors, read at every step (Connection.fileno() checks its state).
        self._command_fds: list[int] = []
        self._result_fds: list[int] = []
        self.closed = False
        self._local: worker.WorkerLoop | None = None  # worker 0 when inline
        self._local_code = worker.DONE
        self._finalizer = weakref.finalize(self, _shutdown, self._processes, self._commands,
                                           self._results, self._controls)  # fmt: skip
        if inline:
            self._start_inline(layout, options)
        for w in range(1 if inline else 0, num_workers):
            self._start_worker(ctx, w, layout, options)
        self._await_ready()
        self._sent = [0] * num_workers  # last command number per worker
        # Every worker is in exactly one of: in flight (sent, result not read), ready (result
        # read, not yet returned by recv), waiting (returned, awaiting actions).
        self._in_flight: list[int] = []
        self._ready: list[int] = []  # first done first
        self._waiting: list[int] = []
        self.reset(seed=seed)

    # -- processes -----------------------------------------------------------------------
    def _worker_args(self, w: int, layout: Any, options: dict[str, Any], **ends: Any) -> Any:
        lo = w * self.rows_per_worker
        return worker.WorkerArgs(
            index=w,
            env_name=self.env_name,
            factory=factory_of(self.env_name),
            num_envs=self.envs_per_worker,
            rows=(lo, lo + self.rows_per_worker),
            options=options,
            layout=layout,
            shape=self.shape,
            buffer=self._buffer,
            spin_s=self._spin_s,
            **ends,
        )

    def _start_inline(self, layout: Any, options: dict[str, Any]) -> None:
        """Worker 0 in this process: no pipes, no process; the lists keep its slot (None) so
        that every index is a worker's."""
        parent_end, worker_end = worker.local_control_pair()
        args = self._worker_args(0, layout, options, commands=None, results=None,
                                 control=worker_end)  # fmt: skip
        self._processes.append(None)
        self._commands.append(None)
        self._results.append(None)
        self._controls.append(parent_end)
        self._command_fds.append(-1)
        self._result_fds.append(-1)
        try:
            self._local = worker.WorkerLoop(args, self._views)
        except Exception as e:  # the env could not be built: reported as a worker's would be
            self._fail(0, worker.describe_error(e), "building the env")

    def _start_worker(self, ctx: Any, w: int, layout: Any, options: dict[str, Any]) -> None:
        commands_r, commands_w = ctx.Pipe(duplex=False)
        results_r, results_w = ctx.Pipe(duplex=False)
        control, control_child = ctx.Pipe()
        core = self._cores[w % len(self._cores)] if self._cores else None
        args = self._worker_args(w, layout, options, commands=commands_r, results=results_w,
                                 control=control_child, core=core)  # fmt: skip
        process = ctx.Process(target=worker.run, args=(args,), name=f"rlperf-env-worker-{w}")
        process.daemon = True
        process.start()
        # Only the worker may hold these ends: its death must read as end-of-file here.
        for end in (commands_r, results_w, control_child):
            end.close()
        self._processes.append(process)
        self._commands.append(commands_w)
        self._results.append(results_r)
        self._controls.append(control)
        self._command_fds.append(commands_w.fileno())
        self._result_fds.append(results_r.fileno())

    @property
    def _remote(self) -> list[int]:
        """The workers that are processes (all but worker 0 when inline)."""
        return list(range(0 if self._local is None else 1, self.num_workers))

    def _await_ready(self) -> None:
        waiting = set(self._remote)
        deadline = time.monotonic() + START_TIMEOUT_S
        while waiting:
            objects = [self._controls[w] for w in waiting]
            objects += [self._processes[w].sentinel for w in waiting]
            if not wait(objects, timeout=max(deadline - time.monotonic(), 0.0)):
                self.close()
                raise WorkerError(f"env workers did not start within {START_TIMEOUT_S:.0f} s")
            for w in sorted(waiting):
                if self._controls[w].poll():
                    try:
                        error = self._controls[w].recv()
                    except EOFError:  # it died before saying whether its env was built
                        self._fail_dead(w)
                    if error is not None:
                        self._fail(w, error, "building the env")
                    waiting.discard(w)
                elif not self._processes[w].is_alive():
                    self._fail_dead(w)

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

    # -- signalling ----------------------------------------------------------------------
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

    # -- gymnasium API -------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every env (discarding steps in flight); returns all rows' observations."""
        self.async_reset(seed=seed, options=options)
        self._wait(self.num_workers, "resetting")
        self._ready, self._waiting = [], list(range(self.num_workers))
        obs, _, _, _, infos, _ = self._results_of(self._waiting)
        return obs, infos

    def async_reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> None:
        """Start resetting every env; :meth:`recv` then returns the first observations."""
        self._check_open()
        if self._in_flight:
            self._wait(len(self._in_flight), "stepping")
        if seed is not None:
            # What np_random_seed reports (the workers' generators are their own): gymnasium's
            # SyncVectorEnv of a gym id gives its sub-envs' seeds, as the serial backend does.
            self._np_random, seed_of = seeding.np_random(seed)
            seeds: Any = tuple(range(seed, seed + self.num_envs)) if self._gym else seed_of
            self._np_random_seed = seeds
            self.action_space.seed(seed)
        for w in range(self.num_workers):
            worker_seed = None if seed is None else seed + w * self.envs_per_worker
            self._controls[w].send((worker_seed, options))
        self._ready, self._waiting = [], []
        self._signal(list(range(self.num_workers)), RESET)

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Synchronous step of every env: :meth:`send` to all, then wait for all."""
        self._check_all_waiting("step()")
        self.send(actions)
        self._wait(self.num_workers, "stepping")
        self._ready, self._waiting = [], list(range(self.num_workers))
        obs, rewards, terminations, truncations, infos, _ = self._results_of(self._waiting)
        return obs, rewards, terminations, truncations, infos

    def send(self, actions: np.ndarray, env_ids: np.ndarray | None = None) -> None:
        """Actions for the rows of the last :meth:`recv` (or :meth:`reset`), which step next.

        Args:
            actions: ``(rows, *action_shape)``, one per row, in the order of ``env_ids``.
            env_ids: the rows to step, whole workers' rows from the last recv (default: all of
                them). Rows left out stay parked until a later send (a rollout's envs that have
                all their steps wait so for the next rollout).

        Raises:
            ValueError: ``actions`` is not ``(rows, *action_shape)`` (TypeError: not of the
                action space's dtype kind); nothing is sent.
        """
        self._check_open()
        if env_ids is None:
            workers = sorted(self._waiting)
        else:
            first_rows = np.asarray(env_ids)[:: self.rows_per_worker]
            workers = [int(r) // self.rows_per_worker for r in first_rows]
            expected = self._row_ids[workers].ravel() if workers else np.empty(0, np.int64)
            if not np.array_equal(np.asarray(env_ids), expected):
                raise ApiUsageError(
                    f"send() env_ids must be whole workers' rows ({self.rows_per_worker} per "
                    "worker) as recv() returned them"
                )
        if not workers or any(w not in self._waiting for w in workers):
            raise ApiUsageError(
                "send() for envs that are not waiting for actions: call recv() (or reset()) "
                "first, and send once per recv"
            )
        batch = self._batch(workers)
        self._actions.write(actions, batch.rows, len(batch.env_ids))
        self._waiting = [w for w in self._waiting if w not in workers]
        self._signal(workers, STEP)

    def recv(
        self,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any], np.ndarray]:
        """Wait for a batch of ready workers (``batch_size`` envs, or all still in flight).

        Returns:
            obs, rewards, terminations, truncations, infos (as :meth:`step`, for these rows)
            and ``env_ids``: the rows' indices, in the order of the other arrays.
        """
        self._check_open()
        if not self._in_flight and not self._ready:
            # EnvPool's and PufferLib's recv would wait forever here.
            raise ApiUsageError("recv() with no step in flight: call send(actions) first")
        want = min(self.workers_per_batch, len(self._in_flight) + len(self._ready))
        if len(self._ready) < want:
            self._wait(want - len(self._ready), "stepping")
        batch = sorted(self._ready[:want])
        self._ready = self._ready[want:]
        self._waiting.extend(batch)
        return self._results_of(batch)

    def _batch(self, workers: list[int]) -> RowBatch:
        """The batch of these workers; kept when they are consecutive (at most W * W such
        sets: the synchronous step's one, an async run's few), built anew otherwise."""
        key = tuple(workers)
        batch = self._batches.get(key)
        if batch is None:
            batch = RowBatch(key, self._row_ids, self._views, self._row_arrays)
            if batch.consecutive:
                self._batches[key] = batch
        return batch

    def _results_of(
        self, workers: list[int]
    ) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any], np.ndarray]:
        batch = self._batch(workers)
        has = 0
        for bits in self._has[batch.workers].tolist():  # a few workers: cheaper than a ufunc
            has |= bits
        infos = self._infos_of(batch, has)
        obs = batch.assemble(self.single_observation_space, "obs")
        rewards, terminations, truncations = (
            batch["rewards"], batch["terminations"], batch["truncations"])  # fmt: skip
        if self.copy:
            obs, rewards = copy_tree(obs), rewards.copy()
            terminations, truncations = terminations.copy(), truncations.copy()
            infos = copy_tree(infos)
        if has & HAS_FINAL_OBS_ROWS:
            # The env gives a Tuple/Dict space's final_obs as gymnasium's object array of rows:
            # so do the workers (rebuilt from the dense leaves, only on steps an episode ended).
            rows = len(batch.env_ids)
            infos["final_obs"] = final_obs_rows(
                batch_space(self.single_observation_space, rows), infos["final_obs"],
                infos["_final_obs"],
            )  # fmt: skip
        return obs, rewards, terminations, truncations, infos, batch.env_ids.copy()

    def _infos_of(self, batch: RowBatch, has: int) -> dict[str, Any]:
        """The batch's ``infos`` as the serial env of the same rows gives them (``has``: its
        workers' HAS_* bits): views of the shared block, or, when some worker sent entries on
        its control channel, each worker's entries put together as gymnasium's
        ``SyncVectorEnv`` does (:func:`combine_infos`)."""
        if has & HAS_EXTRA:
            return self._combined_infos(batch)
        return self._shared_infos(batch, has)

    def _shared_infos(self, batch: RowBatch, has: int) -> dict[str, Any]:
        """The batch's ``infos`` entries in shared memory; ``has``: its workers' HAS_* bits."""
        shape = self.shape
        infos: dict[str, Any] = {}
        if shape.infos:
            self._add_declared(infos, batch, shape.infos, "info", self._info_present)
        if has & HAS_FINAL_OBS:
            infos["final_obs"] = batch.assemble(self.single_observation_space, "final_obs")
            infos["_final_obs"] = batch["final_flags"]
        if has & HAS_FINAL_INFO:
            final: dict[str, Any] = {}
            self._add_declared(final, batch, shape.final_infos, "final_info",
                               self._final_info_present)  # fmt: skip
            infos["final_info"], infos["_final_info"] = final, batch["final_info_flags"]
        if has & HAS_EPISODE:
            infos["episode"] = {"r": batch["episode_r"], "l": batch["episode_l"],
                                "t": batch["episode_t"]}  # fmt: skip
            infos["_episode"] = batch["episode_flags"]
        if shape.has_mask:
            infos[ACTION_MASK_KEY] = batch["mask"]
        return infos

    @staticmethod
    def _add_declared(infos: dict[str, Any], batch: RowBatch, fields: tuple[InfoField, ...],
                      prefix: str, present: np.ndarray) -> None:  # fmt: skip
        """The declared entries some worker of ``batch`` had (the others' rows are zeros)."""
        had = present[batch.workers].any(axis=0)
        for i, f in enumerate(fields):
            if had[i]:
                infos[f.key] = batch[f"{prefix}:{f.key}"]
                if f.masked:
                    infos[f"_{f.key}"] = batch[f"{prefix}:_{f.key}"]

    def _combined_infos(self, batch: RowBatch) -> dict[str, Any]:
        """The slow path of :meth:`_infos_of`, on steps where some worker's ``infos`` had an
        entry that is not in shared memory: each worker's own ``infos`` (its rows' views and what
        it sent), combined."""
        blocks, promoted = [], []
        for w in np.atleast_1d(np.arange(self.num_workers)[batch.workers]):
            infos = self._shared_infos(self._batch([int(w)]), int(self._has[w]))
            extra = self._extras[int(w)]
            if extra:
                extra = dict(extra)
                promoted.append(extra.pop(PROMOTED_KEY, {}))
                merge_infos(infos, extra)
            else:
                promoted.append({})
            blocks.append(infos)
        combined = combine_infos(blocks, self.rows_per_worker)
        for path in set().union(*promoted):
            retype_first(combined, blocks, promoted, path)
        return combined

    # -- state, teacher, timing ----------------------------------------------------------
    def _check_all_waiting(self, doing: str) -> None:
        self._check_open()
        if len(self._waiting) != self.num_workers:
            raise ApiUsageError(
                f"{doing} needs every env waiting for actions (no step in flight); with "
                "--env-batch-size use send()/recv()"
            )

    def _round_trip(self, command: int, doing: str) -> None:
        """``command`` to every worker (all waiting for actions) and wait for all."""
        self._check_all_waiting(doing)
        workers = list(range(self.num_workers))
        self._signal(workers, command)
        self._wait(self.num_workers, doing)
        self._ready, self._waiting = [], workers

    def _get_state(self) -> dict[str, Any]:
        """Every worker's env state (``{"workers": [...]}``), for a checkpoint."""
        self._round_trip(GET_STATE, "saving its state")
        return {"workers": [control.recv() for control in self._controls]}

    def _set_state(self, saved: dict[str, Any]) -> None:
        """Restore states from :meth:`get_state` of an env with the same worker count."""
        self._check_all_waiting("set_state()")
        states = saved["workers"]
        if len(states) != self.num_workers:
            raise ValueError(
                f"env state of {len(states)} workers cannot be restored into {self.num_workers}"
            )
        for control, state in zip(self._controls, states, strict=True):
            control.send(state)
        self._round_trip(SET_STATE, "restoring its state")

    def _make_teacher(self) -> Any:
        """The env's scripted teacher, run by each worker on its own rows (it reads its env's
        tables, which live in the worker): ``teacher(obs) -> (num_envs,) int64``."""
        return WorkersTeacher(self)

    def teacher_actions(self) -> np.ndarray:
        """Every worker's teacher actions for its current observations, (num_envs,) int64."""
        self._round_trip(TEACHER, "running the teacher")
        return self._views["teacher"].copy()

    def render(self) -> tuple[Any, ...] | None:
        """Every env's frame, as gymnasium's vector envs give them: a tuple of ``num_envs``
        frames, each worker rendering its share (pickled back on its control channel: for a
        video, not for every step); None where the env's own render gives None.

        Raises:
            NotImplementedError: the env does not render (as its serial form raises).
            RuntimeError: a worker's env failed to draw (one line naming it); the workers stay.
        """
        self._check_all_waiting("render()")
        workers = list(range(self.num_workers))
        self._signal(workers, RENDER)
        # Each reply before the result bytes, and every one before any raise: a frame larger
        # than the socket's buffer holds the worker in its send until this side reads it, and
        # the worker writes its result byte after that.
        replies = []
        for w, control in enumerate(self._controls):
            try:
                replies.append(control.recv())
            except EOFError:  # it died while drawing
                self._fail_dead(w)
        self._wait(self.num_workers, "rendering")
        self._ready, self._waiting = [], workers
        for w, (error, _) in enumerate(replies):
            if error is not None:
                kind = NotImplementedError if error["type"] == "NotImplementedError" else (
                    RuntimeError)  # fmt: skip
                raise kind(f"{self._describe(w)} could not render: {error['type']}: "
                           f"{error['message']} (at {error['where']})")  # fmt: skip
        if any(frames is None for _, frames in replies):
            return None
        return tuple(frame for _, frames in replies for frame in frames)

    def worker_times(self) -> list[dict[str, float]]:
        """Seconds each worker spent executing commands (busy) and waiting for them (idle; 0
        for an inline worker 0)."""
        v = self._views
        return [{"busy_s": float(v["busy_s"][w]), "idle_s": float(v["idle_s"][w])}
                for w in range(self.num_workers)]  # fmt: skip

    @property
    def spin_us(self) -> float:
        """Microseconds this process and each worker poll before blocking on a pipe."""
        return self._spin_s * 1e6

    # -- lifetime ------------------------------------------------------------------------
    @property
    def pids(self) -> list[int]:
        """The worker processes' ids (not this process's, for an inline worker 0)."""
        return [p.pid for p in self._processes if p is not None]

    def _check_open(self) -> None:
        if self.closed:
            raise EnvClosedError("the env is closed: build a new MultiprocessVecEnv")

    def close(self, **kwargs: Any) -> None:
        """Stop every worker (end-of-file on its command pipe, then kill);
        ``closed`` is then True and a second call does nothing."""
        if self.closed:
            return
        self.closed = True
        self._finalizer()
        if self._local is not None:
            self._local.env.close()


class RowBatch:
    """The rows of some whole workers in the shared arrays, as ``send``/``recv`` use them at every
    step. Consecutive workers' rows are a slice and their arrays views made once (no copy): the
    pool keeps such a batch. Other sets index the rows, which copies at each read.

    Attributes:
        consecutive: the workers are consecutive (the rows a slice).
        workers: a slice or index list of the workers (for per-worker control words).
        rows: a slice or index array of the rows (for assignment).
        env_ids: the rows' indices, read-only (the batch is kept: callers get a copy).
    """

    def __init__(self, workers: tuple[int, ...], row_ids: np.ndarray,
                 views: dict[str, np.ndarray], row_arrays: frozenset[str]) -> None:  # fmt: skip
        first, count = workers[0], len(workers)
        self._views = views
        self.consecutive = workers == tuple(range(first, first + count))
        self.workers: Any = slice(first, first + count) if self.consecutive else list(workers)
        self.env_ids = row_ids[self.workers].ravel()
        self.env_ids.flags.writeable = False
        self.rows: Any = self.env_ids  # an index array (read-only serves to index)
        self._cached: dict[str, np.ndarray] | None = None
        if self.consecutive:
            self.rows = slice(int(self.env_ids[0]), int(self.env_ids[-1]) + 1)
            self._cached = {name: array[self.rows] for name, array in views.items()
                            if name in row_arrays}  # fmt: skip

    def __getitem__(self, name: str) -> np.ndarray:
        """Array ``name`` at these rows."""
        if self._cached is not None:
            return self._cached[name]
        return self._views[name][self.rows]

    def assemble(self, space: spaces.Space, prefix: str) -> Any:
        """The batch of ``space`` stored under ``prefix`` (``obs``, ``final_obs``) at these rows:
        one array, or a tuple/dict of arrays for a Tuple/Dict space (``layout.assemble``)."""
        if prefix in self._views:  # not a Tuple or Dict: the common case, one lookup
            return self[prefix]
        return assemble(space, _Rows(self), prefix)


class _Rows:
    """A :class:`RowBatch` as the mapping ``layout.assemble`` reads."""

    def __init__(self, batch: RowBatch) -> None:
        self.batch = batch

    def __getitem__(self, name: str) -> np.ndarray:
        return self.batch[name]


class ActionRows:
    """Writes a batch of actions for some rows into the shared block, each leaf of a Tuple/Dict
    space into its own array, after ``envs/contract.py``'s :class:`ActionCheck` of a batch of
    that many rows (the serial envs' check: the same errors on both backends)."""

    def __init__(self, space: spaces.Space, leaves: list[tuple[Path, spaces.Space]],
                 views: dict[str, np.ndarray]) -> None:  # fmt: skip
        self.space = space
        self.leaves = [(views[leaf_name("actions", path)], path) for path, _ in leaves]
        self.checks: dict[int, ActionCheck] = {}  # by rows: a sync step's and an async batch's

    def write(self, actions: Any, rows: slice | np.ndarray, count: int) -> None:
        """Check ``actions`` for ``count`` rows (ValueError/TypeError, nothing written) and
        write them to rows ``rows``."""
        check = self.checks.get(count)
        if check is None:
            check = self.checks[count] = ActionCheck(batch_space(self.space, count), per="row")
        checked = check(actions)
        for out, path in self.leaves:
            out[rows] = leaf_of(checked, path)


def copy_tree(value: Any) -> Any:
    """``value`` with every array copied (dicts and tuples rebuilt, anything else kept)."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, dict):
        return {k: copy_tree(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(copy_tree(v) for v in value)
    return value


def merge_infos(infos: dict[str, Any], extra: dict[str, Any]) -> None:
    """Add a worker's control-channel entries to the entries of its shared rows (nested dicts
    such as ``final_info`` merged key by key)."""
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(infos.get(key), dict):
            infos[key] = dict(infos[key])
            merge_infos(infos[key], value)
        else:
            infos[key] = value


def combine_infos(blocks: list[dict[str, Any]], rows: int) -> dict[str, Any]:
    """One ``infos`` for consecutive blocks of ``rows`` rows each, built as gymnasium's
    ``VectorEnv._add_info`` builds it from its sub-envs: an entry's array takes the dtype of the
    first block that has it (zeros, or None for objects, where a block lacks it), and values of
    later blocks are cast into it."""
    total, out = rows * len(blocks), cast(dict[str, Any], {})
    for b, block in enumerate(blocks):
        _place(out, block, slice(b * rows, (b + 1) * rows), total)
    return out


def retype_first(
    combined: dict[str, Any],
    blocks: list[dict[str, Any]],
    promoted: list[dict[tuple[str, ...], np.dtype]],
    path: tuple[str, ...],
) -> None:
    """Cast the combined entry at ``path`` to the type of the batch's first row that has it, as
    gymnasium's ``SyncVectorEnv`` types it, when the first block that has the entry kept it wider
    than that row's type (``promoted[b]``: block b's such entries, ``gym_adapter.InfoTypes``)."""
    for block, kept in zip(blocks, promoted, strict=True):
        node: Any = block
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node is None:
            continue  # this block lacks the entry: the next one's first row comes first
        if path in kept:
            parent = combined
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]] = parent[path[-1]].astype(kept[path])
        return


def _place(out: dict[Any, Any], block: dict[Any, Any], rows: slice, total: int) -> None:
    for key, value in block.items():
        if isinstance(value, dict):
            _place(out.setdefault(key, {}), value, rows, total)
        elif isinstance(value, tuple):  # a Tuple space's final_obs: place each part
            placed = out.get(key)
            parts = dict(enumerate(placed)) if isinstance(placed, tuple) else {}
            _place(parts, dict(enumerate(value)), rows, total)
            out[key] = tuple(parts[i] for i in range(len(value)))
        elif isinstance(value, np.ndarray) and value.ndim and len(value) == rows.stop - rows.start:
            if key not in out:
                trailing = (total, *value.shape[1:])
                out[key] = (np.full(trailing, None, object) if value.dtype == object
                            else np.zeros(trailing, value.dtype))  # fmt: skip
            out[key][rows] = value
        else:  # not one entry per row: nothing to place
            out[key] = value


class WorkersTeacher:
    """The grid teacher over workers: ``teacher(obs)`` with ``obs`` the env's last observation."""

    def __init__(self, env: MultiprocessVecEnv) -> None:
        self.env = env
        self.shape = (env.num_envs, *cast(tuple[int, ...], env.single_observation_space.shape))

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        if tuple(obs.shape) != self.shape:
            raise ValueError(f"obs must be the env's observation, shape {self.shape}, got "
                             f"{tuple(obs.shape)}")  # fmt: skip
        return self.env.teacher_actions()


def check_worker_sizes(num_envs: int, num_workers: int, batch_size: int) -> None:
    """ValueError (one line) unless the sizes split into whole workers and whole batches."""
    if num_workers < 1:
        raise ValueError(f"num_workers must be >= 1, got {num_workers}")
    if num_envs % num_workers:
        raise ValueError(f"num_envs {num_envs} must be divisible by num_workers {num_workers}")
    per_worker = num_envs // num_workers
    if batch_size and (batch_size % per_worker or num_envs % batch_size or batch_size < 0):
        raise ValueError(
            f"env_batch_size {batch_size} must be a multiple of the envs per worker "
            f"({num_envs}/{num_workers} = {per_worker}) that divides num_envs {num_envs}"
        )


def _exit_missing_main_guard() -> None:
    """In a worker that is importing the user's script (multiprocessing sets ``_inheriting``
    then) and reached a MultiprocessVecEnv: the script has no main guard. Say so on stderr and
    exit with :data:`MAIN_GUARD_EXIT`, which the parent turns into its error message (otherwise
    the worker would try to start workers of its own and die with exit 1)."""
    sys.stderr.write(f"rlperf env worker: {MAIN_GUARD_MESSAGE}\n")
    sys.stderr.flush()
    os._exit(MAIN_GUARD_EXIT)


def _shutdown(processes: list[Any], commands: list[Connection], results: list[Connection],
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
