"""Batched RGB rendering of Ricochet Robots boards, in numpy (no Pillow needed).

Geometry (shared with the Pillow reference in ``reference.py``, which draws the same shapes on
a canvas :data:`SUPERSAMPLE` times larger and box-resizes it):

- Cell ``i`` spans pixels ``[e_i, e_{i+1})`` with ``e_i = floor(i * image_size / board_size)``,
  so cells differ by at most one pixel when ``image_size`` is not a multiple of ``board_size``.
- A one-pixel grid line on the top/left edge of every cell; walls are bands
  :func:`wall_thickness` pixels thick centred on their edge, each segment long enough to
  join its neighbours at corners. Border walls are clipped to the image (at least 1 pixel
  shows), so border cells keep the same room as the others.
- A cell's *interior* is what no grid line or wall band can touch. Robots (discs) and the
  target (a five-pointed star in the target robot's colour, on a dark tile that fills its cell's
  interior) are drawn inside interiors only.

How it is fast: grid and walls never change within an episode, so they are drawn once per new
episode into a cached background (``draw_grid``: a copy of the grid image, border walls
included, made once; ``draw_walls``: one fancy-indexed assignment painting every inner wall
segment of all new boards). Each step copies the
backgrounds and pastes one opaque interior tile per robot and one for the target with a single
fancy-indexed assignment each, for all envs at once. The tiles are rasterised once at
construction, at :data:`SUPERSAMPLE` x the resolution, and averaged down with the rounding
Pillow's box resize uses, so they come out as the reference draws them up to how the two
rasterisers decide edge pixels (see ``tests/envs/test_robots.py`` for the tolerance). A robot
standing on the target is its own tile (disc over star), as the reference draws it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlperf.envs.robots.board import WALL_BITS

SUPERSAMPLE = 4  # the reference's canvas scale; tiles are rasterised at it too
FLOOR = (228, 226, 218)
GRID = (182, 180, 172)
WALL = (38, 40, 52)
# The target's cell interior, under the star. On the floor, a star of the robot's colour and
# size is all but a robot to a freshly initialised encoder: PPO did not learn to tell them
# apart from the image within 400k steps even on a one-robot board, and learned as fast as from
# the symbolic planes with this tile (docs/robots.md).
TARGET_TILE = WALL
# Robots in index order: red, green, blue, yellow (the printed game's four).
ROBOT_COLOURS = ((214, 48, 49), (36, 160, 64), (40, 100, 220), (236, 180, 20))
DISC_FRACTION = 0.8  # disc diameter / smaller interior side
STAR_FRACTION = 0.94  # star tip-to-tip diameter / smaller interior side
STAR_INNER = 0.45  # star inner radius / outer radius


def cell_edges(board_size: int, image_size: int) -> np.ndarray:
    """``(B + 1,)`` pixel edges of the cells: ``floor(i * image_size / board_size)``."""
    return np.arange(board_size + 1) * image_size // board_size


def wall_thickness(board_size: int, image_size: int) -> int:
    """Wall band width in pixels: a quarter of a cell, at least 1."""
    return max(1, image_size // (4 * board_size))


@dataclass(frozen=True)
class Geometry:
    """Pixel geometry of one board size at one image size (all ints, output pixels)."""

    board_size: int
    image_size: int
    edges: np.ndarray  # (B + 1,) cell edges
    thickness: int  # wall band width (border bands are clipped)
    band_lo: np.ndarray  # (B + 1,) first pixel of each edge's wall band
    band_hi: np.ndarray  # (B + 1,) one past its last pixel
    lo: np.ndarray  # (B,) first interior pixel of each cell (rows and columns alike)
    hi: np.ndarray  # (B,) one past the last interior pixel

    @staticmethod
    def of(board_size: int, image_size: int) -> Geometry:
        edges = cell_edges(board_size, image_size)
        t = wall_thickness(board_size, image_size)
        band_lo = np.clip(edges - t // 2, 0, image_size - 1)
        band_hi = np.clip(edges - t // 2 + t, band_lo + 1, image_size)
        lo = np.maximum(band_hi[:-1], edges[:-1] + 1)
        hi = band_lo[1:]
        if (hi <= lo).any():
            raise ValueError(f"image_size {image_size} leaves no room inside the cells")
        return Geometry(board_size, image_size, edges, t, band_lo, band_hi, lo, hi)

    @property
    def shape_size(self) -> int:
        """Side of the square robots and stars are fitted into: the smallest interior, so
        they look the same in every cell (border cells lose a little to the border wall)."""
        return int((self.hi - self.lo).min())

    def segment(self, index: int) -> tuple[int, int]:
        """Pixel span ``[start, stop)`` along a wall on cell ``index``'s side, reaching over
        the bands of both its ends."""
        return int(self.band_lo[index]), int(self.band_hi[index + 1])


def disc_shape(width: int, height: int, size: int) -> tuple[float, float, int]:
    """Disc centre and radius in canvas pixels, relative to an interior of ``width x height``
    output pixels, for shapes ``size`` pixels wide (centre on a canvas pixel corner, integer
    radius)."""
    radius = round(DISC_FRACTION * size * SUPERSAMPLE / 2)
    return width * SUPERSAMPLE / 2, height * SUPERSAMPLE / 2, max(1, radius)


def star_shape(width: int, height: int, size: int) -> np.ndarray:
    """``(10, 2)`` star vertices (x, y) in canvas pixels, tip up, relative to the interior."""
    outer = STAR_FRACTION * size * SUPERSAMPLE / 2
    radius = np.where(np.arange(10) % 2 == 0, outer, outer * STAR_INNER)
    angle = np.arange(10) * np.pi / 5
    cx, cy = width * SUPERSAMPLE / 2, height * SUPERSAMPLE / 2
    return np.stack([cx + radius * np.sin(angle), cy - radius * np.cos(angle)], axis=1)


def _inside_polygon(x: np.ndarray, y: np.ndarray, vertices: np.ndarray) -> np.ndarray:
    """Even-odd test of points against a closed polygon."""
    inside = np.zeros(np.broadcast(x, y).shape, dtype=bool)
    for (x0, y0), (x1, y1) in zip(vertices, np.roll(vertices, -1, axis=0), strict=True):
        if y0 == y1:
            continue
        crosses = (y0 > y) != (y1 > y)
        at_x = x0 + (y - y0) * (x1 - x0) / (y1 - y0)
        inside ^= crosses & (x < at_x)
    return inside


def box_reduce(canvas: np.ndarray, factor: int) -> np.ndarray:
    """``(..., H * f, W * f)`` uint8 -> ``(..., H, W)``: means over ``f`` columns, rounded,
    then over ``f`` rows, rounded (half up), as Pillow's BOX resize does it."""
    *lead, h, w = canvas.shape
    x = canvas.astype(np.int64).reshape(*lead, h, w // factor, factor).sum(-1)
    x = (2 * x + factor) // (2 * factor)
    x = x.reshape(*lead, h // factor, factor, w // factor).sum(-2)
    return ((2 * x + factor) // (2 * factor)).astype(np.uint8)


def draw_tile(width: int, height: int, size: int, star: int | None, disc: int | None) -> np.ndarray:
    """One interior, ``(3, height, width)`` uint8: floor (the target tile where there is a
    star), then the star in robot colour ``star``, then the disc of robot ``disc`` (None: not
    drawn), shapes ``size`` wide."""
    ys = np.arange(height * SUPERSAMPLE)[:, None] + 0.5  # canvas pixel centres
    xs = np.arange(width * SUPERSAMPLE)[None, :] + 0.5
    canvas = np.empty((3, len(ys), xs.shape[1]), dtype=np.uint8)
    ground = FLOOR if star is None else TARGET_TILE
    canvas[...] = np.array(ground, dtype=np.uint8)[:, None, None]
    if star is not None:
        inside = _inside_polygon(xs, ys, star_shape(width, height, size))
        canvas[:, inside] = np.array(ROBOT_COLOURS[star], dtype=np.uint8)[:, None]
    if disc is not None:
        cx, cy, r = disc_shape(width, height, size)
        inside = (xs - cx) ** 2 + (ys - cy) ** 2 < r * r
        canvas[:, inside] = np.array(ROBOT_COLOURS[disc], dtype=np.uint8)[:, None]
    return box_reduce(canvas, SUPERSAMPLE)


class BoardRenderer:
    """Renders batches of boards as ``(n, 3, image_size, image_size)`` uint8 images.

    Tile contents, by index: ``j`` the disc of robot j; ``R + t`` the star of robot t;
    ``2R + t * R + j`` robot j's disc on robot t's star.
    """

    def __init__(self, board_size: int, num_robots: int, image_size: int) -> None:
        if num_robots > len(ROBOT_COLOURS):
            raise ValueError(f"at most {len(ROBOT_COLOURS)} robots have colours")
        g = self.geometry = Geometry.of(board_size, image_size)
        self.num_robots = num_robots
        b, s = board_size, image_size
        self._grid = np.empty((3, s, s), dtype=np.uint8)
        self._grid[...] = np.array(FLOOR, dtype=np.uint8)[:, None, None]
        lines = g.edges[:-1]
        self._grid[:, lines, :] = np.array(GRID, dtype=np.uint8)[:, None, None]
        self._grid[:, :, lines] = np.array(GRID, dtype=np.uint8)[:, None, None]
        wall = np.array(WALL, dtype=np.uint8)
        for i in (0, b):  # every board is walled all round: part of the grid image
            span = slice(int(g.band_lo[i]), int(g.band_hi[i]))
            self._grid[:, span, :] = wall[:, None, None]
            self._grid[:, :, span] = wall[:, None, None]
        self._wall_offsets = self._wall_slots(g)
        # Interior tiles, one per distinct interior size, padded to the largest by repeating
        # their last row/column (pasted twice with the same value, so padding is harmless).
        sizes = g.hi - g.lo  # per row and per column alike
        widths, size_class = np.unique(sizes, return_inverse=True)
        big = int(widths.max())
        # (target robot, robot) pairs a tile shows; None: no target / no robot.
        contents: list[tuple[int | None, int | None]] = [(None, j) for j in range(num_robots)]
        contents += [(t, None) for t in range(num_robots)]
        contents += [(t, j) for t in range(num_robots) for j in range(num_robots)]
        clamp = np.minimum(np.arange(big)[None, :], widths[:, None] - 1)  # (classes, big)
        tiles = np.zeros((len(widths), len(widths), len(contents), 3, big, big), np.uint8)
        for a, h in enumerate(widths):
            for c, w in enumerate(widths):
                for k, (star, disc) in enumerate(contents):
                    tile = draw_tile(int(w), int(h), g.shape_size, star, disc)
                    tiles[a, c, k] = tile[:, clamp[a]][:, :, clamp[c]]
        self._tiles = tiles.reshape(len(widths) ** 2, len(contents), -1)
        rows, cols = np.divmod(np.arange(b * b), b)
        self._cell_class = size_class[rows] * len(widths) + size_class[cols]
        ys = g.lo[rows][:, None] + np.minimum(np.arange(big), sizes[rows][:, None] - 1)
        xs = g.lo[cols][:, None] + np.minimum(np.arange(big), sizes[cols][:, None] - 1)
        pixel = ys[:, :, None] * s + xs[:, None, :]  # (B*B, big, big)
        self._offsets = (np.arange(3)[None, :, None, None] * s * s + pixel[:, None]).reshape(
            b * b, -1
        )

    @staticmethod
    def _wall_slots(g: Geometry) -> np.ndarray:
        """Pixel offsets ``(slots, t * L)``, in one channel, of every inner wall segment:
        horizontal ones (north side of rows 1..B-1; by edge, then column), then vertical ones
        (west side of columns 1..B-1; by edge, then row), each padded to the longest by
        repeating its last pixel."""
        b, s = g.board_size, g.image_size
        spans = [g.segment(i) for i in range(b)]
        longest = max(stop - start for start, stop in spans)
        along = np.array([np.minimum(np.arange(longest) + start, stop - 1)
                          for start, stop in spans])  # fmt: skip  # (B, L)
        bands = np.array([np.arange(g.band_lo[i], g.band_hi[i]) for i in range(1, b)])
        # horizontal[i - 1, c]: y from band i, x along segment c; vertical: x and y swapped.
        ys = bands[:, None, :, None]
        xs = along[None, :, None, :]
        horizontal = (ys * s + xs).reshape((b - 1) * b, -1)
        vertical = (xs * s + ys).reshape((b - 1) * b, -1)
        return np.concatenate([horizontal, vertical])

    def backgrounds(self, walls: np.ndarray) -> np.ndarray:
        """``(k, B, B)`` wall bitmasks -> ``(k, 3, S, S)`` grid and walls."""
        out = np.empty((len(walls), *self._grid.shape), dtype=np.uint8)
        self.grid_into(out)
        self.draw_walls(out, walls)
        return out

    def draw_walls(self, out: np.ndarray, walls: np.ndarray) -> None:
        """Paint the inner walls of ``walls`` ``(k, B, B)`` into grid images ``out``
        ``(k, 3, S, S)`` (the border is already there)."""
        k = len(walls)
        north = (walls[:, 1:, :] & WALL_BITS[0]) != 0  # (k, B-1, B): edges 1..B-1 by column
        west = (walls[:, :, 1:] & WALL_BITS[3]) != 0  # (k, B, B-1): by row, edge
        present = np.concatenate(
            [north.reshape(k, -1), west.transpose(0, 2, 1).reshape(k, -1)], axis=1
        )
        rows, slots = np.nonzero(present)
        # One channel at a time with a scalar colour: ~2x faster than one (k, 3 * ...) write.
        plane = self.geometry.image_size**2
        at = rows[:, None] * (3 * plane) + self._wall_offsets[slots]
        flat = _flat(out)
        for c, value in enumerate(WALL):
            flat[at + c * plane] = value

    def grid_into(self, out: np.ndarray) -> None:
        """Fill ``out`` ``(k, 3, S, S)`` with the empty grid."""
        out[...] = self._grid

    def paste(
        self, images: np.ndarray, rows: np.ndarray, cells: np.ndarray, content: np.ndarray
    ) -> None:
        """Paste tile ``content[i]`` into the interior of cell ``cells[i]`` of image
        ``rows[i]`` of ``images`` ``(n, 3, S, S)`` (C-contiguous)."""
        at = rows[:, None] * images[0].size + self._offsets[cells]
        _flat(images)[at] = self._tiles[self._cell_class[cells], content]

    def draw_target(
        self, images: np.ndarray, target_robot: np.ndarray, target_cell: np.ndarray
    ) -> None:
        """The star in the target robot's colour on its tile, into every image
        ``(n, 3, S, S)``."""
        rows = np.arange(len(images))
        self.paste(images, rows, target_cell, self.num_robots + target_robot)

    def draw_robots(
        self,
        images: np.ndarray,
        positions: np.ndarray,
        target_robot: np.ndarray,
        target_cell: np.ndarray,
    ) -> None:
        """Every robot's disc (over the star where it stands on the target), into every image
        ``(n, 3, S, S)``."""
        r = self.num_robots
        rows = np.arange(len(images))
        for j in range(r):
            cells = positions[:, j]
            on_star = cells == target_cell
            content = np.where(on_star, 2 * r + target_robot * r + j, j)
            self.paste(images, rows, cells, content)


def _flat(images: np.ndarray) -> np.ndarray:
    """A 1-D view of C-contiguous ``images`` (a copy would silently drop the writes)."""
    if not images.flags.c_contiguous:
        raise ValueError("images must be C-contiguous")
    return images.reshape(-1)
