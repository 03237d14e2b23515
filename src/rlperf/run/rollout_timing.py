"""The rollout timing block (``--summary-every K``): where each rollout's milliseconds went.

Every K rollouts the trainer prints, and logs in ``metrics.jsonl`` as ``rollout_timing_ms``, the
mean milliseconds per rollout over the K rollouts since the last block:

    rollout total
      - student forward          the policy's act (``rollout/policy_forward``)
      - teacher total            ``rollout/teacher`` (supervised phase only), and its parts:
          reshape, device->host, teacher call, to device
      - actions to host          ``rollout/device_to_host``
      - env step                 ``rollout/env_step``
      - replay store             ``rollout/buffer_store`` (the buffer write)
      - <any other child>        e.g. truncation bootstrap, user sections
      - other                    rollout time outside every child (the loop itself)

The top-level rows add up to the rollout total (``other`` is the remainder), and the largest is
marked. It is the block of ``guide-teacher-to-ppo-profiling.md``, filled from the trainer's own
sections, so it costs nothing beyond two profiler snapshots every K rollouts.
"""

from __future__ import annotations

from typing import Any

from rlperf.timing import names

# (label, child section under rollout) in the order the data flows.
ROWS = (
    ("student forward", names.POLICY_FORWARD),
    ("teacher total", names.TEACHER),
    ("actions to host", names.DEVICE_TO_HOST),
    ("env step", names.ENV_STEP),
    ("replay store", names.BUFFER_STORE),
)
TEACHER_ROWS = (
    ("reshape", names.TEACHER_RESHAPE),
    ("device->host", names.TEACHER_DEVICE_TO_HOST),
    ("teacher call", names.TEACHER_CALL),
    ("to device", names.TEACHER_TO_DEVICE),
)
OTHER = "other"
TOTAL = "rollout_total"


def rollout_timing_ms(window_ns: dict[str, int], rollouts: int) -> dict[str, float]:
    """Mean ms per rollout of the rollout, each of its children and the teacher's parts.

    Args:
        window_ns: section full name -> nanoseconds spent in the window (a difference of two
            :meth:`~rlperf.timing.sections.Profiler.snapshot_ns`).
        rollouts: rollouts in the window.

    Returns:
        ``rollout_total``, each child that ran (``policy_forward``, ``env_step``, ...), the
        teacher's parts as ``teacher/<part>``, and ``other`` (total minus the children, >= 0).
    """
    scale = 1e6 * max(rollouts, 1)
    prefix = names.ROLLOUT + "/"
    out = {TOTAL: window_ns.get(names.ROLLOUT, 0) / scale}
    children = 0.0
    for full, ns in window_ns.items():
        if not full.startswith(prefix) or ns <= 0:
            continue
        rest = full[len(prefix) :]
        if "/" not in rest:
            out[rest] = ns / scale
            children += ns / scale
        elif rest.count("/") == 1 and rest.startswith(names.TEACHER + "/"):
            out[rest] = ns / scale
    out[OTHER] = max(out[TOTAL] - children, 0.0)
    return out


def render_block(timing_ms: dict[str, float], iterations: tuple[int, int], step: int,
                 phase: str | None = None) -> str:  # fmt: skip
    """The printed block for :func:`rollout_timing_ms`'s figures of iterations ``first-last``."""
    known = {child for _, child in ROWS}
    top = [(label, child) for label, child in ROWS if child in timing_ms]
    top += [(c.replace("_", " "), c) for c in sorted(timing_ms)
            if c not in known and "/" not in c and c not in (TOTAL, OTHER)]  # fmt: skip
    top.append((OTHER, OTHER))
    largest = max((c for _, c in top), key=lambda c: timing_ms[c], default=None)
    rule = "=" * 60
    first, last = iterations
    where = f"agent_step={step:,}" + (f", phase={phase}" if phase else "")
    lines = [
        rule,
        f"Rollout Timing Profile ({where}), iterations {first}-{last}: ms per rollout",
        rule,
        f"  {'rollout total':<28}{timing_ms[TOTAL]:>10.3f} ms",
    ]
    for label, child in top:
        mark = "  <-- largest" if child == largest else ""
        lines.append(f"    - {label:<24}{timing_ms[child]:>10.3f} ms{mark}")
        if child == names.TEACHER:
            for part_label, part in TEACHER_ROWS:
                key = f"{names.TEACHER}/{part}"
                if key in timing_ms:
                    lines.append(f"        * {part_label:<20}{timing_ms[key]:>10.3f} ms")
    lines.append(rule)
    return "\n".join(lines)


class RolloutTimer:
    """Snapshots the profiler every ``every`` rollouts and turns the window into the block."""

    def __init__(self, profiler: Any, every: int) -> None:
        if every < 1:
            raise ValueError(f"--summary-every must be at least 1, got {every}")
        self.profiler, self.every = profiler, every
        self._last_ns = profiler.snapshot_ns()
        self._last_iteration: int | None = None

    def start(self, iteration: int) -> None:
        self._last_ns = self.profiler.snapshot_ns()
        self._last_iteration = iteration

    def due(self, iteration: int) -> bool:
        last = self._last_iteration or 0
        return iteration - last >= self.every

    def take(self, iteration: int) -> tuple[dict[str, float], tuple[int, int]]:
        """The figures since the last block (or :meth:`start`), and the iteration range."""
        now = self.profiler.snapshot_ns()
        last = self._last_iteration or 0
        window = {k: v - self._last_ns.get(k, 0) for k, v in now.items()}
        self._last_ns, self._last_iteration = now, iteration
        return rollout_timing_ms(window, iteration - last), (last + 1, iteration)
