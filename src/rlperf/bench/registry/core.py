"""What a benchmark case is: a component, its parameters, a setup and the one call to time.

Every module of this package imports rlperf inside its setup functions, by public names only:
``rlperf gate`` and asv load this package from *their* checkout and point ``rlperf`` at the
tree under test, so the same case definitions time every commit.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
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


@dataclass(frozen=True)
class Extra:
    """One of rlperf's optional extras (``pip install 'rlperf[name]'``) and the modules of it
    that cases import. A case that declares it skips, naming them, where any is missing: asv's
    environments, built from asv.conf.json, have no extras, and an import that fails inside a
    case's setup (gymnasium's MuJoCo envs raise their own error, not ImportError) would fail
    the case instead of skipping it."""

    name: str  # as pyproject.toml's [project.optional-dependencies] names it
    modules: tuple[str, ...]

    def missing(self) -> list[str]:
        """The modules that cannot be imported here (found without importing them)."""
        return [m for m in self.modules if importlib.util.find_spec(m) is None]


# imageio: gymnasium's MuJoCo renderer, imported with every MuJoCo env.
MUJOCO = Extra("mujoco", ("mujoco", "imageio"))
ATARI = Extra("atari", ("ale_py", "cv2", "stable_baselines3"))
ENVPOOL = Extra("envpool", ("envpool", "ale_py"))
ROBOTS = Extra("robots", ("PIL",))  # the robots env's Pillow reference renderer


def check_needs(needs: Collection[Extra]) -> None:
    """CaseSkipped, one line naming the missing modules and the extra, unless all are here."""
    for extra in needs:
        missing = extra.missing()
        if missing:
            raise CaseSkipped(f"needs {', '.join(missing)}: pip install 'rlperf[{extra.name}]'")


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
    # The extras the case imports: checked before its setup runs (:func:`check_needs`).
    needs: tuple[Extra, ...] = field(default=(), compare=False)

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
        """Build the inputs (raises CaseSkipped when the machine lacks what the case needs:
        an extra it declares, CUDA, a component the commit does not have)."""
        check_needs(self.needs)
        return self.setup_fn(**self.params)


@dataclass(frozen=True)
class Workload:
    """Something rlperf trains (an env with a policy, maybe a teacher), and its cases.

    ``e2e`` is the workload's end-to-end training case, sized for a ~0.1 s call: it is gated,
    tracked by the history and in the quick set (the tags are added here, so declaring a
    workload is all it takes). ``cases`` are its other cases, each with its own tags.
    ``needs``: the extras every one of its cases imports (added to each case's own).
    """

    name: str
    env: str  # the env it trains on, as rlperf.envs.registered() names it
    e2e: Case
    cases: tuple[Case, ...] = ()
    needs: tuple[Extra, ...] = ()

    def all_cases(self) -> list[Case]:
        e2e = replace(self.e2e, tags=frozenset(TAGS))
        return [
            replace(case, needs=tuple(dict.fromkeys((*self.needs, *case.needs))))
            for case in (*self.cases, e2e)
        ]


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
