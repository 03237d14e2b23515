"""``--init-log-std``: every policy's Gaussian starts with that log standard deviation, its
samples spread by ``exp`` of it; discrete actions ignore it; 0 leaves CleanRL's start."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlperf.config import PolicyConfig
from rlperf.envs.spec import ActionSpec, EnvSpec
from rlperf.policies.registry import make_policy

BOX = ActionSpec("box", (), 3, (-1.0,) * 3, (1.0,) * 3)
DISCRETE = ActionSpec("discrete", (4,), 1)
FLAT = ((5,), np.dtype(np.float32))
IMAGE = ((3, 8, 8), np.dtype(np.uint8))
SMALL = {"hidden_sizes": (16, 16), "lstm_hidden_size": 8, "cnn_channels": (4,),
         "cnn_features": 8, "convlstm_channels": 4, "convlstm_layers": 1}  # fmt: skip


def policy_of(kind: str, action: ActionSpec, init_log_std: float) -> torch.nn.Module:
    obs_shape, dtype = IMAGE if kind in ("cnn", "convlstm") else FLAT
    cfg = PolicyConfig(kind=kind, init_log_std=init_log_std, **SMALL)  # type: ignore[arg-type]
    torch.manual_seed(0)
    return make_policy(cfg, EnvSpec(64, obs_shape, dtype, action))


@pytest.mark.parametrize("kind", ["mlp", "lstm", "cnn", "convlstm"])
def test_the_gaussian_starts_at_the_given_log_std(kind: str) -> None:
    policy = policy_of(kind, BOX, -1.5)
    logstd = policy.logstd()
    assert logstd is not None
    torch.testing.assert_close(logstd, torch.full((3,), -1.5))
    default = policy_of(kind, BOX, 0.0).logstd()
    assert default is not None and torch.equal(default, torch.zeros(3))


def test_samples_spread_by_the_initial_std() -> None:
    """Sampled around the (near-zero) initial mean with std exp(-1.5) = 0.22."""
    policy = policy_of("mlp", BOX, -1.5)
    obs = torch.zeros(4096, 5)
    actions, _, _, _ = policy.act(obs, policy.initial_state(4096), torch.ones(4096), None,
                                  torch.Generator().manual_seed(0))  # fmt: skip
    assert abs(float(actions.std()) - float(np.exp(-1.5))) < 0.01


def test_discrete_actions_have_no_log_std_to_set() -> None:
    assert policy_of("mlp", DISCRETE, -1.5).logstd() is None
