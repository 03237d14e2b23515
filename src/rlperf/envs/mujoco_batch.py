"""gymnasium's MuJoCo locomotion envs stepped as one batch: ``--vec-backend mujoco`` (and
``auto``, ``--preset mujoco``'s, where it steps the env).

Why: at one env, gymnasium's HalfCheetah step is ~1.3x MuJoCo's physics and rlperf's whole
step ~2.9x (docs/continuous.md, "Speed"); the physics of one env cannot use a second core, and
env worker processes cost more in hand-over than they save on two. MuJoCo 4's
``mujoco.batch.Batch`` keeps each env's physics state in one row and runs ``mj_step`` over the
rows on a thread pool, bit-identical to a loop over one ``MjData`` per env at any thread count
(its docstring). What gymnasium's env adds around the physics (observation, reward,
termination, the time limit, the reset noise) is here numpy over the whole batch: no Python per
env and step.

The formulas are those of gymnasium's v5 classes (``HalfCheetahEnv``, ``HopperEnv``,
``Walker2dEnv``), with their parameters read from a gymnasium env made with the same options,
so ``--env-option ctrl_cost_weight=0.2`` means what it means to ``gymnasium.make``.
tests/envs/test_mujoco_batch.py steps gymnasium's own envs and this one with the same seeds and
actions and asserts equal observations, rewards, flags and infos, bit for bit, across resets.

Seeds: env ``i`` of ``reset(seed=s)`` draws its reset noise from ``np_random(s + i)`` as
gymnasium's vector envs seed their sub-envs; autoreset continues that generator.
Autoreset: ``SAME_STEP`` with the dense ``final_obs``, episode statistics of the env's own
rewards (``envs/episodes.py``), as every rlperf env. ``render`` is not offered: ``rlperf eval``
films through gymnasium's own env.

Options: the env's gymnasium keywords, and ``batch_threads`` (MuJoCo's threads; default: the
cores this process may use, shared with the other ranks on the machine, at most one per env).
"""

from __future__ import annotations

import importlib.util
import os
import time
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rlperf.config import ConfigError
from rlperf.cores import usable_cores
from rlperf.envs.contract import ActionCheck, reseed
from rlperf.envs.episodes import finished_infos
from rlperf.envs.gym_adapter import quiet_mujoco
from rlperf.envs.registry import GYM_PREFIX, EnvOptionError, UnknownEnvError


@dataclass(frozen=True)
class Locomotion:
    """How one gymnasium v5 class turns the physics into a step's result."""

    healthy: str  # "" (never ends), "hopper" (state, z and angle ranges) or "walker" (z, angle)
    clip_qvel: bool  # the observation's velocities clipped to +-10
    normal_qvel_noise: bool  # reset velocity noise: scale * N(0, 1), else uniform(+-scale)


# gymnasium class name -> its formulas (gymnasium/envs/mujoco/*_v5.py).
KINDS = {
    "HalfCheetahEnv": Locomotion(healthy="", clip_qvel=False, normal_qvel_noise=True),
    "HopperEnv": Locomotion(healthy="hopper", clip_qvel=True, normal_qvel_noise=False),
    "Walker2dEnv": Locomotion(healthy="walker", clip_qvel=True, normal_qvel_noise=False),
}
SUPPORTED = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5")


def gym_id(env: str) -> str:
    """The gymnasium id of rlperf env name ``env`` (``gym:Hopper-v5`` -> ``Hopper-v5``).

    Raises:
        UnknownEnvError: not one of :data:`SUPPORTED` (one line, naming them).
    """
    task = env[len(GYM_PREFIX) :] if env.startswith(GYM_PREFIX) else env
    if task not in SUPPORTED:
        raise UnknownEnvError(
            f"--vec-backend mujoco steps {', '.join('gym:' + s for s in SUPPORTED)}, not "
            f"{env!r}: use --vec-backend serial for other envs"
        )
    return task


def batch_available() -> bool:
    """Whether MuJoCo >= 4.0's ``mujoco.batch`` is installed (found, not imported)."""
    return (
        importlib.util.find_spec("mujoco") is not None
        and importlib.util.find_spec("mujoco.batch") is not None
    )


def batch_steps(env: str, options: dict[str, Any]) -> bool:
    """Whether :func:`make_mujoco_vec` steps rlperf env name ``env`` with ``options``: one of
    :data:`SUPPORTED`, no ``wrappers``, MuJoCo >= 4.0 (``--vec-backend auto``)."""
    task = env[len(GYM_PREFIX) :] if env.startswith(GYM_PREFIX) else None
    return task in SUPPORTED and "wrappers" not in options and batch_available()


