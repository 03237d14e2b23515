"""The learning gate: does the head learn as fast as the base, in env steps to a return?

``rlperf gate`` guards SPS; a change that keeps SPS and breaks learning (a done mask off by one
step in GAE, a sign in the entropy term, a learning rate) passes it. This gate trains each
workload of ``registry/learning.py`` up to its return threshold, with a step cap, on the base
and on the head: per round one run per side and workload, each in a process forked for it
from the gate's one worker (``worker.py``: the sides' trees imported fresh, the memory layout
randomized), the two sides' runs at the same time, a new seed for every run (base ``S + 2r``,
head ``S + 2r + 1`` in round ``r``).

Each run gives steps to the threshold (what the algorithm learned), CPU seconds to it (what the
user pays) and its SPS; a run that never reaches the threshold is censored at the cap.
:mod:`rlperf.bench.censored` decides: Gehan's test on the censored samples, looked at a few
fixed round counts with linear alpha spending, Holm over the workloads, so the chance that a
gate run flags any unchanged workload is at most ``(1 - confidence) / 2``. The gate stops a
workload once decided (a regression, or at a look before the last, no worse at all) and stops
when every workload is.

The decision is on steps to the return by default (``--metric steps``; the SPS gate guards
the speed), or on CPU seconds to it (``--metric cpu``, the product of both). Either way each
workload's line says what moved: steps to the return, SPS, or both.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from rlperf.bench.censored import (
    LearningVerdict,
    Obs,
    Ratio,
    decide_learning,
    gehan_test,
    look_rounds,
    median_ratio,
    spending_weights,
)
from rlperf.bench.gate import (
    EXIT_REGRESSION,
    EXIT_UNDECIDED,
    PRELOADED,
    REGISTRY,
    GateError,
    Side,
    Worker,
    duration,
)
from rlperf.bench.stats import OK, REGRESSION, UNDECIDED, false_alarm_level, median

LEARNING_REGISTRY = REGISTRY / "learning.py"  # loaded by path, as the SPS registry is
LEARNING_METRICS = ("steps", "cpu")  # what the decision is on: env steps or CPU s to return
METRIC_WORDS = {"steps": "steps to return", "cpu": "CPU s to return"}
SEED_LIMIT = 2**31  # seeds numpy and torch both take
MAX_RUNS_PER_ROUND = 4  # a registry workload's runs_per_round is at most this


@dataclass
class LearningSettings:
    """How the learning gate samples and decides."""

    # A head needing this much more (fraction) to reach the return is a regression. 10%: the
    # planted bugs cost 25% or more; a noisier workload's median moves ~10% between two sets of
    # 12 seeds, so a smaller threshold would be reached by noise alone.
    threshold: float = 0.10
    metric: str = "steps"  # "steps" or "cpu"
    confidence: float = 0.95  # false alarms <= (1 - confidence) / 2 for the whole gate run
    min_rounds: int = 6  # the first look (runs per side)
    max_rounds: int = 12  # the last look
    looks: int = 3  # looks, evenly spaced from min_rounds to max_rounds (6, 9, 12)
    together: bool = True  # the base's and the head's run of a round train at the same time
    seed: int | None = None  # S: runs take seeds S, S + 1, ...; None: drawn at random
    # What a regression is called, in bisect's lines ("first commit that learns worse").
    worse: ClassVar[str] = "learning worse"

    def check(self) -> LearningSettings:
        """Raise GateError on values that cannot give a decision."""
        if self.metric not in LEARNING_METRICS:
            raise GateError(
                f"--learning --metric must be one of {', '.join(LEARNING_METRICS)}, "
                f"got {self.metric!r}"
            )
        if not 0.0 < self.threshold < 10.0:
            raise GateError(f"threshold must be in (0, 10), got {self.threshold}")
        if not 0.5 <= self.confidence < 1.0:
            raise GateError(f"confidence must be in [0.5, 1), got {self.confidence}")
        if self.min_rounds < 2 or self.max_rounds < self.min_rounds:
            raise GateError(
                f"--min-rounds must be >= 2 and --max-rounds >= --min-rounds, got "
                f"{self.min_rounds} and {self.max_rounds}"
            )
        if not 1 <= self.looks <= self.max_rounds - self.min_rounds + 1:
            raise GateError(
                f"--looks must be in [1, {self.max_rounds - self.min_rounds + 1}] (one look a "
                f"round at most from --min-rounds to --max-rounds), got {self.looks}"
            )
        span = seed_span(self)
        if self.seed is not None and not 0 <= self.seed < SEED_LIMIT - span:
            raise GateError(f"--seed must be in [0, {SEED_LIMIT - span}), got {self.seed}")
        return self

    def look_rounds(self) -> list[int]:
        return look_rounds(self.min_rounds, self.max_rounds, self.looks)

    def check_family(self, num_workloads: int) -> None:
        """GateError when no look could flag a regression among ``num_workloads`` workloads:
        the smallest p-value of a look of n runs a side is 1 / C(2n, n) (every head run longer
        than every base run), and Holm asks the first for p / w_k <= alpha / num_workloads."""
        looks = self.look_rounds()
        level = false_alarm_level(self.confidence) / num_workloads
        if any(1 / math.comb(2 * n, n) / w <= level
               for n, w in zip(looks, spending_weights(looks), strict=True)):  # fmt: skip
            return
        raise GateError(
            f"looks at {looks} rounds are too few to flag a regression among {num_workloads} "
            f"workloads at a {false_alarm_level(self.confidence):.1%} family-wise false-alarm "
            "rate: raise --min-rounds and --max-rounds, or pass fewer --workloads"
        )


@dataclass
class WorkloadResult:
    """Every run of one workload, both sides, and the verdicts on them."""

    name: str
    what: str
    threshold: float
    cap: int
    runs_per_round: int = 1  # runs per side a round (the registry's; looks count rounds)
    # "base"/"head" -> runs in round order: {"seed", "reached", "steps", "cpu_s", "wall_s",
    # "final_return", "sps"}
    runs: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {"base": [], "head": []})
    verdicts: dict[str, LearningVerdict] = field(default_factory=dict)

    @property
    def rounds(self) -> int:
        return min(len(self.runs["base"]), len(self.runs["head"])) // self.runs_per_round

    def decision(self, metric: str) -> str:
        return self.verdicts[metric].decision

    def verdict_text(self, metric: str) -> str:
        """``steps to return 1.62x (median above 1.10, worse: p=0.0011)``."""
        return format_verdict(self.verdicts[metric], metric)

    def obs(self, side: str, metric: str) -> list[Obs]:
        """The side's runs as censored observations of ``metric`` (steps or CPU seconds)."""
        key = "steps" if metric == "steps" else "cpu_s"
        return [Obs(float(run[key]), bool(run["reached"])) for run in self.runs[side]]

    def sps(self, side: str) -> list[float]:
        """Each run's env steps per CPU second after its first iteration (reached or not; over
        the whole run in files from before the runs reported it)."""
        return [run.get("sps") or run["steps"] / run["cpu_s"] for run in self.runs[side]]

    def censored(self, side: str) -> int:
        return sum(not run["reached"] for run in self.runs[side])

    def moved(self, settings: LearningSettings) -> Moved:
        return moved(self, settings)

    def moved_phase(self) -> Moved | None:
        """What moved, as bisect names a case's moved phase (a ``describe()``)."""
        return self.moved(LearningSettings())

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k != "verdicts"}
        out["verdicts"] = {m: v.to_dict() for m, v in self.verdicts.items()}
        return out


