"""What the parent learns about an env before it starts any worker: one env built in this
process, reset and stepped once, gives the spaces, rows per env, capabilities (mask, teacher,
state, render mode) and the numeric ``infos`` keys that get their own arrays in shared memory
(``layout.py``); every other key travels pickled on the worker's control channel.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlperf.envs.registry import make_vec
from rlperf.envs.spec import ACTION_MASK_KEY, read_action_mask
from rlperf.envs.workers.layout import EnvShape, InfoField, space_leaves


def probe(env_name: str, options: dict[str, Any]) -> EnvShape:
    """Build one env in this process to learn its spaces, rows per env, capabilities and the
    numeric ``infos`` keys (and rewards dtype) of a reset and of one step of sampled actions.

    Raises:
        UnsupportedSpaceError: a space the shared block cannot hold (``layout.space_leaves``).
    """
    env = make_vec(env_name, 1, **options)
    try:
        _, reset_infos = env.reset(seed=0)
        space_leaves(env.single_observation_space, "observation")
        space_leaves(env.single_action_space, "action")
        env.action_space.seed(0)
        rows = int(env.num_envs)
        _, rewards, _, _, step_infos = env.step(env.action_space.sample())
        infos = numeric_infos(reset_infos, rows)
        infos.update(numeric_infos(step_infos, rows))  # a step's dtype where they differ
        final_infos = numeric_infos(step_infos, rows)
        final_infos.update(numeric_infos(step_infos.get("final_info", {}), rows))
        return EnvShape(
            rows_per_env=rows,
            observation_space=env.single_observation_space,
            action_space=env.single_action_space,
            has_mask=read_action_mask(env, reset_infos) is not None,
            has_teacher=callable(getattr(env, "make_teacher", None)),
            has_state=callable(getattr(env, "get_state", None)),
            rewards_dtype=np.asarray(rewards).dtype.str,
            infos=tuple(infos.values()),
            final_infos=tuple(final_infos.values()),
            render_mode=env.render_mode,
        )
    finally:
        env.close()


# infos keys the workers carry in their own arrays (or, for the mask, the env's mask array).
CONTRACT_KEYS = frozenset({"final_obs", "final_info", "episode", ACTION_MASK_KEY})


def numeric_infos(infos: dict[str, Any], rows: int) -> dict[str, InfoField]:
    """The entries of ``infos`` with one number (or fixed-shape numeric array) per row, other
    than the contract's own keys and the ``_key`` masks."""
    fields = {}
    for key, value in infos.items():
        if key.startswith("_") or key in CONTRACT_KEYS or not isinstance(value, np.ndarray):
            continue
        if value.dtype.kind in "biuf" and value.ndim >= 1 and value.shape[0] == rows:
            fields[key] = InfoField(key, tuple(value.shape[1:]), value.dtype.str,
                                    f"_{key}" in infos)  # fmt: skip
    return fields
