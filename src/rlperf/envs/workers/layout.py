"""Where every per-step array of a multiprocess vector env lives in one shared block.

The parent allocates one block of shared memory when the env is built (``RawArray``: an
unlinked file under ``/dev/shm``, inherited by descriptor, so nothing outlives the processes
even after a SIGKILL) and both sides view it through numpy arrays at fixed offsets: a worker
writes its rows of observations, rewards, flags, final observations and episode statistics in
place, and the parent reads them without a copy or a pickle. Worker ``w`` owns the contiguous
rows ``[w * rows_per_worker, (w + 1) * rows_per_worker)`` of every row array.

Per-worker control words (command sequence numbers, busy and idle seconds) live in the same
block, one entry per worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from gymnasium import spaces

ALIGN_BYTES = 64  # one cache line: two arrays never share a line

# Commands the parent writes to ``command[w]`` (see worker.py).
STEP, RESET, GET_STATE, SET_STATE, TEACHER = 1, 2, 3, 4, 5


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


@dataclass(frozen=True)
class EnvShape:
    """What the parent learns from a one-env probe of the environment, before any worker starts.

    Attributes:
        rows_per_env: rows one env contributes (the grid: its agents; others: 1).
        observation_space, action_space: one row's spaces.
        has_mask: the env supplies action masks (``envs/spec.py``).
        has_teacher: the env has a scripted teacher (``make_teacher``).
        has_state: the env supports ``get_state``/``set_state``.
    """

    rows_per_env: int
    observation_space: spaces.Space
    action_space: spaces.Space
    has_mask: bool
    has_teacher: bool
    has_state: bool

    @property
    def mask_width(self) -> int:
        space = self.action_space
        if isinstance(space, spaces.Discrete):
            return int(space.n)
        return int(np.sum(cast(spaces.MultiDiscrete, space).nvec))  # masks are for these two

    @property
    def action_dtype(self) -> np.dtype:
        """Discrete actions as int64 (what the trainer samples); Box in the space's dtype."""
        if isinstance(self.action_space, spaces.Box):
            return np.dtype(self.action_space.dtype)
        return np.dtype(np.int64)


def env_layout(shape: EnvShape, rows: int, num_workers: int) -> Layout:
    """The block of a multiprocess env with ``rows`` rows in all over ``num_workers`` workers."""
    # Every space a pool carries (Box, Discrete, MultiDiscrete) has a shape.
    obs_shape = cast(tuple[int, ...], shape.observation_space.shape)
    obs_dtype = shape.observation_space.dtype
    action_shape = cast(tuple[int, ...], shape.action_space.shape)
    row_fields: list[tuple[str, tuple[int, ...], Any]] = [
        ("obs", (rows, *obs_shape), obs_dtype),
        ("actions", (rows, *action_shape), shape.action_dtype),
        ("rewards", (rows,), np.float32),
        ("terminations", (rows,), np.bool_),
        ("truncations", (rows,), np.bool_),
        ("final_obs", (rows, *obs_shape), obs_dtype),
        ("final_flags", (rows,), np.bool_),
        ("episode_r", (rows,), np.float64),
        ("episode_l", (rows,), np.int64),
        ("episode_t", (rows,), np.float64),
        ("episode_flags", (rows,), np.bool_),
    ]
    if shape.has_mask:
        row_fields.append(("mask", (rows, shape.mask_width), np.bool_))
    if shape.has_teacher:
        row_fields.append(("teacher", (rows,), np.int64))
    control_fields: list[tuple[str, tuple[int, ...], Any]] = [
        ("command", (num_workers,), np.int64),
        ("command_seq", (num_workers,), np.int64),
        ("done_seq", (num_workers,), np.int64),
        ("finished", (num_workers,), np.bool_),  # some episode ended in the last step
        ("busy_s", (num_workers,), np.float64),
        ("idle_s", (num_workers,), np.float64),
    ]
    return Layout.of(row_fields + control_fields, frozenset(name for name, *_ in row_fields))
