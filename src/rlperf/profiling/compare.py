"""``rlperf compare``: did this change make training faster, or is it noise?

Two forms:

- ``rlperf compare A.json B.json``: one report each; a table of baseline, candidate and speedup
  per section and for SPS. One run per side cannot show noise, and the table says so.
- ``rlperf compare --env ENV --a "k=v ..." --b "k=v ..." --repeats N``: runs ``rlperf profile``
  for both configurations itself, alternating A B A B in fresh processes (so slow drift of the
  machine hits both alike and no run inherits another's warm caches), then shows every figure as
  median [min-max] over the N runs.

**When is B different from A?** Run ``i`` of A and run ``i`` of B are neighbours in time, so
they are compared as a pair: ``change_i = A_i / B_i - 1`` for times (positive: B is faster) and
``B_i / A_i - 1`` for SPS. B is called faster (slower) only when

1. at least :data:`MIN_REPEATS` pairs ran,
2. every paired change has the same sign (a sign test: with 5 pairs, chance alone gives this
   about 6% of the time), and
3. the median paired change is larger than the noise, the larger of the two configurations'
   half-ranges relative to their median, ``(max - min) / 2 / median``.

Anything else reads "no difference". A +1.2% change measured with +-5% noise in the other rows
fails (3) and reads "no difference"; a consistent +10% on a quiet machine passes.

Section times are in milliseconds per 1,000 environment steps, so configurations with different
batch sizes (and so slightly different step counts) compare fairly.

**Why did B move SPS by as much (or as little) as it did?** :func:`explain` applies Amdahl's law
to the measurements: a section taking a share ``f`` of A's wall time and sped up ``s`` times
allows an end-to-end speedup of ``1 / ((1 - f) + f / s)``. It does this for the env step (the
question a faster simulator raises: a 2x faster env at 10% of the time buys 5%) and for the
section whose time changed most, and says whether the prediction lies within the measured
spread of the paired SPS speedups. Settings that are not config fields but options of the env
(``--a turbo=false``) are passed as ``--env-option``.
"""

from __future__ import annotations

import shlex
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlperf.config import ConfigError, field_index, flag_name, parse_option_value
from rlperf.profiling.report import load_report
from rlperf.timing import names

MIN_REPEATS = 3
SPS = "SPS"
ENV_STEP = names.path(names.ROLLOUT, names.ENV_STEP)
ENV_SECTIONS = (ENV_STEP, *(names.path(names.ROLLOUT, n) for n in (names.ENV_SEND, names.ENV_RECV)))
# A figure, not a section: the rollout's env phase whatever the backend, the serial env step or
# the worker backend's send plus receive. Shown where the two sides step their envs differently
# (serial against workers), so the rows still pair up and Amdahl has an env phase to explain.
ENV_PHASE = "rollout/env"


# -- figures from reports ------------------------------------------------------------------
def figures(report: dict[str, Any]) -> dict[str, float]:
    """SPS and each section's ms per 1,000 env steps."""
    steps = max(report["totals"]["steps"], 1)
    out = {SPS: float(report["totals"]["sps"])}
    for e in report["sections"]:
        out[e["name"]] = e["total_s"] * 1e6 / steps
    if any(name in out for name in ENV_SECTIONS):
        out[ENV_PHASE] = _seconds(report, ENV_PHASE) * 1e6 / steps
    return out


def _seconds(report: dict[str, Any], name: str) -> float:
    """Total seconds of section ``name`` (0 if absent); for :data:`ENV_PHASE`, its sections'."""
    wanted = ENV_SECTIONS if name == ENV_PHASE else (name,)
    return sum(e["total_s"] for e in report["sections"] if e["name"] in wanted)


def _env_sections(report: dict[str, Any]) -> frozenset[str]:
    return frozenset(e["name"] for e in report["sections"] if e["name"] in ENV_SECTIONS)


def _order(reports: list[dict[str, Any]]) -> list[str]:
    """Figure names: SPS, then sections parents-first as first seen (children under parents)."""
    seen: dict[str, str | None] = {}
    for r in reports:
        for e in r["sections"]:
            seen.setdefault(e["name"], e["parent"])
    order = [SPS]

    def emit(parent: str | None) -> None:
        for name, p in seen.items():
            if p == parent:
                order.append(name)
                emit(name)

    emit(None)
    return order


def _label(name: str) -> str:
    if name == ENV_PHASE:
        return "  env: step | send+recv"
    return name if name == SPS else "  " * name.count("/") + name.rsplit("/", 1)[-1]


def change(name: str, a: float, b: float) -> float:
    """Relative improvement of b over a: positive means B is better (faster / more SPS)."""
    if name == SPS:
        return b / a - 1.0 if a > 0 else 0.0
    return a / b - 1.0 if b > 0 else 0.0


