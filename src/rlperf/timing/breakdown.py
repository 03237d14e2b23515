"""The nested time breakdown: rows that add up, with nothing hidden and nothing counted twice.

Each section's children are listed under it; where they do not cover all of the parent's time an
``other`` row shows the rest. The top level adds up to the wall time with an ``untimed`` row for
whatever ran outside any section (Python glue between sections, setup inside the timed span).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rlperf.timing.stats import SectionStats

BAR_WIDTH = 24


@dataclass
class Row:
    """One line of the breakdown; ``calls`` is 0 for the synthetic other/untimed rows."""

    name: str
    path: str
    depth: int
    total_s: float
    pct: float
    calls: int = 0
    mean_ms: float = 0.0
    min_ms: float = 0.0
    max_ms: float = 0.0


def build_rows(stats: Iterable[SectionStats], wall_s: float) -> list[Row]:
    """Breakdown rows in display order (depth-first), with other/untimed rows added."""
    stats = [s for s in stats if s.calls]
    children: dict[str | None, list[SectionStats]] = {}
    for s in stats:
        children.setdefault(s.parent, []).append(s)
    rows: list[Row] = []
    denom = wall_s if wall_s > 0 else 1.0

    def emit(parent: str | None, parent_total_s: float, depth: int) -> None:
        kids = sorted(children.get(parent, []), key=lambda s: -s.total_ns)
        covered = 0.0
        for s in kids:
            total = s.total_ns / 1e9
            covered += total
            rows.append(
                Row(
                    name=s.name.rsplit("/", 1)[-1],
                    path=s.name,
                    depth=depth,
                    total_s=total,
                    pct=100.0 * total / denom,
                    calls=s.calls,
                    mean_ms=s.total_ns / s.calls / 1e6,
                    min_ms=s.min_ns / 1e6,
                    max_ms=s.max_ns / 1e6,
                )
            )
            if s.name in children:
                emit(s.name, total, depth + 1)
        rest = parent_total_s - covered
        if kids and rest > 0:
            label = "untimed" if parent is None else "other"
            path = label if parent is None else f"{parent}/({label})"
            rows.append(Row(label, path, depth, rest, 100.0 * rest / denom))

    emit(None, wall_s, 0)
    return rows


def render(rows: list[Row], wall_s: float, title: str | None = None) -> str:
    """Text table: name, total seconds, % of wall, calls, mean/min/max ms, bar."""
    lines = []
    if title:
        lines.append(title)
    header = (
        f"{'section':<30} {'total_s':>9} {'%wall':>6} {'calls':>8} "
        f"{'mean_ms':>9} {'min_ms':>9} {'max_ms':>9}"
    )
    lines.append(header)
    lines.append("-" * len(header))
    for r in rows:
        name = "  " * r.depth + r.name
        bar = "█" * round(BAR_WIDTH * r.pct / 100.0)
        if r.calls:
            timing = f"{r.calls:>8} {r.mean_ms:>9.3f} {r.min_ms:>9.3f} {r.max_ms:>9.3f}"
        else:
            timing = f"{'':>8} {'':>9} {'':>9} {'':>9}"
        lines.append(f"{name:<30} {r.total_s:>9.3f} {r.pct:>5.1f}% {timing} {bar}")
    lines.append("-" * len(header))
    lines.append(f"{'wall':<30} {wall_s:>9.3f} {100.0 if wall_s else 0.0:>5.1f}%")
    return "\n".join(lines)
