"""Vectorised environments and their registry."""

from rlperf.envs.cartpole import CartPoleVec
from rlperf.envs.registry import (
    GYM_PREFIX,
    UnknownEnvError,
    check_env_name,
    make_vec,
    register,
    registered,
    unregister,
)

register("cartpole", CartPoleVec)

__all__ = [
    "GYM_PREFIX",
    "CartPoleVec",
    "UnknownEnvError",
    "check_env_name",
    "make_vec",
    "register",
    "registered",
    "unregister",
]
