"""Why env workers made the env phase only so much faster: the machine, or the hand-over?

``rlperf compare`` of a serial run against one with ``W`` env workers shows the env phase
(``rollout/env``) and what Amdahl allows from it. With ``W`` workers each share ought to take
``1/W`` of the serial env step; two things keep the env phase from that, and the reports hold
what separates them (the serial run's ``rollout/env_step``, the worker run's ``env_send`` plus
``env_recv``, and each worker's busy seconds, ``run.env_workers``):

- **slowdown**: the slowest worker's busy seconds a step over its part of the serial env step,
  ``busy / (serial / W)``. Above 1 the shares stepped slower beside each other than the same
  envs did alone: cores that slow each other (two busy vCPUs of a VM whose host shares their
  physical cores, shared caches, a neighbour), and the workers' copy into shared memory.
- **hand-over**: the env phase a step beyond that slowest worker's busy time: the trainer's
  send and receive, the signalling, and its wait for whichever share finished last at each step
  (the slowest worker over the run is not the last one at every step).

For each it says what Amdahl would allow end to end without it (the other as measured), on
the serial run's env share of wall time. Figures are medians over the pairs of runs, in ms per
1,000 env steps like the comparison table.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from rlperf.profiling.compare import ENV_PHASE, ENV_STEP, figures, section_share


@dataclass
class WorkerSplit:
    """The split of one comparison (see the module docstring).

    Attributes:
        side: ``"A"`` or ``"B"``, the side with the workers.
        workers: env workers of that side.
        serial_ms: the serial side's env step, ms per 1,000 steps, median.
        busy_ms: the slowest worker's busy time, ms per 1,000 steps, median.
        phase_ms: the worker side's env phase (send + receive), ms per 1,000 steps, median.
        share: the serial env step's share of the serial side's wall time (0-1), median.
        slowdown: ``busy / (serial / workers)``, median of the pairs.
        hand_over_ms: ``phase - busy``, median of the pairs.
    """

    side: str
    workers: int
    serial_ms: float
    busy_ms: float
    phase_ms: float
    share: float
    slowdown: float
    hand_over_ms: float

    def allows(self, slowdown: float, hand_over_ms: float) -> float:
        """Amdahl's end-to-end speedup over the serial side for an env phase of shares
        ``slowdown`` times their part of the serial step plus ``hand_over_ms``."""
        phase = self.serial_ms / self.workers * slowdown + hand_over_ms
        speedup = self.serial_ms / phase if phase > 0 else float("inf")
        return 1.0 / ((1.0 - self.share) + self.share / speedup)

    def render(self) -> str:
        part = self.serial_ms / self.workers
        return (
            f"env workers ({self.side}, {self.workers}): the slowest worker was busy "
            f"{self.busy_ms:.2f} ms per 1,000 steps, {self.slowdown:.2f}x its part of the serial "
            f"env step ({self.serial_ms:.2f} / {self.workers} = {part:.2f}); the hand-over "
            f"beyond it (send, receive, waiting for the last share) took "
            f"{self.hand_over_ms:.2f} of the env phase's {self.phase_ms:.2f}. Amdahl allows, "
            f"with shares as fast as alone: "
            f"{self.allows(1.0, self.hand_over_ms):.3f}x end to end; with no hand-over: "
            f"{self.allows(self.slowdown, 0.0):.3f}x; with neither: {self.allows(1.0, 0.0):.3f}x"
        )


def _workers(report: dict[str, Any]) -> list[dict[str, float]] | None:
    workers = report["run"].get("env_workers")
    return workers if isinstance(workers, list) and workers else None


def split(a_reports: list[dict[str, Any]], b_reports: list[dict[str, Any]]) -> WorkerSplit | None:
    """The split where every run of one side had env workers and every run of the other
    stepped serially (``rollout/env_step``); None otherwise (or without a complete pair)."""
    sides = {"A": a_reports, "B": b_reports}
    workers_of = {s: [_workers(r) for r in reports] for s, reports in sides.items()}
    with_workers = [s for s, lists in workers_of.items() if lists and all(lists)]
    if len(with_workers) != 1:
        return None
    side = with_workers[0]
    serial_reports = sides["B" if side == "A" else "A"]
    serial_figures = [figures(r) for r in serial_reports]
    if not serial_figures or not all(f.get(ENV_STEP, 0.0) > 0 for f in serial_figures):
        return None
    serial, busy, phase, shares, slowdowns, hand_overs = [], [], [], [], [], []
    worker_lists = [w for w in workers_of[side] if w is not None]  # all, checked above
    count = len(worker_lists[0])
    for s_report, s_figs, w_report, workers in zip(serial_reports, serial_figures, sides[side],
                                                   worker_lists, strict=False):  # fmt: skip
        per_1k_w = 1e6 / max(w_report["totals"]["steps"], 1)  # as figures() counts sections
        serial.append(s_figs[ENV_STEP])
        busy.append(max(w["busy_s"] for w in workers) * per_1k_w)
        phase.append(figures(w_report)[ENV_PHASE])
        shares.append(section_share(s_report, ENV_STEP))
        slowdowns.append(busy[-1] / (serial[-1] / count))
        hand_overs.append(phase[-1] - busy[-1])
    med = statistics.median
    return WorkerSplit(side, count, med(serial), med(busy), med(phase), med(shares),
                       med(slowdowns), med(hand_overs))  # fmt: skip
