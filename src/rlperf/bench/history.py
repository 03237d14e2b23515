"""``rlperf history``: one self-contained HTML page of benchmark history that opens offline.

``asv publish`` builds a site whose scripts load from public CDNs; with no network it shows
nothing. This page is a single file with inline CSS and inline SVG, no scripts and no external
reference of any kind (no ``src``, no ``href`` to a URL), so it renders the same in an
air-gapped CI viewer, a mail attachment or a browser with the network off.

Sources, either or both:

- asv results (``.asv/results``, or ``results_dir`` of ``asv.conf.json``): one chart per
  benchmark and parameter combination, commits in commit-date order. Times are shown as
  throughput where the case says how much work a call does (``env_steps=4096``: env steps/s),
  else as milliseconds per call; the band is asv's interquartile range (``q_25``..``q_75``,
  or its 99% interval where quartiles are missing).
- gate runs (``rlperf gate --json`` files, in the order given): one chart per case of the
  head/base time ratio of each run with its interval, coloured by the verdict, the threshold
  drawn; each point's tooltip names the phase that moved.

asv result files (format version 2, as asv 0.6 writes them): ``<results>/<machine>/<commit
hash[:8]>-<environment>.json``, each an object with ``commit_hash``, ``date`` (commit date, ms),
``params`` (machine), ``env_name``, ``result_columns`` (``result``, ``params``, ``stats_q_25``,
...) and ``results``: benchmark -> a row of those columns, where ``result`` holds one value per
combination of the benchmark's ``params`` (their Cartesian product, in order; null: failed).
"""

from __future__ import annotations

import ast
import html
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlperf.bench.gate import GateError, results_from_json
from rlperf.bench.learning_gate import METRIC_WORDS
from rlperf.bench.learning_gate import results_from_json as learning_results_from_json
from rlperf.bench.stats import OK, REGRESSION, UNDECIDED

ASV_VERSION = 2
DECISION_COLOURS = {OK: "#2e7d32", REGRESSION: "#c62828", UNDECIDED: "#757575"}
WIDTH, HEIGHT = 880, 260
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 80, 20, 16, 56


class HistoryError(RuntimeError):
    """Input the page cannot be built from (missing, malformed); the message is one line."""


@dataclass
class Point:
    """One commit (asv) or one gate run on a chart."""

    label: str  # x-axis label: short commit
    detail: str  # tooltip
    value: float
    low: float  # spread: the band (asv) or the interval (gate)
    high: float
    decision: str | None = None  # gate verdicts only


@dataclass
class Chart:
    """One case's history."""

    title: str
    subtitle: str
    unit: str  # the y axis
    points: list[Point] = field(default_factory=list)
    rules: list[tuple[float, str]] = field(default_factory=list)  # horizontal reference lines


# -- asv results -------------------------------------------------------------------------
def results_dir_from_conf(conf: Path) -> Path:
    """``results_dir`` of an ``asv.conf.json`` (JSON with ``//`` comments), relative to it."""
    try:
        text = conf.read_text()
    except OSError as e:
        raise HistoryError(f"cannot read {conf}: {e.strerror}") from e
    text = "\n".join(re.sub(r"^\s*//.*$", "", line) for line in text.splitlines())
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise HistoryError(f"{conf} is not JSON: {e.msg} (line {e.lineno})") from e
    return conf.parent / str(data.get("results_dir", "results"))


