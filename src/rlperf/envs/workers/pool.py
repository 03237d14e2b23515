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

The parent's side, by concern: ``probe.py`` (the env's shape, before any worker starts),
``processes.py`` (starting from ``forkserver``, shutting down), ``signalling.py`` (the hand-over of
a step), ``faults.py`` (a worker's error or death as one line, :class:`WorkerError`),
``rows.py`` (batches of rows in the shared block, actions in, infos out) and ``round_trips.py``
(state, teacher and render: a command to every worker at once). This module puts them together
behind gymnasium's vector API.
"""

from __future__ import annotations

import multiprocessing
import time
import weakref
from multiprocessing.connection import wait
from typing import Any

import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rlperf.cores import pinnable_cores
from rlperf.envs.contract import final_obs_rows
from rlperf.envs.registry import GYM_PREFIX, check_env_name, factory_of
from rlperf.envs.spec import ACTION_MASK_KEY
from rlperf.envs.workers import worker
from rlperf.envs.workers.faults import (
    MAIN_GUARD_EXIT,
    ApiUsageError,
    EnvClosedError,
    WorkerError,
    exit_missing_main_guard,
)
from rlperf.envs.workers.layout import (
    HAS_EPISODE,
    HAS_EXTRA,
    HAS_FINAL_INFO,
    HAS_FINAL_OBS,
    HAS_FINAL_OBS_ROWS,
    PROMOTED_KEY,
    RESET,
    STEP,
    InfoField,
    env_layout,
)
from rlperf.envs.workers.probe import probe
from rlperf.envs.workers.processes import START_TIMEOUT_S, shutdown
from rlperf.envs.workers.processes import context as _context
from rlperf.envs.workers.round_trips import WorkerRoundTrips, WorkersTeacher
from rlperf.envs.workers.rows import (
    ActionRows,
    RowBatch,
    combine_infos,
    copy_tree,
    merge_infos,
    retype_first,
)
from rlperf.envs.workers.signalling import DEFAULT_SPIN_US

__all__ = [
    "MAIN_GUARD_EXIT",
    "ApiUsageError",
    "EnvClosedError",
    "MultiprocessVecEnv",
    "WorkerError",
    "WorkersTeacher",
    "check_worker_sizes",
]


class MultiprocessVecEnv(WorkerRoundTrips, VectorEnv):
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
            exit_missing_main_guard()
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
        self._cores = pinnable_cores() if pin_cores else []

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
        self._finalizer = weakref.finalize(self, shutdown, self._processes, self._commands,
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

    # -- timing ----------------------------------------------------------------------------
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

    def close(self, **kwargs: Any) -> None:
        """Stop every worker (end-of-file on its command pipe, then kill);
        ``closed`` is then True and a second call does nothing."""
        if self.closed:
            return
        self.closed = True
        self._finalizer()
        if self._local is not None:
            self._local.env.close()


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
