"""The SPS regression gate: base and head timed in the same job, interleaved, in fresh processes.

One worker (``worker.py``) imports torch once and forks two fresh processes for every round,
one per side, from itself (one parent, so neither side inherits a layout the other lacks:
``worker.py`` says why that matters); each randomizes its memory layout, imports ``rlperf``
from its side's checkout and sets up the same registry cases. The two round processes then
time ``pairs_per_round`` pairs of samples, both samples of a pair on one CPU, the CPUs in turn
pair after pair: by default both sides at once, the scheduler switching between them every few
milliseconds, so a change in the machine's load hits both (``Settings.pairing``); or in turns,
back to back. The order alternates (A B, B A, ...) so neither side always starts first. Each
sample is a fixed number of calls of the case, calibrated once on the base so both sides do the
same work.

A round yields one value per case: the median over its pairs of ``log(head_s / base_s)``;
the median discards the pairs a burst of load hit unevenly. Rounds
are the independent samples of the statistic (fresh processes, a fresh random memory layout,
forked from one parent); every case runs every round, until all are decided or ``max_rounds``
is reached. The cases of one run, and their rounds pooled (:class:`PooledResult`), are decided
together (:func:`rlperf.bench.stats.decide_family`): the chance that the run calls anything
unchanged a regression is held at ``(1 - confidence) / 2`` for the whole family. The run may
stop early when all are ok; a regression is tested once, at the last round the budget gives.

A sample of a case that runs the trainer also carries the seconds of each trainer section
(``rollout/env_step``, ``update/backward``, ...) spent in it; :mod:`rlperf.bench.phases` names
the section that moved most.

The metric is the worker's CPU time by default: on a shared machine wall time also counts the
time a neighbour held the core, CPU time does not (see docs/benchmarks.md for the measured
false-alarm and catch rates of both). Wall-time ratios are always recorded and reported too.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from rlperf.bench import budget
from rlperf.bench.phases import PhaseShift, moved_phase
from rlperf.bench.stats import (
    OK,
    REGRESSION,
    UNDECIDED,
    Verdict,
    decide_family,
    false_alarm_level,
    median,
    min_rounds,
    min_rounds_to_flag,
    pooled_log_ratios,
)
from rlperf.cores import pinnable_cores

WORKER = Path(__file__).with_name("worker.py")
REGISTRY = Path(__file__).with_name("registry")  # the package, loaded by path
# Third-party modules each worker imports once, before it forks the round processes; those
# marked "?" where installed (the extras' modules). Imported in each round process instead,
# the Atari case's (stable_baselines3's wrappers pull in tensorboard and boto) cost ~1 s of
# CPU a side and round on the slow box, a tenth of a round's setup.
PRELOADED = ("numpy", "torch", "gymnasium", "?ale_py", "?cv2",
             "?stable_baselines3.common.atari_wrappers", "?mujoco")  # fmt: skip
METRICS = ("cpu", "wall")
# Where the round processes' kernel counts them (``worker.py``): instructions per sample, which
# other processes on the machine barely move; decided on with ``metric="instructions"``.
COUNTED = ("instructions",)
# A pair's two samples: at the same time on one CPU, or one after the other (Settings.pairing).
PAIRINGS = ("together", "turns")
EXIT_OK, EXIT_REGRESSION, EXIT_UNDECIDED = 0, 1, 2


class GateError(RuntimeError):
    """The gate could not run (a case crashed, a worker died, bad input): exit status 2."""


@dataclass
class Settings:
    """How the gate measures and decides."""

    # Head this much slower (fraction) counts as a regression: a case is flagged when it is
    # shown slower (the p-value) and its median ratio is above 1 + threshold. 1%, so that a 2%
    # slowdown is caught: the median of 10 rounds lands above the threshold about half the
    # time when the true slowdown equals it, so catching 2% needs the threshold below 2%
    # (docs/gate.md, "2% on a busy runner"). The false-alarm rate rests on the p-value alone.
    threshold: float = 0.01
    metric: str = "cpu"  # "cpu", "wall" or "instructions": what the decision uses
    confidence: float = 0.95  # coverage of the interval on the median ratio
    min_rounds: int = 6
    # The most rounds asked for; the time budget may allow fewer (budget_s, below).
    max_rounds: int = 25
    # 3 pairs of 0.1 s and 0.1 s of warm-up: the default set's 7 cases fit 10 rounds in the
    # budget (rlperf.bench.budget), where 6 can flag one (max-T: 2^-6 <= 2.5%); 6 pairs and
    # 0.2 s, the earlier defaults, fitted 6.
    pairs_per_round: int = 3  # samples per side per round, interleaved
    # How a pair's two samples share their CPU: "together", both sides' calls at once, the
    # kernel's scheduler switching between them every few ms, or "turns", one sample after
    # the other. Beside two busy processes a pair's log-ratio had an sd of 0.12 in turns and
    # 0.04 together (docs/journal/gate.md, 2026-12-03): a neighbour's effect on the CPU time
    # changes within a tenth of a second, and only a finer interleave cancels it. Wall time
    # needs turns (together, each side's wall time counts the other's share of the CPU).
    pairing: str = "together"
    sample_s: float = 0.1  # target CPU seconds of one sample (calls calibrated to reach it)
    warmup_s: float = 0.1  # untimed CPU seconds per case and round (at least 3 calls)
    # Wall seconds a run may take on the slowest box beside two busy processes (CI's 5
    # minutes), planned from the cases' measured costs: it caps max_rounds (0: no budget).
    budget_s: float = budget.GATE_BUDGET_S
    # What a regression is called in bisect's lines ("first commit slower than GOOD").
    worse: ClassVar[str] = "slower"

    def check(self) -> Settings:
        """Raise GateError on values that cannot give a decision."""
        if self.metric not in METRICS + COUNTED:
            known = ", ".join(METRICS + COUNTED)
            raise GateError(f"metric must be one of {known}, got {self.metric!r}")
        if not 0.0 < self.threshold < 10.0:
            raise GateError(f"threshold must be in (0, 10), got {self.threshold}")
        if not 0.5 <= self.confidence < 1.0:
            raise GateError(f"confidence must be in [0.5, 1), got {self.confidence}")
        need = min_rounds(self.confidence)
        if self.max_rounds < max(self.min_rounds, need):
            raise GateError(
                f"max_rounds {self.max_rounds} is below the {max(self.min_rounds, need)} rounds "
                f"a {self.confidence:.0%} interval needs"
            )
        if self.pairs_per_round < 1 or self.sample_s <= 0 or self.warmup_s < 0:
            raise GateError("pairs_per_round must be >= 1, sample_s > 0 and warmup_s >= 0")
        if not self.budget_s >= 0:
            raise GateError(f"budget_s must be >= 0 (0: no budget), got {self.budget_s}")
        if self.pairing not in PAIRINGS:
            raise GateError(f"pairing must be one of {', '.join(PAIRINGS)}, got {self.pairing!r}")
        if self.metric == "wall" and self.pairing == "together":
            raise GateError(
                "--metric wall needs --pairing turns: samples paired together "
                "each count the other side's share of the CPU as wall time"
            )
        return self

    def plan(self, cases: list[str]) -> budget.GatePlan | None:
        """The budget's plan for ``cases`` (None without a budget, or with a case whose cost
        was never measured: a case outside the registry's cost table is not planned)."""
        if not self.budget_s or any(name not in budget.COSTS for name in cases):
            return None
        return budget.gate_plan(cases, self.pairs_per_round, self.sample_s, self.warmup_s,
                                self.budget_s)  # fmt: skip

    def fit_budget(self, cases: list[str]) -> None:
        """Cap ``max_rounds`` at the rounds of ``cases`` the budget holds, in place (so a
        ``--json`` file records the horizon the run was decided with); GateError when those are
        too few to flag a regression among them."""
        plan = self.plan(cases)
        if plan is None or plan.fit_rounds >= self.max_rounds:
            return
        if plan.fit_rounds < min_rounds_to_flag(self.confidence, self.min_rounds):
            raise GateError(
                f"{len(cases)} case(s) at {plan.round_s:.1f} CPU s a round: the "
                f"{duration(self.budget_s)} budget holds {plan.fit_rounds} rounds, too few to "
                "flag a regression: pass fewer --cases, fewer --pairs or a larger --budget-s"
            )
        self.max_rounds = plan.fit_rounds

    def fit_pace(
        self, num_cases: int, spent_s: float, round_s: float, ceiling: int | None = None
    ) -> str | None:
        """After the first round: set ``max_rounds`` to the rounds the budget holds at the pace
        this machine has now (``spent_s`` wall seconds since the gate started, the first
        round's own work ``round_s``: its setups and samples, not the worker's start or the
        calibration of the calls, which later rounds do not repeat), at most ``ceiling`` (the
        rounds asked for; default: ``max_rounds`` as planned), never below the fewest that can
        flag a regression; the line to log when it changed (None otherwise).

        Why: the plan (:meth:`fit_budget`) reads costs measured on one box and scales them to
        the slowest box beside two busy processes, and a box's speed drifts 2x from day to day;
        the first round measures the pace itself, so a faster box spends its budget on more
        rounds rather than leaving it unused. The later rounds are planned at
        :data:`rlperf.bench.budget.LATER_ROUNDS` times its wall time. Its wall time cannot
        depend on the verdict (the regression test is taken once, at the horizon), so setting
        the horizon from it keeps the false-alarm rate."""
        if not self.budget_s or round_s <= 0:
            return None
        ceiling = self.max_rounds if ceiling is None else max(ceiling, self.max_rounds)
        fit = 1 + math.floor(max(0.0, self.budget_s - spent_s) / (budget.LATER_ROUNDS * round_s))
        need = min_rounds_to_flag(self.confidence, self.min_rounds)
        rounds = min(ceiling, max(fit, need))
        if rounds == self.max_rounds:
            return None
        planned, self.max_rounds = self.max_rounds, rounds
        pace = f"gate: round 1 took {duration(round_s)}"
        if fit >= need:
            budget_s = duration(self.budget_s)
            return f"{pace}: {rounds} rounds fit the {budget_s} budget (of {planned} planned)"
        return (
            f"{pace}: the {duration(self.budget_s)} budget holds {fit} rounds at this pace, too "
            f"few to flag a regression among {num_cases} case(s); running the {need} that can "
            f"(~{duration(spent_s + (need - 1) * round_s)})"
        )

    def check_family(self, num_cases: int) -> None:
        """GateError when ``max_rounds`` could not flag a regression among ``num_cases`` cases
        (the smallest p-value over n rounds is 2^-n, for any number of cases: max-T,
        :func:`rlperf.bench.stats.maxt_adjusted_pvalues`)."""
        if self.max_rounds >= min_rounds_to_flag(self.confidence, self.min_rounds):
            return
        raise GateError(
            f"max_rounds {self.max_rounds} is too few to flag a regression among {num_cases} "
            f"cases at a {false_alarm_level(self.confidence):.1%} family-wise false-alarm "
            "rate: raise --max-rounds or pass fewer --cases"
        )


