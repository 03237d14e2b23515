"""gymnasium 1.x's vector-env contract, the parts every rlperf env checks the same way.

- :class:`ActionCheck`: a batch of actions of the wrong shape or dtype raises one line naming
  the expected shape and dtype (ValueError for the shape, TypeError for the dtype), checked once
  per step on the whole batch, never per element. Values are not range-checked (that would be a
  pass over every element on every step): an out-of-range action is the caller's error.
- :func:`reseed`: ``reset(seed=...)`` sets ``np_random`` and ``np_random_seed`` together, as
  gymnasium's ``VectorEnv.reset`` does, so reading either later never replaces the generator.
- :func:`check_spaces`: observation and action spaces rlperf can batch (Box, Discrete,
  MultiDiscrete, MultiBinary, and Dict/Tuple of those); Graph, Sequence, OneOf and Text are
  refused at construction with one line naming the space and, where one exists, the wrapper
  that gives it a fixed-size form.
- :func:`final_obs_rows`: ``infos["final_obs"]`` of a Dict or Tuple observation space as
  gymnasium gives it (``gym:`` ids, and env workers wherever the env gives that form), an
  object array of each finished row's observation (None elsewhere). Spaces batched into one
  array keep rlperf's dense ``final_obs`` (the critic takes it whole); the trainer takes no
  Dict/Tuple observations, so there gymnasium's own form costs nothing and its info wrappers
  (``DictInfoToList``) can split it.
"""

from __future__ import annotations

import copy
import operator
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.spaces.utils import flatten_space
from gymnasium.utils import seeding
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import iterate

from rlperf.envs.spec import UnsupportedSpaceError

# Leaf spaces batched by gymnasium's batch_space into one array.
ARRAY_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
# Variable-size spaces: no fixed-shape batch exists.
VARIABLE_SPACES = (spaces.Graph, spaces.Sequence, spaces.OneOf, spaces.Text)


def _kinds(space: spaces.Space) -> tuple[str, str]:
    """numpy dtype kinds a batch of ``space`` may have, and how an error message names them."""
    if isinstance(space, spaces.MultiBinary):
        return "iub", "integer or bool"
    if isinstance(space, spaces.Box) and space.dtype is not None:
        kind = np.dtype(space.dtype).kind
        if kind == "f":
            return "f", "float"
        if kind == "b":
            return "b", "bool"
    return "iu", "integer"


class ActionCheck:
    """Checks a batch of actions against a *batched* action space (``env.action_space``).

    ``check(actions)`` returns ``actions`` as numpy arrays (the same structure for Dict/Tuple
    spaces) or raises ValueError (wrong shape, wrong keys or length) or TypeError (wrong dtype,
    wrong container), on one line naming the expected shape and dtype. ``per`` says what one row
    is, for the message (``"env"``; the grid says ``"agent row (3 maps x 5 agents)"``).
    """

    __slots__ = ("_shape", "_kinds", "_dtype_name", "_per", "_children", "_space", "_name")

    def __init__(self, space: spaces.Space, per: str = "env", name: str = "actions") -> None:
        self._space, self._per, self._name = space, per, name
        self._children: dict[Any, ActionCheck] | None = None
        if isinstance(space, spaces.Dict | spaces.Tuple):
            parts = (
                space.spaces.items() if isinstance(space, spaces.Dict) else enumerate(space.spaces)
            )
            self._children = {k: ActionCheck(s, per, f"{name}[{k!r}]") for k, s in parts}
        self._shape = space.shape
        self._kinds, self._dtype_name = _kinds(space)

    def __call__(self, actions: Any) -> Any:
        if self._children is not None:
            return self._structured(actions)
        batch = np.asarray(actions)
        if batch.ndim == 0 and self._shape:  # as gymnasium: a scalar is no batch (TypeError)
            raise TypeError(f"{self._name} must be {self._expected()}, got a scalar")
        if batch.shape != self._shape:
            raise ValueError(f"{self._name} must be {self._expected()}, got shape {batch.shape}")
        if batch.dtype.kind not in self._kinds:
            raise TypeError(f"{self._name} must be {self._expected()}, got dtype {batch.dtype}")
        return batch

    def _expected(self) -> str:
        return (
            f"a {self._shape} array of {self._dtype_name} dtype "
            f"(one {self._space_name()} action per {self._per})"
        )

    def _space_name(self) -> str:
        space = self._space
        if isinstance(space, spaces.MultiDiscrete) and space.nvec.ndim == 1:
            if np.all(space.nvec == space.nvec[0]) and np.all(space.start == 0):
                return f"Discrete({int(space.nvec[0])})"  # batch_space of Discrete(n)
        return str(space)

    def _structured(self, actions: Any) -> Any:
        children = self._children
        assert children is not None
        if isinstance(self._space, spaces.Dict):
            if not isinstance(actions, dict):
                raise TypeError(f"{self._name} must be a dict with keys {list(children)} for "
                                f"{self._space}, got {type(actions).__name__}")  # fmt: skip
            if set(actions) != set(children):
                raise ValueError(
                    f"{self._name} must have the keys {list(children)}, got {list(actions)}"
                )
            return {k: check(actions[k]) for k, check in children.items()}
        if not isinstance(actions, tuple | list):
            raise TypeError(f"{self._name} must be a tuple of {len(children)} batches for "
                            f"{self._space}, got {type(actions).__name__}")  # fmt: skip
        if len(actions) != len(children):
            raise ValueError(f"{self._name} must be a tuple of {len(children)} batches, got "
                             f"{len(actions)}")  # fmt: skip
        return tuple(check(a) for check, a in zip(children.values(), actions, strict=True))


