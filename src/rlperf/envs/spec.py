"""What the trainer needs to know about a vector environment, read once from its spaces.

:class:`EnvSpec` replaces ad-hoc reading of ``single_observation_space`` and
``single_action_space``: the observation's shape and storage dtype, the action space, and whether
the environment supplies an action mask.

Observations are stored in their own dtype when it is ``uint8`` (images, grid windows: a 1024-env
84x84x3 rollout of 128 steps is 0.7 GB as uint8 and 2.7 GB as float32) and as ``float32``
otherwise (float64 physics, small integer counts).

**Action masks** (the convention every rlperf environment follows): an environment with invalid
actions gives a boolean array of shape ``(num_envs, mask_width)`` (``mask_width`` = number of
discrete actions; for MultiDiscrete the sum of the component sizes, components concatenated),
True where the action may be taken, either as ``infos["action_mask"]`` from ``reset`` and
``step`` or as an ``action_mask`` attribute of the vector env read after each call. With
SAME_STEP autoreset the mask returned for a finished sub-environment is that of the first
observation of its next episode, like the observation itself.

**Observations into a given array** (optional): an environment with an ``obs_out`` attribute
(None by default) writes the observations of ``reset`` and ``step`` into the array it is set to
(C-contiguous, of the batch's shape and dtype) and returns that array, which the next call
overwrites. An env worker (``envs/workers``) sets it to its rows of shared memory, so the
observations are written once instead of built and then copied (the grid at 2048 rows: ~0.1 ms
of a ~1.3 ms step).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import VectorEnv

ACTION_MASK_KEY = "action_mask"


class UnsupportedSpaceError(ValueError):
    """The environment's observation or action space is one the trainer cannot handle."""


@dataclass(frozen=True)
class ActionSpec:
    """An action space, reduced to what the policy heads need.

    Attributes:
        kind: ``"discrete"``, ``"multidiscrete"`` or ``"box"``.
        nvec: choices per component (``(n,)`` for Discrete); empty for Box.
        dim: number of action components (1 for Discrete, len(nvec), or the Box size).
        low, high: Box bounds (actions are clipped to them before the env sees them).
    """

    kind: str
    nvec: tuple[int, ...] = ()
    dim: int = 1
    low: tuple[float, ...] = ()
    high: tuple[float, ...] = ()

    @property
    def discrete(self) -> bool:
        return self.kind != "box"

    @property
    def num_outputs(self) -> int:
        """Width of the actor's output: logits for every choice, or the Gaussian mean."""
        return sum(self.nvec) if self.discrete else self.dim

    @property
    def mask_width(self) -> int:
        return sum(self.nvec)

    @cached_property
    def _bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self.low, dtype=np.float32), np.asarray(self.high, dtype=np.float32)

    def to_env(self, actions: np.ndarray) -> np.ndarray:
        """Sampled actions (B, ...) as the environment takes them: Box actions clipped to
        their bounds (a Gaussian sample is unbounded); discrete ones unchanged."""
        if self.discrete:
            return actions
        low, high = self._bounds
        # np.clip's own dispatch costs ~2 us more than the two ufuncs it amounts to.
        return np.minimum(np.maximum(actions, low), high)

    @staticmethod
    def from_space(space: spaces.Space) -> ActionSpec:
        if isinstance(space, spaces.Discrete):
            if int(space.start) != 0:
                raise UnsupportedSpaceError(f"Discrete action space must start at 0, got {space}")
            return ActionSpec("discrete", (int(space.n),), 1)
        if isinstance(space, spaces.MultiDiscrete) and space.nvec.ndim == 1:
            nvec = tuple(int(n) for n in space.nvec)
            return ActionSpec("multidiscrete", nvec, len(nvec))
        if isinstance(space, spaces.Box) and len(space.shape) == 1:
            low = tuple(float(v) for v in space.low)
            high = tuple(float(v) for v in space.high)
            return ActionSpec("box", (), int(space.shape[0]), low, high)
        raise UnsupportedSpaceError(
            f"action space {space} is not supported: need Discrete, 1-D MultiDiscrete or 1-D Box"
        )


@dataclass(frozen=True)
class EnvSpec:
    """Observation and action description of a vector environment.

    Attributes:
        num_envs: sub-environments stepped as one batch.
        obs_shape: one observation's shape, e.g. ``(4,)`` or ``(3, 64, 64)``.
        obs_dtype: storage dtype, ``np.uint8`` or ``np.float32``.
        action: the action space.
        has_mask: the env supplies action masks (see the module docstring).
    """

    num_envs: int
    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype
    action: ActionSpec
    has_mask: bool = False

    @property
    def flat_obs(self) -> bool:
        return len(self.obs_shape) == 1

    @property
    def image_obs(self) -> bool:
        """(C, H, W) observations."""
        return len(self.obs_shape) == 3

    def describe_obs(self) -> str:
        """E.g. ``(3, 64, 64) uint8``."""
        return f"{self.obs_shape} {np.dtype(self.obs_dtype).name}"

    @staticmethod
    def from_env(env: VectorEnv, reset_infos: dict[str, Any] | None = None) -> EnvSpec:
        """The spec of ``env``; ``reset_infos`` (from a reset) tells whether masks come in infos.

        Raises:
            UnsupportedSpaceError: for a non-Box observation (the message names gymnasium's
                ``FlattenObservation``) or an unsupported action space.
        """
        obs_space = env.single_observation_space
        if not isinstance(obs_space, spaces.Box):
            # rlperf's envs batch Dict/Tuple/Discrete observations (envs/contract.py); the
            # policies take one array, which gymnasium's FlattenObservation makes of them.
            raise UnsupportedSpaceError(
                f"observation space {obs_space} is not supported by the trainer's policies, "
                "which take a Box: wrap the env in gymnasium.wrappers.FlattenObservation "
                "(e.g. a gymnasium id registered with it)"
            )
        dtype = np.dtype(np.uint8) if obs_space.dtype == np.uint8 else np.dtype(np.float32)
        has_mask = read_action_mask(env, reset_infos or {}) is not None
        return EnvSpec(
            num_envs=int(env.num_envs),
            obs_shape=tuple(int(d) for d in obs_space.shape),
            obs_dtype=dtype,
            action=ActionSpec.from_space(env.single_action_space),
            has_mask=has_mask,
        )


def read_action_mask(env: VectorEnv, infos: dict[str, Any]) -> np.ndarray | None:
    """The current ``(num_envs, mask_width)`` bool action mask, or None when there is none."""
    mask = infos.get(ACTION_MASK_KEY) if infos else None
    if mask is None:
        mask = getattr(env, ACTION_MASK_KEY, None)
    return mask
