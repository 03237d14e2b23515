"""Commands every worker executes at once while no step is in flight: save and restore the envs'
state (a checkpoint), run the env's scripted teacher on each worker's rows, render a frame of
every env. Each is one round trip: the command to every worker, then every result.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from rlperf.envs.workers.faults import ApiUsageError
from rlperf.envs.workers.layout import GET_STATE, RENDER, SET_STATE, TEACHER
from rlperf.envs.workers.signalling import WorkerSignalling


class WorkerRoundTrips(WorkerSignalling):
    """The pool's whole-pool commands (a mixin of
    :class:`~rlperf.envs.workers.pool.MultiprocessVecEnv`, whose attributes these are)."""

    num_envs: int
    num_workers: int
    single_observation_space: Any
    _views: dict[str, np.ndarray]
    _waiting: list[int]

    # -- state, teacher, render ----------------------------------------------------------
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


class WorkersTeacher:
    """The grid teacher over workers: ``teacher(obs)`` with ``obs`` the env's last observation."""

    def __init__(self, env: WorkerRoundTrips) -> None:
        self.env = env
        self.shape = (env.num_envs, *cast(tuple[int, ...], env.single_observation_space.shape))

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        if tuple(obs.shape) != self.shape:
            raise ValueError(f"obs must be the env's observation, shape {self.shape}, got "
                             f"{tuple(obs.shape)}")  # fmt: skip
        return self.env.teacher_actions()