@dataclass
class Shift:
    """One quantity's head/base ratio, and whether it moved: one-sided tests each way at the
    gate's alpha (together, two-sided at ``1 - confidence``)."""

    what: str  # "steps to return", "SPS"
    ratio: Ratio
    p_up: float  # p-value of "the head's is larger"
    p_down: float  # of "the head's is smaller"
    alpha: float
    higher_is_worse: bool = True

    @property
    def moved(self) -> bool:
        return min(self.p_up, self.p_down) <= self.alpha

    def describe(self) -> str:
        if not self.moved:
            p = min(self.p_up, self.p_down)
            return f"{self.what} {self.ratio} unchanged within noise (p={p:.2g})"
        up = self.p_up <= self.p_down
        word = "worse" if up == self.higher_is_worse else "better"
        return f"{self.what} {self.ratio} {word} (p={min(self.p_up, self.p_down):.2g})"


@dataclass
class Moved:
    """What moved between base and head in one workload: steps to return, SPS, both or
    neither (two-sided tests at the gate's alpha over all the runs)."""

    steps: Shift
    sps: Shift

    @property
    def summary(self) -> str:
        names = [s.what for s in (self.steps, self.sps) if s.moved]
        return " and ".join(names) if names else "neither steps to return nor SPS"

    def describe(self) -> str:
        return f"moved: {self.summary}: {self.steps.describe()}; {self.sps.describe()}"


