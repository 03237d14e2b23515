"""A multi-agent resource grid: ``make_vec("grid", num_maps, mission="extractor_hub_30")``.

Agents walk a walled map, take resources from extractors (which then rest a few steps) and
deposit them at the hub for reward. Every map and every agent is stepped in numpy at once, and
the agents are the vector env's rows. Modules: ``missions`` (named missions, random maps),
``distances`` (BFS distance fields), ``env`` (the vector env, its rules and observation),
``goals`` (each agent's goal), ``teacher`` (the vectorised scripted teacher) and ``reference``
(plain per-agent loops the tests compare with).
"""

from __future__ import annotations

from dataclasses import replace

from rlperf.envs.grid.distances import UNREACHABLE
from rlperf.envs.grid.env import (
    GOAL_AT_AGENT,
    GOAL_PER_MOVE,
    ON,
    GridVec,
)
from rlperf.envs.grid.layout import (
    AGENTS,
    CHANNEL_NAMES,
    COL,
    COOLING,
    DOWN,
    GOAL,
    HUB,
    INVENTORY,
    LEFT,
    MOVES,
    NOOP,
    NUM_ACTIONS,
    NUM_CHANNELS,
    READY,
    RIGHT,
    ROW,
    UP,
    WALLS,
)
from rlperf.envs.grid.missions import (
    DEFAULT_MISSION,
    MISSIONS,
    Mission,
    check_fits,
    generate_maps,
)
from rlperf.envs.grid.teacher import GridTeacher
from rlperf.envs.registry import int_option

MIN_MAP_SIZE, MAX_MAP_SIZE = 10, 64
MAX_OBS_RADIUS = 15


def make_grid(
    num_maps: int,
    mission: str = DEFAULT_MISSION,
    num_agents: int | None = None,
    map_size: int | None = None,
    obs_radius: int = 5,
    max_steps: int | None = None,
    goal_plane: bool = True,
) -> GridVec:
    """The ``grid`` environment factory (its keyword arguments are the ``--env-option``s).

    Args:
        num_maps: maps stepped together; the env's ``num_envs`` is ``num_maps * num_agents``.
        mission: a name in :data:`MISSIONS`.
        num_agents: agents per map (default: the mission's).
        map_size: cells per side, border included, in ``[10, 64]`` (default: the mission's).
        obs_radius: the observation window is ``2 * obs_radius + 1`` cells wide, ``[1, 15]``.
        max_steps: steps per episode (default: the mission's).
        goal_plane: add the ``GOAL`` observation plane, the distance field of the agent's
            goal (the teacher's information; ``env.py``).

    Raises:
        ValueError: one line, before any map is built.
    """
    int_option("num_maps", num_maps, 1)
    if not isinstance(mission, str) or mission not in MISSIONS:
        raise ValueError(f"unknown mission {mission!r}: choose one of {', '.join(MISSIONS)}")
    base = MISSIONS[mission]
    size = base.map_size if map_size is None else int_option("map_size", map_size, MIN_MAP_SIZE,
                                                        MAX_MAP_SIZE)  # fmt: skip
    agents = base.num_agents if num_agents is None else int_option("num_agents", num_agents, 1)
    steps = base.max_steps if max_steps is None else int_option("max_steps", max_steps, 1)
    int_option("obs_radius", obs_radius, 1, MAX_OBS_RADIUS)
    if not isinstance(goal_plane, bool):
        raise ValueError(f"goal_plane must be true or false, got {goal_plane!r}")
    check_fits(size, agents, base.num_extractors)
    chosen = replace(base, map_size=size, num_agents=agents, max_steps=steps)
    return GridVec(num_maps, chosen, obs_radius=obs_radius, goal_plane=goal_plane)


__all__ = [
    "AGENTS",
    "CHANNEL_NAMES",
    "COL",
    "COOLING",
    "DEFAULT_MISSION",
    "DOWN",
    "GOAL",
    "GOAL_AT_AGENT",
    "GOAL_PER_MOVE",
    "HUB",
    "INVENTORY",
    "LEFT",
    "MAX_MAP_SIZE",
    "MAX_OBS_RADIUS",
    "MIN_MAP_SIZE",
    "MISSIONS",
    "MOVES",
    "NOOP",
    "NUM_ACTIONS",
    "NUM_CHANNELS",
    "ON",
    "READY",
    "RIGHT",
    "ROW",
    "UNREACHABLE",
    "UP",
    "WALLS",
    "GridTeacher",
    "GridVec",
    "Mission",
    "generate_maps",
    "make_grid",
]
