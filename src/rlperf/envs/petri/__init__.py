"""Place/transition nets as an RL environment: ``make_vec("petri", n, net=..., turbo=...)``.

Modules: ``net`` (the model), ``builtin`` (named generators), ``pnml`` (the file parser),
``base`` (the env contract both implementations share), ``reference`` (plain Python loops) and
``turbo`` (batched numpy). docs/petri.md describes the nets, rewards and observations.
"""

from __future__ import annotations

from rlperf.envs.petri.base import (
    DEAD_PENALTY,
    GOAL_REWARD,
    INVALID_PENALTY,
    MAX_TOKENS,
    STEP_COST,
    PetriNetVec,
)
from rlperf.envs.petri.builtin import builtin_net
from rlperf.envs.petri.net import Net, parse_goal
from rlperf.envs.petri.pnml import load_pnml
from rlperf.envs.petri.reference import ReferencePetriVec
from rlperf.envs.petri.turbo import TurboPetriVec

DEFAULT_NET = "jobshop"


def load_net(net: str, goal: str | None = None) -> Net:
    """A built-in net by name, or the PNML file ``net`` (a path ending in ``.pnml``).

    ``goal`` (``place:count,...``) replaces the net's goal. Raises ValueError (one line).
    """
    if not isinstance(net, str) or not net:
        raise ValueError(f"net must be a built-in name or a .pnml path, got {net!r}")
    if goal is not None and not isinstance(goal, str):
        raise ValueError(f"goal takes place:count,..., got {goal!r}")
    if net.lower().endswith(".pnml"):
        return load_pnml(net, goal=goal)
    built = builtin_net(net)
    if goal is None:
        return built
    arcs = {
        t: (
            {built.places[p]: w for p, w in built.inputs[i]},
            {built.places[p]: w for p, w in built.outputs[i]},
        )
        for i, t in enumerate(built.transitions)
    }
    initial = {p: int(k) for p, k in zip(built.places, built.initial, strict=True)}
    return Net.build(net, list(built.places), arcs, initial, parse_goal(goal, f"net {net}"),
                     built.max_steps)  # fmt: skip


def _flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    return value


def make_petri(
    num_envs: int,
    net: str = DEFAULT_NET,
    turbo: bool = True,
    mask: bool = True,
    max_steps: int | None = None,
    max_tokens: int = MAX_TOKENS,
    goal: str | None = None,
) -> PetriNetVec:
    """The ``petri`` environment factory (its keyword arguments are the ``--env-option``s).

    Args:
        net: ``manufacturing``, ``jobshop``, ``random:SEED`` or a ``.pnml`` path.
        turbo: the batched numpy implementation (True) or the plain-Python reference.
        mask: publish the enabled transitions as the action mask (``infos["action_mask"]`` and
            ``action_mask``); False publishes none (the unmasked-PPO comparison).
        max_steps: truncation limit (default: the net's own).
        max_tokens: observation clip for token counts.
        goal: ``place:count,...``, replacing the net's goal (needed for PNML files without a
            final marking).

    Raises:
        ValueError: one line for a bad value.
    """
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs <= 0:
        raise ValueError(f"num_envs must be a positive integer, got {num_envs!r}")
    for name, value in (("max_steps", max_steps), ("max_tokens", max_tokens)):
        if value is None and name == "max_steps":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    impl = TurboPetriVec if _flag("turbo", turbo) else ReferencePetriVec
    loaded = load_net(net, goal)
    limit = loaded.max_steps if max_steps is None else max_steps
    return impl(num_envs, loaded, mask=_flag("mask", mask), max_steps=limit, max_tokens=max_tokens)


__all__ = [
    "DEAD_PENALTY",
    "DEFAULT_NET",
    "GOAL_REWARD",
    "INVALID_PENALTY",
    "MAX_TOKENS",
    "STEP_COST",
    "Net",
    "PetriNetVec",
    "ReferencePetriVec",
    "TurboPetriVec",
    "builtin_net",
    "load_net",
    "load_pnml",
    "make_petri",
]