def moved(result: WorkloadResult, settings: LearningSettings) -> Moved:
    """Steps to return by Gehan's test, SPS by the Mann-Whitney test (every run has an SPS)."""
    alpha = false_alarm_level(settings.confidence)
    head, base = result.obs("head", "steps"), result.obs("base", "steps")
    steps_test = gehan_test(head, base)
    steps = Shift("steps to return", median_ratio(head, base), steps_test.p_worse,
                  steps_test.p_better, alpha)  # fmt: skip
    head_sps, base_sps = result.sps("head"), result.sps("base")
    sps_test = gehan_test([Obs(v) for v in head_sps], [Obs(v) for v in base_sps])
    sps = Shift("SPS", Ratio(median(head_sps) / median(base_sps)), sps_test.p_worse,
                sps_test.p_better, alpha, higher_is_worse=False)  # fmt: skip
    return Moved(steps, sps)


def analyse(results: list[WorkloadResult], settings: LearningSettings) -> None:
    """Every workload's verdict on each metric, the workloads decided as one family."""
    looks = settings.look_rounds()
    per_round = {r.name: r.runs_per_round for r in results}
    for metric in LEARNING_METRICS:
        runs = {r.name: (r.obs("head", metric), r.obs("base", metric)) for r in results}
        verdicts = decide_learning(runs, looks, settings.threshold, settings.confidence,
                                   per_round)  # fmt: skip
        for res in results:
            res.verdicts[metric] = verdicts[res.name]


def first_seed(settings: LearningSettings) -> int:
    """S: the seed of the first base run (drawn at random unless ``--seed`` gave one)."""
    if settings.seed is not None:
        return settings.seed
    return random.SystemRandom().randrange(SEED_LIMIT - seed_span(settings))


def seed_span(settings: LearningSettings) -> int:
    """Seeds a gate run may use from S on: two a run, up to MAX_RUNS_PER_ROUND runs a round."""
    return 2 * settings.max_rounds * MAX_RUNS_PER_ROUND


def run_seeds(first: int, round_index: int, run: int, runs_per_round: int) -> dict[str, int]:
    """The seeds of run ``run`` of round ``round_index`` (both from 0): base even, head odd
    after S, every run of a workload its own pair."""
    k = round_index * runs_per_round + run
    return {"base": first + 2 * k, "head": first + 2 * k + 1}


def run_learning_rounds(
    base: Side,
    head: Side,
    workloads: list[tuple[str, float | None]],
    settings: LearningSettings,
    log: Callable[[str], None],
    worker: Worker | None = None,
    describe: Callable[[str], tuple[str, float, int, int]] | None = None,
) -> list[WorkloadResult]:
    """Rounds of runs (the workload's ``runs_per_round`` a side) until every workload is
    decided.

    Args:
        workloads: (name, return threshold or None for the workload's own).
        worker: a :class:`Worker` on the learning registry to reuse (left open); default: a
            new one, closed at the end.
        describe: name -> (what, threshold, cap, runs per round); default: the registry's.

    A workload either side skips (``WorkloadSkipped``) is logged and left out; GateError if
    none is left, or when no run of either side reached a workload's threshold by the first
    look (a threshold out of reach: nothing could ever be decided).
    """
    seed = first_seed(settings)
    describe = describe or _describe
    results: dict[str, WorkloadResult] = {}
    for name, threshold in workloads:
        what, default_threshold, cap, per_round = describe(name)
        if not 1 <= per_round <= MAX_RUNS_PER_ROUND:  # the seeds' span assumes the bound
            raise GateError(f"{name}: runs_per_round {per_round} is not in "
                            f"[1, {MAX_RUNS_PER_ROUND}]")  # fmt: skip
        results[name] = WorkloadResult(name, what, threshold or default_threshold, cap, per_round)
    thresholds = dict(workloads)
    pending = [name for name, _ in workloads]
    looks = settings.look_rounds()
    runs_text = runs_per_round_words(list(results.values()))
    log(f"gate: learning: {len(pending)} workload(s) x {looks[0]}-{looks[-1]} rounds (looks at "
        f"{', '.join(map(str, looks))}), {runs_text}; seeds from {seed} "
        f"(--seed {seed} repeats them)")  # fmt: skip
    owned = worker is None
    if worker is None:
        worker = Worker(LEARNING_REGISTRY, PRELOADED)
    worker.sides = {"base": base, "head": head}
    started = time.monotonic()
    try:
        for r in range(settings.max_rounds):
            for name in list(pending):
                per_round = results[name].runs_per_round
                for run in range(per_round):
                    seeds = run_seeds(seed, r, run, per_round)
                    if not learn_once(
                        worker, results, name, seeds, thresholds[name], settings, log
                    ):
                        pending.remove(name)
                        break
            if not results:
                raise GateError("no learning workload can run on both base and head")
            analyse(list(results.values()), settings)
            for name in list(pending):
                result = results[name]
                if result.rounds == looks[0] and not any(
                    run["reached"] for side in result.runs.values() for run in side
                ):
                    raise GateError(
                        f"{name}: no run of base or head reached return {result.threshold:g} "
                        f"within {result.cap:,} steps in {looks[0]} rounds: the threshold is out "
                        "of reach"
                    )
                if result.decision(settings.metric) != UNDECIDED or result.rounds >= looks[-1]:
                    pending.remove(name)
            elapsed = time.monotonic() - started
            log(round_line(r + 1, settings, list(results.values()), elapsed))
            if not pending:
                break
    finally:
        if owned:
            worker.close()
    return [results[name] for name, _ in workloads if name in results]