@dataclass
class Side:
    """One of the two trees compared: what the user asked for and where its source lives."""

    label: str  # "base" or "head"
    ref: str  # as given ("origin/main", "working tree")
    sha: str  # commit, or "" for the working tree
    src: Path = field(repr=False)

    def describe(self) -> str:
        return f"{self.ref} ({self.sha[:12]})" if self.sha else self.ref


class Worker:
    """The process that times both sides, driven by JSON lines (``worker.py``).

    It forks each round's two round processes (one per side) from itself, so the sides share
    everything a fork inherits and differ only by their own, randomized, allocations. The sides
    may change between rounds: ``rlperf bisect`` keeps one worker for all its steps, so a step
    does not pay for importing torch again.

    Args:
        registry: the case definitions (default: the gate's own ``registry`` package).
        preload: modules imported once before forking (default :data:`PRELOADED`).
    """

    def __init__(self, registry: Path = REGISTRY, preload: tuple[str, ...] = PRELOADED) -> None:
        self.sides: dict[str, Side] = {}  # label -> tree, set by run_rounds
        self.setup_answers: dict[str, dict[str, Any]] = {}  # label -> the round's setup reply
        self._stderr = tempfile.TemporaryFile(mode="w+")
        # One thread: the two sides alternate on a 2-core box shared with other jobs, and
        # intra-op threads would add spin-waiting and scheduling noise to the CPU time.
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": ""}
        cmd = [sys.executable, str(WORKER), "--registry", str(registry),
               "--preload", ",".join(preload)]  # fmt: skip
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            text=True, env=env,
        )  # fmt: skip

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one request, return its reply; GateError naming the side on any failure."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        try:
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            self._raise_died(request)
        line = self._proc.stdout.readline()
        if not line:
            self._raise_died(request)
        answer = json.loads(line)
        if "error" in answer:
            what = f"case {request['case']}" if "case" in request else "setup"
            side = self.sides.get(answer.get("side", ""))
            where = f" on {side.label} {side.describe()}" if side is not None else ""
            raise GateError(f"{what} failed{where}: {answer['error']}")
        return answer

    def _raise_died(self, request: dict[str, Any]) -> None:
        self._proc.wait()
        self._stderr.seek(0)
        lines = [line for line in self._stderr.read().splitlines() if line.strip()]
        last = lines[-1] if lines else f"exit status {self._proc.returncode}"
        sides = " vs ".join(s.describe() for s in self.sides.values())
        raise GateError(f"the gate's worker ({sides}) died during {request['op']}: {last}")

    def close(self) -> None:
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            try:
                self._proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._stderr.close()