# -- the verdict -----------------------------------------------------------------------------
@dataclass
class Comparison:
    """One figure compared over paired runs."""

    name: str
    a: list[float]
    b: list[float]

    @property
    def paired_changes(self) -> list[float]:
        return [change(self.name, x, y) for x, y in zip(self.a, self.b, strict=True)]

    @property
    def median_change(self) -> float:
        return statistics.median(self.paired_changes)

    @staticmethod
    def _half_range(values: list[float]) -> float:
        mid = statistics.median(values)
        return (max(values) - min(values)) / 2 / mid if mid > 0 else 0.0

    @property
    def noise(self) -> float:
        """Larger relative half-range of the two configurations."""
        return max(self._half_range(self.a), self._half_range(self.b))

    @property
    def verdict(self) -> str:
        if len(self.a) < MIN_REPEATS:
            return f"n/a (need >= {MIN_REPEATS} repeats)"
        changes = self.paired_changes
        same_sign = all(c > 0 for c in changes) or all(c < 0 for c in changes)
        if same_sign and abs(self.median_change) > self.noise:
            return "B faster" if self.median_change > 0 else "B slower"
        return "no difference"


def compare_runs(
    a_reports: list[dict[str, Any]], b_reports: list[dict[str, Any]]
) -> list[Comparison]:
    """Paired comparisons of every figure present in all runs of both sides, and of the env
    phase (:data:`ENV_PHASE`, after ``rollout``) where the runs step their envs differently."""
    a_figs = [figures(r) for r in a_reports]
    b_figs = [figures(r) for r in b_reports]
    order = _order(a_reports + b_reports)
    if len({_env_sections(r) for r in a_reports + b_reports}) > 1 and names.ROLLOUT in order:
        order.insert(order.index(names.ROLLOUT) + 1, ENV_PHASE)
    out = []
    for name in order:
        if all(name in f for f in a_figs + b_figs):
            out.append(Comparison(name, [f[name] for f in a_figs], [f[name] for f in b_figs]))
    return out


def one_sided(
    a_reports: list[dict[str, Any]], b_reports: list[dict[str, Any]]
) -> list[tuple[str, str, list[float]]]:
    """Sections in every run of one side and in no run of the other (``rollout/env_step``
    against the workers' ``env_send`` and ``env_recv``): ``(name, "A" or "B", values)``."""
    a_figs = [figures(r) for r in a_reports]
    b_figs = [figures(r) for r in b_reports]
    out = []
    for name in _order(a_reports + b_reports):
        for side, mine, other in (("A", a_figs, b_figs), ("B", b_figs, a_figs)):
            if all(name in f for f in mine) and not any(name in f for f in other):
                out.append((name, side, [f[name] for f in mine]))
    return out


def _fmt(name: str, v: float) -> str:
    return f"{v:,.0f}" if name == SPS else f"{v:.2f}"


def _spread(name: str, values: list[float]) -> str:
    mid = statistics.median(values)
    if len(values) == 1:
        return _fmt(name, mid)
    return f"{_fmt(name, mid)} [{_fmt(name, min(values))}-{_fmt(name, max(values))}]"


def _one_side_cells(side: str, cell: str) -> tuple[str, str]:
    """A one-sided row's A and B cells (:func:`one_sided`): the figure on its side, "-" on the
    other."""
    return (cell, "-") if side == "A" else ("-", cell)


def render_runs(
    comparisons: list[Comparison],
    a_label: str,
    b_label: str,
    only: Sequence[tuple[str, str, list[float]]] = (),
) -> str:
    """The median [min-max] table with paired change, noise and verdict per figure; below it
    the ``only`` rows (:func:`one_sided`), which have nothing to pair with."""
    n = len(comparisons[0].a) if comparisons else 0
    width = max([12] + [len(_spread(c.name, v)) + 2 for c in comparisons for v in (c.a, c.b)])
    lines = [
        f"A: {a_label}",
        f"B: {b_label}",
        f"{n} runs each, alternating A B; SPS in steps/s, sections in ms per 1,000 env steps;",
        "median [min-max]; change = median of paired changes (+: B better); noise = larger",
        "half-range / median of the two sides",
        "-" * (28 + 2 * width + 36),
        f"{'figure':<28}{'A':>{width}}{'B':>{width}}{'change':>9}{'noise':>9}  verdict",
        "-" * (28 + 2 * width + 36),
    ]
    for c in comparisons:
        lines.append(
            f"{_label(c.name):<28}{_spread(c.name, c.a):>{width}}{_spread(c.name, c.b):>{width}}"
            f"{c.median_change:>+9.1%}{c.noise:>9.1%}  {c.verdict}"
        )
    for name, side, values in only:
        a_cell, b_cell = _one_side_cells(side, _spread(name, values))
        lines.append(f"{name:<28}{a_cell:>{width}}{b_cell:>{width}}{'':>18}  only in {side}")
    return "\n".join(lines)


