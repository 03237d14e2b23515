"""What one gymnasium MuJoCo v5 class adds around the physics, over the batch: the contract
each env's formulas follow (:class:`Task`) and the arithmetic several of them share.

Bit for bit: each formula keeps the order and dtypes of gymnasium's scalar arithmetic, so the
same operations run elementwise over the rows give the same bits. Two of gymnasium's calls
need care to stay equal over a batch: ``np.linalg.norm`` of a vector is the square root of
BLAS's dot product, which may fuse multiply-adds (:func:`norms`), and ``np.sum`` over a row is
numpy's pairwise sum (``axis=1`` over contiguous rows runs it row by row).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from rlperf.envs.mujoco_batch.physics import BatchPhysics

# A step's rewards (N,) float64, terminations (N,) bool and infos (each (N, ...)).
StepResult = tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]


class Task(ABC):
    """One gymnasium v5 class's formulas over the batch, its parameters read from ``env``
    (gymnasium's env, unwrapped, made with the user's options).

    Every array returned is new (no view of the physics' live arrays), rows first.
    """

    outputs: ClassVar[tuple[str, ...]] = ()  # derived MjData fields the formulas read
    contacts: ClassVar[bool] = False  # reads cfrc_ext (mj_rnePostConstraint after a step)

    def __init__(self, env: Any) -> None:
        self.init_qpos, self.init_qvel = env.init_qpos.copy(), env.init_qvel.copy()
        self.frame_skip, self.dt = env.frame_skip, env.dt

    @abstractmethod
    def draw_reset(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """One env's ``reset_model`` state, (nq,) and (nv,), drawn from ``rng`` in gymnasium's
        order."""

    def before_step(self, sim: BatchPhysics) -> Any:
        """What the step's formulas need from before the physics moves (positions), or None."""
        return None

    @abstractmethod
    def after_step(self, sim: BatchPhysics, before: Any, actions: np.ndarray) -> StepResult:
        """Rewards, terminations and the step's infos after the physics stepped ``actions``
        (N, nu), as the class's ``step``."""

    @abstractmethod
    def observe(self, sim: BatchPhysics) -> np.ndarray:
        """(N, obs) float64: ``_get_obs`` of every env."""

    def reset_infos(self, sim: BatchPhysics) -> dict[str, np.ndarray]:
        """``_get_reset_info`` of every env (the vector env keeps the reset rows')."""
        return {}


def noisy_state(
    rng: np.random.Generator,
    init_qpos: np.ndarray,
    init_qvel: np.ndarray,
    scale: float,
    normal_qvel: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """``reset_model``'s noise of most classes: positions plus uniform(+-scale), velocities plus
    ``scale * N(0, 1)`` where ``normal_qvel`` (HalfCheetah, Ant, InvertedDoublePendulum), else
    uniform(+-scale); positions drawn first."""
    qpos = init_qpos + rng.uniform(low=-scale, high=scale, size=len(init_qpos))
    if normal_qvel:
        qvel = init_qvel + scale * rng.standard_normal(len(init_qvel))
    else:
        qvel = init_qvel + rng.uniform(low=-scale, high=scale, size=len(init_qvel))
    return qpos, qvel


def norms(vectors: np.ndarray) -> np.ndarray:
    """(N,) ``np.linalg.norm`` of each row of ``vectors`` (N, k), bit for bit as gymnasium's
    call on one vector: ``sqrt(x.dot(x))``, where BLAS's dot may fuse multiply-adds that
    numpy's elementwise arithmetic does not. matmul's row-by-column case runs that same dot on
    each row."""
    rows = np.ascontiguousarray(vectors)
    return np.sqrt(np.matmul(rows[:, None, :], rows[:, :, None])[:, 0, 0])


def control_cost(weight: float, actions: np.ndarray) -> np.ndarray:
    """(N,) ``weight * np.sum(np.square(action))``, in the actions' dtype as gymnasium's is
    (``np.add.reduce`` is ``np.sum`` without its Python wrapper: this runs on every step)."""
    return weight * np.add.reduce(np.square(actions), axis=1)
