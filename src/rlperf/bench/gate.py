"""The SPS regression gate: base and head timed in the same job, interleaved, in fresh processes.

Each side has one worker (``worker.py``) that imports torch once and forks a fresh process
for every round; that process imports ``rlperf`` from its side's checkout and sets up the same
registry cases. The two then take turns, one sample at a
time, ``pairs_per_round`` times each (A B, B A, A B ...: the order alternates so neither side
always runs first). Each sample is a fixed number of calls of the case, calibrated once on the
base so both sides do the same work.

A round yields one value per case: the median over its pairs of ``log(head_s / base_s)``.
The two samples of a pair run back to back (a fraction of a second apart), so a change in the
machine's load hits both; the median discards the pairs a burst of load hit in between. Rounds
are the independent samples of the statistic (fresh processes: fresh memory layout, fresh
import), and continue until every case is decided (:func:`rlperf.bench.stats.decide`) or
``max_rounds`` is reached.

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
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rlperf.bench.stats import OK, REGRESSION, UNDECIDED, Verdict, decide, median, min_rounds

WORKER = Path(__file__).with_name("worker.py")
REGISTRY = Path(__file__).with_name("registry.py")
METRICS = ("cpu", "wall")
EXIT_OK, EXIT_REGRESSION, EXIT_UNDECIDED = 0, 1, 2


class GateError(RuntimeError):
    """The gate could not run (a case crashed, a worker died, bad input): exit status 2."""


@dataclass
class Settings:
    """How the gate measures and decides."""

    threshold: float = 0.10  # head this much slower (fraction) counts as a regression
    metric: str = "cpu"  # "cpu" or "wall": which time the decision uses
    confidence: float = 0.95  # coverage of the interval on the median ratio
    min_rounds: int = 6
    max_rounds: int = 20
    pairs_per_round: int = 6  # samples per side per round, interleaved
    sample_s: float = 0.1  # target CPU seconds of one sample (calls calibrated to reach it)
    warmup_s: float = 0.2  # untimed CPU seconds per case and round (at least 3 calls)

    def check(self) -> Settings:
        """Raise GateError on values that cannot give a decision."""
        if self.metric not in METRICS:
            raise GateError(f"metric must be one of {', '.join(METRICS)}, got {self.metric!r}")
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
        return self


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
    """A fresh process timing cases of one side, driven by JSON lines."""

    def __init__(self, side: Side) -> None:
        self.side = side
        self.setup_answer: dict[str, Any] = {}
        self._stderr = tempfile.TemporaryFile(mode="w+")
        # One thread: the two workers alternate on a 2-core box shared with other jobs, and
        # intra-op threads would add spin-waiting and scheduling noise to the CPU time.
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": ""}
        cmd = [sys.executable, str(WORKER), "--src", str(side.src), "--registry", str(REGISTRY)]
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            text=True, env=env,
        )  # fmt: skip

    def send(self, request: dict[str, Any]) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            self._raise_died(request)

    def receive(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            self._raise_died(request)
        answer = json.loads(line)
        if "error" in answer:
            what = f"case {request['case']}" if "case" in request else "setup"
            raise GateError(f"{what} failed on {self.side.label} {self.side.describe()}: "
                            f"{answer['error']}")  # fmt: skip
        return answer

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        self.send(request)
        return self.receive(request)

    def _raise_died(self, request: dict[str, Any]) -> None:
        self._proc.wait()
        self._stderr.seek(0)
        lines = [line for line in self._stderr.read().splitlines() if line.strip()]
        last = lines[-1] if lines else f"exit status {self._proc.returncode}"
        raise GateError(f"the {self.side.label} worker ({self.side.describe()}) died during "
                        f"{request['op']}: {last}")  # fmt: skip

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


def begin_round(workers: dict[str, Worker], cases: list[str], warmup_s: float) -> None:
    """Fresh round processes on both sides, set up (concurrently: nothing is timed yet)."""
    request = {"op": "setup", "cases": cases, "warmup_s": warmup_s}
    for worker in workers.values():
        worker.send(request)
    for worker in workers.values():
        worker.setup_answer = worker.receive(request)


def end_round(workers: dict[str, Worker]) -> None:
    for worker in workers.values():
        worker.ask({"op": "end"})


# -- samples and their analysis ----------------------------------------------------------
Samples = dict[str, list[dict[str, float]]]  # "base"/"head" -> [{"wall_s", "cpu_s"}, ...]


def fastest(samples: list[dict[str, float]], metric: str) -> float:
    """The least disturbed sample's time, seconds."""
    return min(s[f"{metric}_s"] for s in samples)


def round_log_ratio(round_samples: Samples, metric: str) -> float:
    """Median over the round's pairs of log(head / base); pair j ran back to back."""
    key = f"{metric}_s"
    pairs = zip(round_samples["base"], round_samples["head"], strict=True)
    return median([math.log(head[key] / base[key]) for base, head in pairs])


def analyse(rounds: list[Samples], settings: Settings) -> dict[str, Verdict]:
    """Verdict of each metric on the recorded rounds."""
    return {
        metric: decide(
            [round_log_ratio(r, metric) for r in rounds], settings.threshold, settings.confidence
        )
        for metric in METRICS
    }


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

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["verdicts"] = {m: v.to_dict() for m, v in self.verdicts.items()}
        return out


