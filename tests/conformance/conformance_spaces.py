# Adapted from gymnasium's tests/spaces/utils.py (Gymnasium v1.4.0, commit 95a790e19).
# MIT License, Copyright (c) 2016 OpenAI, Copyright (c) 2022 Farama Foundation: LICENSE.gymnasium.
"""gymnasium's testing spaces, and ``gym:`` ids of a small env observing and acting in each.

gymnasium's vector tests hand ``SyncVectorEnv`` env functions of a ``GenericTestEnv`` with the
space under test; rlperf builds envs by name, so each space gets a registered gymnasium id
(``RlperfConformance/Space<i>-v0``) whose env samples its observations from the space and ends
its episodes every :data:`EPISODE_LENGTH` steps. Importing this module registers them, so env
workers reach them by gymnasium's ``module:id`` form (:func:`space_gym_name`). Each space is also
an env registered with ``rlperf.envs.register`` (:data:`SPACES_ENV`, option ``index``; the
conformance conftest registers it): gymnasium's ``SyncVectorEnv`` of the same env, as a user
registers a gymnasium env of their own. :func:`space_env` builds either on either backend.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.spaces import (  # noqa: I001
    Box,
    Dict,
    Discrete,
    Graph,
    MultiBinary,
    MultiDiscrete,
    OneOf,
    Sequence,
    Space,
    Text,
    Tuple,
)
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.wrappers.vector import RecordEpisodeStatistics

from rlperf.envs import make_vec
from rlperf.envs.workers import MultiprocessVecEnv

TESTING_FUNDAMENTAL_SPACES = [
    Discrete(3),
    Discrete(3, start=-1),
    Discrete(n=4, dtype=np.int32, start=1),
    Box(low=0.0, high=1.0),
    Box(low=0.0, high=np.inf, shape=(2, 2)),
    Box(low=np.array([-10.0, 0.0]), high=np.array([10.0, 10.0]), dtype=np.float64),
    Box(low=-np.inf, high=0.0, shape=(2, 1)),
    Box(low=0.0, high=np.inf, shape=(2, 1)),
    Box(low=0, high=255, shape=(2, 2, 3), dtype=np.uint8),
    Box(low=np.array([0, 0, 1]), high=np.array([1, 0, 1]), dtype=np.bool_),
    Box(
        low=np.array([-np.inf, -np.inf, 0, -10]),
        high=np.array([np.inf, 0, np.inf, 10]),
        dtype=np.int32,
    ),
    MultiDiscrete([2, 2]),
    MultiDiscrete([[2, 3], [3, 2]]),
    MultiDiscrete([2, 2], start=[10, 10]),
    MultiDiscrete([[2, 3], [3, 2]], start=[[10, 20], [30, 40]]),
    MultiDiscrete([2, 3], dtype=np.int8),
    MultiDiscrete([2, 3], dtype=np.uint16),
    MultiBinary(8),
    MultiBinary([2, 3]),
    Text(6),
    Text(min_length=3, max_length=6),
    Text(6, charset="abcdef"),
]
TESTING_FUNDAMENTAL_SPACES_IDS = [f"{space}" for space in TESTING_FUNDAMENTAL_SPACES]


TESTING_COMPOSITE_SPACES = [
    # Tuple spaces
    Tuple([Discrete(5), Discrete(4)]),
    Tuple(
        (
            Discrete(5),
            Box(
                low=np.array([0.0, 0.0]),
                high=np.array([1.0, 5.0]),
                dtype=np.float64,
            ),
        )
    ),
    Tuple((Discrete(5), Tuple((Box(low=0.0, high=1.0, shape=(3,)), Discrete(2))))),
    Tuple((Discrete(3), Dict(position=Box(low=0.0, high=1.0), velocity=Discrete(2)))),
    Tuple((Graph(node_space=Box(-1, 1, shape=(2, 1)), edge_space=None), Discrete(2))),
    # Dict spaces
    Dict(
        {
            "position": Discrete(5),
            "velocity": Box(
                low=np.array([0.0, 0.0]),
                high=np.array([1.0, 5.0]),
                dtype=np.float64,
            ),
        }
    ),
    Dict(
        position=Discrete(6),
        velocity=Box(
            low=np.array([0.0, 0.0]),
            high=np.array([1.0, 5.0]),
            dtype=np.float64,
        ),
    ),
    Dict(
        {
            "a": Box(low=0, high=1, shape=(3, 3)),
            "b": Dict(
                {
                    "b_1": Box(low=-100, high=100, shape=(2,)),
                    "b_2": Box(low=-1, high=1, shape=(2,)),
                }
            ),
            "c": Discrete(4),
        }
    ),
    Dict(
        a=Dict(
            a=Graph(node_space=Box(-100, 100, shape=(2, 2)), edge_space=None),
            b=Box(-100, 100, shape=(2, 2)),
        ),
        b=Tuple((Box(-100, 100, shape=(2,)), Box(-100, 100, shape=(2,)))),
    ),
    # Graph spaces
    Graph(node_space=Box(-1, 1, shape=(2,)), edge_space=None),
    Graph(node_space=Box(low=-100, high=100, shape=(3, 4)), edge_space=Discrete(5)),
    Graph(node_space=Discrete(5), edge_space=Box(low=-100, high=100, shape=(3, 4))),
    Graph(node_space=Discrete(3), edge_space=Discrete(4)),
    Graph(
        node_space=Dict({"node_feature_1": Discrete(5), "node_feature_2": MultiBinary(5)}),
        edge_space=Box(low=1, high=4),
    ),
    # Graph spaces with arbitrary node/edge spaces
    Graph(node_space=MultiBinary(4), edge_space=None),
    Graph(node_space=MultiDiscrete([3, 4, 2]), edge_space=Discrete(3)),
    Graph(node_space=Tuple((Box(-1, 1, shape=(2,)), Discrete(3))), edge_space=None),
    Graph(node_space=Discrete(4), edge_space=Tuple((Box(0, 1, shape=(2,)), Discrete(3)))),
    Graph(
        node_space=Discrete(3),
        edge_space=Dict({"weight": Box(0, 1, shape=()), "type": Discrete(4)}),
    ),
    Graph(
        node_space=Dict({"pos": Box(-10, 10, shape=(3,)), "label": Discrete(5)}),
        edge_space=Dict({"weight": Box(0, 1, shape=()), "type": Discrete(3)}),
    ),
    Graph(
        node_space=Tuple((Dict({"a": Discrete(3)}), MultiBinary(2))),
        edge_space=Tuple((Discrete(4), Box(0, 1, shape=(2,)))),
    ),
    # Note: Text, Sequence, Graph, and OneOf as node/edge spaces have broken
    # JSON serialization in Graph.to_jsonable/from_jsonable
    # Graph(node_space=Sequence(Discrete(3)), edge_space=None),
    # Graph(node_space=Discrete(3), edge_space=Sequence(Box(0, 1, shape=(2,)))),
    # Graph(
    #     node_space=Graph(node_space=Box(-1, 1, shape=(2,)), edge_space=None),
    #     edge_space=None,
    # ),
    # Graph(
    #     node_space=Discrete(3),
    #     edge_space=Graph(node_space=Box(-1, 1, shape=(2,)), edge_space=None),
    # ),
    # Graph(node_space=OneOf([Discrete(3), Box(0, 1)]), edge_space=None),
    # Graph(node_space=Discrete(3), edge_space=OneOf([Discrete(3), Box(0, 1)])),
    # Graph(node_space=Text(6), edge_space=None),
    # Graph(node_space=Discrete(3), edge_space=Text(6)),
    #
    # Sequence spaces
    Sequence(Discrete(4)),
    Sequence(Dict({"feature": Box(0, 1, (3,))})),
    Sequence(Graph(node_space=Box(-100, 100, shape=(2, 2)), edge_space=Discrete(4))),
    Sequence(Box(low=0.0, high=1.0), stack=True),
    Sequence(Dict({"a": Box(0, 1, (3,)), "b": Discrete(5)}), stack=True),
    # OneOf spaces
    OneOf([Discrete(3), Box(low=0.0, high=1.0)]),
    OneOf([MultiBinary(2), MultiDiscrete([2, 2])]),
]
TESTING_COMPOSITE_SPACES_IDS = [f"{space}" for space in TESTING_COMPOSITE_SPACES]

TESTING_SPACES: list[Space] = TESTING_FUNDAMENTAL_SPACES + TESTING_COMPOSITE_SPACES
TESTING_SPACES_IDS = TESTING_FUNDAMENTAL_SPACES_IDS + TESTING_COMPOSITE_SPACES_IDS

# Spaces gymnasium batches into a fixed-shape array (or a Tuple/Dict of them); the others have
# a dynamic shape: rlperf refuses them at construction, naming the space.
DYNAMIC_SPACES = (Graph, Sequence, OneOf, Text)
EPISODE_LENGTH = 3


def dynamic_part(space: Space) -> str | None:
    """The class name of the first Graph/Sequence/OneOf/Text in ``space`` (None: there is none)."""
    if isinstance(space, DYNAMIC_SPACES):
        return type(space).__name__
    if isinstance(space, (Tuple, Dict)):
        for sub in space.spaces if isinstance(space, Tuple) else space.spaces.values():
            found = dynamic_part(sub)
            if found is not None:
                return found
    return None


class SpaceEnv(gym.Env):
    """Observes samples of ``space``, acts in ``space`` (checking each action is in it), and
    terminates every :data:`EPISODE_LENGTH` steps with reward 1."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, space: Space) -> None:
        self.observation_space = space
        self.action_space = space
        self.count = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        if seed is not None:
            self.observation_space.seed(seed)
        self.count = 0
        return self.observation_space.sample(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        assert action in self.action_space, f"{action!r} not in {self.action_space}"
        self.count += 1
        return self.observation_space.sample(), 1.0, self.count == EPISODE_LENGTH, False, {}


def space_env_id(index: int) -> str:
    return f"RlperfConformance/Space{index}-v0"


def space_gym_name(index: int) -> str:
    """The ``gym:`` name of the space's id that env workers can build too: gymnasium's
    ``module:id`` form, which imports this module (registering the ids) first."""
    return f"gym:conformance_spaces:{space_env_id(index)}"


SPACES_ENV = "conformance-spaces"
# Which env each space test builds: its gym id, or SPACES_ENV; serially, or on workers.
SPACE_CASES = [("gym", "serial"), ("gym", "workers"), ("registered", "serial"),
               ("registered", "workers")]  # fmt: skip
SPACE_CASE_IDS = [f"{backend}-{kind}" for kind, backend in SPACE_CASES]


def space_vec(num_envs: int, index: int = 0) -> VectorEnv:
    """:data:`SPACES_ENV`'s factory: gymnasium's SyncVectorEnv of the space's env in SAME_STEP
    mode under gymnasium's RecordEpisodeStatistics (its ``final_obs`` is gymnasium's object
    array)."""
    env = gym.make_vec(space_env_id(index), num_envs, vectorization_mode="sync",
                       vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP})  # fmt: skip
    return RecordEpisodeStatistics(env)


