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
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
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


def _header(view: DashboardView) -> Table:
    row = view.row
    step, sps = row.get("global_step", 0), row.get("sps", 0.0)
    left = (view.total_steps - step) / sps if sps > 0 else None
    table = Table.grid(padding=(0, 2))
    for _ in range(5):
        table.add_column()
    table.add_row(
        Text.from_markup(f"[bold]Steps[/] {abbreviate(step)} / {abbreviate(view.total_steps)}"),
        Text.from_markup(f"[bold]SPS[/] {abbreviate(sps)}"),
        Text.from_markup(f"[bold]Elapsed[/] {duration(view.elapsed_s)}"),
        Text.from_markup(f"[bold]Left[/] {'n/a' if left is None else duration(left)}"),
        Text.from_markup(f"[bold]Iteration[/] {row.get('iteration', 0)}"),
    )
    bar = ProgressBar(total=max(view.total_steps, 1), completed=step, width=60)
    return _stack(table, bar)


def _stack(*items: RenderableType) -> Table:
    grid = Table.grid()
    for item in items:
        grid.add_row(item)
    return grid


def _table(*columns: str) -> Table:
    """A borderless table: the first column's header names it, the others are right-aligned."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1))
    table.add_column(columns[0], style="bold")
    for name in columns[1:]:
        table.add_column(name, justify="right")
    return table


def _utilisation(telemetry: dict[str, Any]) -> RenderableType:
    if not telemetry:
        return Text("Utilisation: waiting for the first telemetry sample (--no-telemetry: none)")
    table = _table("Utilisation", "CPU %", "memory")
    trainer = telemetry.get("trainer", {})
    table.add_row(
        "trainer", _fmt(trainer.get("cpu_pct_max"), "{:.0f}"), _mb(trainer.get("rss_mb_max"))
    )
    workers = telemetry.get("workers_total")
    if workers:
        n = len(telemetry.get("workers", []))
        table.add_row(
            f"workers ({n})", _fmt(workers.get("cpu_pct_max"), "{:.0f}"), _mb(workers["rss_mb_max"])
        )
    machine = telemetry.get("machine", {})
    mem = machine.get("mem_used_pct_max")
    table.add_row(
        "machine (all cores)",
        _fmt(machine.get("cpu_pct_max"), "{:.0f}"),
        "" if mem is None else f"{mem:.0f}% used",
    )
    for gpu in telemetry.get("gpus", []):
        used, total = gpu.get("mem_used_mb_max"), gpu["mem_total_mb"]
        table.add_row(
            f"GPU {gpu['index']} {gpu['name']}",
            _fmt(gpu.get("util_pct_max"), "{:.0f}"),
            f"{_mb(used)} / {_mb(total)}",
        )
    if "note" in telemetry:
        return _stack(table, Text(telemetry["note"], style="dim"))
    return table


def _phases(sections_s: dict[str, float]) -> Table:
    """Top-level sections and their children, seconds and share of the timed time."""
    table = _table("Phase", "s", "%")
    top = [p for p in sections_s if "/" not in p]
    timed_s = sum(sections_s[p] for p in top) or 1.0
    for parent in top:
        table.add_row(
            parent, f"{sections_s[parent]:.2f}", f"{100 * sections_s[parent] / timed_s:.1f}"
        )
        for path, seconds in sections_s.items():
            if path.count("/") == 1 and path.startswith(parent + "/"):
                child = path.split("/", 1)[1]
                table.add_row(f"  {child}", f"{seconds:.2f}", f"{100 * seconds / timed_s:.1f}")
    return table


def _learning(row: dict[str, Any]) -> Table:
    table = _table("Learning", "")
    ret = row.get("mean_return")
    table.add_row("mean return", "n/a" if ret is None else f"{ret:.2f}")
    table.add_row("episodes", f"{row.get('episodes', 0):,}")
    if "phase" in row:
        table.add_row("phase", str(row["phase"]))
    for key in LOSS_KEYS:
        if key in row:
            table.add_row(key, f"{row[key]:.4g}")
    return table


def _fmt(value: float | None, fmt: str) -> str:
    return "" if value is None else fmt.format(value)


def _mb(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value / 1024:.1f} GB" if value >= 1024 else f"{value:.0f} MB"


def render(view: DashboardView) -> RenderableType:
    """One frame of the dashboard."""
    body = Table.grid(padding=(0, 3))
    body.add_column(vertical="top")
    body.add_column(vertical="top")
    body.add_row(_phases(view.sections_s), _learning(view.row))
    return Panel(
        Group(_header(view), Text(""), body, Text(""), _utilisation(view.telemetry)),
        title=f"[bold]rlperf[/] {view.title}",
        title_align="left",
        box=box.ROUNDED,
    )


class Dashboard:
    """The live view, as a trainer callback: ``trainer.callbacks.append(dashboard)``.

    Args:
        title: what ran (env, policy, device), shown in the frame's title.
        total_steps: the run's step target (progress and time left).
        telemetry: the sampler whose latest reading the view shows (None: no utilisation).
        refresh_s: least seconds between two redraws.
        console: where to draw (default: a rich Console on stdout).

    Use as ``with dashboard: trainer.train()`` or :meth:`start` / :meth:`stop`; stopping draws
    the last frame and leaves it on the screen.
    """

    def __init__(
        self,
        title: str,
        total_steps: int,
        telemetry: Telemetry | None = None,
        refresh_s: float = 0.5,
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
            self.draw()
            self._live.stop()

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
