"""Supervised-then-PPO: a scripted teacher's rollout hook, lead schedule and loss choice.

``--supervised-steps N`` on an environment with a scripted teacher (``grid``): while fewer than
N env steps are done, each rollout step also runs the teacher under ``rollout/teacher``
(``reshape``, ``device_to_host``, ``call``, ``to_device``: the observations go to the host, the
teacher's actions come back), an agent executes the teacher's action with probability
``teacher_lead * (1 - step / N)`` (linear anneal, fixed for a rollout), and the update minimises
the cross-entropy to the teacher's actions plus the value loss (``ppo/loss.py``). From the first
rollout at or after N steps on, plain PPO: the teacher is never called again. Env steps count
agent rows: a multi-agent env's rows are its agents.

The trainer sees one object, :class:`TeacherPhase`, and asks it three things: whether this
rollout is supervised (:meth:`TeacherPhase.begin_rollout`), what to do with a step's actions
(:meth:`TeacherPhase.step`), and what to log (:meth:`TeacherPhase.metrics`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rlperf.config import ConfigError, TeacherConfig
from rlperf.envs.spec import EnvSpec
from rlperf.timing import names
from rlperf.timing.sections import Profiler

SUPERVISED, PPO = "supervised", "ppo"
Teacher = Callable[[np.ndarray], np.ndarray]


def make_teacher_phase(
    env: Any,
    env_name: str,
    spec: EnvSpec,
    cfg: TeacherConfig,
    device: torch.device,
    prof: Profiler,
) -> TeacherPhase | None:
    """The run's supervised phase, or None when none is asked for (``supervised_steps == 0``).

    Raises:
        ConfigError: the environment has no scripted teacher, or its actions are not Discrete.
    """
    if cfg.supervised_steps == 0:
        return None
    make_teacher = getattr(env, "make_teacher", None)
    if make_teacher is None:
        raise ConfigError(
            f"--supervised-steps needs an environment with a scripted teacher (grid); "
            f"env {env_name!r} has none"
        )
    if spec.action.kind != "discrete":
        raise ConfigError("--supervised-steps needs a Discrete action space")
    return TeacherPhase(make_teacher(), cfg, int(env.num_envs), spec, device, prof)


class TeacherPhase:
    """The teacher's part of a run: calls it during supervised rollouts and logs agreement.

    Attributes:
        teacher: ``obs (rows, *obs_shape) numpy -> actions (rows,) int``, vectorised over rows.
        calls: teacher calls per phase (the ``ppo`` count must stay 0).
        lead: the probability of executing the teacher's action in the current rollout.
    """

    def __init__(
        self,
        teacher: Teacher,
        cfg: TeacherConfig,
        rows: int,
        spec: EnvSpec,
        device: torch.device,
        prof: Profiler,
    ) -> None:
        self.teacher, self.cfg = teacher, cfg
        self.rows, self.obs_shape, self.device, self.prof = rows, spec.obs_shape, device, prof
        self.calls = {SUPERVISED: 0, PPO: 0}
        self.lead = 0.0
        # The student's agreement with the teacher, summed on the device during the rollout and
        # read once, in logging.
        self._agree = torch.zeros((), device=device)

    def phase(self, global_step: int) -> str:
        """``supervised`` while the teacher trains the student, then ``ppo``."""
        return SUPERVISED if global_step < self.cfg.supervised_steps else PPO

    def begin_rollout(self, global_step: int) -> bool:
        """Fix this rollout's lead; True when the rollout (and its update) is supervised."""
        supervised = self.phase(global_step) == SUPERVISED
        frac = global_step / self.cfg.supervised_steps
        self.lead = self.cfg.teacher_lead * (1.0 - frac) if supervised else 0.0
        return supervised

    def step(
        self,
        obs_t: torch.Tensor,
        actions: torch.Tensor,
        teacher_actions_out: torch.Tensor,
        generator: torch.Generator,
    ) -> torch.Tensor:
        """Run the teacher on a step's observations; returns the actions to execute.

        Args:
            obs_t: the step's observations (rows, *obs_shape) on the training device.
            actions: the student's sampled actions (rows,).
            teacher_actions_out: where the teacher's actions are stored (rows,) int64.
            generator: the trainer's sampling generator (the lead's coin flips).
        """
        sec = self.prof.section
        with sec(names.TEACHER):
            with sec(names.TEACHER_RESHAPE):
                # The teacher reads every agent row as one batch; a reshape, not a per-env split.
                obs_rows = obs_t.reshape(self.rows, *self.obs_shape)
            with sec(names.TEACHER_DEVICE_TO_HOST):
                obs_host = obs_rows.numpy() if self.device.type == "cpu" else obs_rows.cpu().numpy()
            with sec(names.TEACHER_CALL):
                teacher_host = self.teacher(obs_host)
            with sec(names.TEACHER_TO_DEVICE):
                teacher_actions = torch.from_numpy(np.asarray(teacher_host, dtype=np.int64))
                teacher_actions = teacher_actions.to(self.device, non_blocking=True)
                teacher_actions_out.copy_(teacher_actions)
                self._agree += (actions == teacher_actions).sum()
                if self.lead > 0.0:
                    follow = torch.rand(self.rows, generator=generator, device=self.device)
                    actions = torch.where(follow < self.lead, teacher_actions, actions)
        self.calls[SUPERVISED] += 1
        return actions

    def metrics(self, supervised: bool, steps: int) -> dict[str, Any]:
        """The iteration's phase, teacher calls so far and (supervised) agreement and lead.

        Args:
            steps: agent steps in the rollout (the agreement's denominator).
        """
        row: dict[str, Any] = {
            "phase": SUPERVISED if supervised else PPO,
            "teacher_calls": dict(self.calls),
        }
        if supervised:
            row["teacher_agreement"] = float(self._agree) / steps
            row["teacher_lead"] = self.lead
            self._agree.zero_()
        return row