def learn_once(
    worker: Worker,
    results: dict[str, WorkloadResult],
    name: str,
    seeds: dict[str, int],
    threshold: float | None,
    settings: LearningSettings,
    log: Callable[[str], None],
) -> bool:
    """Train one run per side of workload ``name``, appended to its result; False (the
    workload logged and dropped from ``results``) when either side skips it."""
    request = {
        "op": "learn", "case": name, "threshold": threshold, "seeds": seeds,
        "sides": {label: str(side.src) for label, side in worker.sides.items()},
        "together": settings.together,
    }  # fmt: skip
    answers = worker.ask(request)["sides"]
    skipped = {label: a["skipped"] for label, a in answers.items() if "skipped" in a}
    if skipped:
        for label, reason in skipped.items():
            log(f"skipping {name} (not on {label}: {reason})")
        del results[name]
        return False
    for label, answer in answers.items():
        results[name].runs[label].append({"seed": seeds[label], **answer})
    return True


def _describe(name: str) -> tuple[str, float, int, int]:
    from rlperf.bench.registry.learning import get

    workload = get(name)
    return workload.what, workload.threshold, workload.cap, workload.runs_per_round


def runs_per_round_words(results: list[WorkloadResult]) -> str:
    """``one run per side a round`` or ``one run per side a round, 2 for cartpole_mlp``."""
    more = [f"{r.runs_per_round} for {r.name}" for r in results if r.runs_per_round > 1]
    return "one run per side a round" + (f", {', '.join(more)}" if more else "")


def round_line(
    done: int, settings: LearningSettings, results: list[WorkloadResult], elapsed_s: float
) -> str:
    """One round's line: the workloads' decisions so far and the time spent."""
    decisions = [r.decision(settings.metric) for r in results]
    counts = ", ".join(f"{decisions.count(d)} {d}" for d in (OK, REGRESSION, UNDECIDED)
                       if d in decisions)  # fmt: skip
    return f"round {done}/{settings.max_rounds}: {counts}; {duration(elapsed_s)}"


# -- the report --------------------------------------------------------------------------
def format_verdict(v: LearningVerdict, metric: str) -> str:
    """``steps to return 1.62x (median above 1.10, worse: p=0.0011)``."""
    ratio = "n/a" if v.ratio is None else str(Ratio(v.ratio, v.bound))
    return f"{METRIC_WORDS[metric]} {ratio} ({v.reason})"


def side_summary(result: WorkloadResult, side: str) -> str:
    """``base: median 181,248 steps, 0.91 CPU s, 198,000 SPS, 0/6 censored``."""
    steps = [run["steps"] for run in result.runs[side]]
    cpu = [run["cpu_s"] for run in result.runs[side]]
    return (
        f"{side}: median {median(steps):,.0f} steps, {median(cpu):.2f} CPU s, "
        f"{median(result.sps(side)):,.0f} SPS, {result.censored(side)}/{len(steps)} censored"
    )


def report(results: list[WorkloadResult], settings: LearningSettings) -> str:
    """Per workload: the verdict on each metric, both sides' medians, and what moved."""
    other = "cpu" if settings.metric == "steps" else "steps"
    looks = settings.look_rounds()
    family = f" over {len(results)} workloads (Holm)" if len(results) > 1 else ""
    lines = [
        f"head/base ratio of median {METRIC_WORDS[settings.metric]} (>1: head learns slower); "
        f"threshold {1 + settings.threshold:.2f}; Gehan's test on censored runs, looks at "
        f"{', '.join(map(str, looks))} rounds (linear alpha spending); false alarms <= "
        f"{false_alarm_level(settings.confidence):.1%}{family}"
    ]
    for res in results:
        verdict = res.verdicts[settings.metric]
        lines.append(
            f"  {res.name} ({res.what}; return >= {res.threshold:g} within {res.cap:,} steps): "
            f"{verdict.decision.upper()} after {verdict.rounds} rounds: "
            f"{format_verdict(verdict, settings.metric)}; "
            f"{format_verdict(res.verdicts[other], other)}"
        )
        lines.append(f"    {side_summary(res, 'base')}")
        lines.append(f"    {side_summary(res, 'head')}")
        lines.append(f"    {res.moved(settings).describe()}")
    return "\n".join(lines)


