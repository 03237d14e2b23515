"""Policies: actor-critic networks the trainer can train."""

from rlperf.policies.mlp import MLPActorCritic

__all__ = ["MLPActorCritic"]