def make_mujoco_vec(
    env: str, num_envs: int, seed: int | None = None, **options: Any
) -> MujocoBatchVecEnv:
    """:class:`MujocoBatchVecEnv` for rlperf env name ``env``, reset with ``seed``.

    Raises:
        ConfigError: MuJoCo older than 4.0 (no ``mujoco.batch``), or none (one line).
        UnknownEnvError: ``env`` is not one of :data:`SUPPORTED`.
        EnvOptionError: an option gymnasium's env does not take, ``wrappers`` (the batch has no
            per-env env to wrap), or a bad ``batch_threads`` (one line).
    """
    task = gym_id(env)
    if not batch_available():
        raise ConfigError(
            "--vec-backend mujoco needs MuJoCo >= 4.0 for mujoco.batch "
            "(Python >= 3.11): pip install 'rlperf[mujoco]', or train with --vec-backend serial"
        )
    quiet_mujoco(task)
    options = dict(options)
    if "wrappers" in options:
        raise EnvOptionError(
            "--vec-backend mujoco takes no wrappers option (it has no per-env gymnasium env to "
            "wrap): use --vec-backend serial"
        )
    threads = options.pop("batch_threads", None)
    if threads is None:
        # Ranks on this machine (torchrun's LOCAL_WORLD_SIZE) share its cores.
        ranks = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
        threads = max(1, min(num_envs, usable_cores() // ranks))
    elif not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise EnvOptionError(f"batch_threads must be an integer >= 1, got {threads!r}")
    vec = MujocoBatchVecEnv(task, num_envs, threads, options)
    vec.reset(seed=seed)
    return vec


class MujocoBatchVecEnv(VectorEnv):
    """``num_envs`` envs of gymnasium id ``task`` on one ``mujoco.batch.Batch`` of ``threads``
    threads, as a gymnasium 1.x vector env with SAME_STEP autoreset (module docstring).

    Observations (N, obs) float64 and rewards (N,) float64 as gymnasium's envs give them;
    actions (N, nu) in the Box, float32 or float64.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}

    def __init__(self, task: str, num_envs: int, threads: int, options: dict[str, Any]) -> None:
        from mujoco.batch import Batch

        try:
            env = gymnasium.make(task, **options)
        except TypeError as e:
            raise EnvOptionError(f"env 'gym:{task}': {e}") from e
        u: Any = env.unwrapped
        self.kind = KINDS[type(u).__name__]
        self.num_envs, self.threads = num_envs, threads
        self.max_episode_steps = env.spec.max_episode_steps if env.spec else None
        self.single_observation_space = u.observation_space
        self.single_action_space = u.action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._check_actions = ActionCheck(self.action_space)
        self._frame_skip, self._dt = u.frame_skip, u.dt
        self._init_qpos, self._init_qvel = u.init_qpos.copy(), u.init_qvel.copy()
        self._noise = u._reset_noise_scale
        self._forward_weight, self._ctrl_weight = u._forward_reward_weight, u._ctrl_cost_weight
        self._first = 1 if u._exclude_current_positions_from_observation else 0
        if self.kind.healthy:
            self._healthy_reward = u._healthy_reward
            self._terminate = u._terminate_when_unhealthy
            self._z_range, self._angle_range = u._healthy_z_range, u._healthy_angle_range
            # Walker2d has no state range: every state is within (-inf, inf).
            self._state_range: tuple[float, float] = getattr(
                u, "_healthy_state_range", (-np.inf, np.inf)
            )
        self._batch = Batch(u.model, nsim=num_envs, nthread=threads)
        env.close()
        self._qpos, self._qvel = self._batch.bind("qpos"), self._batch.bind("qvel")
        self._ctrl = self._batch.bind("ctrl")
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
        return self._observe(), self._reset_infos(rows)

    def step(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        actions = self._check_actions(actions)
        qpos, qvel = self._qpos, self._qvel
        x_before = qpos[:, 0].copy()
        self._ctrl[:] = actions
        self._batch.step(nstep=self._frame_skip)
        x_after = qpos[:, 0].copy()
        # The order of gymnasium's scalar arithmetic, over the batch: the same bits. The control
        # cost stays in the action's dtype, as np.sum(np.square(action)) gives it there.
        x_velocity = (x_after - x_before) / self._dt
        forward = self._forward_weight * x_velocity
        ctrl_cost = self._ctrl_weight * np.sum(np.square(actions), axis=1)
        infos: dict[str, Any] = {"x_position": x_after}
        if self.kind.healthy:
            healthy = self._healthy(qpos, qvel)
            survive = healthy * self._healthy_reward
            rewards = (forward + survive) - ctrl_cost
            terminated = ~healthy if self._terminate else np.zeros(self.num_envs, np.bool_)
            infos["z_distance_from_origin"] = qpos[:, 1] - self._init_qpos[1]
        else:
            rewards = forward - ctrl_cost
            terminated = np.zeros(self.num_envs, dtype=np.bool_)
        infos["x_velocity"], infos["reward_forward"] = x_velocity, forward
        infos["reward_ctrl"] = -ctrl_cost
        if self.kind.healthy:
            infos["reward_survive"] = survive
        self._steps += 1
        self._returns += rewards
        truncated = (self._steps >= self.max_episode_steps if self.max_episode_steps
                     else np.zeros(self.num_envs, dtype=np.bool_))  # fmt: skip
        obs = self._observe()
        done = terminated | truncated
        ones = np.ones(self.num_envs, dtype=np.bool_)
        if done.any():
            # gymnasium's SyncVectorEnv: a finished row's step infos go to final_info; the
            # batch's own entries for it are its reset's (x_position, z_distance_from_origin).
            final_info = {}
            for key, value in infos.items():
                final_info[key] = np.where(done, value, 0)
                final_info[f"_{key}"] = done.copy()
            ended = finished_infos(obs, done.copy(), self._returns, self._steps, self._start_s,
                                   final_info)  # fmt: skip
            rows = np.flatnonzero(done)
            self._reset_rows(rows)
            obs[rows] = self._observe()[rows]
            kept = ~done
            reset_info = self._reset_infos(rows)
            for key in list(infos):
                if key in reset_info:
                    infos[key] = np.where(kept, infos[key], reset_info[key])
                    infos[f"_{key}"] = ones.copy()
                else:
                    infos[key] = np.where(kept, infos[key], 0)
                    infos[f"_{key}"] = kept.copy()
            infos.update(ended)
        else:
            for key in list(infos):
                infos[f"_{key}"] = ones.copy()
        return obs, rewards, terminated, truncated, infos

    def _healthy(self, qpos: np.ndarray, qvel: np.ndarray) -> np.ndarray:
        """(N,) bool: gymnasium's ``is_healthy`` after the step, over the batch."""
        z, angle = qpos[:, 1], qpos[:, 2]
        (min_z, max_z), (min_angle, max_angle) = self._z_range, self._angle_range
        healthy = (min_z < z) & (z < max_z) & (min_angle < angle) & (angle < max_angle)
        if self.kind.healthy == "hopper":
            lo, hi = self._state_range
            state = np.concatenate((qpos[:, 2:], qvel), axis=1)  # state_vector()[2:]
            healthy &= ((lo < state) & (state < hi)).all(axis=1)
        return healthy

    def _observe(self) -> np.ndarray:
        """(N, obs) float64: the positions (without x) and the velocities (clipped for hopper
        and walker), as ``_get_obs``."""
        qvel = np.clip(self._qvel, -10, 10) if self.kind.clip_qvel else self._qvel
        return np.concatenate((self._qpos[:, self._first :], qvel), axis=1)

    def _reset_rows(self, rows: np.ndarray) -> None:
        """``mj_resetData`` then ``reset_model``'s noise for ``rows``, each from its own
        generator in gymnasium's draw order (a loop over the resetting envs only)."""
        if len(rows) == 0:
            return
        import mujoco

        nq, nv = len(self._init_qpos), len(self._init_qvel)
        qpos = np.empty((len(rows), nq))
        qvel = np.empty((len(rows), nv))
        low, high = -self._noise, self._noise
        for j, i in enumerate(rows):
            rng = self._rngs[i]
            qpos[j] = self._init_qpos + rng.uniform(low=low, high=high, size=nq)
            if self.kind.normal_qvel_noise:
                qvel[j] = self._init_qvel + self._noise * rng.standard_normal(nv)
            else:
                qvel[j] = self._init_qvel + rng.uniform(low=low, high=high, size=nv)
        # mj_resetData's defaults (time, controls, warmstart zeroed), then the noisy state;
        # gymnasium's mj_forward after set_state only fills fields derived from this state.
        ids = None if len(rows) == self.num_envs else rows.astype(np.int32)
        self._batch.reset(ids, stage=mujoco.mjtStage.mjSTAGE_NONE.value)
        self._qpos[rows], self._qvel[rows] = qpos, qvel
        self._steps[rows], self._returns[rows] = 0, 0.0
        self._start_s[rows] = time.perf_counter()

    def _reset_infos(self, rows: np.ndarray) -> dict[str, Any]:
        """``_get_reset_info`` of ``rows`` (zeros, masked False, elsewhere)."""
        mask = np.zeros(self.num_envs, dtype=np.bool_)
        mask[rows] = True
        out = {"x_position": np.where(mask, self._qpos[:, 0], 0.0), "_x_position": mask}
        if self.kind.healthy:
            z = self._qpos[:, 1] - self._init_qpos[1]
            out["z_distance_from_origin"] = np.where(mask, z, 0.0)
            out["_z_distance_from_origin"] = mask.copy()
        return out

    def close(self, **kwargs: Any) -> None:
        self.closed = True