def verdict_line(results: list[WorkloadResult], settings: LearningSettings, code: int) -> str:
    metric = settings.metric
    if code == EXIT_REGRESSION:
        bad = [f"{r.name} ({r.moved(settings).summary} moved: {METRIC_WORDS[metric]} "
               f"{Ratio(r.verdicts[metric].ratio or math.nan, r.verdicts[metric].bound)})"
               for r in results if r.decision(metric) == REGRESSION]  # fmt: skip
        return (
            f"gate: LEARNING REGRESSION beyond {settings.threshold:.0%} in {', '.join(bad)} "
            "(exit 1)"
        )
    if code == EXIT_UNDECIDED:
        open_ones = [r.name for r in results if r.decision(metric) != OK]
        return (
            f"gate: could not decide learning for {', '.join(open_ones)} within "
            f"{settings.max_rounds} rounds (exit 2): rerun, or raise --max-rounds"
        )
    return f"gate: no learning regression beyond {settings.threshold:.0%} (exit 0)"


# -- saved results -----------------------------------------------------------------------
def results_from_json(data: Any) -> tuple[list[WorkloadResult], dict[str, Any]]:
    """Workload results and saved settings from a ``--learning --json`` file; GateError on
    anything malformed."""
    try:
        if data.get("kind") != "learning":
            raise ValueError('not a --learning file (no "kind": "learning")')
        results = []
        for entry in data["workloads"]:
            res = WorkloadResult(str(entry["name"]), str(entry.get("what", "")),
                                 float(entry["threshold"]), int(entry["cap"]),
                                 int(entry.get("runs_per_round", 1)))  # fmt: skip
            if not 1 <= res.runs_per_round <= MAX_RUNS_PER_ROUND:
                raise ValueError(f"{res.name}: runs_per_round {res.runs_per_round} is not in "
                                 f"[1, {MAX_RUNS_PER_ROUND}]")  # fmt: skip
            for side in ("base", "head"):
                for run in entry["runs"][side]:
                    res.runs[side].append(run_from_json(run))
            if len(res.runs["base"]) != len(res.runs["head"]):
                raise ValueError(f"{res.name}: base and head run counts differ")
            if not res.runs["base"]:
                raise ValueError(f"{res.name}: no runs")
            results.append(res)
        saved = data.get("settings", {})
        if not isinstance(saved, dict):
            raise TypeError("settings is not an object")
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise GateError(f"malformed learning gate results: {type(e).__name__}: {e}") from e
    if not results:
        raise GateError("malformed learning gate results: no workloads")
    return results, saved


def run_from_json(entry: dict[str, Any]) -> dict[str, Any]:
    """One run of a ``--json`` file, checked; ValueError/KeyError/TypeError if malformed."""
    run = {
        "seed": int(entry["seed"]), "reached": entry["reached"], "steps": int(entry["steps"]),
        "cpu_s": float(entry["cpu_s"]), "wall_s": float(entry.get("wall_s", math.nan)),
        "final_return": entry.get("final_return"),
    }  # fmt: skip
    if entry.get("sps") is not None:
        run["sps"] = float(entry["sps"])
    if not isinstance(run["reached"], bool):
        raise ValueError("a run whose 'reached' is not true or false")
    if run["steps"] <= 0 or not (math.isfinite(run["cpu_s"]) and run["cpu_s"] > 0):
        raise ValueError("a run whose steps or cpu_s is not a positive number")
    return run


def looks_of(saved: dict[str, Any], settings: LearningSettings) -> LearningSettings:
    """``settings`` with the file's looks (how the runs were gathered: the alpha spending
    depends on them); threshold, metric and confidence stay the command line's."""
    try:
        first = int(saved.get("min_rounds", settings.min_rounds))
        last = int(saved.get("max_rounds", settings.max_rounds))
        count = int(saved.get("looks", settings.looks))
    except (TypeError, ValueError) as e:
        raise GateError(f"malformed learning gate results: settings: {e}") from e
    out = LearningSettings(settings.threshold, settings.metric, settings.confidence, first, last,
                           count, settings.together, saved.get("seed"))  # fmt: skip
    return out.check()
