"""``rlperf analyze --charts PNG``: the breakdown and the per-call times as one figure.

Left: every row of the nested breakdown (sections, ``other`` and ``untimed``) as a horizontal bar
of percent wall time, children indented under their parent. Right: per-call time of each section
on a log scale, a dot at the mean and a line from the fastest to the slowest call (the report keeps
min/mean/max per section, not every call). Third: the category view (``profiling/categories.py``),
each category's percent of wall time. Needs matplotlib (``pip install rlperf[charts]``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rlperf.profiling.categories import categorize
from rlperf.profiling.report import stats_from_report
from rlperf.timing.breakdown import build_rows


class ChartsUnavailable(RuntimeError):
    """matplotlib is not installed."""


def write_charts(report: dict[str, Any], path: str | Path) -> Path:
    """Draw the breakdown and per-call chart of ``report`` into the PNG ``path``."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only; never needs a display
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ChartsUnavailable("--charts needs matplotlib: pip install 'rlperf[charts]'") from e

    totals = report["totals"]
    rows = build_rows(stats_from_report(report), totals["wall_s"])
    timed = [r for r in rows if r.calls]
    height = max(3.0, 0.32 * max(len(rows), len(timed)) + 1.5)
    fig, (ax_share, ax_call, ax_cat) = plt.subplots(
        1, 3, figsize=(19, height), gridspec_kw={"width_ratios": [3, 3, 2]}
    )

    # Non-breaking spaces: matplotlib strips ordinary leading spaces from tick labels.
    labels = ["\u00a0\u00a0\u00a0" * r.depth + ("└ " if r.depth else "") + r.name for r in rows]
    colors = ["#bbbbbb" if not r.calls else f"C{min(r.depth, 9)}" for r in rows]
    ax_share.barh(range(len(rows)), [r.pct for r in rows], color=colors)
    ax_share.set_yticks(range(len(rows)), labels, fontfamily="monospace", fontsize=8)
    ax_share.invert_yaxis()
    ax_share.set_xlabel("% of wall time")
    ax_share.set_title("Where the time went (grey: other / untimed)")
    for i, r in enumerate(rows):
        ax_share.text(r.pct, i, f" {r.total_s:.2f}s", va="center", fontsize=7)

    means = [r.mean_ms for r in timed]
    lower = [r.mean_ms - r.min_ms for r in timed]
    upper = [r.max_ms - r.mean_ms for r in timed]
    ax_call.errorbar(means, range(len(timed)), xerr=[lower, upper], fmt="o", capsize=3, color="C0")
    ax_call.set_yticks(range(len(timed)), [r.path for r in timed], fontsize=8)
    ax_call.invert_yaxis()
    ax_call.set_xscale("log")
    ax_call.set_xlabel("ms per call (dot: mean, line: min to max)")
    ax_call.set_title("Per-call time")

    categories = categorize(
        report["sections"], totals["wall_s"], float(totals.get("untimed_s", 0.0))
    )
    ax_cat.barh(range(len(categories)), [c["pct"] for c in categories],
                color=[f"C{i}" for i in range(len(categories))])  # fmt: skip
    ax_cat.set_yticks(range(len(categories)), [c["category"] for c in categories], fontsize=9)
    ax_cat.invert_yaxis()
    ax_cat.set_xlabel("% of wall time")
    ax_cat.set_title("By category (own time)")
    for i, c in enumerate(categories):
        ax_cat.text(c["pct"], i, f" {c['pct']:.1f}%", va="center", fontsize=8)

    fig.suptitle(
        f"{report['run'].get('env', '?')} on {report['run'].get('device', '?')}: "
        f"{totals['steps']:,} steps, {totals['wall_s']:.2f}s, {totals['sps']:,.0f} SPS"
        + (" (interrupted)" if report.get("interrupted") else "")
    )
    fig.tight_layout()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=110)
    plt.close(fig)
    return target
