"""Where every per-step array of a multiprocess vector env lives in one shared block.

The parent allocates one block of shared memory when the env is built (``RawArray``: an
unlinked file under ``/dev/shm``, inherited by descriptor, so nothing outlives the processes
even after a SIGKILL) and both sides view it through numpy arrays at fixed offsets: a worker
writes its rows of observations, rewards, flags, final observations and episode statistics in
place, and the parent reads them without a copy or a pickle. Worker ``w`` owns the contiguous
rows ``[w * rows_per_worker, (w + 1) * rows_per_worker)`` of every row array. A Tuple or Dict
space has one array per leaf (``obs/0``, ``obs/key``, ...); each numeric per-row ``infos`` entry
the probe saw has one (``info:<key>``, ``final_info:<key>``), with its ``_<key>`` flags.

Per-worker control words (command sequence numbers, busy and idle seconds) live in the same
block, one entry per worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from gymnasium import spaces

from rlperf.envs.contract import ARRAY_SPACES

ALIGN_BYTES = 64  # one cache line: two arrays never share a line

# Commands the parent writes to ``command[w]`` (see worker.py).
STEP, RESET, GET_STATE, SET_STATE, TEACHER, RENDER = 1, 2, 3, 4, 5, 6


@dataclass(frozen=True)
class ArraySpec:
    name: str
    shape: tuple[int, ...]
    dtype: str
    offset: int

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class Layout:
    """Named arrays at fixed offsets in one buffer of ``nbytes`` (picklable: sent to workers);
    ``row_arrays`` names those with one entry per row (the others have one per worker)."""

    arrays: tuple[ArraySpec, ...]
    nbytes: int
    row_arrays: frozenset[str] = frozenset()

    @staticmethod
    def of(fields: list[tuple[str, tuple[int, ...], Any]],
           row_arrays: frozenset[str] = frozenset()) -> Layout:  # fmt: skip
        """Lay out ``(name, shape, dtype)`` fields one after another, each cache-line aligned."""
        offset, specs = 0, []
        for name, shape, dtype in fields:
            spec = ArraySpec(name, tuple(int(d) for d in shape), np.dtype(dtype).str, offset)
            specs.append(spec)
            offset += -(-spec.nbytes // ALIGN_BYTES) * ALIGN_BYTES
        return Layout(tuple(specs), max(offset, ALIGN_BYTES), row_arrays)

    def views(self, buffer: Any) -> dict[str, np.ndarray]:
        """Numpy views of every array in ``buffer`` (anything with the buffer protocol)."""
        base = np.frombuffer(buffer, dtype=np.uint8, count=self.nbytes)
        return {
            a.name: base[a.offset : a.offset + a.nbytes].view(a.dtype).reshape(a.shape)
            for a in self.arrays
        }


# Bits of a worker's ``has`` word: which infos its last step (or reset) gave.
HAS_FINAL_OBS, HAS_EPISODE, HAS_FINAL_INFO, HAS_EXTRA = 1, 2, 4, 8
# With HAS_FINAL_OBS: a Tuple or Dict space's env gave its final_obs as gymnasium's object array
# of rows, which the shared block carries dense and the parent gives back as such.
HAS_FINAL_OBS_ROWS = 16
# The control-channel entry naming a gym: id's info entries a worker kept wider than the type
# their first row gave (gym_adapter.InfoTypes): {path of keys: that dtype}. Not an info key.
PROMOTED_KEY = "rlperf.promoted"

Path = tuple[Any, ...]  # Tuple indices and Dict keys from the root of a space to a leaf


def space_leaves(
    space: spaces.Space, what: str, path: Path = ()
) -> list[tuple[Path, spaces.Space]]:
    """The leaves of ``space`` (Box, Discrete, MultiDiscrete, MultiBinary) with their paths,
    Tuple and Dict walked in their own order.

    Raises:
        UnsupportedSpaceError: a space with no fixed-size batch (Graph, Sequence, OneOf, Text or
            one rlperf does not know), naming it and the wrapper that makes it usable.
    """
    if isinstance(space, ARRAY_SPACES):  # one array in shared memory
        return [(path, space)]
    if isinstance(space, spaces.Tuple):
        return [
            leaf for i, s in enumerate(space.spaces) for leaf in space_leaves(s, what, (*path, i))
        ]
    if isinstance(space, spaces.Dict):
        return [leaf for k, s in space.spaces.items() for leaf in space_leaves(s, what, (*path, k))]
    from rlperf.envs.spec import UnsupportedSpaceError

    where = "".join(f"[{p!r}]" for p in path)
    fix = (
        "wrap the env in gymnasium.wrappers.FlattenObservation"
        if isinstance(space, spaces.OneOf) and what == "observation"
        else f"wrap the env so that its {what}s are fixed-size arrays (gymnasium.wrappers."
        f"Transform{what.capitalize()} with a Box, Discrete, MultiDiscrete or MultiBinary space)"
    )
    raise UnsupportedSpaceError(
        f"{what} space{where} {type(space).__name__} ({space}) has no fixed-size batch for the "
        f"env workers' shared memory: {fix}"
    )


def leaf_name(prefix: str, path: Path) -> str:
    """The layout's name of the leaf at ``path`` of a space stored under ``prefix``."""
    return prefix + "".join(f"/{p}" for p in path)


