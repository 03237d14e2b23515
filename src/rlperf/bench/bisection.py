"""``rlperf bisect GOOD BAD``: the first commit between GOOD and BAD that made a case slower.

The commits are BAD's first-parent line after GOOD (the history a main branch records, one
merge at a time). A commit is *slower* when the gate, comparing it with GOOD, calls a case a
regression: every step is a full gate decision (interleaved rounds in fresh processes, the
sign-flip test at the horizon with max-T over the cases, :mod:`rlperf.bench.stats`), never one
timing.
Always comparing with GOOD, not with the last commit found fast, makes "slower than GOOD beyond
the threshold" one property that holds from some commit on, which is what a binary search
needs; a slowdown that crept in over several commits is reported where it crossed the
threshold.

Steps: BAD first (if it is not slower there is nothing to find: exit 0), then a binary search
over the commits between: ``1 + ceil(log2(n))`` gate decisions for ``n`` commits. One worker
serves every step (its round processes import GOOD on one side and the commit under test on
the other), so torch is imported once per bisect, not once per step.

Exit status, as the gate's: 1 the first slower commit was found (a regression exists, and here
is where); 0 BAD is not slower than GOOD (nothing to find); 2 a step could not be decided, or
bad input, or a case crashed (the message names the commit).

Each step holds the gate's false-alarm rate (``(1 - confidence) / 2`` over its cases); a bisect
of k steps takes a wrong turn on an unchanged commit with probability at most k times that.

``rlperf bisect --learning`` searches the same way with the learning gate's step
(``bench/learning_gate.py``): each commit's workloads trained to their return against GOOD's;
the first commit that learns worse than GOOD.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from rlperf.bench.gate import (
    EXIT_OK,
    EXIT_REGRESSION,
    EXIT_UNDECIDED,
    PRELOADED,
    REGISTRY,
    CaseResult,
    GateError,
    Side,
    Worker,
    run_rounds,
)
from rlperf.bench.stats import OK, REGRESSION, UNDECIDED
from rlperf.bench.worktree import (
    GitError,
    checked_out,
    first_parent_path,
    is_ancestor,
    resolve_commit,
)


class BisectError(RuntimeError):
    """Bisect could not run (bad refs, a crashing case, a step undecidable): exit status 2."""


class StepSettings(Protocol):
    """What the search reads of a gate's settings (the SPS gate's or the learning gate's)."""

    threshold: float
    metric: str
    max_rounds: int
    worse: ClassVar[str]  # "slower", "learning worse"

    def check_family(self, num_cases: int) -> None: ...


# One gate decision of a commit against GOOD: (good, commit, cases, settings, log, worker) ->
# each case's result (``decision(metric)``, ``verdicts[metric].ratio``, ``moved_phase()``).
Rounds = Callable[[Side, Side, Any, Any, Callable[[str], None], Worker], list[Any]]


@dataclass
class Step:
    """One gate decision of the search: a commit against GOOD."""

    sha: str
    subject: str
    results: list[CaseResult] = field(repr=False)
    metric: str
    worse: str = "slower"  # the settings' word for a regression

    @property
    def decision(self) -> str:
        """``regression`` if any case regressed, ``ok`` if all are ok, else ``undecided``."""
        decisions = [r.decision(self.metric) for r in self.results]
        if REGRESSION in decisions:
            return REGRESSION
        return OK if all(d == OK for d in decisions) else UNDECIDED

    def worst(self) -> CaseResult:
        """The case that decided the step: a regressed one, else the largest ratio."""
        return max(
            self.results,
            key=lambda r: (
                r.decision(self.metric) == REGRESSION,
                r.verdicts[self.metric].ratio or 0.0,
            ),
        )

    def describe(self) -> str:
        """``1a2b3c4d5e6f "subject": REGRESSION case ratio 1.31 [1.2, 1.4] ...; phase``."""
        case = self.worst()
        text = (
            f'{self.sha[:12]} "{self.subject}": {self.decision.upper()} {case.name} '
            f"{case.verdict_text(self.metric)}"
        )
        return _with_phase(text, case)

    def summary(self) -> str:
        """``1a2b3c4d5e6f "subject": case 1.31x slower; phase``: what the commit did."""
        case = self.worst()
        text = (
            f'{self.sha[:12]} "{self.subject}": {case.name} '
            f"{case.verdicts[self.metric].ratio:.2f}x {self.worse}"
        )
        return _with_phase(text, case)


def _with_phase(text: str, case: CaseResult) -> str:
    """``text``, then the phase that moved most in ``case`` when the sections tell one."""
    phase = case.moved_phase()
    return text if phase is None else f"{text}; {phase.describe()}"


@dataclass
class Outcome:
    """What the search found, and the path it took."""

    good: str
    bad: str
    commits: list[tuple[str, str]]  # (sha, subject) after GOOD up to BAD, oldest first
    steps: list[Step]
    first_slower: Step | None  # None: BAD is not slower (or the search stopped undecided)
    code: int


