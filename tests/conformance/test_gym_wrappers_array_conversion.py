# Adapted from Gymnasium v1.4.0 (commit 95a790e19): tests/wrappers/vector/
# test_array_conversion.py. MIT License, Copyright (c) 2016 OpenAI, Copyright (c) 2022 Farama
# Foundation: LICENSE.gymnasium.
"""gymnasium's vector array conversion (NumpyToTorch) over rlperf's envs.

gymnasium's test converts a GenericTestVectorEnv's arrays between every pair of installed array
libraries; rlperf's users convert its numpy results to torch. Here: the tensors equal the
numpy results of the reference, and a tensor kept is not changed by the next step (tensors
share memory with the arrays they came from, so that needs fresh arrays)."""

from __future__ import annotations

import numpy as np
import pytest
from conformance_envs import ReferenceEnv, action_sampler
from gymnasium import spaces

torch = pytest.importorskip("torch")
# gymnasium's array conversion needs array_api_compat (gymnasium's test skips without it too)
pytest.importorskip("array_api_compat", reason="gymnasium's NumpyToTorch needs array_api_compat")
from gymnasium.wrappers.vector import NumpyToTorch  # noqa: E402


def test_numpy_to_torch(case, shared_env):
    if not isinstance(shared_env.single_observation_space, spaces.Box):
        pytest.skip(
            f"checks array observations; {shared_env.single_observation_space} is not batched "
            "into one array"
        )
    env = NumpyToTorch(shared_env)
    reference = ReferenceEnv(*case)
    try:
        obs, _ = env.reset(seed=5)
        assert isinstance(obs, torch.Tensor)
        assert np.array_equal(obs.numpy(), reference.reset(seed=5)[0])
        sampler = action_sampler(env, 5)
        kept = []
        for _ in range(20):
            action = sampler.sample()
            obs, rewards, terminated, truncated, _ = env.step(torch.as_tensor(action))
            ref = reference.step(action)
            for tensor, array in zip((obs, rewards, terminated, truncated), ref[:4], strict=True):
                assert isinstance(tensor, torch.Tensor)
                assert np.array_equal(tensor.numpy(), array)
            kept.append((obs, obs.clone(), rewards, rewards.clone()))
        for obs, obs_copy, rewards, rewards_copy in kept:
            assert torch.equal(obs, obs_copy) and torch.equal(rewards, rewards_copy)
    finally:
        reference.close()
