"""Which gymnasium ids the batch steps, and the formulas of each (one :class:`Task` a v5 class)."""

from __future__ import annotations

from rlperf.envs.mujoco_batch.ant import Ant
from rlperf.envs.mujoco_batch.humanoid import Humanoid, HumanoidStandup
from rlperf.envs.mujoco_batch.locomotion import HalfCheetah, Hopper, Swimmer, Walker2d
from rlperf.envs.mujoco_batch.manipulators import Pusher, Reacher
from rlperf.envs.mujoco_batch.pendulums import InvertedDoublePendulum, InvertedPendulum
from rlperf.envs.mujoco_batch.task import Task

# gymnasium id -> its formulas: every MuJoCo v5 env gymnasium registers.
TASKS: dict[str, type[Task]] = {
    "HalfCheetah-v5": HalfCheetah,
    "Hopper-v5": Hopper,
    "Walker2d-v5": Walker2d,
    "Swimmer-v5": Swimmer,
    "Ant-v5": Ant,
    "Humanoid-v5": Humanoid,
    "HumanoidStandup-v5": HumanoidStandup,
    "InvertedPendulum-v5": InvertedPendulum,
    "InvertedDoublePendulum-v5": InvertedDoublePendulum,
    "Reacher-v5": Reacher,
    "Pusher-v5": Pusher,
}
SUPPORTED = tuple(TASKS)
