"""gymnasium's MuJoCo v5 envs stepped as one batch: ``--vec-backend mujoco`` (and ``auto``,
``--preset mujoco``'s, where it steps the env), for all eleven (:data:`SUPPORTED`).

Why: at one env, gymnasium's HalfCheetah step is ~1.3x MuJoCo's physics and rlperf's whole
step ~2.9x (docs/continuous.md, "Speed"); the physics of one env cannot use a second core, and
env worker processes cost more in hand-over than they save on two. MuJoCo 4's
``mujoco.batch.Batch`` keeps each env's physics state in one row and runs ``mj_step`` over the
rows on a thread pool, bit-identical to a loop over one ``MjData`` per env at any thread count.
What gymnasium's env adds around the physics (observation, reward, termination, the time
limit, the reset noise) is numpy over the whole batch: no Python per env and step, but for the
contact forces of Ant, Humanoid and HumanoidStandup (``physics.BatchPhysics._post_constraint``
says why and what it costs).

The modules, in the order a step reads them:

- ``make``: which ids, ``make_mujoco_vec`` (options checked, threads chosen);
- ``vec_env``: :class:`MujocoBatchVecEnv`, gymnasium's vector-env contract (seeds, SAME_STEP
  autoreset with the dense ``final_obs``, the infos' masks, episode statistics);
- ``physics``: what gymnasium's ``MujocoEnv`` does with MuJoCo (substeps,
  ``mj_rnePostConstraint``, ``mj_resetData``, ``set_state``), on the batch;
- ``task``: the contract of one class's formulas and the arithmetic they share; ``tasks``: id
  -> formulas;
- the formulas of each v5 class, with their parameters read from a gymnasium env made with the
  same options (so ``--env-option ctrl_cost_weight=0.2`` means what it means to
  ``gymnasium.make``): ``locomotion`` (HalfCheetah, Hopper, Walker2d, Swimmer), ``ant``,
  ``humanoid`` (Humanoid, HumanoidStandup), ``pendulums`` (InvertedPendulum,
  InvertedDoublePendulum), ``manipulators`` (Reacher, Pusher).

tests/envs/test_mujoco_batch.py steps gymnasium's own vector env and this one with the same
seeds and actions and asserts equal observations, rewards, flags and infos, bit for bit, across
terminations, truncations and resets, for each of the eleven. ``render`` is not offered:
``rlperf eval`` films through gymnasium's own env.

Options: the env's gymnasium keywords (``max_episode_steps`` too), and ``batch_threads``
(MuJoCo's threads; default: the cores this process may use, shared with the other ranks on the
machine, at most one per env).
"""

from rlperf.envs.mujoco_batch.make import batch_available, batch_steps, gym_id, make_mujoco_vec
from rlperf.envs.mujoco_batch.tasks import SUPPORTED
from rlperf.envs.mujoco_batch.vec_env import MujocoBatchVecEnv

__all__ = [
    "SUPPORTED",
    "MujocoBatchVecEnv",
    "batch_available",
    "batch_steps",
    "gym_id",
    "make_mujoco_vec",
]