def begin_round(worker: Worker, cases: list[str], warmup_s: float, pairing: str = "turns") -> None:
    """Fresh round processes for both sides, set up (concurrently: nothing is timed yet)."""
    sides = {label: str(side.src) for label, side in worker.sides.items()}
    request = {"op": "setup", "sides": sides, "cases": cases, "warmup_s": warmup_s,
               "pairing": pairing}  # fmt: skip
    worker.setup_answers = worker.ask(request)["sides"]


def end_round(worker: Worker) -> None:
    worker.ask({"op": "end"})


# -- samples and their analysis ----------------------------------------------------------
# "base"/"head" -> [{"wall_s": s, "cpu_s": s, "sections_s": {name: s}}, ...]; "sections_s"
# only for cases that run the trainer, on commits that have the process-wide profiler.
Samples = dict[str, list[dict[str, Any]]]


def sample_key(metric: str) -> str:
    """A sample's field for ``metric``: ``cpu_s``, ``wall_s``, ``instructions``."""
    return metric if metric in COUNTED else f"{metric}_s"


def measured_metrics(results: list[CaseResult], pairing: str = "turns") -> tuple[str, ...]:
    """The metrics every sample has: cpu, wall where the pairs ran in turns (paired together,
    a side's wall time counts the other's share of the CPU), and instructions where they were
    counted."""
    samples = [s for r in results for rounds in r.rounds for side in rounds.values() for s in side]
    timed = METRICS if pairing == "turns" else tuple(m for m in METRICS if m != "wall")
    return timed + tuple(m for m in COUNTED if samples and all(m in s for s in samples))


