"""Vectorised environments and their registry."""

from rlperf.envs.backends import make_env  # noqa: E402 (after the registrations it uses)
from rlperf.envs.cartpole import CartPoleVec
from rlperf.envs.catch import CatchVec
from rlperf.envs.grid import make_grid
from rlperf.envs.petri import make_petri
from rlperf.envs.registry import (
    GYM_PREFIX,
    EnvOptionError,
    UnknownEnvError,
    check_env_name,
    make_vec,
    register,
    registered,
    unregister,
)
from rlperf.envs.robots import make_robots

register("cartpole", CartPoleVec)
register("catch", CatchVec)
register("grid", make_grid)
register("petri", make_petri)
register("robots", make_robots)

__all__ = [
    "GYM_PREFIX",
    "CartPoleVec",
    "CatchVec",
    "EnvOptionError",
    "UnknownEnvError",
    "check_env_name",
    "make_env",
    "make_vec",
    "register",
    "registered",
    "unregister",
]