def assemble(space: spaces.Space, arrays: Any, prefix: str,
             path: Path = ()) -> Any:  # fmt: skip
    """The batch of ``space`` as gymnasium's ``batch_space`` shapes it (a tuple or dict of arrays
    for Tuple and Dict), from the leaves' arrays named by :func:`leaf_name` (``arrays``: a
    mapping, or anything that indexes arrays by name)."""
    if isinstance(space, spaces.Tuple):
        return tuple(assemble(s, arrays, prefix, (*path, i)) for i, s in enumerate(space.spaces))
    if isinstance(space, spaces.Dict):
        return {k: assemble(s, arrays, prefix, (*path, k)) for k, s in space.spaces.items()}
    return arrays[leaf_name(prefix, path)]


def leaf_of(value: Any, path: Path) -> Any:
    """The part of a batch (tuple/dict of arrays) at ``path``."""
    for p in path:
        value = value[p]
    return value


def action_dtype(space: spaces.Space) -> np.dtype:
    """Actions in the space's own dtype, as the sub-envs take them: gymnasium's spaces check it
    (``Discrete(4, dtype=np.int32)`` does not contain an int64), and so may an env. A batch of
    another integer dtype (the trainer samples int64) is cast as it is written (ActionRows)."""
    return np.dtype(space.dtype)


@dataclass(frozen=True)
class InfoField:
    """A numeric per-row ``infos`` entry carried in shared memory.

    Attributes:
        key: its key in ``infos`` (or in ``infos["final_info"]``).
        shape: one row's shape (``()`` for a number a row).
        dtype: its dtype (numpy's ``str``).
        masked: the env gives ``_<key>`` with it (gymnasium's per-row presence flags).
    """

    key: str
    shape: tuple[int, ...]
    dtype: str
    masked: bool


@dataclass(frozen=True)
class EnvShape:
    """What the parent learns from a one-env probe of the environment, before any worker starts.

    Attributes:
        rows_per_env: rows one env contributes (the grid: its agents; others: 1).
        observation_space, action_space: one row's spaces.
        has_mask: the env supplies action masks (``envs/spec.py``).
        has_teacher: the env has a scripted teacher (``make_teacher``).
        has_state: the env supports ``get_state``/``set_state``.
        rewards_dtype: the dtype of the env's rewards (float32 for rlperf's, float64 for
            gymnasium's).
        infos: the numeric per-row ``infos`` keys of a reset and a step.
        final_infos: those of a step, as ``infos["final_info"]`` has them.
        render_mode: the env's ``render_mode`` (None: it does not render).
    """

    rows_per_env: int
    observation_space: spaces.Space
    action_space: spaces.Space
    has_mask: bool
    has_teacher: bool
    has_state: bool
    rewards_dtype: str = np.dtype(np.float32).str
    infos: tuple[InfoField, ...] = ()
    final_infos: tuple[InfoField, ...] = ()
    render_mode: str | None = None

    @property
    def mask_width(self) -> int:
        space = self.action_space
        if isinstance(space, spaces.Discrete):
            return int(space.n)
        return int(np.sum(cast(spaces.MultiDiscrete, space).nvec))  # masks are for these two

    @property
    def obs_leaves(self) -> list[tuple[Path, spaces.Space]]:
        return space_leaves(self.observation_space, "observation")

    @property
    def action_leaves(self) -> list[tuple[Path, spaces.Space]]:
        return space_leaves(self.action_space, "action")


def env_layout(shape: EnvShape, rows: int, num_workers: int) -> Layout:
    """The block of a multiprocess env with ``rows`` rows in all over ``num_workers`` workers."""
    row_fields: list[tuple[str, tuple[int, ...], Any]] = []
    for path, leaf in shape.obs_leaves:
        leaf_shape = cast(tuple[int, ...], leaf.shape)  # every leaf space has a shape
        row_fields.append((leaf_name("obs", path), (rows, *leaf_shape), leaf.dtype))
        row_fields.append((leaf_name("final_obs", path), (rows, *leaf_shape), leaf.dtype))
    for path, leaf in shape.action_leaves:
        row_fields.append((leaf_name("actions", path), (rows, *cast(tuple[int, ...], leaf.shape)),
                           action_dtype(leaf)))  # fmt: skip
    row_fields += [
        ("rewards", (rows,), shape.rewards_dtype),
        ("terminations", (rows,), np.bool_),
        ("truncations", (rows,), np.bool_),
        ("final_flags", (rows,), np.bool_),
        ("episode_r", (rows,), np.float64),
        ("episode_l", (rows,), np.int64),
        ("episode_t", (rows,), np.float64),
        ("episode_flags", (rows,), np.bool_),
        ("final_info_flags", (rows,), np.bool_),
    ]
    for prefix, fields in (("info", shape.infos), ("final_info", shape.final_infos)):
        for f in fields:
            row_fields.append((f"{prefix}:{f.key}", (rows, *f.shape), f.dtype))
            if f.masked:
                row_fields.append((f"{prefix}:_{f.key}", (rows,), np.bool_))
    if shape.has_mask:
        row_fields.append(("mask", (rows, shape.mask_width), np.bool_))
    if shape.has_teacher:
        row_fields.append(("teacher", (rows,), np.int64))
    control_fields: list[tuple[str, tuple[int, ...], Any]] = [
        ("command", (num_workers,), np.int64),
        ("command_seq", (num_workers,), np.int64),
        ("done_seq", (num_workers,), np.int64),
        ("has", (num_workers,), np.int8),  # HAS_* bits of the last step's infos
        # Which of shape.infos / shape.final_infos the worker's last infos had in shared memory.
        ("info_present", (num_workers, max(len(shape.infos), 1)), np.bool_),
        ("final_info_present", (num_workers, max(len(shape.final_infos), 1)), np.bool_),
        ("busy_s", (num_workers,), np.float64),
        ("idle_s", (num_workers,), np.float64),
    ]
    return Layout.of(row_fields + control_fields, frozenset(name for name, *_ in row_fields))
