"""What gymnasium's ``MujocoEnv`` does with MuJoCo, for a batch of envs on one
``mujoco.batch.Batch``: ``do_simulation`` (``frame_skip`` substeps of ``mj_step``, then
``mj_rnePostConstraint``), ``reset`` (``mj_resetData``) and ``set_state`` (the new state, then
``mj_forward``).

The batch keeps each env's state in one row and runs the rows on a thread pool, bit-identical to
a loop over one ``MjData`` per env (its docstring). The derived fields an env's formulas read
(``xpos``, ``cinert``, ...) are bound once and refreshed by every call, one substep behind the
state after a step, as ``data.xpos`` is after gymnasium's ``mj_step``.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class BatchPhysics:
    """``num_envs`` simulations of ``model``, stepped ``frame_skip`` substeps at a time on
    ``threads`` threads.

    ``qpos`` (N, nq), ``qvel`` (N, nv) and ``ctrl`` (N, nu) are live views of the state rows;
    ``out[name]`` the live (N, ...) array of each derived field in ``outputs``; ``cfrc_ext``
    (N, nbody, 6) the contact forces after ``mj_rnePostConstraint`` where ``contacts``, zero
    after a reset (``mj_resetData`` zeroes them and ``mj_forward`` does not compute them).
    """

    def __init__(
        self,
        model: Any,
        num_envs: int,
        threads: int,
        frame_skip: int,
        outputs: tuple[str, ...],
        contacts: bool,
    ) -> None:
        import mujoco
        from mujoco.batch import Batch

        self.model, self.num_envs, self.frame_skip = model, num_envs, frame_skip
        self._contacts = contacts
        # Contacts: one MjData per env (persistent), so that each can be handed over whole to
        # mj_rnePostConstraint (_post_constraint).
        self._batch = Batch(model, nsim=num_envs, nthread=threads, persistent=contacts)
        self.qpos, self.qvel = self._batch.bind("qpos"), self._batch.bind("qvel")
        self.ctrl = self._batch.bind("ctrl")
        self.out = {name: self._batch.bind(name) for name in outputs}
        self.cfrc_ext = np.zeros((num_envs, model.nbody, 6))
        self._forward_at_reset = bool(outputs) or contacts
        if contacts:
            self._ncon = self._batch.bind("ncon")
            self._data = mujoco.MjData(model)
            # Equality and flex constraints add to cfrc_ext without contacts (none in
            # gymnasium's models, but a user's xml_file may have them).
            self._every_row = model.neq > 0 or model.nflex > 0

    def step(self, actions: np.ndarray) -> None:
        """``do_simulation(actions, frame_skip)`` for every env: (N, nu) controls."""
        self.ctrl[:] = actions
        self._batch.step(nstep=self.frame_skip)
        if self._contacts:
            self._post_constraint()

    def _post_constraint(self) -> None:
        """``cfrc_ext`` as gymnasium's ``mj_rnePostConstraint`` after the substeps leaves it.

        The batch has no call for it, and an acceleration sensor (which runs it inside each
        substep's forward pass) gives other values: MuJoCo 4's ``mj_step`` updates the
        constraint forces after that pass, and gymnasium computes cfrc_ext from the updated
        ones. So each env with contacts hands its MjData over for one call: a Python loop over
        those envs only (a few microseconds each against the substeps' tens to hundreds). With
        no contact, no applied force (never set here) and no equality constraint, cfrc_ext is 0.
        """
        import mujoco

        self.cfrc_ext.fill(0.0)
        rows = range(self.num_envs) if self._every_row else np.flatnonzero(self._ncon)
        for i in rows:
            self._batch.get_data(int(i), self._data)
            mujoco.mj_rnePostConstraint(self.model, self._data)
            self.cfrc_ext[i] = self._data.cfrc_ext

    def reset(self, rows: np.ndarray, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """``mj_resetData`` then ``set_state(qpos, qvel)`` for ``rows`` (k,): (k, nq), (k, nv)."""
        import mujoco

        ids = None if len(rows) == self.num_envs else rows.astype(np.int32)
        # mj_resetData's defaults (time, controls, warmstart zeroed), then the new state.
        self._batch.reset(ids, stage=mujoco.mjtStage.mjSTAGE_NONE.value)
        self.qpos[rows], self.qvel[rows] = qpos, qvel
        # set_state's mj_forward fills only fields derived from this state, and warm starts
        # nothing: needed only where an observation or the next step reads derived fields.
        if self._forward_at_reset:
            self._batch.forward(ids)
        self.cfrc_ext[rows] = 0.0
