"""Vectorised environments and their registry."""

from rlperf.envs.cartpole import CartPoleVec
from rlperf.envs.catch import CatchVec
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

register("cartpole", CartPoleVec)
register("catch", CatchVec)
register("petri", make_petri)

__all__ = [
    "GYM_PREFIX",
    "CartPoleVec",
    "CatchVec",
    "EnvOptionError",
    "UnknownEnvError",
    "check_env_name",
    "make_vec",
    "register",
    "registered",
    "unregister",
]