def final_obs_rows(space: spaces.Space, final_obs: Any, done: np.ndarray) -> np.ndarray:
    """gymnasium's ``infos["final_obs"]``: an object array (N,) holding, where ``done`` (N,) is
    set, that row of the batch ``final_obs`` of the batched space ``space`` (a tuple or dict, its
    arrays copied), and None elsewhere. For Dict/Tuple spaces (module docstring); a loop over
    the rows, off the training path."""
    rows = np.full(len(done), None, dtype=object)
    for i, row in enumerate(iterate(space, final_obs)):
        if done[i]:
            rows[i] = copy.deepcopy(row)
    return rows


def reseed(env: VectorEnv, seed: int | None) -> None:
    """``env.reset(seed=seed)``'s seeding: ``np_random`` and ``np_random_seed`` from ``seed``
    (gymnasium's ``VectorEnv.reset``) and the action space; nothing when ``seed`` is None.

    Setting ``np_random`` alone leaves ``np_random_seed`` None, and gymnasium's property then
    replaces the generator with a fresh random one the first time anyone reads the seed.
    """
    if seed is None:
        return
    seed = operator.index(seed)  # numpy integers too, as np.random.default_rng took them
    env._np_random, env._np_random_seed = seeding.np_random(seed)
    env.action_space.seed(seed)


def _variable_part(space: spaces.Space) -> spaces.Space | None:
    """The first Graph, Sequence, OneOf or Text in ``space`` (inside Dict/Tuple too), or None
    when every part is one rlperf batches; a space of any other (custom) class is returned too."""
    if isinstance(space, VARIABLE_SPACES):
        return space
    if isinstance(space, spaces.Dict | spaces.Tuple):
        for sub in space.spaces.values() if isinstance(space, spaces.Dict) else space.spaces:
            found = _variable_part(sub)
            if found is not None:
                return found
        return None
    if isinstance(space, ARRAY_SPACES):
        return None
    return space


def _hint(space: spaces.Space, role: str) -> str:
    """The wrapper that makes an observation ``space`` batchable, when one exists."""
    if role == "observation":
        try:
            flat = flatten_space(space)
        except (NotImplementedError, TypeError, ValueError):  # a part with no flat form
            flat = None
        if isinstance(flat, spaces.Box):
            return (
                f"wrap the env in gymnasium.wrappers.FlattenObservation (a {flat} Box), e.g. "
                "--env-option wrappers=FlattenObservation for a gym: id"
            )
        return "map it to a fixed-size Box with a gymnasium.ObservationWrapper"
    return "use an env whose actions are Box, Discrete, MultiDiscrete, MultiBinary or Dict/Tuple"


def check_spaces(name: str, env: VectorEnv) -> None:
    """Raise :class:`UnsupportedSpaceError` (one line) unless ``env``'s single observation and
    action spaces are made only of Box, Discrete, MultiDiscrete, MultiBinary, Dict and Tuple."""
    for role, space in (
        ("observation", env.single_observation_space),
        ("action", env.single_action_space),
    ):
        part = _variable_part(space)
        if part is None:
            continue
        inside = "" if part is space else f" (inside {type(space).__name__})"
        raise UnsupportedSpaceError(
            f"env {name!r}: {role} space {part}{inside} has no fixed-size "
            f"batch, so rlperf's vector envs cannot take it: {_hint(space, role)}"
        )