def fastest(samples: list[dict[str, float]], metric: str) -> float:
    """The least disturbed sample's value (seconds, or instructions)."""
    return min(s[sample_key(metric)] for s in samples)


def round_log_ratio(round_samples: Samples, metric: str) -> float:
    """Median over the round's pairs of log(head / base); pair j ran back to back."""
    key = sample_key(metric)
    pairs = zip(round_samples["base"], round_samples["head"], strict=True)
    return median([math.log(head[key] / base[key]) for base, head in pairs])


def analyse(results: list[CaseResult], settings: Settings) -> PooledResult | None:
    """Set every case's verdict for each metric, the cases and their pooled rounds decided as
    one family; returns the pooled cases' result (None for one case, or cases whose rounds
    differ, as in files from before 2026-11-29, when cases stopped one by one). GateError
    when the samples lack the metric the decision uses (instructions not counted)."""
    cases = [r for r in results if not isinstance(r, PooledResult)]
    metrics = measured_metrics(cases, settings.pairing)
    if settings.metric not in metrics:
        raise GateError(f"--metric {settings.metric}: the samples have no {settings.metric}")
    poolable = len(cases) > 1 and len({len(r.rounds) for r in cases}) == 1
    pooled = PooledResult(cases) if poolable else None
    for metric in metrics:
        family = {r.name: [round_log_ratio(rounds, metric) for rounds in r.rounds] for r in cases}
        if pooled is not None:
            family[pooled.name], pooled.weights[metric] = pooled_log_ratios(family)
        verdicts = decide_family(
            family,
            settings.threshold,
            settings.confidence,
            first_look=settings.min_rounds,
            horizon=settings.max_rounds,
            close_at_horizon=True,  # no more rounds: not shown slower, median within: ok
        )
        for res in cases:
            res.verdicts[metric] = verdicts[res.name]
        if pooled is not None:
            pooled.verdicts[metric] = verdicts[pooled.name]
    return pooled


