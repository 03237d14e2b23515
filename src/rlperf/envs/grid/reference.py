"""Plain per-agent Python versions of the grid's rules, observation window, distance fields and
teacher: slow and obviously right, for the tests to hold the batched code to.

Every function reads the state dict of :meth:`GridVec.get_state` (plus the mission's numbers)
and loops over maps and agents one at a time.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from rlperf.envs.grid.distances import UNREACHABLE
from rlperf.envs.grid.env import (
    GOAL_AT_AGENT,
    GOAL_PER_MOVE,
    ON,
)
from rlperf.envs.grid.layout import (
    AGENTS,
    COL,
    COOLING,
    GOAL,
    HUB,
    INVENTORY,
    MOVES,
    NOOP,
    NUM_CHANNELS,
    READY,
    ROW,
    WALLS,
)


def reference_step(
    state: dict[str, Any],
    actions: np.ndarray,
    priority: np.ndarray,
    num_agents: int,
    capacity: int,
    cooldown: int,
) -> dict[str, Any]:
    """One step of every map, agent by agent in priority order (lowest first).

    Returns ``agent_row``, ``agent_col``, ``inventory``, ``cooldown_left`` after the step and
    ``rewards`` (float32).
    """
    rows = [int(v) for v in state["agent_row"]]
    cols = [int(v) for v in state["agent_col"]]
    inv = [int(v) for v in state["inventory"]]
    left = [[int(v) for v in m] for m in state["cooldown_left"]]
    rewards = [0.0] * len(rows)
    for m, walls in enumerate(state["walls"]):
        agents = range(m * num_agents, (m + 1) * num_agents)
        occupied = {(rows[i], cols[i]) for i in agents}  # at the start of the step
        extractor = {(int(y), int(x)): k for k, (y, x) in enumerate(state["extractors"][m])}
        hub = (int(state["hub"][m][0]), int(state["hub"][m][1]))
        claimed: set[tuple[int, int]] = set()
        used: set[int] = set()
        for i in sorted(agents, key=lambda i: int(priority[i])):
            dy, dx = MOVES[int(actions[i])]
            target = (rows[i] + int(dy), cols[i] + int(dx))
            if walls[target]:
                continue
            if target == hub:
                rewards[i], inv[i] = float(inv[i]), 0
            elif target in extractor:
                k = extractor[target]
                if left[m][k] == 0 and k not in used and inv[i] < capacity:
                    inv[i] += 1
                    used.add(k)
            elif target not in occupied and target not in claimed:
                claimed.add(target)
                rows[i], cols[i] = target
        left[m] = [cooldown if k in used else max(v - 1, 0) for k, v in enumerate(left[m])]
    return {
        "agent_row": np.array(rows),
        "agent_col": np.array(cols),
        "inventory": np.array(inv),
        "cooldown_left": np.array(left).reshape(np.shape(state["cooldown_left"])),
        "rewards": np.array(rewards, np.float32),
    }


def reference_window(
    state: dict[str, Any],
    row: int,
    num_agents: int,
    radius: int,
    capacity: int,
    goal_plane: bool = True,
) -> np.ndarray:
    """The ``(NUM_CHANNELS, 2r + 1, 2r + 1)`` observation of agent row ``row``, cell by cell
    (``GOAL`` channels fewer without ``goal_plane``)."""
    m = row // num_agents
    walls = state["walls"][m]
    size = walls.shape[0]
    y0, x0 = int(state["agent_row"][row]), int(state["agent_col"][row])
    extractor = {(int(y), int(x)): k for k, (y, x) in enumerate(state["extractors"][m])}
    others = {
        (int(state["agent_row"][i]), int(state["agent_col"][i]))
        for i in range(m * num_agents, (m + 1) * num_agents)
        if i != row
    }
    side = 2 * radius + 1
    obs = np.zeros((NUM_CHANNELS if goal_plane else GOAL, side, side), np.uint8)
    to_goal = reference_goal(state, row, num_agents, capacity) if goal_plane else None
    for i in range(side):
        for j in range(side):
            cell = (y0 - radius + i, x0 - radius + j)
            if not (0 <= cell[0] < size and 0 <= cell[1] < size) or walls[cell]:
                obs[WALLS, i, j] = ON
            elif cell in extractor:
                ready = state["cooldown_left"][m][extractor[cell]] == 0
                obs[READY if ready else COOLING, i, j] = ON
            elif cell == tuple(state["hub"][m]):
                obs[HUB, i, j] = ON
            elif cell in others:
                obs[AGENTS, i, j] = ON
            if to_goal is None:
                continue
            inside = 0 <= cell[0] < size and 0 <= cell[1] < size
            d = int(to_goal[cell]) if inside else UNREACHABLE
            relative = GOAL_AT_AGENT + GOAL_PER_MOVE * (d - int(to_goal[y0, x0]))
            obs[GOAL, i, j] = ON if d == UNREACHABLE else min(max(relative, 1), ON - 1)
    obs[INVENTORY] = int(state["inventory"][row]) * (ON // capacity)
    obs[ROW] = y0 * (ON // (size - 1))
    obs[COL] = x0 * (ON // (size - 1))
    return obs


def reference_distances(passable: np.ndarray, source: tuple[int, int]) -> np.ndarray:
    """``(P, P)`` moves from each cell into ``source``: a plain BFS through passable cells."""
    open_ = passable.tolist()
    size = len(open_)
    dist = [[int(UNREACHABLE)] * size for _ in range(size)]
    dist[source[0]][source[1]] = 0
    queue = deque([source])
    while queue:
        y, x = queue.popleft()
        for ny, nx in ((y - 1, x), (y + 1, x), (y, x - 1), (y, x + 1)):
            if open_[ny][nx] and dist[ny][nx] == UNREACHABLE:
                dist[ny][nx] = dist[y][x] + 1
                queue.append((ny, nx))
    return np.array(dist, np.int64)


def reference_goal(
    state: dict[str, Any], row: int, num_agents: int, capacity: int
) -> np.ndarray | None:
    """The ``(P, P)`` distance field into agent row ``row``'s goal (``goals.py``), from a plain
    BFS; None when it has no goal.

    From the agent: a BFS gives the moves to every cell, so an extractor is ``1 +`` the nearest
    of its free neighbours; the nearest ready one (lowest index on ties) while the inventory has
    room, else the hub if it carries anything (and can reach it).
    """
    m = row // num_agents
    walls = state["walls"][m]
    hub = (int(state["hub"][m][0]), int(state["hub"][m][1]))
    extractors = [(int(y), int(x)) for y, x in state["extractors"][m]]
    passable = ~walls.copy()
    for cell in [*extractors, hub]:
        passable[cell] = False
    here = (int(state["agent_row"][row]), int(state["agent_col"][row]))
    inv = int(state["inventory"][row])
    from_agent = reference_distances(passable, here)
    goal, best = None, UNREACHABLE
    if inv < capacity:
        for k, (y, x) in enumerate(extractors):
            if state["cooldown_left"][m][k] != 0:
                continue
            near = min(int(from_agent[y + dy, x + dx]) for dy, dx in MOVES[1:])
            if near != UNREACHABLE and near + 1 < best:
                goal, best = (y, x), near + 1
    if goal is None and inv > 0:
        goal = hub
    if goal is None:
        return None
    to_goal = reference_distances(passable, goal)
    return None if to_goal[here] == UNREACHABLE else to_goal


def reference_teacher(state: dict[str, Any], num_agents: int, capacity: int) -> np.ndarray:
    """The teacher's action for every agent row, with fresh BFSs per agent: the first of up,
    down, left, right that gets one move closer to :func:`reference_goal`'s goal."""
    actions = np.full(len(state["agent_row"]), NOOP, np.int64)
    for row in range(len(actions)):
        to_goal = reference_goal(state, row, num_agents, capacity)
        if to_goal is None:
            continue
        here = (int(state["agent_row"][row]), int(state["agent_col"][row]))
        for action, (dy, dx) in enumerate(MOVES[1:], start=1):
            if to_goal[here[0] + dy, here[1] + dx] == to_goal[here] - 1:
                actions[row] = action
                break
    return actions
