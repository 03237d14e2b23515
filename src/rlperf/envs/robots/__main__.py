"""Draw a few Ricochet Robots boards into one PNG, for a person to look at.

    python -m rlperf.envs.robots --out boards.png --count 4 [--seed S --image-size N]

Top row: the environment's batched renderer (what the policy sees); bottom row, with
``--reference`` (the default): the Pillow reference renderer on the same boards. Each board's
puzzle (target robot, target cell, optimal length) is printed.
"""

from __future__ import annotations

import argparse

import numpy as np

from rlperf.envs.robots import make_robots
from rlperf.envs.robots.board import DIRECTION_NAMES
from rlperf.envs.robots.reference import reference_image

COLOUR_NAMES = ("red", "green", "blue", "yellow")
GAP = 4  # pixels between boards


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    ap.add_argument("--out", default="boards.png", help="PNG file to write")
    ap.add_argument("--count", type=int, default=4, help="boards to draw")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--board-size", type=int, default=8)
    ap.add_argument("--num-robots", type=int, default=2)
    ap.add_argument("--max-depth", type=int, default=3)
    ap.add_argument("--scale", type=int, default=4, help="pixel repeat for viewing")
    ap.add_argument("--no-reference", dest="reference", action="store_false",
                    help="leave out the Pillow reference row")  # fmt: skip
    args = ap.parse_args(argv)
    if args.count < 1 or args.scale < 1:
        ap.error("--count and --scale must be positive")
    from PIL import Image

    env = make_robots(args.count, board_size=args.board_size, num_robots=args.num_robots,
                      max_depth=args.max_depth, image_size=args.image_size)  # fmt: skip
    env.reset(seed=args.seed)
    rows = [list(env.render())]
    if args.reference:
        rows.append([
            reference_image(env.walls[i], env.positions[i], int(env.target_robot[i]),
                            int(env.target_cell[i]), args.image_size)
            for i in range(args.count)
        ])  # fmt: skip
    s = args.image_size
    sheet = np.full(
        (len(rows) * (s + GAP) - GAP, args.count * (s + GAP) - GAP, 3), 255, dtype=np.uint8
    )
    for r, images in enumerate(rows):
        for c, image in enumerate(images):
            sheet[r * (s + GAP) : r * (s + GAP) + s, c * (s + GAP) : c * (s + GAP) + s] = image
    sheet = sheet.repeat(args.scale, axis=0).repeat(args.scale, axis=1)
    Image.fromarray(sheet).save(args.out)
    b = args.board_size
    for i in range(args.count):
        t = int(env.target_robot[i])
        row, col = divmod(int(env.target_cell[i]), b)
        print(f"board {i}: {COLOUR_NAMES[t]} robot to row {row}, col {col} "
              f"in {int(env.optimal[i])} moves")  # fmt: skip
    print(f"wrote {args.out} (actions: robot * 4 + direction, directions "
          f"{', '.join(DIRECTION_NAMES)})")  # fmt: skip


if __name__ == "__main__":
    main()