def space_env(kind: str, backend: str, index: int, num_envs: int = 3) -> VectorEnv:
    """The space's env, reset with seed 0: ``kind`` "gym" (its gym id) or "registered"
    (:data:`SPACES_ENV`), serially or on workers (one env each: gymnasium's tests use 3 envs)."""
    name = space_gym_name(index) if kind == "gym" else SPACES_ENV
    options = {} if kind == "gym" else {"index": index}
    if backend == "serial":
        return make_vec(name, num_envs, seed=0, **options)
    return MultiprocessVecEnv(name, num_envs, num_envs, seed=0, options=options)


for _index, _space in enumerate(TESTING_SPACES):
    if space_env_id(_index) not in gym.registry:
        gym.register(space_env_id(_index), entry_point=lambda space=_space: SpaceEnv(space))


class CountEnv(gym.Env):
    """gymnasium's ``count_reset``/``count_step`` test env: observes and rewards a step count;
    terminates at ``max_count``, which gymnasium's test sets per sub-env with ``set_attr`` to
    ``[2, 3, 3]``; here the reset seed does it (sub-env ``i`` of ``reset(seed=0)`` is seeded
    ``i``: max_count 2 for sub-env 0, 3 for the others). With ``render_mode="rgb_array"`` it
    renders a 2x3 frame of its count (gymnasium's render tests use CartPole, whose frames need
    pygame)."""

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"]}

    def __init__(self, render_mode: str | None = None) -> None:
        self.observation_space = Discrete(5)
        self.action_space = Discrete(5)
        self.render_mode = render_mode
        self.count = 0
        self.max_count = 3

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        return np.full((2, 3, 3), self.count, dtype=np.uint8)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        if seed is not None:
            self.max_count = 2 if seed == 0 else 3
        self.count = 0
        return self.count, {}

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict]:
        self.count += 1
        return self.count, action, self.count == self.max_count, False, {}


COUNT_ENV_ID = "RlperfConformance/Count-v0"
# Its gym name for both backends (gymnasium's module:id form; see space_gym_name).
COUNT_GYM_NAME = f"gym:conformance_spaces:{COUNT_ENV_ID}"
# Envs that render rgb_array frames, as gymnasium's render tests need: name -> options.
RENDERING = {"robots": {}, COUNT_GYM_NAME: {"render_mode": "rgb_array"}}
if COUNT_ENV_ID not in gym.registry:
    gym.register(COUNT_ENV_ID, entry_point=CountEnv)
