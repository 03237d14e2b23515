"""CartPole-v1 for a whole batch of environments at once, in numpy.

Physics, reward, termination thresholds, initial-state distribution and the 500-step time limit
are gymnasium's ``CartPole-v1`` (``gymnasium/envs/classic_control/cartpole.py``), computed in
float64 in the same operation order, so one step from the same state with the same action gives
bit-identical observations (tests/envs/test_cartpole.py checks this against gymnasium itself).

Autoreset: ``AutoresetMode.SAME_STEP``. When a sub-environment terminates or is truncated, the
observation returned for it by that same ``step`` is already the first observation of its next
episode; the last observation of the finished episode is in ``infos["final_obs"]`` (a dense
``(num_envs, 4)`` float32 array, valid where ``infos["_final_obs"]`` is True). PPO needs that
final observation to bootstrap the value of a truncated episode.

``observe="position"`` (``--env-option observe=position``) observes only the cart position and
the pole angle, as the CartPoleNoVel benchmark does: the velocities must be inferred from
history, so a feed-forward policy cannot balance the pole for long and a recurrent one can.
Physics, rewards and termination are unchanged.

Episode statistics are reported as gymnasium's ``RecordEpisodeStatistics`` vector wrapper does:
``infos["episode"] = {"r": returns, "l": lengths, "t": elapsed seconds}`` (float64, int64,
float64) with the mask ``infos["_episode"]``, and ``infos["final_info"]`` (``{}``: the env gives
no per-step infos) with ``infos["_final_info"]``, present only on steps where some episode
finished (``envs/episodes.py``). Every call returns fresh arrays. ``envs/contract.py``: actions
are checked for shape and dtype once per step, and ``reset(seed=s)`` makes
``np_random_seed == s``.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rlperf.envs.contract import ActionCheck, reseed
from rlperf.envs.episodes import finished_infos

GRAVITY = 9.8
MASS_CART = 1.0
MASS_POLE = 0.1
TOTAL_MASS = MASS_POLE + MASS_CART
HALF_POLE_LENGTH = 0.5
POLE_MASS_LENGTH = MASS_POLE * HALF_POLE_LENGTH
FORCE_MAG = 10.0
TAU_S = 0.02
THETA_THRESHOLD_RAD = 12 * 2 * math.pi / 360
X_THRESHOLD = 2.4
RESET_BOUND = 0.05
MAX_EPISODE_STEPS = 500
# Observed state variables per ``observe`` option: indices into (x, x_dot, theta, theta_dot).
OBSERVATIONS = {"full": (0, 1, 2, 3), "position": (0, 2)}


class CartPoleVec(VectorEnv):
    """Batched CartPole with gymnasium's vector API (``reset``/``step`` over ``num_envs``).

    Attributes:
        state: writable float64 array of shape ``(num_envs, 4)``: x, x_dot, theta, theta_dot.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(
        self, num_envs: int, max_episode_steps: int = MAX_EPISODE_STEPS, observe: str = "full"
    ) -> None:
        if num_envs <= 0:
            raise ValueError(f"num_envs must be positive, got {num_envs}")
        if isinstance(max_episode_steps, bool) or not isinstance(max_episode_steps, int):
            raise ValueError(f"max_episode_steps must be an integer, got {max_episode_steps!r}")
        if max_episode_steps <= 0:
            raise ValueError(f"max_episode_steps must be positive, got {max_episode_steps}")
        if observe not in OBSERVATIONS:
            raise ValueError(f"observe must be one of {', '.join(OBSERVATIONS)}, got {observe!r}")
        self.num_envs = num_envs
        self.max_episode_steps = max_episode_steps
        self.observe = observe
        # None: every state variable, in order (the common case pays no indexing).
        self._observed = None if observe == "full" else list(OBSERVATIONS[observe])
        high = np.array(
            [X_THRESHOLD * 2, np.inf, THETA_THRESHOLD_RAD * 2, np.inf], dtype=np.float32
        )
        if self._observed is not None:
            high = high[self._observed]
        self.single_observation_space = spaces.Box(-high, high, dtype=np.float32)
        self.single_action_space = spaces.Discrete(2)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        # Stored as (4, num_envs) so each state variable is one contiguous row for the
        # vectorised physics; `state` exposes the (num_envs, 4) transpose view.
        self._state_t = np.zeros((4, num_envs), dtype=np.float64)
        self.episode_steps = np.zeros(num_envs, dtype=np.int64)
        self.episode_returns = np.zeros(num_envs, dtype=np.float64)
        self._episode_start_s = np.zeros(num_envs, dtype=np.float64)
        self._check_actions = ActionCheck(self.action_space)

    # -- state ---------------------------------------------------------------------------
    @property
    def state(self) -> np.ndarray:
        return self._state_t.T

    @state.setter
    def state(self, value: np.ndarray) -> None:
        value = np.asarray(value, dtype=np.float64)
        if value.shape != (self.num_envs, 4):
            raise ValueError(f"state must have shape ({self.num_envs}, 4), got {value.shape}")
        self._state_t[...] = value.T

    def _reset_rows(self, mask: np.ndarray | None) -> None:
        if mask is None:
            self._state_t[...] = self.np_random.uniform(
                -RESET_BOUND, RESET_BOUND, size=(4, self.num_envs)
            )
            self.episode_steps[...] = 0
            self.episode_returns[...] = 0.0
            self._episode_start_s[...] = time.perf_counter()
        else:
            n = int(mask.sum())
            self._state_t[:, mask] = self.np_random.uniform(-RESET_BOUND, RESET_BOUND, size=(4, n))
            self.episode_steps[mask] = 0
            self.episode_returns[mask] = 0.0
            self._episode_start_s[mask] = time.perf_counter()

    # -- gymnasium API -------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        reseed(self, seed)
        self._reset_rows(None)
        return self._observation(), {}

    def _observation(self) -> np.ndarray:
        """(num_envs, obs_dim) float32 observation of the current state."""
        st = self._state_t if self._observed is None else self._state_t[self._observed]
        return st.T.astype(np.float32)

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        x, x_dot, theta, theta_dot = self._state_t
        force = np.where(self._check_actions(actions) == 1, FORCE_MAG, -FORCE_MAG)
        costheta = np.cos(theta)
        sintheta = np.sin(theta)
        temp = (force + POLE_MASS_LENGTH * np.square(theta_dot) * sintheta) / TOTAL_MASS
        thetaacc = (GRAVITY * sintheta - costheta * temp) / (
            HALF_POLE_LENGTH * (4.0 / 3.0 - MASS_POLE * np.square(costheta) / TOTAL_MASS)
        )
        xacc = temp - POLE_MASS_LENGTH * thetaacc * costheta / TOTAL_MASS
        # Euler integration, as gymnasium's default kinematics_integrator.
        new_x = x + TAU_S * x_dot
        new_x_dot = x_dot + TAU_S * xacc
        new_theta = theta + TAU_S * theta_dot
        new_theta_dot = theta_dot + TAU_S * thetaacc
        st = self._state_t
        st[0], st[1], st[2], st[3] = new_x, new_x_dot, new_theta, new_theta_dot

        terminated = (
            (new_x < -X_THRESHOLD)
            | (new_x > X_THRESHOLD)
            | (new_theta < -THETA_THRESHOLD_RAD)
            | (new_theta > THETA_THRESHOLD_RAD)
        )
        self.episode_steps += 1
        truncated = self.episode_steps >= self.max_episode_steps
        rewards = np.ones(self.num_envs, dtype=np.float32)
        self.episode_returns += 1.0
        obs = self._observation()

        done = terminated | truncated
        if not done.any():
            return obs, rewards, terminated, truncated, {}
        infos = finished_infos(
            obs, done, self.episode_returns, self.episode_steps, self._episode_start_s
        )
        self._reset_rows(done)
        rows = st.T[done]
        obs[done] = rows if self._observed is None else rows[:, self._observed]
        return obs, rewards, terminated, truncated, infos

    # -- checkpointing -------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """Everything needed to continue bit-identically (plain Python / numpy values)."""
        return {
            "state": self._state_t.copy(),
            "episode_steps": self.episode_steps.copy(),
            "episode_returns": self.episode_returns.copy(),
            "rng": self.np_random.bit_generator.state,
        }

    def set_state(self, saved: dict[str, Any]) -> None:
        self._state_t[...] = np.asarray(saved["state"])
        self.episode_steps[...] = np.asarray(saved["episode_steps"])
        self.episode_returns[...] = np.asarray(saved["episode_returns"])
        self.np_random.bit_generator.state = saved["rng"]
        self._episode_start_s[...] = time.perf_counter()