@dataclass
class CaseResult:
    """Everything the gate measured for one case, and its verdicts."""

    name: str
    calls_per_sample: int
    items_per_call: int
    items_unit: str
    rounds: list[Samples] = field(default_factory=list)
    verdicts: dict[str, Verdict] = field(default_factory=dict)

    def decision(self, metric: str) -> str:
        return self.verdicts[metric].decision

    def verdict_text(self, metric: str) -> str:
        """The verdict on ``metric`` as a report line gives it (:func:`format_verdict`)."""
        return format_verdict(self.verdicts[metric])

    def moved_phase(self) -> PhaseShift | None:
        """The trainer section whose time moved most (None for a case without sections)."""
        return moved_phase(self.rounds)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["verdicts"] = {m: v.to_dict() for m, v in self.verdicts.items()}
        phase = self.moved_phase()
        out["moved_phase"] = None if phase is None else asdict(phase)
        return out


class PooledResult(CaseResult):
    """The gate's cases taken together: each round's log-ratios averaged with inverse-noise
    weights (:func:`rlperf.bench.stats.pooled_log_ratios`) and decided as one more member of
    the cases' family. A slowdown in code every case runs (the update, GAE) shows in each
    case's rounds beneath their noise; in the pooled rounds the cases' noise averages out.
    It has no samples of its own: the phase that moved is read from every case's rounds."""

    def __init__(self, members: list[CaseResult]) -> None:
        super().__init__(f"all {len(members)} cases, pooled", 0, 0, "")
        self.members = members
        self.weights: dict[str, dict[str, float]] = {}  # metric -> case -> weight (sum 1)

    def moved_phase(self) -> PhaseShift | None:
        return moved_phase([r for member in self.members for r in member.rounds])

    def to_dict(self) -> dict[str, Any]:
        phase = self.moved_phase()
        return {
            "name": self.name,
            "pooled_of": [m.name for m in self.members],
            "weights": self.weights,
            "verdicts": {m: v.to_dict() for m, v in self.verdicts.items()},
            "moved_phase": None if phase is None else asdict(phase),
        }


def run_rounds(
    base: Side,
    head: Side,
    cases: list[str],
    settings: Settings,
    log: Callable[[str], None],
    worker: Worker | None = None,
    started: float | None = None,
) -> list[CaseResult]:
    """Alternate base and head in fresh processes, round after round, until all are decided.

    A case either side skips (``CaseSkipped``: a component the base commit does not have yet,
    CUDA on a CPU box) is logged with its reason and left out; GateError if none is left.
    Every case runs every round, so that their rounds pool (:class:`PooledResult`); the run
    stops early only when every case and the pooled rounds are ok. Returns the cases' results,
    then the pooled result where there are two or more cases.

    Args:
        worker: a :class:`Worker` to reuse (pointed at ``base`` and ``head`` here, left open
            for the caller); default: a new one, closed at the end.
        started: ``time.perf_counter()`` when the gate started (its worktrees, its imports),
            what the budget counts from (:meth:`Settings.fit_pace`); default: now.
    """
    results: dict[str, CaseResult] = {}
    asked = settings.max_rounds
    settings.fit_budget(cases)
    log(plan_line(cases, settings, asked))
    started = time.perf_counter() if started is None else started
    pooled, cpus = None, pinnable_cores()
    owned = worker is None
    if worker is None:
        worker = Worker()
    worker.sides = {"base": base, "head": head}
    try:
        # Once: the worker imports its preloads before it reads a request (torch, gymnasium,
        # the extras: ~10 s beside two busy processes), which no later round repeats.
        worker.ask({"op": "ready"})
        r, calibrate_s = 0, 0.0
        while r < settings.max_rounds:
            round_started = time.perf_counter()
            begin_round(worker, cases, settings.warmup_s, settings.pairing)
            if r == 0:
                for side, answer in worker.setup_answers.items():
                    for case, reason in answer.get("skipped", {}).items():
                        log(f"skipping {case} (not on {side}: {reason})")
                        if case in cases:
                            cases = [c for c in cases if c != case]
                if not cases:
                    raise GateError("no case can be timed on both base and head")
                for side, answer in worker.setup_answers.items():
                    if settings.metric in COUNTED and "no_instructions" in answer:
                        raise GateError(f"--metric {settings.metric} on {side}: "
                                        f"{answer['no_instructions']}")  # fmt: skip
                calibrating = time.perf_counter()
                for case in cases:
                    request = {"op": "calibrate", "side": "base", "case": case,
                               "sample_s": settings.sample_s}  # fmt: skip
                    calls = worker.ask(request)["calls"]
                    items, unit = worker.setup_answers["base"]["items"][case]
                    results[case] = CaseResult(case, calls, items, unit)
                calibrate_s = time.perf_counter() - calibrating
            for case in cases:
                results[case].rounds.append(measure_round(worker, results[case], r, settings,
                                                          cpus))  # fmt: skip
            end_round(worker)
            if r == 0:  # the pace of a round as the later ones run: no calibration
                now = time.perf_counter()
                round_s = now - round_started - calibrate_s
                line = settings.fit_pace(len(cases), now - started, round_s, ceiling=asked)
                if line is not None:
                    log(line)
            pooled = analyse(list(results.values()), settings)
            decided = [*results.values(), *([pooled] if pooled is not None else [])]
            done = r + 1 >= settings.min_rounds and all(
                res.decision(settings.metric) != UNDECIDED for res in decided
            )
            # One short line a round; each case's ratio and interval are in the report and
            # the --json file.
            elapsed = time.perf_counter() - started
            left = 0.0 if done else (settings.max_rounds - r - 1) * elapsed / (r + 1)
            log(round_line(r + 1, settings.max_rounds, decided, settings.metric, elapsed, left))
            if done:
                break
            r += 1
    finally:
        if owned:
            worker.close()
    ordered: list[CaseResult] = [results[c] for c in cases]
    return ordered + ([pooled] if pooled is not None else [])


