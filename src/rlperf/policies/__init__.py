"""Policies: the actor-critic protocol (``base``), its implementations and their registry."""

from rlperf.policies.base import ActorCritic, FeedForwardActorCritic
from rlperf.policies.mlp import MLPActorCritic
from rlperf.policies.registry import PolicyEntry, make_policy, policy_entry, register_policy

__all__ = [
    "ActorCritic",
    "FeedForwardActorCritic",
    "MLPActorCritic",
    "PolicyEntry",
    "make_policy",
    "policy_entry",
    "register_policy",
]
