"""Fixtures for the gymnasium conformance suite: every env name on both backends.

Worker processes take a while to start, so the envs of tests that only reset and step are built
once per session (:func:`shared_env`) and reset with a seed by each test; tests that close an
env, or look at a fresh one, build their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from conformance_envs import BACKENDS, ENV_NAMES, case_id, make  # tests/conformance/, on sys.path
from conformance_spaces import SPACES_ENV, space_vec

from rlperf.envs import register, unregister

CASES = [
    pytest.param((name, backend), id=case_id(name, backend))
    for backend in BACKENDS
    for name in ENV_NAMES
]


@pytest.fixture(params=CASES)
def case(request: pytest.FixtureRequest) -> tuple[str, str]:
    """``(env name, backend)``."""
    return request.param


@pytest.fixture(scope="session")
def env_pool() -> Iterator[dict[tuple[str, str], Any]]:
    pool: dict[tuple[str, str], Any] = {}
    yield pool
    for env in pool.values():
        env.close()


@pytest.fixture
def shared_env(case: tuple[str, str], env_pool: dict[tuple[str, str], Any]) -> Any:
    """The session's env for ``case``, reset with seed 0; rebuilt when a test left it unusable
    (a reset that raises: a dead worker, a step left in flight)."""
    env = env_pool.get(case)
    if env is not None:
        try:
            env.reset(seed=0)
            return env
        except Exception:
            env_pool.pop(case)
            env.close()
    env = make(*case, seed=0)
    env_pool[case] = env
    return env


@pytest.fixture(scope="module")
def spaces_env() -> Iterator[str]:
    """The testing spaces as an env registered with ``rlperf.envs.register``
    (``conformance_spaces.SPACES_ENV``), for a test module; env workers receive its factory.
    Not for the session: a registered env adds its component cases to the benchmark registry,
    whose counts the docs test reads later in the same run."""
    register(SPACES_ENV, space_vec)
    yield SPACES_ENV
    unregister(SPACES_ENV)