def plan_line(cases: list[str], settings: Settings, asked_rounds: int) -> str:
    """What the gate says before its first round: the budget's plan (cases, calls a sample,
    rounds) where the cases' costs are measured, else :func:`estimate_line`."""
    plan = settings.plan(cases)
    if plan is None:
        return estimate_line(len(cases), settings)
    capped = f" (of {asked_rounds} asked)" if settings.max_rounds < asked_rounds else ""
    calls = ", ".join(str(c) for c in plan.calls)
    here = [n * plan.round_s for n in (settings.min_rounds, settings.max_rounds)]
    return (
        f"gate: {len(cases)} case(s) x {settings.min_rounds}-{settings.max_rounds} rounds"
        f"{capped}, {settings.pairs_per_round} pairs a round, calls a sample {calls}\n"
        f"gate: planned {duration(here[0])} to {duration(here[1])} of CPU; at most "
        f"{duration(plan.worst_s(settings.max_rounds))} on the slowest box beside two busy "
        f"processes (budget {duration(settings.budget_s)})"
    )


def estimate_line(num_cases: int, settings: Settings) -> str:
    """What the gate says before its first round: how long it may take, from the configured
    CPU seconds of one case's round (warm-up and samples, both sides)."""
    case_round_s = 2 * (settings.warmup_s + settings.pairs_per_round * settings.sample_s)
    fewest, most = (n * num_cases * case_round_s for n in (settings.min_rounds,
                                                           settings.max_rounds))  # fmt: skip
    return (
        f"gate: {num_cases} case(s) x {settings.min_rounds}-{settings.max_rounds} rounds: "
        f"estimated {duration(fewest)} to {duration(most)} (timed CPU alone; a busy machine "
        "adds to it)"
    )


def round_line(
    done: int, max_rounds: int, results: list[CaseResult], metric: str, elapsed_s: float,
    left_s: float,
) -> str:  # fmt: skip
    """One round's line: the cases' decisions so far, time spent, at most how long is left
    (the rounds still allowed at the measured seconds of a case's round: an estimate)."""
    decisions = [r.decision(metric) for r in results if not isinstance(r, PooledResult)]
    counts = ", ".join(f"{decisions.count(d)} {d}" for d in (OK, REGRESSION, UNDECIDED)
                       if d in decisions)  # fmt: skip
    counts += "".join(f", pooled {r.decision(metric)}" for r in results
                      if isinstance(r, PooledResult))  # fmt: skip
    ratios = [ratio for r in results if (ratio := r.verdicts[metric].ratio) is not None]
    worst = f"; head/base up to {max(ratios):.3f}" if ratios else ""
    left = f"; at most ~{duration(left_s)} left (estimate)" if left_s > 0 else ""
    return f"round {done}/{max_rounds}: {counts}{worst}; {duration(elapsed_s)}{left}"