def run_rounds(
    base: Side,
    head: Side,
    cases: list[str],
    settings: Settings,
    log: Callable[[str], None],
) -> list[CaseResult]:
    """Alternate base and head in fresh processes, round after round, until all are decided.

    A case either side skips (``CaseSkipped``: a component the base commit does not have yet,
    CUDA on a CPU box) is logged with its reason and left out; GateError if none is left.
    """
    results: dict[str, CaseResult] = {}
    pending = list(cases)
    workers = {"base": Worker(base), "head": Worker(head)}
    try:
        for r in range(settings.max_rounds):
            begin_round(workers, pending, settings.warmup_s)
            if r == 0:
                for side, worker in workers.items():
                    for case, reason in worker.setup_answer.get("skipped", {}).items():
                        log(f"skipping {case} (not on {side}: {reason})")
                        if case in cases:
                            cases = [c for c in cases if c != case]
                            pending.remove(case)
                if not cases:
                    raise GateError("no case can be timed on both base and head")
                for case in cases:
                    calls = workers["base"].ask(
                        {"op": "calibrate", "case": case, "sample_s": settings.sample_s}
                    )["calls"]
                    items, unit = workers["base"].setup_answer["items"][case]
                    results[case] = CaseResult(case, calls, items, unit)
            for case in pending:
                results[case].rounds.append(measure_round(workers, results[case], r, settings))
            end_round(workers)
            for case in list(pending):
                result = results[case]
                result.verdicts = analyse(result.rounds, settings)
                verdict = result.verdicts[settings.metric]
                if len(result.rounds) >= settings.min_rounds and verdict.decision != UNDECIDED:
                    pending.remove(case)
            log(f"round {r + 1}: " + "; ".join(
                f"{name} {format_verdict(res.verdicts[settings.metric])}"
                for name, res in results.items()
            ))  # fmt: skip
            if not pending:
                break
    finally:
        for worker in workers.values():
            worker.close()
    return [results[c] for c in cases]


def measure_round(
    workers: dict[str, Worker], result: CaseResult, round_index: int, settings: Settings
) -> Samples:
    """``pairs_per_round`` back-to-back pairs; the order alternates (A B, B A, ...)."""
    samples: Samples = {"base": [], "head": []}
    request = {"op": "measure", "case": result.name, "calls": result.calls_per_sample}
    for j in range(settings.pairs_per_round):
        order = ("base", "head") if (round_index + j) % 2 == 0 else ("head", "base")
        for label in order:
            answer = workers[label].ask(request)
            samples[label].append({"wall_s": answer["wall_s"], "cpu_s": answer["cpu_s"]})
    return samples


def format_verdict(v: Verdict) -> str:
    if v.low is None or v.high is None:
        ratio = "n/a" if v.ratio is None else f"{v.ratio:.3f}"
        return f"ratio {ratio} ({v.reason})"
    return f"ratio {v.ratio:.3f} [{v.low:.3f}, {v.high:.3f}] {v.decision}"


def exit_code(results: list[CaseResult], metric: str) -> int:
    """1 if any case regressed, else 2 if any is undecided, else 0."""
    decisions = [r.decision(metric) for r in results]
    if REGRESSION in decisions:
        return EXIT_REGRESSION
    if any(d != OK for d in decisions):
        return EXIT_UNDECIDED
    return EXIT_OK


def report(results: list[CaseResult], settings: Settings) -> str:
    """Human-readable table: per case, head/base ratio with its interval, both metrics."""
    other = "wall" if settings.metric == "cpu" else "cpu"
    lines = [
        f"head/base time ratio (>1: head slower); threshold {1 + settings.threshold:.2f}, "
        f"{settings.confidence:.0%} interval on the median of the rounds; decided on "
        f"{settings.metric} time"
    ]
    for res in results:
        verdict = res.verdicts[settings.metric]
        base_s = median([fastest(r["base"], settings.metric) for r in res.rounds])
        head_s = median([fastest(r["head"], settings.metric) for r in res.rounds])
        items = res.items_per_call * res.calls_per_sample
        rate = f" | {items / base_s:,.0f} -> {items / head_s:,.0f} {res.items_unit}/s"
        lines.append(
            f"  {res.name}: {verdict.decision.upper()} {settings.metric} "
            f"{format_verdict(verdict)} over {verdict.rounds} rounds{rate}; "
            f"{other} {format_verdict(res.verdicts[other])}"
        )
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
                    side: [{m: float(s[m]) for m in ("wall_s", "cpu_s")} for s in r[side]]
                    for side in ("base", "head")
                }
                times = [t for side in samples.values() for s in side for t in s.values()]
                if not samples["base"] or not samples["head"]:
                    raise ValueError("a round without samples")
                if not all(math.isfinite(t) and t > 0 for t in times):
                    raise ValueError("a sample time that is not a positive number")
                res.rounds.append(samples)
            results.append(res)
    except (KeyError, TypeError, ValueError) as e:
        raise GateError(f"malformed gate results: {type(e).__name__}: {e}") from e
    if not results:
        raise GateError("malformed gate results: no cases")
    return results
