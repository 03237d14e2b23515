"""Slow, obviously-right references the tests hold the batched code to.

- :func:`reference_move`: one robot, one board, stepped cell by cell until a wall or a robot.
- :func:`reference_image`: one board drawn with Pillow's ImageDraw on a canvas ``SUPERSAMPLE``
  times larger and box-resized to ``image_size``, the way per-env RGB pipelines render (timed
  in stages as ``render/draw_grid`` ... ``render/resize`` in the process-wide profiler).

Pillow is imported here only, when the renderer is first used; the environment needs numpy
alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlperf.envs.robots.board import COL_STEP, ROW_STEP, WALL_BITS
from rlperf.envs.robots.render import (
    FLOOR,
    GRID,
    ROBOT_COLOURS,
    SUPERSAMPLE,
    TARGET_TILE,
    WALL,
    Geometry,
    disc_shape,
    star_shape,
)
from rlperf.timing import names
from rlperf.timing.sections import profile


def reference_move(walls: np.ndarray, robots: list[int], robot: int, direction: int) -> list[int]:
    """Robot cells after moving ``robot`` in ``direction`` on one board (``(B, B)`` bitmasks)."""
    b = walls.shape[0]
    row, col = divmod(robots[robot], b)
    occupied = {divmod(cell, b) for i, cell in enumerate(robots) if i != robot}
    while not walls[row, col] & WALL_BITS[direction]:
        nxt = (row + int(ROW_STEP[direction]), col + int(COL_STEP[direction]))
        if nxt in occupied:
            break
        row, col = nxt
    moved = list(robots)
    moved[robot] = row * b + col
    return moved


def _box(draw: Any, x0: int, y0: int, x1: int, y1: int, colour: tuple[int, ...]) -> None:
    """Fill output pixels ``[x0, x1) x [y0, y1)`` (ImageDraw rectangles include both ends)."""
    s = SUPERSAMPLE
    draw.rectangle([x0 * s, y0 * s, x1 * s - 1, y1 * s - 1], fill=colour)


def reference_image(
    walls: np.ndarray,
    robots: list[int] | np.ndarray,
    target_robot: int,
    target_cell: int,
    image_size: int,
) -> np.ndarray:
    """One board as an ``(image_size, image_size, 3)`` uint8 RGB array, drawn with Pillow."""
    from PIL import Image, ImageDraw

    b = walls.shape[0]
    g = Geometry.of(b, image_size)
    s, size = SUPERSAMPLE, image_size
    with profile(names.RENDER):
        canvas = Image.new("RGB", (size * s, size * s), FLOOR)
        draw = ImageDraw.Draw(canvas)
        with profile(names.RENDER_DRAW_GRID):
            for e in g.edges[:-1]:
                _box(draw, 0, e, size, e + 1, GRID)
                _box(draw, e, 0, e + 1, size, GRID)
        with profile(names.RENDER_DRAW_WALLS):
            lo, hi = g.band_lo.tolist(), g.band_hi.tolist()
            for r in range(b):
                for c in range(b):
                    cell = int(walls[r, c])
                    x0, x1 = g.segment(c)
                    y0, y1 = g.segment(r)
                    if cell & WALL_BITS[0]:
                        _box(draw, x0, lo[r], x1, hi[r], WALL)
                    if r == b - 1 and cell & WALL_BITS[2]:
                        _box(draw, x0, lo[b], x1, hi[b], WALL)
                    if cell & WALL_BITS[3]:
                        _box(draw, lo[c], y0, hi[c], y1, WALL)
                    if c == b - 1 and cell & WALL_BITS[1]:
                        _box(draw, lo[b], y0, hi[b], y1, WALL)

        def interior(cell: int) -> tuple[int, int, int, int]:
            r, c = divmod(int(cell), b)
            return int(g.lo[c]), int(g.lo[r]), int(g.hi[c] - g.lo[c]), int(g.hi[r] - g.lo[r])

        with profile(names.RENDER_DRAW_TARGET):
            x, y, w, h = interior(target_cell)
            _box(draw, x, y, x + w, y + h, TARGET_TILE)
            star = star_shape(w, h, g.shape_size) + (x * s, y * s)
            draw.polygon([tuple(p) for p in star.tolist()], fill=ROBOT_COLOURS[target_robot])
        with profile(names.RENDER_DRAW_ROBOTS):
            for j, cell in enumerate(robots):
                x, y, w, h = interior(cell)
                cx, cy, radius = disc_shape(w, h, g.shape_size)
                cx, cy = int(cx) + x * s, int(cy) + y * s
                box = [cx - radius, cy - radius, cx + radius - 1, cy + radius - 1]
                draw.ellipse(box, fill=ROBOT_COLOURS[j])
        with profile(names.RENDER_RESIZE):
            small = canvas.resize((size, size), Image.Resampling.BOX)
        return np.asarray(small).copy()