def duration(seconds: float) -> str:
    """``42 s`` or ``3.4 min``."""
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def pair_cpu(cpus: list[int] | None, round_index: int, pair: int, pairs: int) -> dict[str, int]:
    """The ``cpu`` field of both measure requests of one pair: ``cpus``
    (:func:`rlperf.cores.pinnable_cores`) in turn, pair after pair, so that each side runs on
    each CPU equally often; nothing where none can be pinned.

    Why: on a shared 2-vCPU runner the two CPUs are not equally fast (a neighbour on the host
    shares one's physical core), and the scheduler kept a round process on one of them for
    much of a round, so the two sides of a pair could run on different CPUs and their ratio
    measured the CPUs as much as the code (a case's round sd 0.053 busy, 0.025 pinned)."""
    if not cpus:
        return {}
    return {"cpu": cpus[(round_index * pairs + pair) % len(cpus)]}


def measure_round(
    worker: Worker, result: CaseResult, round_index: int, settings: Settings, cpus: list[int]
) -> Samples:
    """``pairs_per_round`` pairs, both samples of a pair on one of ``cpus`` (:func:`pair_cpu`,
    recorded in the samples as ``cpu``), the order alternating (A B, B A, ...): with
    ``settings.pairing`` "together" the order the two sides are started in, with "turns" the
    order they run in, back to back."""
    samples: Samples = {"base": [], "head": []}
    request = {"op": "measure", "case": result.name, "calls": result.calls_per_sample}
    for j in range(settings.pairs_per_round):
        order = ("base", "head") if (round_index + j) % 2 == 0 else ("head", "base")
        pinned = pair_cpu(cpus, round_index, j, settings.pairs_per_round)
        answers = measure_pair(worker, {**request, **pinned}, order, settings.pairing)
        for label in ("base", "head"):
            samples[label].append(sample_of(answers[label], pinned))
    return samples


def measure_pair(
    worker: Worker, request: dict[str, Any], order: Sequence[str], pairing: str
) -> dict[str, dict[str, Any]]:
    """One pair of ``measure`` ``request`` (case, calls, cpu), side -> its reply: both sides
    started at once in ``order`` ("together"), or one after the other in it ("turns")."""
    if pairing == "together":
        return worker.ask({**request, "op": "measure_together", "order": list(order)})["sides"]
    return {label: worker.ask({**request, "side": label}) for label in order}


def sample_of(answer: dict[str, Any], pinned: dict[str, int]) -> dict[str, Any]:
    """A sample as the ``--json`` file keeps it, from a round process's ``measure`` reply."""
    sample = {"wall_s": answer["wall_s"], "cpu_s": answer["cpu_s"], **pinned}
    for counted in COUNTED:
        if counted in answer:
            sample[counted] = answer[counted]
    if "sections_s" in answer:
        sample["sections_s"] = answer["sections_s"]
    return sample


def format_verdict(v: Verdict) -> str:
    """``ratio 1.006 [0.991, 1.025] ok (not shown slower in 25 rounds, median below 1.02)``:
    the ratio, its interval and the decision, with why wherever the interval does not show it
    (docs/gate.md): a regression gives its p-value, ``ok`` with the whole interval below the
    limit stands alone, and every other outcome (``ok`` at the horizon, ``undecided``) says
    its reason, so an interval that reaches past the limit is never read as a plain ``ok``."""
    if v.low is None or v.high is None:
        ratio = "n/a" if v.ratio is None else f"{v.ratio:.3f}"
        return f"ratio {ratio} ({v.reason})"
    shown = f"ratio {v.ratio:.3f} [{v.low:.3f}, {v.high:.3f}] {v.decision}"
    if v.decision == REGRESSION and v.p_value is not None:
        return f"{shown} (p={v.p_value:.2g})"
    if v.decision == OK and v.limit is not None and v.high < v.limit:
        return shown
    return f"{shown} ({v.reason})"


class Decided(Protocol):
    """A case or workload the gate decided (``CaseResult``, the learning gate's results)."""

    def decision(self, metric: str) -> str: ...


def exit_code(results: Sequence[Decided], metric: str) -> int:
    """1 if any case regressed, else 2 if any is undecided, else 0."""
    decisions = [r.decision(metric) for r in results]
    if REGRESSION in decisions:
        return EXIT_REGRESSION
    if any(d != OK for d in decisions):
        return EXIT_UNDECIDED
    return EXIT_OK


