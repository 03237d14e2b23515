"""Puzzles generated in batches and kept in a pool, so that resets cost a copy, not a search.

A batch of K boards is made at once: random walls, random distinct robot cells, then one
batched breadth-first search (``solver.first_depths``) to ``max_depth`` gives, for every robot
and cell, its optimal solution length. Each board then yields one puzzle: a wanted length drawn
uniformly from ``1..max_depth`` (the deepest length the board offers at or below it where it
has none that long), then a (target robot, target cell) pair drawn uniformly among those with
that length, never a cell a robot starts on (the target starts uncovered). Boards whose robots
cannot move at all yield none.

:func:`plan_generation` is the bounded attempt the factory makes first: it searches a few
hundred boards, raises a one-line ValueError when ``max_depth`` is deeper than any puzzle found
or the search grows too large, and sizes later batches from the work it measured.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from rlperf.envs.robots.board import random_walls, slide_lengths
from rlperf.envs.robots.solver import UNREACHED, SearchTooLargeError, first_depths

PROBE_BOARDS = 256  # boards the factory's bounded attempt searches at most
PROBE_CHUNK = 32
LAYER_BUDGET = 1 << 20  # configurations expanded per layer that a refill batch aims at
PROBE_LIMIT = 1 << 23  # a probe chunk expanding more than this: the settings are refused
MIN_BATCH, MAX_BATCH = 16, 1024  # boards per refill batch


@dataclass
class Puzzles:
    """A batch of puzzles (arrays share the first axis)."""

    walls: np.ndarray  # (n, B, B) uint8 wall bitmasks (board.WALL_BITS)
    robots: np.ndarray  # (n, R) int16 start cells
    target_robot: np.ndarray  # (n,) int8
    target_cell: np.ndarray  # (n,) int16
    depth: np.ndarray  # (n,) int8 optimal solution length, 1..max_depth

    def __len__(self) -> int:
        return len(self.depth)

    def take(self, index: np.ndarray | slice) -> Puzzles:
        return Puzzles(*(getattr(self, f.name)[index] for f in fields(self)))

    @staticmethod
    def concat(parts: list[Puzzles]) -> Puzzles:
        return Puzzles(
            *(np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(Puzzles))
        )

    def as_dict(self) -> dict[str, np.ndarray]:
        return {f.name: getattr(self, f.name).copy() for f in fields(self)}


def generate(
    rng: np.random.Generator, boards: int, board_size: int, num_robots: int, max_depth: int
) -> Puzzles:
    """Up to ``boards`` puzzles with optimal lengths in ``1..max_depth`` (one per board)."""
    cells = board_size * board_size
    walls = random_walls(rng, boards, board_size)
    start = np.argsort(rng.random((boards, cells)), axis=1)[:, :num_robots]
    depth, _ = first_depths(slide_lengths(walls), start, board_size, max_depth)
    # No target under a robot at the start: it would begin the episode hidden in the image.
    board_ix, robot_ix = np.arange(boards)[:, None, None], np.arange(num_robots)[:, None]
    depth[board_ix, robot_ix, start[:, None]] = UNREACHED
    flat = depth.reshape(boards, num_robots * cells)
    # offered[k, d + 1]: board k has a (robot, cell) at depth d (d = -1 unreached, 0 start).
    offered = np.zeros((boards, max_depth + 2), dtype=bool)
    offered[np.repeat(np.arange(boards), flat.shape[1]), flat.ravel().astype(np.int64) + 1] = True
    offered = offered[:, 2:]  # lengths 1..max_depth
    lengths = np.arange(1, max_depth + 1)
    wanted = rng.integers(1, max_depth + 1, boards)
    usable = offered & (lengths <= wanted[:, None])
    chosen = np.where(usable.any(1), max_depth - np.argmax(usable[:, ::-1], axis=1), 0)
    scores = np.where(flat == chosen[:, None], rng.random(flat.shape), -1.0)
    pick = np.argmax(scores, axis=1)
    keep = chosen > 0
    return Puzzles(
        walls=walls[keep],
        robots=start[keep].astype(np.int16),
        target_robot=(pick[keep] // cells).astype(np.int8),
        target_cell=(pick[keep] % cells).astype(np.int16),
        depth=chosen[keep].astype(np.int8),
    )


def plan_generation(board_size: int, num_robots: int, max_depth: int) -> int:
    """Check that ``max_depth`` can be generated; return the boards per refill batch.

    Raises:
        ValueError: one line, when no puzzle of ``max_depth`` moves turns up within
            :data:`PROBE_BOARDS` boards, or a search layer grows past :data:`PROBE_LIMIT`.
    """
    rng = np.random.default_rng(0)
    cells = board_size * board_size
    deepest, per_board, searched = 0, 1.0, 0
    while searched < PROBE_BOARDS and deepest < max_depth:
        walls = random_walls(rng, PROBE_CHUNK, board_size)
        start = np.argsort(rng.random((PROBE_CHUNK, cells)), axis=1)[:, :num_robots]
        try:
            depth, peak = first_depths(
                slide_lengths(walls), start, board_size, max_depth, PROBE_LIMIT
            )
        except SearchTooLargeError as e:
            raise ValueError(
                f"max_depth {max_depth} with {num_robots} robots on a {board_size}x"
                f"{board_size} board is too large a search ({e}); lower max_depth or num_robots"
            ) from None
        deepest = max(deepest, int(depth.max()))
        per_board = max(per_board, peak / PROBE_CHUNK)
        searched += PROBE_CHUNK
    if deepest < max_depth:
        raise ValueError(
            f"max_depth {max_depth} is deeper than any puzzle found on {searched} random "
            f"{board_size}x{board_size} boards with {num_robots} robots (deepest {deepest}); "
            f"use max_depth <= {deepest}"
        )
    return int(np.clip(LAYER_BUDGET // per_board, MIN_BATCH, MAX_BATCH))


class PuzzlePool:
    """Puzzles made ahead in batches of ``batch_boards`` boards, handed out in order.

    Everything drawn depends only on the generator's seed: batches are made in the same order
    whatever the number drawn at a time, and :meth:`get_state` keeps the unused puzzles and the
    generator, so a restored pool hands out the same puzzles.
    """

    def __init__(
        self,
        board_size: int,
        num_robots: int,
        max_depth: int,
        batch_boards: int,
        rng: np.random.Generator,
    ) -> None:
        self.board_size, self.num_robots, self.max_depth = board_size, num_robots, max_depth
        self.batch_boards = batch_boards
        self.rng = rng
        self._ready = self._empty()
        self.generated = 0  # puzzles made since the last reseed (statistics)

    def _empty(self) -> Puzzles:
        b, r = self.board_size, self.num_robots
        return Puzzles(
            np.zeros((0, b, b), np.uint8),
            np.zeros((0, r), np.int16),
            np.zeros(0, np.int8),
            np.zeros(0, np.int16),
            np.zeros(0, np.int8),
        )

    def reseed(self, rng: np.random.Generator) -> None:
        """Forget the unused puzzles and draw from ``rng`` from now on."""
        self.rng = rng
        self._ready = self._empty()
        self.generated = 0

    def __len__(self) -> int:
        return len(self._ready)

    def refill(self, at_least: int) -> None:
        """Generate batches until at least ``at_least`` puzzles are ready."""
        parts = [self._ready]
        ready = len(self._ready)
        while ready < at_least:
            made = generate(
                self.rng, self.batch_boards, self.board_size, self.num_robots, self.max_depth
            )
            parts.append(made)
            ready += len(made)
            self.generated += len(made)
        self._ready = Puzzles.concat(parts)

    def draw(self, n: int) -> Puzzles:
        """The next ``n`` puzzles (refilling first if fewer are ready)."""
        if len(self._ready) < n:
            self.refill(n)
        out = self._ready.take(slice(0, n))
        self._ready = self._ready.take(slice(n, None))
        return out

    def get_state(self) -> dict[str, Any]:
        return {"ready": self._ready.as_dict(), "rng": self.rng.bit_generator.state}

    def set_state(self, saved: dict[str, Any]) -> None:
        self._ready = Puzzles(**{k: np.asarray(v).copy() for k, v in saved["ready"].items()})
        self.rng.bit_generator.state = saved["rng"]
