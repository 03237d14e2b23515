"""Every benchmark case of rlperf, defined once for pytest-benchmark, asv and ``rlperf gate``.

Each workload rlperf trains is declared beside its cases, in its own module (``cartpole``,
``petri``, ``robots``, ``grid``), as a :class:`Workload`: the env, one small end-to-end training
case, and its component cases with their tags. The case sets the tools use are derived from the
declarations, never listed by hand: ``tagged("gate")`` is ``rlperf gate``'s default set (one e2e
case per workload), ``tagged("history")`` what asv tracks, ``tagged("quick")`` the
pytest-benchmark subset. A new env is one :class:`Workload` in :data:`WORKLOADS` (or
:func:`register_workload`) away from being gated, tracked and tested.

``rlperf gate`` and asv load this package from *their* checkout (``load_registry`` in
``bench/worker.py``) and point ``rlperf`` at the tree under test, so the same definitions time
every commit; ``compat.py`` holds the shims for commits from before an API change.
"""

from __future__ import annotations

from . import atari, cartpole, catch, components, grid, mujoco, petri, robots
from .core import GATE, HISTORY, QUICK, TAGS, Case, CaseSkipped, Extra, Prepared, Workload

__all__ = [
    "GATE", "HISTORY", "QUICK", "TAGS", "Case", "CaseSkipped", "Extra", "Prepared",
    "UnknownCaseError",
    "Workload", "all_cases", "component_names", "gate_case_names", "register_workload",
    "select", "tagged", "uncovered_envs", "unregister_workload", "workloads",
]  # fmt: skip

# The workloads rlperf trains, in the gate's order.
WORKLOADS: list[Workload] = [cartpole.MLP, cartpole.LSTM, petri.WORKLOAD, robots.WORKLOAD,
                             grid.WORKLOAD, mujoco.WORKLOAD, atari.WORKLOAD]  # fmt: skip
# Registered envs that are not a workload of their own, and why.
NOT_WORKLOADS = {"catch": catch.REASON}


class UnknownCaseError(ValueError):
    """A requested case or component is not in the registry."""


def workloads() -> list[Workload]:
    """The declared workloads, in order."""
    return list(WORKLOADS)


def register_workload(workload: Workload) -> None:
    """Declare a workload: its e2e case joins the gate, history and quick sets."""
    if any(w.name == workload.name for w in WORKLOADS):
        raise ValueError(f"workload {workload.name!r} is already registered")
    WORKLOADS.append(workload)


def unregister_workload(name: str) -> None:
    """Remove a workload declared with :func:`register_workload` (tests)."""
    WORKLOADS[:] = [w for w in WORKLOADS if w.name != name]


def uncovered_envs() -> list[str]:
    """Envs the tree registers that no workload trains and :data:`NOT_WORKLOADS` does not
    excuse: each needs a :class:`Workload` to be gated (the registry test lists them)."""
    from rlperf.envs import registered

    covered = {w.env for w in WORKLOADS} | set(NOT_WORKLOADS)
    return [env for env in registered() if env not in covered]


def all_cases() -> list[Case]:
    """Every case, in a stable order: shared components, then each workload's, then Catch's."""
    cases = components.cases()
    for workload in WORKLOADS:
        cases += workload.all_cases()
    return cases + list(catch.CASES)


def tagged(tag: str) -> list[Case]:
    """The cases carrying ``tag`` (one of :data:`TAGS`), in registry order."""
    if tag not in TAGS:
        raise ValueError(f"unknown tag {tag!r}; known: {', '.join(TAGS)}")
    return [c for c in all_cases() if tag in c.tags]


def gate_case_names() -> list[str]:
    """``rlperf gate``'s default cases: each workload's end-to-end case, in workload order."""
    return [c.name for c in tagged(GATE)]


def component_names() -> list[str]:
    """Every component, once, in registry order."""
    return list(dict.fromkeys(c.component for c in all_cases()))


def select(names: list[str]) -> list[Case]:
    """Cases matching each entry, by full name or by component; UnknownCaseError otherwise."""
    cases = all_cases()
    chosen: list[Case] = []
    for wanted in names:
        matches = [c for c in cases if wanted in (c.name, c.component)]
        if not matches:
            raise UnknownCaseError(
                f"unknown benchmark case {wanted!r}; components: {', '.join(component_names())}"
            )
        chosen += [c for c in matches if c not in chosen]
    return chosen
