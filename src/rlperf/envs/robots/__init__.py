"""Ricochet Robots, batched in numpy: ``make_vec("robots", n, seed, board_size=8, ...)``.

The game: robots on a ``board_size x board_size`` board with walls on cell edges (the border
and random L-shaped pieces). A move sends one robot in one direction and it slides until the
next wall or robot; a move that goes nowhere is allowed and still costs a step. The episode is
won when the target robot stops on the target cell.

- Actions: ``Discrete(4 * num_robots)``, ``action = robot * 4 + direction`` with directions
  0 up, 1 right, 2 down, 3 left.
- Rewards: ``-STEP_COST`` (-0.01) every step, plus ``GOAL_REWARD`` (+1) on the step the
  target robot stops on the target (terminated; that step gives +0.99). Truncated after
  ``max_steps`` steps, by default ``4 * max_depth``.
- Puzzles: every episode's optimal solution length is between 1 and ``max_depth`` (wanted
  lengths drawn uniformly, see ``puzzles.py``), found by a batched breadth-first search and
  served from a pool refilled in batches.
- Observations: ``obs_mode="rgb_image"``: ``(3, image_size, image_size)`` uint8, grid lines,
  walls, robots as coloured discs (red, green, blue, yellow in robot order), the target as a
  star in the target robot's colour on a dark tile (``render.py``). ``obs_mode="symbolic"``:
  ``(4 + num_robots + 2, B, B)`` uint8 planes, 0 or 255: walls on the north, east, south,
  west side of each cell; one plane per robot marking its cell; the target cell; the target
  robot's current cell.

Modules: ``board`` (walls), ``moves`` (batched sliding), ``solver`` (batched BFS), ``puzzles``
(generation and the pool), ``render`` (batched images), ``reference`` (per-env Pillow renderer
and plain mover, the tests' oracles), ``env`` (the vector env). ``python -m rlperf.envs.robots
--out boards.png`` draws a few boards.
"""

from __future__ import annotations

from rlperf.envs.registry import int_option
from rlperf.envs.robots.env import GOAL_REWARD, OBS_MODES, ON, STEP_COST, RobotsVec
from rlperf.envs.robots.puzzles import plan_generation
from rlperf.envs.robots.render import ROBOT_COLOURS

BOARD_SIZES = (4, 16)  # smallest and largest board_size
MAX_IMAGE_SIZE = 256
MAX_DEPTH = 64  # a hard ceiling; the bounded search refuses most depths well below it
MIN_CELL_PIXELS = 4  # image_size >= 4 * board_size: room for a grid line, walls and a robot
STEPS_PER_DEPTH = 4  # default max_steps = STEPS_PER_DEPTH * max_depth


def make_robots(
    num_envs: int,
    board_size: int = 8,
    num_robots: int = 2,
    max_depth: int = 3,
    max_steps: int | None = None,
    obs_mode: str = "rgb_image",
    image_size: int = 64,
) -> RobotsVec:
    """The ``robots`` environment factory (its keyword arguments are the ``--env-option``s).

    Args:
        board_size: cells per side, 4..16.
        num_robots: 1..4 (one colour each), fewer than the cells.
        max_depth: the longest optimal solution of a puzzle; must be one the generator finds
            on such boards (checked by a bounded search here).
        max_steps: truncation limit (default ``4 * max_depth``).
        obs_mode: ``"rgb_image"`` or ``"symbolic"``.
        image_size: side of the RGB image in pixels, ``4 * board_size``..256 (also used by
            ``render()`` in symbolic mode).

    Raises:
        ValueError: one line, before any environment is built.
    """
    int_option("num_envs", num_envs, 1)
    if obs_mode not in OBS_MODES:
        raise ValueError(f"obs_mode must be one of {', '.join(OBS_MODES)}, got {obs_mode!r}")
    b = int_option("board_size", board_size, *BOARD_SIZES)
    int_option("num_robots", num_robots, 1, min(len(ROBOT_COLOURS), b * b - 1))
    int_option("image_size", image_size, MIN_CELL_PIXELS * b, MAX_IMAGE_SIZE)
    int_option("max_depth", max_depth, 1, MAX_DEPTH)
    if max_steps is None:
        max_steps = STEPS_PER_DEPTH * max_depth
    int_option("max_steps", max_steps, 1)
    batch_boards = plan_generation(board_size, num_robots, max_depth)
    return RobotsVec(
        num_envs,
        board_size=board_size,
        num_robots=num_robots,
        max_depth=max_depth,
        max_steps=max_steps,
        obs_mode=obs_mode,
        image_size=image_size,
        batch_boards=batch_boards,
    )


__all__ = [
    "BOARD_SIZES",
    "GOAL_REWARD",
    "OBS_MODES",
    "ON",
    "ROBOT_COLOURS",
    "STEP_COST",
    "RobotsVec",
    "make_robots",
]
