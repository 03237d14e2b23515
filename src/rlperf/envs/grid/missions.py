"""Named missions and the random maps they are played on.

A map is ``map_size`` x ``map_size`` cells: a wall border, random interior wall segments, one hub
at the centre ``(map_size // 2, map_size // 2)`` and ``num_extractors`` extractors around it.

Map generation, for a batch of maps at once (every draw from the env's generator, in a fixed
order, so a seed gives the same maps):

1. Extractors take distinct random *slots*: cells with both coordinates even, at least 2 from
   the border and at least 3 (Chebyshev) from the hub. Slots are 2 apart, so no extractor is in
   another's 3x3 block.
2. Wall segments: ``round(wall_fraction * interior / mean length)`` of them, each at a uniform
   random interior cell, horizontal or vertical with probability 1/2, 1 to ``wall_length``
   cells long (cut at the border). The 3x3 blocks around the hub and every extractor are then
   cleared, so each of them has a free ring of 8 cells: an obstacle with a free ring never
   disconnects the free cells around it.
3. Distance fields from every extractor and the hub (``distances.py``). Free cells the hub
   cannot reach (pockets closed by walls) become walls.
4. A map is rejected and drawn again when an extractor's ring is cut off from the hub, fewer
   than ``num_agents`` free cells remain, or some path is ``MAX_DISTANCE`` moves long (so every
   distance is exact); after :data:`MAX_ATTEMPTS` rejections a map is drawn without interior
   walls (always valid: the factory checks that the agents fit, and no path in a 64 x 64 map
   without walls is that long).
5. Agents start on distinct random free cells (the ``num_agents`` highest of a uniform score
   per cell, in score order).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlperf.envs.grid.distances import MAX_DISTANCE, MAX_SOURCES, UNREACHABLE, distance_fields

MAX_ATTEMPTS = 8  # draws of a map with walls before it is drawn without interior walls


@dataclass(frozen=True)
class Mission:
    """One named task. Sizes here are defaults; ``make_grid`` options override some."""

    map_size: int
    """Cells per side, border included."""
    num_agents: int
    """Agents per map (agent rows of the vector env per map)."""
    num_extractors: int
    """Extractors per map; each gives one resource per use."""
    cooldown: int
    """Steps an extractor stays unusable after a use (0: usable every step)."""
    capacity: int
    """Resources an agent carries at most."""
    max_steps: int
    """Steps per episode; every agent of a map is truncated together at this step."""
    wall_fraction: float
    """Share of the interior the random wall segments cover, before clearing."""
    wall_length: int
    """Segments are 1 to this many cells long."""


MISSIONS: dict[str, Mission] = {
    # The workload: 16 agents share 15 extractors that rest 12 steps after each use, so at most
    # 15/13 resources a step per map; the teacher's agents compete for them. (15 extractors and
    # the hub are 16 sources: the distance fields' BFS runs on uint16 bit sets.)
    "extractor_hub_30": Mission(map_size=30, num_agents=16, num_extractors=15, cooldown=12,
                                capacity=4, max_steps=256, wall_fraction=0.12, wall_length=6),
    # Small and short, for tests and quick runs.
    "extractor_hub_12": Mission(map_size=12, num_agents=4, num_extractors=4, cooldown=6,
                                capacity=3, max_steps=64, wall_fraction=0.10, wall_length=3),
}  # fmt: skip
DEFAULT_MISSION = "extractor_hub_30"


@dataclass
class MapBatch:
    """``n`` generated maps (``E`` extractors, ``A`` agents, side ``P``).

    Attributes:
        walls: ``(n, P, P)`` bool.
        extractors: ``(n, E, 2)`` int64 (row, col), in row-major order of their cells.
        hub: ``(n, 2)`` int64 (row, col).
        agents: ``(n, A, 2)`` int64 (row, col) start cells.
        dist: ``(n, P, P, E + 1)`` uint8 distance fields, extractors then the hub.
    """

    walls: np.ndarray
    extractors: np.ndarray
    hub: np.ndarray
    agents: np.ndarray
    dist: np.ndarray


def hub_cell(map_size: int) -> tuple[int, int]:
    return map_size // 2, map_size // 2


def extractor_slots(map_size: int) -> np.ndarray:
    """``(K, 2)`` cells an extractor may take, row-major."""
    hub = np.array(hub_cell(map_size))
    coords = np.arange(2, map_size - 2, 2)
    slots = np.stack(np.meshgrid(coords, coords, indexing="ij"), -1).reshape(-1, 2)
    return slots[np.abs(slots - hub).max(1) >= 3]


def max_agents(map_size: int, num_extractors: int) -> int:
    """Agents a map takes at most: half its free cells without interior walls."""
    return ((map_size - 2) ** 2 - num_extractors - 1) // 2


def check_fits(map_size: int, num_agents: int, num_extractors: int) -> None:
    """Raise ValueError (one line) unless the extractors and agents fit a map of this size."""
    room = len(extractor_slots(map_size))
    if num_extractors > min(room, MAX_SOURCES - 1):
        raise ValueError(
            f"{num_extractors} extractors do not fit a {map_size}x{map_size} map "
            f"(room for {min(room, MAX_SOURCES - 1)}): choose a larger map_size"
        )
    most = max_agents(map_size, num_extractors)
    if num_agents > most:
        raise ValueError(
            f"num_agents {num_agents} does not fit a {map_size}x{map_size} map with "
            f"{num_extractors} extractors: at most {most} (half its free cells)"
        )


def generate_maps(rng: np.random.Generator, n: int, mission: Mission) -> MapBatch:
    """``n`` random maps for ``mission`` (see the module docstring for the procedure)."""
    size, num_ext, num_agents = mission.map_size, mission.num_extractors, mission.num_agents
    walls = np.zeros((n, size, size), bool)
    extractors = np.zeros((n, num_ext, 2), np.int64)
    dist = np.zeros((n, size, size, num_ext + 1), np.uint8)
    todo = np.arange(n)
    for attempt in range(MAX_ATTEMPTS + 1):
        fraction = mission.wall_fraction if attempt < MAX_ATTEMPTS else 0.0
        w, ext = _draw_layout(rng, len(todo), mission, fraction)
        hub = np.broadcast_to(np.array(hub_cell(size)), (len(todo), 1, 2))
        sources = np.concatenate([ext, hub], axis=1)
        obstacles = w.copy()
        maps = np.arange(len(todo))[:, None]
        obstacles[maps, sources[..., 0], sources[..., 1]] = True
        d = distance_fields(~obstacles, sources)
        from_hub = d[..., num_ext] != UNREACHABLE
        w |= ~obstacles & ~from_hub  # pockets closed by walls
        free = ~obstacles & from_hub
        ext_joined = from_hub[maps, ext[..., 0] - 1, ext[..., 1]].all(1)
        capped = (d == MAX_DISTANCE).any((1, 2, 3))  # a path may go on past the cap
        ok = ext_joined & (free.sum((1, 2)) >= num_agents) & ~capped
        done = todo[ok]
        walls[done], extractors[done], dist[done] = w[ok], ext[ok], d[ok]
        todo = todo[~ok]
        if not todo.size:
            break
    hub = np.broadcast_to(np.array(hub_cell(size), np.int64), (n, 2)).copy()
    obstacles = walls.copy()
    obstacles[np.arange(n)[:, None], extractors[..., 0], extractors[..., 1]] = True
    obstacles[np.arange(n), hub[:, 0], hub[:, 1]] = True
    agents = _spawn(rng, ~obstacles, num_agents)
    return MapBatch(walls, extractors, hub, agents, dist)


def _draw_layout(
    rng: np.random.Generator, n: int, mission: Mission, wall_fraction: float
) -> tuple[np.ndarray, np.ndarray]:
    """Walls ``(n, P, P)`` bool (border, segments, cleared blocks) and extractors ``(n, E, 2)``."""
    size, length = mission.map_size, mission.wall_length
    slots = extractor_slots(size)
    picks = np.argsort(rng.random((n, len(slots))), axis=1)[:, : mission.num_extractors]
    extractors = slots[np.sort(picks, axis=1)]
    walls = np.zeros((n, size, size), bool)
    walls[:, [0, -1], :] = True
    walls[:, :, [0, -1]] = True
    num_segments = round(wall_fraction * (size - 2) ** 2 / ((1 + length) / 2))
    if num_segments:
        y0 = rng.integers(1, size - 1, (n, num_segments, 1))
        x0 = rng.integers(1, size - 1, (n, num_segments, 1))
        vertical = rng.random((n, num_segments, 1)) < 0.5
        lengths = rng.integers(1, length + 1, (n, num_segments, 1))
        t = np.arange(length)
        ys, xs = y0 + vertical * t, x0 + ~vertical * t
        keep = (t < lengths) & (ys < size - 1) & (xs < size - 1)
        maps = np.broadcast_to(np.arange(n)[:, None, None], keep.shape)
        walls[maps[keep], ys[keep], xs[keep]] = True
    centres = np.concatenate([extractors, np.broadcast_to(hub_cell(size), (n, 1, 2))], axis=1)
    around = np.stack(np.meshgrid([-1, 0, 1], [-1, 0, 1], indexing="ij"), -1).reshape(9, 2)
    block = centres[:, :, None, :] + around  # (n, E + 1, 9, 2)
    walls[np.arange(n)[:, None, None], block[..., 0], block[..., 1]] = False
    return walls, extractors


def _spawn(rng: np.random.Generator, free: np.ndarray, num_agents: int) -> np.ndarray:
    """``(n, A, 2)`` distinct free start cells: the A highest uniform scores, in score order."""
    n, size, _ = free.shape
    scores = np.where(free.reshape(n, -1), rng.random((n, size * size)), -1.0)
    top = np.argpartition(-scores, num_agents - 1, axis=1)[:, :num_agents]
    order = np.argsort(-np.take_along_axis(scores, top, 1), axis=1)
    cells = np.take_along_axis(top, order, 1)
    return np.stack(np.divmod(cells, size), -1).astype(np.int64)