def load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as e:
        raise HistoryError(f"cannot read {path}: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise HistoryError(f"{path} is not JSON: {e.msg} (line {e.lineno})") from e


def param_text(value: Any) -> str:
    """asv stores parameter values as their repr (``"'gae[...]'"``); the value itself."""
    try:
        return str(ast.literal_eval(value)) if isinstance(value, str) else str(value)
    except (ValueError, SyntaxError):
        return str(value)


def finite(value: Any) -> float | None:
    """A float for a finite number, None for null/NaN (asv's failed or skipped)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{value!r} is not a number")
    return float(value) if math.isfinite(value) else None


def asv_charts(results_dir: Path) -> list[Chart]:
    """One chart per (machine, environment, benchmark, parameter combination)."""
    if not results_dir.is_dir():
        raise HistoryError(f"asv results directory {results_dir} does not exist")
    files = sorted(p for p in results_dir.glob("*/*.json") if p.name != "machine.json")
    if not files:
        raise HistoryError(f"no asv result files in {results_dir} (expected MACHINE/*.json)")
    units = asv_units(results_dir / "benchmarks.json")
    rows: dict[tuple[str, str, str, str], list[tuple[int, str, float, float, float]]] = {}
    for path in files:
        data = load_json(path)
        try:
            commit, date, machine, env, entries = asv_file(data)
            for bench, combos in entries.items():
                for combo, stats in combos.items():
                    rows.setdefault((machine, env, bench, combo), []).append((date, commit, *stats))
        except (KeyError, TypeError, ValueError) as e:
            raise HistoryError(f"malformed asv result file {path}: {type(e).__name__}: {e}") from e
    machines = {key[0] for key in rows}
    envs = {key[1] for key in rows}
    charts = []
    for (machine, env, bench, combo), points in sorted(rows.items()):
        where = [f"machine {machine}"] if len(machines) > 1 else []
        where += [f"environment {env}"] if len(envs) > 1 else []
        charts.append(asv_chart(bench, combo, units.get(bench, ""), sorted(points), where))
    if not charts:
        raise HistoryError(f"no benchmark values in the asv result files of {results_dir}")
    return charts


def asv_units(path: Path) -> dict[str, str]:
    """Benchmark -> unit from asv's ``benchmarks.json``, when there is one."""
    if not path.is_file():
        return {}
    data = load_json(path)
    if not isinstance(data, dict):
        raise HistoryError(f"malformed {path}: not an object")
    return {k: str(v.get("unit", "")) for k, v in data.items() if isinstance(v, dict)}


def asv_file(
    data: Any,
) -> tuple[str, int, str, str, dict[str, dict[str, tuple[float, float, float]]]]:
    """(commit, date ms, machine, environment, benchmark -> combination -> (value, low, high))
    of one result file; KeyError/TypeError/ValueError when malformed."""
    if not isinstance(data, dict):
        raise TypeError("not an object")
    if data.get("version") != ASV_VERSION:
        raise ValueError(f"format version {data.get('version')!r}, expected {ASV_VERSION}")
    commit = data["commit_hash"]
    if not isinstance(commit, str) or not commit:
        raise ValueError("commit_hash is not a string")
    date = int(data.get("date") or 0)
    machine = str((data.get("params") or {}).get("machine", ""))
    env = str(data.get("env_name", ""))
    columns = data["result_columns"]
    if not isinstance(columns, list) or "result" not in columns:
        raise ValueError("result_columns has no 'result'")
    entries: dict[str, dict[str, tuple[float, float, float]]] = {}
    for bench, row in data["results"].items():
        if not isinstance(row, list):
            raise TypeError(f"{bench}: the row is not a list")
        col = dict(zip(columns, row, strict=False))
        values = col.get("result")
        if values is None:
            continue  # the benchmark failed on this commit
        params = col.get("params") or []
        combos = [", ".join(param_text(v) for v in c) for c in itertools.product(*params)]
        if not isinstance(values, list) or len(values) != len(combos):
            raise ValueError(f"{bench}: {len(combos)} parameter combinations, result {values!r}")
        low_col = col.get("stats_q_25") or col.get("stats_ci_99_a") or [None] * len(values)
        high_col = col.get("stats_q_75") or col.get("stats_ci_99_b") or [None] * len(values)
        for combo, value, low, high in zip(combos, values, low_col, high_col, strict=True):
            v = finite(value)
            if v is None:
                continue
            lo, hi = finite(low), finite(high)
            spread = (v if lo is None else lo, v if hi is None else hi)
            entries.setdefault(bench, {})[combo] = (v, *spread)
    return commit, date, machine, env, entries


def asv_chart(
    bench: str, combo: str, unit: str, rows: list[tuple[int, str, float, float, float]],
    where: list[str],
) -> Chart:  # fmt: skip
    """A chart of one benchmark combination: SPS for seconds of a known amount of work."""
    short = bench.split(".", 1)[1] if bench.startswith("benchmarks.") else bench
    kind = short.rsplit(".", 1)[-1]
    unit = unit or ("seconds" if kind.startswith("time_") else "bytes" if "mem" in kind else "")
    steps = re.search(r"env_steps=(\d+)", combo)
    chart = Chart(combo or short, ", ".join([short, *where]), unit)
    for _, commit, value, low, high in rows:
        if unit == "seconds" and steps and value > 0:
            n = int(steps.group(1))
            # Throughput: the band's ends swap (the slow quartile is the low SPS).
            shown = tuple(n / t if t > 0 else n / value for t in (value, high, low))
            chart.unit = "env steps/s"
            tip = f"{shown[0]:,.0f} env steps/s ({value * 1e3:.1f} ms per {n} steps)"
        elif unit == "seconds":
            shown = (value * 1e3, low * 1e3, high * 1e3)
            chart.unit = "ms per call"
            tip = f"{shown[0]:.3g} ms per call"
        elif unit == "bytes":
            shown = (value / 2**20, low / 2**20, high / 2**20)
            chart.unit = "MiB"
            tip = f"{shown[0]:.1f} MiB"
        else:
            shown, tip = (value, low, high), f"{value:.4g} {unit}"
        label = commit[:8]
        spread = f"band {min(shown[1:]):.4g}..{max(shown[1:]):.4g}"
        chart.points.append(
            Point(label, f"{label}: {tip}, {spread}", shown[0], min(shown[1:]), max(shown[1:]))
        )
    return chart


# -- gate runs ---------------------------------------------------------------------------
def run_facts(
    data: dict[str, Any], path: Path, default_metric: str
) -> tuple[str, float, dict[str, Any], dict[str, Any], str]:
    """A gate file's (metric, threshold, base side, head side, label of the run)."""
    settings = data.get("settings", {})
    metric = str(settings.get("metric", default_metric))
    threshold = float(settings.get("threshold", 0.10))
    sides = data.get("sides", {})
    base, head = (sides.get(s, {}) for s in ("base", "head"))
    # A head that was the working tree has no commit: the file names the run.
    label = str(head.get("sha") or "")[:8] or path.stem
    return metric, threshold, base, head, label


def checked_decision(verdict: dict[str, Any]) -> str:
    """The verdict's decision; ValueError for one the page has no colour for."""
    decision = str(verdict["decision"])
    if decision not in DECISION_COLOURS:
        raise ValueError(f"unknown decision {decision!r}")
    return decision


def gate_charts(paths: list[Path]) -> list[Chart]:
    """One chart per case: each run's head/base ratio, its interval and verdict."""
    charts: dict[str, Chart] = {}
    for path in paths:
        data = load_json(path)
        if not isinstance(data, dict):
            raise HistoryError(f"malformed gate results in {path}: not an object")
        if data.get("kind") == "learning":
            learning_points(data, path, charts)
            continue
        try:
            results = results_from_json(data)
            metric, threshold, base, head, label = run_facts(data, path, "cpu")
            for entry, res in zip(data["cases"], results, strict=True):
                verdict = entry["verdicts"][metric]
                decision = checked_decision(verdict)
                ratio = float(verdict["ratio"])
                low = float(verdict["low"] if verdict["low"] is not None else ratio)
                high = float(verdict["high"] if verdict["high"] is not None else ratio)
                if not all(math.isfinite(v) and v > 0 for v in (ratio, low, high)):
                    raise ValueError("a ratio that is not a positive number")
                phase = res.moved_phase()
                tip = (
                    f"{label}: {decision} {ratio:.3f} [{low:.3f}, {high:.3f}] head "
                    f"{head.get('ref', '?')} vs base {base.get('ref', '?')} "
                    f"({str(base.get('sha', ''))[:8]}), {path.name}"
                    + (f"; {phase.describe()}" if phase else "")
                )
                chart = charts.setdefault(
                    res.name, Chart(res.name, f"rlperf gate, {metric} time", "head/base time")
                )
                chart.rules = [(1.0, "1"), (1.0 + threshold, f"threshold {1 + threshold:.2f}")]
                chart.points.append(Point(label, tip, ratio, low, high, decision))
        except GateError as e:
            raise HistoryError(f"{path}: {e}") from e
        except (KeyError, TypeError, ValueError) as e:
            raise HistoryError(f"malformed gate results in {path}: {type(e).__name__}: {e}") from e
    return list(charts.values())


def learning_points(data: dict[str, Any], path: Path, charts: dict[str, Chart]) -> None:
    """A ``rlperf gate --learning --json`` file's run: one point per workload on its chart, the
    head/base ratio of median steps (or CPU seconds) to the return, coloured by the verdict."""
    try:
        results, _ = learning_results_from_json(data)
        metric, threshold, base, head, label = run_facts(data, path, "steps")
        for entry, res in zip(data["workloads"], results, strict=True):
            verdict = entry["verdicts"][metric]
            decision = checked_decision(verdict)
            ratio = float(verdict["ratio"])
            if not (math.isfinite(ratio) and ratio > 0):
                raise ValueError("a ratio that is not a positive number")
            tip = (
                f"{label}: {decision} {verdict.get('bound', '')}{ratio:.3f} after "
                f"{verdict['rounds']} rounds ({verdict['reason']}) head {head.get('ref', '?')} vs "
                f"base {base.get('ref', '?')} ({str(base.get('sha', ''))[:8]}), {path.name}"
            )
            name = f"learning: {res.name}"
            chart = charts.setdefault(name, Chart(
                name, f"rlperf gate --learning, return >= {res.threshold:g}",
                f"head/base {METRIC_WORDS.get(metric, metric)}",
            ))  # fmt: skip
            chart.rules = [(1.0, "1"), (1.0 + threshold, f"threshold {1 + threshold:.2f}")]
            chart.points.append(Point(label, tip, ratio, ratio, ratio, decision))
    except GateError as e:
        raise HistoryError(f"{path}: {e}") from e
    except (KeyError, TypeError, ValueError) as e:
        raise HistoryError(f"malformed gate results in {path}: {type(e).__name__}: {e}") from e


# -- rendering ---------------------------------------------------------------------------
STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; max-width: 940px; }
h1 { font-size: 20px; } h2 { font-size: 15px; margin: 24px 0 2px; word-break: break-all; }
.sub { color: #666; font-size: 12px; margin: 0 0 4px; }
svg.chart { background: #fafafa; border: 1px solid #ddd; }
.axis { stroke: #999; stroke-width: 1; } .grid { stroke: #e4e4e4; stroke-width: 1; }
.band { fill: #90caf9; fill-opacity: 0.45; stroke: none; }
.line { fill: none; stroke: #1565c0; stroke-width: 1.5; }
.bar { stroke: #555; stroke-width: 1.2; }
.rule { stroke: #b71c1c; stroke-dasharray: 5 4; stroke-width: 1; }
text { font-size: 11px; fill: #444; }
.legend span { display: inline-block; margin-right: 14px; }
.dot { display: inline-block; width: 10px; height: 10px; border-radius: 5px; }
"""


def render(charts: list[Chart], sources: list[str]) -> str:
    """The whole page: one ``<section class="case">`` with one ``<svg class="chart">`` each."""
    legend = "".join(
        f'<span><i class="dot" style="background:{c}"></i> {d}</span>'
        for d, c in DECISION_COLOURS.items()
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<title>rlperf benchmark history</title>",
        f"<style>{STYLE}</style></head><body>",
        "<h1>rlperf benchmark history</h1>",
        '<p class="sub">Self-contained: no scripts, nothing loaded from the network. '
        "Hover a point for its commit and values. Sources: "
        + html.escape("; ".join(sources))
        + "</p>",
        f'<p class="sub legend">Gate verdicts: {legend}</p>',
    ]
    for i, chart in enumerate(charts):
        parts.append(
            f'<section class="case" id="case-{i}" data-case="{html.escape(chart.title)}">'
            f"<h2>{html.escape(chart.title)}</h2>"
            f'<p class="sub">{html.escape(chart.subtitle)}</p>{svg_chart(chart)}</section>'
        )
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round values spanning [low, high]."""
    raw = (high - low) / max(count - 1, 1)
    step = 10 ** math.floor(math.log10(raw))
    step *= next(m for m in (1, 2, 5, 10) if m * step >= raw)
    first = math.ceil(low / step) * step
    return [first + k * step for k in range(int((high - first) / step + 1e-9) + 1)]


def tick_text(value: float) -> str:
    """``13,500`` for large values, ``1.05`` / ``0.25`` for small ones."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def svg_chart(chart: Chart) -> str:
    """Inline SVG: band or error bars for the spread, the values, reference lines, axes."""
    points = chart.points
    values = [v for p in points for v in (p.low, p.high, p.value)]
    values += [y for y, _ in chart.rules]
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.08 or abs(hi) * 0.05 or 1.0
    lo, hi = lo - pad, hi + pad
    plot_w = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_h = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM

    def x(i: int) -> float:
        return MARGIN_LEFT + (plot_w * (i + 0.5) / len(points))

    def y(v: float) -> float:
        return MARGIN_TOP + plot_h * (hi - v) / (hi - lo)

    out = [
        f'<svg class="chart" role="img" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}"><title>{html.escape(chart.title)}</title>'
    ]
    for t in ticks(lo, hi):
        out.append(
            f'<line class="grid" x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" '
            f'y1="{y(t):.1f}" y2="{y(t):.1f}"/>'
            f'<text x="{MARGIN_LEFT - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{tick_text(t)}'
            "</text>"
        )
    bottom = HEIGHT - MARGIN_BOTTOM
    out.append(
        f'<line class="axis" x1="{MARGIN_LEFT}" x2="{MARGIN_LEFT}" y1="{MARGIN_TOP}" '
        f'y2="{bottom}"/><line class="axis" x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" '
        f'y1="{bottom}" y2="{bottom}"/>'
        f'<text x="14" y="{MARGIN_TOP + plot_h / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {MARGIN_TOP + plot_h / 2:.1f})">{html.escape(chart.unit)}'
        "</text>"
    )
    for value, name in chart.rules:
        out.append(
            f'<line class="rule" x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" '
            f'y1="{y(value):.1f}" y2="{y(value):.1f}"/><text x="{WIDTH - MARGIN_RIGHT - 4}" '
            f'y="{y(value) - 4:.1f}" text-anchor="end">{html.escape(name)}</text>'
        )
    gate = any(p.decision is not None for p in points)
    if not gate and len(points) > 1:
        upper = " ".join(f"{x(i):.1f},{y(p.high):.1f}" for i, p in enumerate(points))
        lower = " ".join(f"{x(i):.1f},{y(p.low):.1f}" for i, p in reversed(list(enumerate(points))))
        out.append(f'<polygon class="band" points="{upper} {lower}"/>')
        line = " ".join(f"{x(i):.1f},{y(p.value):.1f}" for i, p in enumerate(points))
        out.append(f'<polyline class="line" points="{line}"/>')
    every = max(1, math.ceil(len(points) / 24))  # at most about 24 x labels
    for i, p in enumerate(points):
        if gate or len(points) == 1:
            out.append(
                f'<line class="bar" x1="{x(i):.1f}" x2="{x(i):.1f}" y1="{y(p.low):.1f}" '
                f'y2="{y(p.high):.1f}"/>'
            )
        colour = DECISION_COLOURS.get(p.decision or "", "#1565c0")
        out.append(
            f'<circle cx="{x(i):.1f}" cy="{y(p.value):.1f}" r="4" fill="{colour}">'
            f"<title>{html.escape(p.detail)}</title></circle>"
        )
        if i % every == 0:
            out.append(
                f'<text x="{x(i):.1f}" y="{bottom + 12}" text-anchor="end" '
                f'transform="rotate(-40 {x(i):.1f} {bottom + 12})">{html.escape(p.label)}</text>'
            )
    out.append("</svg>")
    return "".join(out)


def build(asv_results: Path | None, gate_json: list[Path]) -> tuple[str, int]:
    """(the page, number of charts) from the given sources; HistoryError if none has data."""
    charts: list[Chart] = []
    sources = []
    if asv_results is not None:
        charts += asv_charts(asv_results)
        sources.append(f"asv results {asv_results}")
    if gate_json:
        charts += gate_charts(gate_json)
        sources.append(f"{len(gate_json)} gate run(s)")
    if not charts:
        raise HistoryError("nothing to show: pass --asv-results DIR or --gate-json FILE")
    return render(charts, sources), len(charts)