def render_reports(a: dict[str, Any], b: dict[str, Any], a_name: str, b_name: str) -> str:
    """Component table for one report per side: baseline, candidate, speedup."""
    comparisons = compare_runs([a], [b])
    lines = [
        f"baseline:  {a_name} ({a['run'].get('env')}, {a['totals']['steps']:,} steps)",
        f"candidate: {b_name} ({b['run'].get('env')}, {b['totals']['steps']:,} steps)",
        "units: SPS in steps/s, sections in ms per 1,000 env steps; speedup +: candidate faster",
        "-" * 68,
        f"{'component':<34}{'baseline':>12}{'candidate':>12}{'speedup':>10}",
        "-" * 68,
    ]
    for c in comparisons:
        lines.append(
            f"{_label(c.name):<34}{_fmt(c.name, c.a[0]):>12}{_fmt(c.name, c.b[0]):>12}"
            f"{c.median_change:>+10.1%}"
        )
    for name, side, values in one_sided([a], [b]):
        a_cell, b_cell = _one_side_cells(side, _fmt(name, values[0]))
        which = "baseline" if side == "A" else "candidate"
        lines.append(f"{name:<34}{a_cell:>12}{b_cell:>12}  only in {which}")
    lines += [
        "-" * 68,
        "one run per side: the table cannot show noise; differences of a few percent are",
        "often noise on a shared machine. Use --env/--a/--b --repeats N to measure it.",
    ]
    return "\n".join(lines)


# -- running configurations -----------------------------------------------------------------
def parse_overrides(text: str, side: str, env: str | None = None) -> dict[str, Any]:
    """``"num_envs=128 hidden_sizes=32,32 analytic=false"`` -> typed config values.

    A key that is not a config field but an option of ``env`` goes into ``options`` (the
    ``--env-option`` dict): ``"turbo=false"`` with ``env="petri"``.
    """
    from rlperf.config import Config
    from rlperf.envs.registry import options_of

    index = field_index()
    defaults = Config()
    out: dict[str, Any] = {}
    for item in shlex.split(text):
        key, sep, raw = item.partition("=")
        key = key.strip().lstrip("-").replace("-", "_")
        if not sep or not raw:
            raise ConfigError(f"--{side}: expected key=value, got {item!r}")
        if key not in index:
            env_options = options_of(env) if env else []
            if env_options is None or key in env_options:
                out.setdefault("options", {})[key] = parse_option_value(raw)
                continue
            where = f" nor an option of env {env!r}" if env else ""
            raise ConfigError(f"--{side}: unknown setting {key!r} (not a config field{where})")
        default = getattr(getattr(defaults, index[key][0]), key)
        try:
            if isinstance(default, bool):
                lowered = raw.lower()
                if lowered not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
                    raise ValueError(raw)
                out[key] = lowered in ("true", "1", "yes", "on")
            elif isinstance(default, tuple):
                out[key] = tuple(int(v) for v in raw.replace("x", ",").split(",") if v)
            elif default is None:
                out[key] = raw
            else:
                out[key] = type(default)(raw)
        except ValueError:
            raise ConfigError(f"--{side}: bad value for {key}: {raw!r}") from None
    return out


def to_flags(settings: dict[str, Any]) -> list[str]:
    """Config values as ``rlperf train`` command-line flags."""
    flags: list[str] = []
    for key, value in settings.items():
        flag = flag_name(key)  # not always --<key>: policy.kind is --policy
        if key == "options":
            for name, option in value.items():
                text = str(option).lower() if isinstance(option, bool) else str(option)
                flags += ["--env-option", f"{name}={text}"]
        elif isinstance(value, bool):
            flags.append(flag if value else "--no-" + flag.removeprefix("--"))
        elif isinstance(value, (tuple, list)):
            flags += [flag, *(str(v) for v in value)]
        else:
            flags += [flag, str(value)]
    return flags


# -- the explanation (Amdahl) ------------------------------------------------------------------
@dataclass
class Explanation:
    """What a section's speedup allows end to end, against what was measured.

    Attributes:
        section: the section's full name.
        share: its median share of A's wall time (0-1).
        speedup: median paired A/B ratio of its time (> 1: faster in B).
        predicted: ``1 / ((1 - share) + share / speedup)``.
        measured: paired B/A SPS ratios.
    """

    section: str
    share: float
    speedup: float
    predicted: float
    measured: list[float]

    @property
    def within(self) -> bool:
        """The prediction lies inside the measured range of paired SPS speedups."""
        return min(self.measured) <= self.predicted <= max(self.measured)

    def render(self) -> str:
        lo, hi = min(self.measured), max(self.measured)
        med = statistics.median(self.measured)
        agrees = "within" if self.within else "OUTSIDE"
        return (
            f"{self.section}: {self.share:.1%} of A's wall time, {self.speedup:.2f}x faster in B "
            f"-> Amdahl allows {self.predicted:.3f}x end to end; measured {med:.3f}x "
            f"[{lo:.3f}-{hi:.3f}] ({agrees} the measured spread)"
        )


