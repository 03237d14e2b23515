"""What a benchmark case is: a component, its parameters, a setup and the one call to time.

Every module of this package imports rlperf inside its setup functions, by public names only:
``rlperf gate`` and asv load this package from *their* checkout and point ``rlperf`` at the
tree under test, so the same case definitions time every commit.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

SEED = 0
OBS_DIM, NUM_ACTIONS = 4, 2  # CartPole's sizes, for components timed without an env

# The case sets the tools derive from the tags (never written out by hand):
GATE = "gate"  # `rlperf gate`'s default set: one small end-to-end case per workload
HISTORY = "history"  # what asv tracks on every commit
QUICK = "quick"  # `pytest benchmarks --benchmark-only -m quick`
TAGS = (GATE, HISTORY, QUICK)


class CaseSkipped(Exception):
    """This case cannot run on this machine or commit; the message says why (printed, never
    silent)."""


@dataclass
class Prepared:
    """A case ready to time: ``run()`` does ``items_per_call`` items of work."""

    run: Callable[[], Any]
    items_per_call: int
    items_unit: str


@dataclass(frozen=True)
class Case:
    """One benchmark case: component, parameters, how to build its inputs, and its tags."""

    component: str
    params: dict[str, Any]
    setup_fn: Callable[..., Prepared] = field(repr=False)
    # Any collection of TAGS (a set literal reads best in the registry); kept as a frozenset.
    tags: Collection[str] = field(default=frozenset(), compare=False)

    def __post_init__(self) -> None:
        unknown = set(self.tags) - set(TAGS)
        if unknown:
            raise ValueError(f"unknown tags {sorted(unknown)} on {self.name}; known: {TAGS}")
        object.__setattr__(self, "tags", frozenset(self.tags))

    @property
    def name(self) -> str:
        """Stable id, e.g. ``gae[num_steps=32,num_envs=64]``."""
        inner = ",".join(f"{k}={v}" for k, v in self.params.items())
        return f"{self.component}[{inner}]" if inner else self.component

    def setup(self) -> Prepared:
        """Build the inputs (raises CaseSkipped when the machine lacks what the case needs)."""
        return self.setup_fn(**self.params)


@dataclass(frozen=True)
class Workload:
    """Something rlperf trains (an env with a policy, maybe a teacher), and its cases.

    ``e2e`` is the workload's end-to-end training case, sized for a ~0.1 s call: it is gated,
    tracked by the history and in the quick set (the tags are added here, so declaring a
    workload is all it takes). ``cases`` are its other cases, each with its own tags.
    """

    name: str
    env: str  # the env it trains on, as rlperf.envs.registered() names it
    e2e: Case
    cases: tuple[Case, ...] = ()

    def all_cases(self) -> list[Case]:
        e2e = Case(self.e2e.component, self.e2e.params, self.e2e.setup_fn, frozenset(TAGS))
        return [*self.cases, e2e]


def requires_env(name: str) -> None:
    """CaseSkipped on commits without env ``name``."""
    from rlperf.envs import registered

    if name not in registered():
        raise CaseSkipped(f"no {name} environment in this commit")


def requires_policy(kind: str) -> None:
    """CaseSkipped on commits without policy ``kind`` (the robots env landed before the
    ConvLSTM: there the kind would fail the trainer, not skip)."""
    from rlperf.policies.registry import policy_names

    if kind not in policy_names():
        raise CaseSkipped(f"no {kind} policy in this commit")