def report(results: list[CaseResult], settings: Settings) -> str:
    """Human-readable table: per case, head/base ratio with its interval, both metrics, and
    the trainer section that moved most."""
    clock = settings.metric if settings.metric in METRICS else "cpu"  # for the rates
    cases = sum(not isinstance(r, PooledResult) for r in results)
    pooled = " and their pooled rounds" if len(results) > cases else ""
    family = f" over {cases} cases{pooled} (max-T)" if cases > 1 else ""
    what = "instructions" if settings.metric in COUNTED else f"{settings.metric} time"
    lines = [
        f"head/base time ratio (>1: head slower); threshold {1 + settings.threshold:.2f}, "
        f"{settings.confidence:.0%} interval on the median of the rounds; decided on "
        f"{what}, false alarms <= {false_alarm_level(settings.confidence):.1%}"
        f"{family}"
    ]
    for res in results:
        verdict = res.verdicts[settings.metric]
        if isinstance(res, PooledResult):
            weights = res.weights[settings.metric]
            heaviest = max(weights, key=weights.__getitem__)
            lines.append(
                f"  {res.name}: {verdict.decision.upper()} {settings.metric} "
                f"{format_verdict(verdict)} over {verdict.rounds} rounds | weights 1/noise^2, "
                f"heaviest {heaviest} {weights[heaviest]:.0%}"
            )
            phase = res.moved_phase()
            if phase is not None:
                lines.append(f"    phase that moved most: {phase.describe()}")
            continue
        base_s = median([fastest(r["base"], clock) for r in res.rounds])
        head_s = median([fastest(r["head"], clock) for r in res.rounds])
        others = "".join(f"; {m} {format_verdict(v)}" for m, v in res.verdicts.items()
                         if m != settings.metric)  # fmt: skip
        items = res.items_per_call * res.calls_per_sample
        rate = f" | {items / base_s:,.0f} -> {items / head_s:,.0f} {res.items_unit}/s"
        lines.append(
            f"  {res.name}: {verdict.decision.upper()} {settings.metric} "
            f"{format_verdict(verdict)} over {verdict.rounds} rounds{rate}{others}"
        )
        phase = res.moved_phase()
        if phase is not None:
            lines.append(f"    phase that moved most: {phase.describe()}")
    return "\n".join(lines)


# -- saved results -----------------------------------------------------------------------
def results_from_json(data: Any) -> list[CaseResult]:
    """Rebuild CaseResults from a ``--json`` file; GateError on anything malformed."""
    try:
        results = []
        for entry in data["cases"]:
            res = CaseResult(
                str(entry["name"]), int(entry["calls_per_sample"]),
                int(entry.get("items_per_call", 0)), str(entry.get("items_unit", "")),
            )  # fmt: skip
            for r in entry["rounds"]:
                samples: Samples = {
                    side: [sample_from_json(s) for s in r[side]] for side in ("base", "head")
                }
                if not samples["base"] or not samples["head"]:
                    raise ValueError("a round without samples")
                if len(samples["base"]) != len(samples["head"]):
                    raise ValueError("a round whose base and head sample counts differ")
                res.rounds.append(samples)
            results.append(res)
    except (KeyError, TypeError, ValueError) as e:
        raise GateError(f"malformed gate results: {type(e).__name__}: {e}") from e
    if not results:
        raise GateError("malformed gate results: no cases")
    return results


def sample_from_json(entry: dict[str, Any]) -> dict[str, Any]:
    """One sample of a ``--json`` file, checked; ValueError/KeyError/TypeError if malformed."""
    sample: dict[str, Any] = {m: float(entry[m]) for m in ("wall_s", "cpu_s")}
    sample.update({m: float(entry[m]) for m in COUNTED if m in entry})
    if not all(math.isfinite(t) and t > 0 for t in sample.values()):
        raise ValueError("a sample time or count that is not a positive number")
    if "sections_s" in entry:
        sections = {str(k): float(v) for k, v in entry["sections_s"].items()}
        if not all(math.isfinite(t) and t >= 0 for t in sections.values()):
            raise ValueError("a section time that is not a non-negative number")
        sample["sections_s"] = sections
    if "cpu" in entry:  # the CPU its pair ran on (pair_cpu)
        sample["cpu"] = int(entry["cpu"])
    return sample