def section_share(report: dict[str, Any], section: str) -> float:
    """Section ``section``'s share of the report's wall time, 0-1 (:data:`ENV_PHASE`: its
    sections' together)."""
    wall = report["totals"]["wall_s"]
    return _seconds(report, section) / wall if wall > 0 else 0.0


def explain(
    a_reports: list[dict[str, Any]],
    b_reports: list[dict[str, Any]],
    comparisons: list[Comparison],
) -> list[Explanation]:
    """Amdahl's prediction for the env step (the env phase, :data:`ENV_PHASE`, where one side
    steps its envs in workers) and for the section that changed most (leaf sections only: a
    parent's change is its children's)."""
    by_name = {c.name: c for c in comparisons}
    sps = by_name.get(SPS)
    if sps is None:
        return []
    measured = [b / a for a, b in zip(sps.a, sps.b, strict=True) if a > 0]
    parents = {n.rsplit("/", 1)[0] for n in by_name if "/" in n}
    leaves = [c for c in comparisons if c.name != SPS and c.name not in parents
              and not names.is_measurement(c.name)]  # fmt: skip
    chosen = [env for env in (ENV_STEP, ENV_PHASE) if env in by_name][:1]
    if leaves:
        biggest = max(leaves, key=lambda c: abs(statistics.median(
            [x / y for x, y in zip(c.a, c.b, strict=True) if y > 0] or [1.0]) - 1.0))  # fmt: skip
        if biggest.name not in chosen:
            chosen.append(biggest.name)
    out = [explain_section(a_reports, by_name[name], measured) for name in chosen]
    return [e for e in out if e is not None]


def explain_section(
    a_reports: list[dict[str, Any]], c: Comparison, measured: list[float]
) -> Explanation | None:
    """Amdahl's prediction for section ``c`` against the paired SPS speedups ``measured``
    (None when the section never ran on one side)."""
    ratios = [x / y for x, y in zip(c.a, c.b, strict=True) if y > 0]
    if not ratios or not measured:
        return None
    share = statistics.median(section_share(r, c.name) for r in a_reports)
    speedup = statistics.median(ratios)
    predicted = 1.0 / ((1.0 - share) + share / speedup)
    return Explanation(c.name, share, speedup, predicted, measured)


def render_explanation(explanations: list[Explanation]) -> str:
    if not explanations:
        return ""
    lines = ["", "Why (Amdahl's law on the measurements above):"]
    lines += [f"- {e.render()}" for e in explanations]
    return "\n".join(lines)


class RunFailed(RuntimeError):
    """A child ``rlperf profile`` exited with an error."""


def run_profile(flags: list[str], out_dir: Path) -> dict[str, Any]:
    """Run ``rlperf profile`` with ``flags`` in a fresh Python process; return its report."""
    cmd = [sys.executable, "-m", "rlperf", "profile", "--no-progress", "--out", str(out_dir)]
    done = subprocess.run(cmd + flags, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise RunFailed(last)
    return load_report(out_dir)


def run_alternating(
    a_flags: list[str],
    b_flags: list[str],
    repeats: int,
    out_dir: Path | None = None,
    cprofile: bool = False,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    """Run A then B, ``repeats`` times: (A reports, B reports, interrupted).

    With ``cprofile`` each run also writes ``train.pstats`` beside its report (the report's
    ``artifacts.cprofile`` names it). On Ctrl-C after at least one complete pair, returns the
    complete pairs so far.
    """
    interrupted = False
    a_reports: list[dict[str, Any]] = []
    b_reports: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="rlperf-compare-") as tmp:
        base = out_dir or Path(tmp)
        try:
            for i in range(1, repeats + 1):
                for side, flags, reports in (("A", a_flags, a_reports), ("B", b_flags, b_reports)):
                    run_dir = base / f"{side.lower()}_{i}"
                    extra = ["--cprofile", str(run_dir / "train.pstats")] if cprofile else []
                    report = run_profile(flags + extra, run_dir)
                    reports.append(report)
                    print(f"run {i}/{repeats} {side}: {report['totals']['sps']:,.0f} SPS",
                          file=sys.stderr, flush=True)  # fmt: skip
        except KeyboardInterrupt:
            interrupted = True
            del a_reports[len(b_reports) :]
            if not b_reports:
                raise
            print(f"rlperf: interrupted; comparing the {len(b_reports)} complete pairs",
                  file=sys.stderr)  # fmt: skip
    return a_reports, b_reports, interrupted
