"""CartPole-v1 as batched torch code on any device: ``envs/cartpole.py``'s env, step for step.

Physics, reward, termination thresholds, the 500-step time limit and the observations are the
numpy env's (its constants, its float64 arithmetic in its order of operations). On the CPU the
two agree bit for bit except where torch's and numpy's ``sin``/``cos`` differ in the last bit
(up to a few float64 arguments in a thousand, on [-3, 3]): a step from the same state then
differs by an ulp or so, and CartPole's instability grows such a difference over an episode,
so a test comparing the two copies the reference's state into this env before each step
(tests/envs/test_device_envs.py).
The reset states are uniform on [-0.05, 0.05) as the numpy env's, drawn from the env's torch
generator instead of numpy's: the same distribution, not the same numbers.
"""

from __future__ import annotations

import torch

from rlperf.envs.cartpole import (
    FORCE_MAG,
    GRAVITY,
    HALF_POLE_LENGTH,
    MASS_POLE,
    MAX_EPISODE_STEPS,
    OBSERVATIONS,
    POLE_MASS_LENGTH,
    RESET_BOUND,
    TAU_S,
    THETA_THRESHOLD_RAD,
    TOTAL_MASS,
    X_THRESHOLD,
    CartPoleVec,
)
from rlperf.envs.device.base import DeviceVecEnv


class CartPoleTorch(DeviceVecEnv):
    """Batched CartPole on ``device``; options as :class:`~rlperf.envs.cartpole.CartPoleVec`'s.

    Attributes:
        state: writable (num_envs, 4) float64 view: x, x_dot, theta, theta_dot.
    """

    state_names = ("_state_t",)
    truncates = True

    def __init__(
        self,
        num_envs: int,
        max_episode_steps: int = MAX_EPISODE_STEPS,
        observe: str = "full",
        *,
        device: str | torch.device = "cpu",
    ) -> None:
        super().__init__(CartPoleVec(num_envs, max_episode_steps, observe), device)
        self.max_episode_steps, self.observe_option = max_episode_steps, observe
        # The observed rows of the state as an index on the device (None: all of them): a
        # Python list would be copied to the device at every step, which a CUDA graph refuses.
        self._observed = (
            None
            if observe == "full"
            else torch.tensor(OBSERVATIONS[observe], dtype=torch.int64, device=self.device)
        )
        # (4, N) as the numpy env: each state variable one contiguous row.
        self._state_t = torch.zeros(4, num_envs, dtype=torch.float64, device=self.device)
        # The forces of actions 0 and 1 as float64 on the device: one where() picks them.
        self._push_left, self._push_right = torch.tensor(
            [-FORCE_MAG, FORCE_MAG], dtype=torch.float64, device=self.device
        )

    @property
    def state(self) -> torch.Tensor:
        return self._state_t.T

    def reset_noise_buffer(self, steps: int) -> torch.Tensor:
        """(steps, 4, N) float64: each step's draws in the state's layout."""
        return torch.empty(steps, 4, self.num_envs, dtype=torch.float64, device=self.device)

    def fill_reset_noise(self, noise: torch.Tensor) -> None:
        noise.uniform_(-RESET_BOUND, RESET_BOUND, generator=self.generator)

    def observe(self) -> torch.Tensor:
        st = self._state_t
        if self._observed is not None:
            st = st.index_select(0, self._observed)
        return st.T.to(torch.float32, memory_format=torch.contiguous_format)

    def _reset_where(self, done: torch.Tensor, noise: torch.Tensor) -> None:
        torch.where(done, noise, self._state_t, out=self._state_t)

    def _move(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, x_dot, theta, theta_dot = self._state_t.unbind(0)
        # As the numpy env: action 1 pushes right, any other left (no index out of range).
        force = torch.where(actions == 1, self._push_right, self._push_left)
        costheta = theta.cos()
        sintheta = theta.sin()
        temp = (force + POLE_MASS_LENGTH * theta_dot.square() * sintheta) / TOTAL_MASS
        thetaacc = (GRAVITY * sintheta - costheta * temp) / (
            HALF_POLE_LENGTH * (4.0 / 3.0 - MASS_POLE * costheta.square() / TOTAL_MASS)
        )
        xacc = temp - POLE_MASS_LENGTH * thetaacc * costheta / TOTAL_MASS
        # Euler integration, as gymnasium's default kinematics_integrator.
        new_x = x + TAU_S * x_dot
        new_x_dot = x_dot + TAU_S * xacc
        new_theta = theta + TAU_S * theta_dot
        new_theta_dot = theta_dot + TAU_S * thetaacc
        # new_* are new tensors (the physics above reads the old state, never writes it).
        torch.stack((new_x, new_x_dot, new_theta, new_theta_dot), out=self._state_t)
        # |v| > bound is v < -bound or v > bound exactly (abs only flips the sign bit).
        terminated = (new_x.abs() > X_THRESHOLD) | (new_theta.abs() > THETA_THRESHOLD_RAD)
        rewards = torch.ones(self.num_envs, dtype=torch.float32, device=self.device)
        return rewards, terminated

    def _truncated(self, episode_length: torch.Tensor) -> torch.Tensor:
        return episode_length >= self.max_episode_steps
