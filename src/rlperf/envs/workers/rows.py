"""Rows of the shared block as the parent reads and writes them at every step: a batch of whole
workers' rows (:class:`RowBatch`), the actions written into it (:class:`ActionRows`), and the
``infos`` put together from several workers' blocks as gymnasium's ``SyncVectorEnv`` would
(:func:`combine_infos`).
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

from rlperf.envs.contract import ActionCheck
from rlperf.envs.workers.layout import Path, assemble, leaf_name, leaf_of


class RowBatch:
    """The rows of some whole workers in the shared arrays, as ``send``/``recv`` use them at every
    step. Consecutive workers' rows are a slice and their arrays views made once (no copy): the
    pool keeps such a batch. Other sets index the rows, which copies at each read.

    Attributes:
        consecutive: the workers are consecutive (the rows a slice).
        workers: a slice or index list of the workers (for per-worker control words).
        rows: a slice or index array of the rows (for assignment).
        env_ids: the rows' indices, read-only (the batch is kept: callers get a copy).
    """

    def __init__(self, workers: tuple[int, ...], row_ids: np.ndarray,
                 views: dict[str, np.ndarray], row_arrays: frozenset[str]) -> None:  # fmt: skip
        first, count = workers[0], len(workers)
        self._views = views
        self.consecutive = workers == tuple(range(first, first + count))
        self.workers: Any = slice(first, first + count) if self.consecutive else list(workers)
        self.env_ids = row_ids[self.workers].ravel()
        self.env_ids.flags.writeable = False
        self.rows: Any = self.env_ids  # an index array (read-only serves to index)
        self._cached: dict[str, np.ndarray] | None = None
        if self.consecutive:
            self.rows = slice(int(self.env_ids[0]), int(self.env_ids[-1]) + 1)
            self._cached = {name: array[self.rows] for name, array in views.items()
                            if name in row_arrays}  # fmt: skip

    def __getitem__(self, name: str) -> np.ndarray:
        """Array ``name`` at these rows."""
        if self._cached is not None:
            return self._cached[name]
        return self._views[name][self.rows]

    def assemble(self, space: spaces.Space, prefix: str) -> Any:
        """The batch of ``space`` stored under ``prefix`` (``obs``, ``final_obs``) at these rows:
        one array, or a tuple/dict of arrays for a Tuple/Dict space (``layout.assemble``)."""
        if prefix in self._views:  # not a Tuple or Dict: the common case, one lookup
            return self[prefix]
        return assemble(space, _Rows(self), prefix)


class _Rows:
    """A :class:`RowBatch` as the mapping ``layout.assemble`` reads."""

    def __init__(self, batch: RowBatch) -> None:
        self.batch = batch

    def __getitem__(self, name: str) -> np.ndarray:
        return self.batch[name]


class ActionRows:
    """Writes a batch of actions for some rows into the shared block, each leaf of a Tuple/Dict
    space into its own array, after ``envs/contract.py``'s :class:`ActionCheck` of a batch of
    that many rows (the serial envs' check: the same errors on both backends)."""

    def __init__(self, space: spaces.Space, leaves: list[tuple[Path, spaces.Space]],
                 views: dict[str, np.ndarray]) -> None:  # fmt: skip
        self.space = space
        self.leaves = [(views[leaf_name("actions", path)], path) for path, _ in leaves]
        self.checks: dict[int, ActionCheck] = {}  # by rows: a sync step's and an async batch's

    def write(self, actions: Any, rows: slice | np.ndarray, count: int) -> None:
        """Check ``actions`` for ``count`` rows (ValueError/TypeError, nothing written) and
        write them to rows ``rows``."""
        check = self.checks.get(count)
        if check is None:
            check = self.checks[count] = ActionCheck(batch_space(self.space, count), per="row")
        checked = check(actions)
        for out, path in self.leaves:
            out[rows] = leaf_of(checked, path)


def copy_tree(value: Any) -> Any:
    """``value`` with every array copied (dicts and tuples rebuilt, anything else kept)."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, dict):
        return {k: copy_tree(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(copy_tree(v) for v in value)
    return value


def merge_infos(infos: dict[str, Any], extra: dict[str, Any]) -> None:
    """Add a worker's control-channel entries to the entries of its shared rows (nested dicts
    such as ``final_info`` merged key by key)."""
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(infos.get(key), dict):
            infos[key] = dict(infos[key])
            merge_infos(infos[key], value)
        else:
            infos[key] = value


def combine_infos(blocks: list[dict[str, Any]], rows: int) -> dict[str, Any]:
    """One ``infos`` for consecutive blocks of ``rows`` rows each, built as gymnasium's
    ``VectorEnv._add_info`` builds it from its sub-envs: an entry's array takes the dtype of the
    first block that has it (zeros, or None for objects, where a block lacks it), and values of
    later blocks are cast into it."""
    total, out = rows * len(blocks), cast(dict[str, Any], {})
    for b, block in enumerate(blocks):
        _place(out, block, slice(b * rows, (b + 1) * rows), total)
    return out


def retype_first(
    combined: dict[str, Any],
    blocks: list[dict[str, Any]],
    promoted: list[dict[tuple[str, ...], np.dtype]],
    path: tuple[str, ...],
) -> None:
    """Cast the combined entry at ``path`` to the type of the batch's first row that has it, as
    gymnasium's ``SyncVectorEnv`` types it, when the first block that has the entry kept it wider
    than that row's type (``promoted[b]``: block b's such entries, ``gym_adapter.InfoTypes``)."""
    for block, kept in zip(blocks, promoted, strict=True):
        node: Any = block
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node is None:
            continue  # this block lacks the entry: the next one's first row comes first
        if path in kept:
            parent = combined
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]] = parent[path[-1]].astype(kept[path])
        return


def _place(out: dict[Any, Any], block: dict[Any, Any], rows: slice, total: int) -> None:
    for key, value in block.items():
        if isinstance(value, dict):
            _place(out.setdefault(key, {}), value, rows, total)
        elif isinstance(value, tuple):  # a Tuple space's final_obs: place each part
            placed = out.get(key)
            parts = dict(enumerate(placed)) if isinstance(placed, tuple) else {}
            _place(parts, dict(enumerate(value)), rows, total)
            out[key] = tuple(parts[i] for i in range(len(value)))
        elif isinstance(value, np.ndarray) and value.ndim and len(value) == rows.stop - rows.start:
            if key not in out:
                trailing = (total, *value.shape[1:])
                out[key] = (np.full(trailing, None, object) if value.dtype == object
                            else np.zeros(trailing, value.dtype))  # fmt: skip
            out[key][rows] = value
        else:  # not one entry per row: nothing to place
            out[key] = value
