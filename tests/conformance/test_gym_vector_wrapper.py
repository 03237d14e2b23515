# Adapted from gymnasium's tests/vector/test_vector_wrapper.py (Gymnasium v1.4.0, commit
# 95a790e19). MIT License, Copyright (c) 2016 OpenAI, Copyright (c) 2022 Farama Foundation:
# LICENSE.gymnasium.
"""gymnasium's VectorWrapper tests over rlperf's envs."""

from __future__ import annotations

from typing import Any

import pytest
from conformance_envs import SKIP_CALL
from gymnasium.core import ObsType
from gymnasium.vector import VectorWrapper


class DummyVectorWrapper(VectorWrapper):
    """Dummy Vector wrapper that contains a counter function to logging the number of times that reset is called."""  # noqa: E501

    def __init__(self, env):
        """Initialises the wrapper with the environment creating a counter variable."""
        super().__init__(env)

        self.counter = 0

    def reset(
        self,
        *,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[ObsType, dict[str, Any]]:
        """Updates the ``counter`` each time at ``reset`` is called."""
        self.counter += 1

        return super().reset(seed=seed, options=options)


def test_vector_env_wrapper_inheritance(case, shared_env):
    """Test vector environment wrapper inheritance."""
    wrapped = DummyVectorWrapper(shared_env)
    wrapped.reset()
    assert wrapped.counter == 1


def test_vector_env_wrapper_attributes():
    pytest.skip(SKIP_CALL)


def test_vector_env_metadata(case, shared_env):
    """Test if `metadata` property for VectorWrapper correctly forwards to the vector env it is wrapping.

    gymnasium's test compares two separate envs (one wrapped); here the wrapper wraps the env
    whose metadata changes, so the change must show through it."""  # noqa: E501
    env = shared_env
    wrapped = DummyVectorWrapper(env)

    assert env.metadata == wrapped.metadata
    saved = env.metadata
    try:
        env.metadata = {"render_modes": ["rgb_array"]}
        assert env.metadata != saved
        assert wrapped.metadata == env.metadata
    finally:
        env.metadata = saved