def max_steps(num_commits: int) -> int:
    """Gate decisions a search over ``num_commits`` commits takes at most: BAD, then halving."""
    return 1 + math.ceil(math.log2(num_commits)) if num_commits > 1 else 1


def bisect(
    repo: Path,
    good_ref: str,
    bad_ref: str,
    cases: Sequence[Any],
    settings: StepSettings,
    log: Callable[[str], None],
    say: Callable[[str], None],
    registry: Path = REGISTRY,
    preload: tuple[str, ...] = PRELOADED,
    rounds: Rounds = run_rounds,
) -> Outcome:
    """Search BAD's first-parent line after GOOD for the first commit slower than GOOD.

    Args:
        repo: the git checkout holding both refs.
        cases: registry case names, decided together at every step.
        log: receives the gate's per-round lines; ``say``: one line per step (the path).
        registry, preload: passed to the worker (tests time a tiny registry, preload nothing).
        rounds: one step's gate decision (default: the SPS gate's; ``rlperf bisect --learning``
            passes the learning gate's, with its workloads as ``cases``).

    Raises:
        BisectError: bad refs, GOOD not an ancestor of BAD, a case that crashed (the message
            names the commit), no case left to time.
    """
    try:
        good, bad = resolve_commit(good_ref, repo), resolve_commit(bad_ref, repo)
        if good == bad:
            raise BisectError(f"GOOD {good_ref} and BAD {bad_ref} are the same commit")
        if not is_ancestor(good, bad, repo):
            raise BisectError(
                f"GOOD {good_ref} ({good[:12]}) is not an ancestor of BAD {bad_ref} ({bad[:12]})"
            )
        commits = first_parent_path(good, bad, repo)
    except GitError as e:
        raise BisectError(str(e)) from e
    try:
        settings.check_family(len(cases))
    except GateError as e:
        raise BisectError(str(e)) from e
    say(
        f"bisect: {len(commits)} commits after GOOD {good[:12]} up to BAD {bad[:12]} "
        f"(first parents); at most {max_steps(len(commits))} steps"
    )
    with checked_out(good, repo) as good_tree:
        good_side = Side("good", good_ref, good, good_tree / "src")
        require_package(good_side)
        worker = Worker(registry, preload)
        try:
            return search(repo, good_side, commits, cases, settings, log, say, worker, rounds)
        finally:
            worker.close()


def search(
    repo: Path,
    good: Side,
    commits: list[tuple[str, str]],
    cases: Sequence[Any],
    settings: StepSettings,
    log: Callable[[str], None],
    say: Callable[[str], None],
    worker: Worker,
    rounds: Rounds = run_rounds,
) -> Outcome:
    """The steps: BAD, then halve ``(known fast, known slower]`` until one commit is left."""
    steps: list[Step] = []

    def decide(index: int) -> Step:
        sha, subject = commits[index]
        with checked_out(sha, repo) as tree:
            side = Side("commit", subject, sha, tree / "src")
            require_package(side)
            log(f"bisect step {len(steps) + 1}: {sha[:12]} against GOOD {good.sha[:12]}")
            try:
                results = rounds(good, side, cases, settings, log, worker)
            except GateError as e:
                raise BisectError(f"at commit {sha[:12]}: {e}") from e
        step = Step(sha, subject, results, settings.metric, settings.worse)
        steps.append(step)
        say(f"step {len(steps)}: {step.describe()}")
        return step

    def outcome(first: Step | None, code: int) -> Outcome:
        return Outcome(good.sha, commits[-1][0], commits, steps, first, code)

    fast, slower = -1, len(commits) - 1  # indices: -1 is GOOD itself
    last = decide(slower)
    if last.decision == OK:
        return outcome(None, EXIT_OK)
    while last.decision != UNDECIDED and slower - fast > 1:
        mid = (fast + slower) // 2
        last = decide(mid)
        if last.decision == REGRESSION:
            slower = mid
        elif last.decision == OK:
            fast = mid
    if last.decision == UNDECIDED:
        return outcome(None, EXIT_UNDECIDED)
    first = next(s for s in steps if s.sha == commits[slower][0])
    return outcome(first, EXIT_REGRESSION)


def require_package(side: Side) -> None:
    if not (side.src / "rlperf" / "__init__.py").is_file():
        raise BisectError(f"{side.label} {side.describe()} has no src/rlperf package")


def verdict_line(out: Outcome, settings: StepSettings) -> str:
    """The last line: what was found, and the exit status."""
    if out.code == EXIT_REGRESSION:
        assert out.first_slower is not None
        return (
            f"bisect: first commit {settings.worse} than GOOD beyond {settings.threshold:.0%}: "
            f"{out.first_slower.summary()} ({len(out.steps)} steps, exit 1)"
        )
    if out.code == EXIT_OK:
        return (
            f"bisect: BAD {out.bad[:12]} is not {settings.worse} than GOOD {out.good[:12]} beyond "
            f"{settings.threshold:.0%}: nothing to find (exit 0)"
        )
    return (
        f"bisect: could not decide at {out.steps[-1].sha[:12]} within {settings.max_rounds} "
        "rounds (exit 2): rerun, or raise --max-rounds"
    )
