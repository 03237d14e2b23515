"""The vector env over the batch: gymnasium's vector-env contract (seeds, SAME_STEP autoreset,
``final_obs``/``final_info``, the infos' masks, episode statistics) around one env's
:class:`~rlperf.envs.mujoco_batch.task.Task` and its
:class:`~rlperf.envs.mujoco_batch.physics.BatchPhysics`.

Seeds: env ``i`` of ``reset(seed=s)`` draws its reset noise from ``np_random(s + i)`` as
gymnasium's vector envs seed their sub-envs; autoreset continues that generator. The infos of a
step where some envs finish are those gymnasium's ``SyncVectorEnv`` gives: the finished rows'
step infos go to ``final_info``, and the batch's own entries for them are their reset's.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium
import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rlperf.envs.contract import ActionCheck, reseed
from rlperf.envs.episodes import finished_infos
from rlperf.envs.mujoco_batch.physics import BatchPhysics
from rlperf.envs.mujoco_batch.tasks import TASKS
from rlperf.envs.registry import EnvOptionError


class MujocoBatchVecEnv(VectorEnv):
    """``num_envs`` envs of gymnasium id ``task`` on one ``mujoco.batch.Batch`` of ``threads``
    threads, as a gymnasium 1.x vector env with SAME_STEP autoreset (module docstring).

    Observations (N, obs) float64 and rewards (N,) float64 as gymnasium's envs give them;
    actions (N, nu) in the Box, float32 or float64. ``options``: gymnasium's keywords for the
    env (``max_episode_steps`` included), read from a gymnasium env made with them.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, task: str, num_envs: int, threads: int, options: dict[str, Any]) -> None:
        try:
            env = gymnasium.make(task, **options)
        except TypeError as e:
            raise EnvOptionError(f"env 'gym:{task}': {e}") from e
        u: Any = env.unwrapped
        self.task = TASKS[task](u)
        self.num_envs, self.threads = num_envs, threads
        self.max_episode_steps = env.spec.max_episode_steps if env.spec else None
        self.single_observation_space = u.observation_space
        self.single_action_space = u.action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._check_actions = ActionCheck(self.action_space)
        self.physics = BatchPhysics(u.model, num_envs, threads, u.frame_skip,
                                    self.task.outputs, self.task.contacts)  # fmt: skip
        env.close()
        self._rngs: list[np.random.Generator] = []
        self._steps = np.zeros(num_envs, dtype=np.int64)
        self._returns = np.zeros(num_envs)
        self._start_s = np.full(num_envs, time.perf_counter())
        self.closed = False

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Every env's (or ``options["reset_mask"]``'s) first observation; ``seed`` an int
        (env ``i`` seeded ``seed + i``) or one per env."""
        mask = None if options is None else options.get("reset_mask")
        if isinstance(seed, list):
            if len(seed) != self.num_envs:
                raise ValueError(f"reset(seed=...) takes {self.num_envs} seeds, got {len(seed)}")
            seeds: list[int | None] = seed
        else:
            reseed(self, seed)
            seeds = [None if seed is None else seed + i for i in range(self.num_envs)]
        if not self._rngs or seed is not None:
            self._rngs = [seeding.np_random(s)[0] for s in seeds]
        rows = np.arange(self.num_envs) if mask is None else np.flatnonzero(mask)
        self._reset_rows(rows)
        return self.task.observe(self.physics), self._reset_infos(rows)

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        actions = self._check_actions(actions)
        before = self.task.before_step(self.physics)
        self.physics.step(actions)
        rewards, terminated, infos = self.task.after_step(self.physics, before, actions)
        self._steps += 1
        self._returns += rewards
        truncated = (self._steps >= self.max_episode_steps if self.max_episode_steps
                     else np.zeros(self.num_envs, dtype=np.bool_))  # fmt: skip
        obs = self.task.observe(self.physics)
        done = terminated | truncated
        if not done.any():
            every = np.ones(self.num_envs, dtype=np.bool_)
            for key in list(infos):
                infos[f"_{key}"] = every.copy()  # cheaper than np.ones per key
            return obs, rewards, terminated, truncated, infos
        final_info = {}
        for key, value in infos.items():
            final_info[key] = np.where(_rows(done, value), value, 0)
            final_info[f"_{key}"] = done.copy()
        ended = finished_infos(obs, done.copy(), self._returns, self._steps, self._start_s,
                               final_info)  # fmt: skip
        rows = np.flatnonzero(done)
        self._reset_rows(rows)
        obs[rows] = self.task.observe(self.physics)[rows]
        infos = _merged(infos, self._reset_infos(rows), ~done)
        infos.update(ended)
        return obs, rewards, terminated, truncated, infos

    def _reset_rows(self, rows: np.ndarray) -> None:
        """``reset`` of ``rows``: each env's ``reset_model`` draw from its own generator, in
        gymnasium's order (a loop over the resetting envs only), then the physics' reset."""
        if len(rows) == 0:
            return
        drawn = [self.task.draw_reset(self._rngs[i]) for i in rows]
        qpos = np.stack([q for q, _ in drawn])
        qvel = np.stack([v for _, v in drawn])
        self.physics.reset(rows, qpos, qvel)
        self._steps[rows], self._returns[rows] = 0, 0.0
        self._start_s[rows] = time.perf_counter()

    def _reset_infos(self, rows: np.ndarray) -> dict[str, Any]:
        """``_get_reset_info`` of ``rows`` (zeros, masked False, elsewhere)."""
        mask = np.zeros(self.num_envs, dtype=np.bool_)
        mask[rows] = True
        out: dict[str, Any] = {}
        for key, value in self.task.reset_infos(self.physics).items():
            out[key] = np.where(_rows(mask, value), value, 0)
            out[f"_{key}"] = mask.copy()
        return out

    def close(self, **kwargs: Any) -> None:
        self.closed = True


def _rows(mask: np.ndarray, value: np.ndarray) -> np.ndarray:
    """(N,) ``mask`` shaped to select whole rows of ``value`` (N, ...)."""
    return mask.reshape(mask.shape + (1,) * (value.ndim - 1))


def _merged(step: dict[str, np.ndarray], reset: dict[str, Any], kept: np.ndarray) -> dict[str, Any]:
    """The step's infos where ``kept`` and the reset's elsewhere, with masks, as
    ``SyncVectorEnv`` adds each env's infos: a key neither gives for a row is 0 there, masked
    False; a key no row gives is left out."""
    out: dict[str, Any] = {}
    for key, value in step.items():
        if key in reset:
            out[key] = np.where(_rows(kept, value), value, reset[key])
            out[f"_{key}"] = kept | reset[f"_{key}"]
        elif kept.any():
            out[key] = np.where(_rows(kept, value), value, 0)
            out[f"_{key}"] = kept.copy()
    for key, value in reset.items():
        out.setdefault(key, value)
    return out
