"""``--dashboard``: a live terminal view of a training run, redrawn in place with ``rich``.

What PufferLib's dashboard shows, from rlperf's own figures: steps and SPS, time spent and time
left, where the time goes (the top-level sections and their children, as shares of the timed
time so far), utilisation (the telemetry sampler's latest reading: trainer and worker CPU,
memory, GPU), the mean return and the losses of the last iteration.

The view is a trainer callback (``trainer.callbacks``): it reads each iteration's metrics row
and redraws at most every ``refresh_s`` seconds, in the trainer's thread, so nothing renders
concurrently with training (rich's own refresh thread would take the GIL four times a second).
Its time is charged to the ``measurement/dashboard`` section, which the view itself shows.

It needs a terminal: ``rlperf train --dashboard`` with stdout redirected fails before any work
(the plain progress line on stderr is what logs and pipes get).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.console import Console, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.text import Text

from rlperf.run.telemetry import Telemetry
from rlperf.timing import names

# Row keys shown under "Losses", in this order, where the row has them (PPO or supervised).
LOSS_KEYS = (
    "loss", "pg_loss", "cross_entropy", "v_loss", "entropy", "approx_kl", "clipfrac",
    "learning_rate", "teacher_agreement", "teacher_lead",
)  # fmt: skip


def abbreviate(value: float) -> str:
    """``1234567 -> "1.2M"``: counts and rates at a glance."""
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.1f}{suffix}"
    return f"{value:.0f}"


def duration(seconds: float) -> str:
    """``3725 -> "1:02:05"``."""
    s = int(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


@dataclass
class DashboardView:
    """Everything one frame shows (built from rows; rendered by :func:`render`)."""

    title: str
    total_steps: int
    elapsed_s: float = 0.0
    row: dict[str, Any] = field(default_factory=dict)
    sections_s: dict[str, float] = field(default_factory=dict)  # summed over the rows
    telemetry: dict[str, Any] = field(default_factory=dict)  # Telemetry.latest()

    def add_row(self, row: dict[str, Any]) -> None:
        self.row = row
        for path, seconds in row.get("sections_s", {}).items():
            self.sections_s[path] = self.sections_s.get(path, 0.0) + seconds


# A line of a frame: (text, rich style). Frames are laid out with format strings into one rich
# Text: rich's Table measures every cell at every redraw, 9-12 ms of CPU per frame of this size
# on the development box against 0.7 ms for the same frame as Text (docs/profiling.md), and
# the trainer's thread pays for each redraw.
Line = tuple[str, str]
BAR_WIDTH = 10  # characters of a phase's share bar (100%)
PHASE_WIDTH = 44  # the phases column


def _header(view: DashboardView) -> list[Line]:
    row = view.row
    step, sps = row.get("global_step", 0), row.get("sps", 0.0)
    left = duration((view.total_steps - step) / sps) if sps > 0 else "n/a"
    done = min(step / max(view.total_steps, 1), 1.0)
    filled = round(done * 40)
    return [
        (
            f"Steps {abbreviate(step)} / {abbreviate(view.total_steps)}  SPS {abbreviate(sps)}  "
            f"Elapsed {duration(view.elapsed_s)}  Left {left}  Iteration {row.get('iteration', 0)}",
            "bold",
        ),
        (f"{'━' * filled}{'─' * (40 - filled)} {done:4.0%}", "cyan"),
        ("", ""),
    ]


def _phases(sections_s: dict[str, float]) -> list[Line]:
    """Top-level sections and their children: seconds so far, share of the timed time."""
    lines: list[Line] = [(f"{'Phase':<22}{'s':>8}{'%':>6}", "bold underline")]
    top = [p for p in sections_s if "/" not in p]
    timed_s = sum(sections_s[p] for p in top) or 1.0

    def line(name: str, seconds: float, style: str) -> Line:
        share = seconds / timed_s
        bar = "█" * round(share * BAR_WIDTH)
        return (f"{name:<22.22}{seconds:>8.2f}{100 * share:>6.1f} {bar}", style)

    for parent in top:
        lines.append(line(parent, sections_s[parent], "bold"))
        for path, seconds in sections_s.items():
            if path.count("/") == 1 and path.startswith(parent + "/"):
                lines.append(line("  " + path.split("/", 1)[1], seconds, ""))
    return lines


def _learning(row: dict[str, Any]) -> list[Line]:
    ret = row.get("mean_return")
    lines: list[Line] = [
        (f"{'Learning':<24}", "bold underline"),
        (f"{'mean return':<14}{'n/a' if ret is None else f'{ret:.2f}':>10}", "bold"),
        (f"{'episodes':<14}{row.get('episodes', 0):>10,}", ""),
    ]
    if "phase" in row:
        lines.append((f"{'phase':<14}{row['phase']:>10}", ""))
    lines += [(f"{key:<14}{row[key]:>10.4g}", "") for key in LOSS_KEYS if key in row]
    return lines


def _utilisation(telemetry: dict[str, Any]) -> list[Line]:
    if not telemetry:
        return [("Utilisation: no telemetry sample yet (none with --no-telemetry)", "dim")]
    lines: list[Line] = [(f"{'Utilisation':<26}{'CPU %':>7}{'memory':>22}", "bold underline")]

    def line(name: str, cpu: float | None, memory: str) -> Line:
        return (f"{name:<26.26}{'' if cpu is None else f'{cpu:.0f}':>7}{memory:>22}", "")

    trainer = telemetry.get("trainer", {})
    lines.append(line("trainer", trainer.get("cpu_pct_max"), _mb(trainer.get("rss_mb_max"))))
    workers = telemetry.get("workers_total")
    if workers:
        n = len(telemetry.get("workers", []))
        lines.append(line(f"workers ({n})", workers.get("cpu_pct_max"), _mb(workers["rss_mb_max"])))
    machine = telemetry.get("machine", {})
    mem = machine.get("mem_used_pct_max")
    used = "" if mem is None else f"{mem:.0f}% used"
    lines.append(line("machine (all cores)", machine.get("cpu_pct_max"), used))
    for gpu in telemetry.get("gpus", []):
        memory = f"{_mb(gpu.get('mem_used_mb_max'))} / {_mb(gpu['mem_total_mb'])}"
        lines.append(line(f"GPU {gpu['index']} {gpu['name']}", gpu.get("util_pct_max"), memory))
    if "note" in telemetry:
        lines.append((telemetry["note"], "dim"))
    return lines


def _mb(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value / 1024:.1f} GB" if value >= 1024 else f"{value:.0f} MB"


def render(view: DashboardView) -> RenderableType:
    """One frame of the dashboard."""
    frame: list[list[Line]] = [[line] for line in _header(view)]
    phases, learning = _phases(view.sections_s), _learning(view.row)
    blank: Line = ("", "")
    for i in range(max(len(phases), len(learning))):
        (left, left_style), right = (
            phases[i] if i < len(phases) else blank,
            learning[i] if i < len(learning) else blank,
        )
        frame.append([(f"{left:<{PHASE_WIDTH}}", left_style), ("   ", ""), right])
    frame.append([blank])
    frame += [[line] for line in _utilisation(view.telemetry)]
    text = Text(no_wrap=True, overflow="ellipsis")
    for i, pieces in enumerate(frame):
        for piece, style in pieces:
            text.append(piece, style)
        if i < len(frame) - 1:
            text.append("\n")
    return Panel(text, title=f"[bold]rlperf[/] {view.title}", title_align="left", box=box.ROUNDED)


class Dashboard:
    """The live view, as a trainer callback: ``trainer.callbacks.append(dashboard)``.

    Args:
        title: what ran (env, policy, device), shown in the frame's title.
        total_steps: the run's step target (progress and time left).
        telemetry: the sampler whose latest reading the view shows (None: no utilisation).
        refresh_s: least seconds between two redraws. 2 s: a redraw costs ~1.2 ms of CPU, and
            once a second it cost 1.4-2.0% of SPS paired (docs/profiling.md); the figures a run
            shows move on the scale of seconds.
        console: where to draw (default: a rich Console on stdout).

    Use as ``with dashboard: trainer.train()`` or :meth:`start` / :meth:`stop`; stopping draws
    the last frame and leaves it on the screen.
    """

    def __init__(
        self,
        title: str,
        total_steps: int,
        telemetry: Telemetry | None = None,
        refresh_s: float = 2.0,
        console: Console | None = None,
    ) -> None:
        self.view = DashboardView(title, total_steps)
        self.telemetry = telemetry
        self.refresh_s = refresh_s
        # The trainer's thread redraws (auto_refresh off); what the run prints meanwhile
        # (--summary-every blocks, warnings) goes above the frame.
        self._live = Live(console=console or Console(), auto_refresh=False)
        self._t0 = time.perf_counter()
        self._drawn_at = -float("inf")

    @classmethod
    def for_trainer(cls, trainer: Any, telemetry: Telemetry | None = None, **kw: Any) -> Dashboard:
        """A dashboard titled with the trainer's env, policy, device and threads."""
        cfg = trainer.cfg
        title = f"{cfg.env.env} | {cfg.policy.kind} | {trainer.device} | {cfg.run.threads} threads"
        return cls(title, cfg.run.total_steps, telemetry, **kw)

    def start(self) -> Dashboard:
        self._t0 = time.perf_counter()
        self._live.start()
        self.draw()
        return self

    def stop(self) -> None:
        """Draw the last frame and give the terminal back (idempotent)."""
        if self._live.is_started:
            try:
                self.draw()
            finally:
                self._live.stop()  # the terminal back (cursor, stdout, stderr) whatever happened

    def __enter__(self) -> Dashboard:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __call__(self, trainer: Any, row: dict[str, Any]) -> None:
        """Take an iteration's row (a ``trainer.callbacks`` entry), redraw when due."""
        with trainer.prof.section(names.MEASUREMENT), trainer.prof.section(names.DASHBOARD):
            self.view.add_row(row)
            if time.perf_counter() - self._drawn_at >= self.refresh_s:
                self.draw()

    def draw(self) -> None:
        """Redraw now."""
        self._drawn_at = time.perf_counter()
        self.view.elapsed_s = self._drawn_at - self._t0
        self.view.telemetry = self.telemetry.latest() if self.telemetry is not None else {}
        self._live.update(render(self.view), refresh=True)
