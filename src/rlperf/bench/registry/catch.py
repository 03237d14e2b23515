"""Catch: a toy for the CNN policy. Not a workload of its own (no gated e2e case): the grid
workload trains the CNN end to end, with its teacher."""

from __future__ import annotations

from .core import HISTORY, Case
from .policies import kind_act
from .training import e2e_train, update_epoch

REASON = "a toy for the CNN policy, which the grid workload trains end to end"

CASES = (
    Case("policy_act_kind", {"kind": "cnn", "num_envs": 64}, kind_act, {HISTORY}),
    Case("update_epoch", {"num_envs": 64, "threads": 1, "kind": "cnn"}, update_epoch),
    Case("e2e_train", {"num_envs": 64, "threads": 1, "kind": "cnn", "env_steps": 4096}, e2e_train),
)
