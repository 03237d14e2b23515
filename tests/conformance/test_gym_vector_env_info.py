# Adapted from gymnasium's tests/vector/test_vector_env_info.py (Gymnasium v1.4.0, commit
# 95a790e19). MIT License, Copyright (c) 2016 OpenAI, Copyright (c) 2022 Farama Foundation:
# LICENSE.gymnasium.
"""gymnasium's vector-info tests on rlperf's envs; see conformance_envs."""

from __future__ import annotations

import pytest
from conformance_envs import (
    GYM_ENVS,
    NUM_ENVS,
    SKIP_NO_ENV,
    gymnasium_reference,
    make,
    per_row,
)
from gymnasium.utils.env_checker import data_equivalence


def test_vector_add_info():
    pytest.skip(SKIP_NO_ENV + " (VectorEnv._add_info)")


@pytest.mark.parametrize("backend", ["serial", "workers"])
@pytest.mark.parametrize("name", GYM_ENVS)
def test_vector_return_info(name, backend):
    """gymnasium's test checks that sub-envs' infos arrive as vector infos with masks. Here: a
    ``gym:`` id's infos, reset and step, are gymnasium's own (every key the env gives, e.g.
    FrozenLake's ``prob``), on both backends."""
    vec_env = make(name, backend, seed=None)
    reference = gymnasium_reference(name.removeprefix("gym:"), vec_env.num_envs)
    try:
        _, reset_info = vec_env.reset(seed=7)
        _, reference_info = reference.reset(seed=7)
        assert sorted(reset_info) == sorted(reference_info)
        assert data_equivalence(reset_info, reference_info, exact=True)
        reference.action_space.seed(7)
        for _ in range(30):
            action = reference.action_space.sample()
            step_info = vec_env.step(action)[4]
            reference_info = reference.step(action)[4]
            assert sorted(step_info) == sorted(reference_info)
            got, want = per_row(step_info, NUM_ENVS), per_row(reference_info, NUM_ENVS)
            assert data_equivalence(got, want, exact=True), (got, want)
    finally:
        vec_env.close()
        reference.close()
