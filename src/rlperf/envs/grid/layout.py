"""The grid's action and observation layout: the numbers the env, its teacher and its readers
share (what each channel holds is in ``env.py``'s docstring)."""

import numpy as np

NOOP, UP, DOWN, LEFT, RIGHT = range(5)
NUM_ACTIONS = 5
MOVES = np.array([(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)], np.int64)  # (drow, dcol) by action

WALLS, READY, COOLING, HUB, AGENTS, INVENTORY, ROW, COL, GOAL = range(9)
NUM_CHANNELS = 9  # with the goal plane; GOAL without it
CHANNEL_NAMES = ("walls", "ready", "cooling", "hub", "agents", "inventory", "row", "col", "goal")
