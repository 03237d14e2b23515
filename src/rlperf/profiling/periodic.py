"""``rlperf profile --summary-every K``: a rollout timing block every K iterations.

Each block covers the K iterations since the previous one and shows, in milliseconds per rollout,
the rollout total and each of its child sections (policy forward, device-to-host, env step,
buffer store, then any other child such as truncation bootstrap or user sections), with an
``other`` line for rollout time outside the children. The largest child is marked.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from rlperf.timing.names import ROLLOUT, ROLLOUT_CHILDREN
from rlperf.timing.sections import Profiler

# The order a reader expects, following the data: forward, copy out, step, store.
CHILD_ORDER = ROLLOUT_CHILDREN


class RolloutSummary:
    """A ``trainer.callbacks`` entry printing the rollout block every ``every`` iterations."""

    def __init__(self, profiler: Profiler, every: int, stream: TextIO | None = None) -> None:
        if every < 1:
            raise ValueError(f"--summary-every must be at least 1, got {every}")
        self.profiler = profiler
        self.every = every
        self.stream = stream or sys.stdout
        self._last_ns = profiler.snapshot_ns()
        self._last_iteration = 0

    def __call__(self, trainer: Any, row: dict[str, Any]) -> None:
        if trainer.iteration - self._last_iteration < self.every:
            return
        now_ns = self.profiler.snapshot_ns()
        rollouts = trainer.iteration - self._last_iteration
        window_ns = {k: v - self._last_ns.get(k, 0) for k, v in now_ns.items()}
        print(
            self.render(window_ns, rollouts, trainer.iteration, trainer.global_step),
            file=self.stream,
            flush=True,
        )
        self._last_ns = now_ns
        self._last_iteration = trainer.iteration

    @staticmethod
    def render(window_ns: dict[str, int], rollouts: int, iteration: int, step: int) -> str:
        """The block for ``rollouts`` rollouts whose section totals (ns) are ``window_ns``."""
        prefix = ROLLOUT + "/"
        children = {
            k[len(prefix) :]: v
            for k, v in window_ns.items()
            if k.startswith(prefix) and "/" not in k[len(prefix) :] and v > 0
        }
        names = [n for n in CHILD_ORDER if n in children]
        names += sorted(n for n in children if n not in CHILD_ORDER)
        total_ms = window_ns.get(ROLLOUT, 0) / 1e6 / rollouts
        largest = max(names, key=lambda n: children[n]) if names else None
        rule = "=" * 60
        lines = [
            rule,
            f"Rollout timing, iterations {iteration - rollouts + 1}-{iteration} "
            f"(global step {step:,}): ms per rollout",
            rule,
            f"  {'rollout total':<26}{total_ms:>10.3f} ms",
        ]
        covered_ms = 0.0
        for n in names:
            ms = children[n] / 1e6 / rollouts
            covered_ms += ms
            mark = "  <- largest" if n == largest else ""
            lines.append(f"    - {n.replace('_', ' '):<22}{ms:>10.3f} ms{mark}")
        if names and total_ms - covered_ms > 0:
            lines.append(f"    - {'other':<22}{total_ms - covered_ms:>10.3f} ms")
        lines.append(rule)
        return "\n".join(lines)
