"""``rlperf ablate``: what each knob of a preset buys, in SPS and in time to a return.

A speed guide lists knobs (bigger batches, more envs, a shorter BPTT horizon, torch.compile ...)
and a total speedup; it rarely says which knob bought what, or whether training reached a return
any sooner. ``rlperf ablate --base original --target ultra_fast`` answers both on this machine:

- the **variants**: the base preset; each **knob** of the target applied alone to the base (a
  knob is a group of config fields where the two presets differ, :data:`KNOB_GROUPS`; a
  differing field in no group is a knob of its own); each knob the target leaves out
  (``config.LEFT_OUT``: measured slower, still measured here); and the target itself (all knobs);
- every variant trains under the same wall-clock budget (``--max-wall-s``), or until the base
  preset's total steps if those come first, in a fresh ``rlperf profile`` process (``--only``
  keeps the base and the named rows), the variants interleaved within each repeat and seed,
  each round starting one row later, so slow drift of a shared machine hits all alike;
- per variant: SPS median [min-max], the paired SPS speedup over the base, the wall time to
  reach the base's final mean return (the same seed and repeat's base run; "not reached" when
  the budget ran out first), the return reached within the budget, and the phase whose time per
  step moved most with Amdahl's prediction beside the measured SPS change
  (:func:`rlperf.profiling.compare.explain`).

Time to a return is read from ``metrics.jsonl``'s ``wall_s`` (seconds since training started)
and ``mean_return`` (the last 100 episodes): the first row at or above the base's final value.
The base run's own time is the first row where it reached its final value, so a base that
plateaued early has a short time too.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlperf.config import LEFT_OUT, Config, ConfigError, field_index, preset, set_field
from rlperf.ppo.checks import check_config
from rlperf.profiling.compare import (
    SPS,
    Comparison,
    Explanation,
    compare_runs,
    explain_section,
    run_profile,
    to_flags,
)
from rlperf.timing import names

SCHEMA = "rlperf.ablate/1"
DEFAULT_BUDGET_S = 120.0

# Knob name -> the config fields it moves together (the guide's rows). Fields that do not exist
# yet (the worker backend's) simply never differ; adding them to the presets makes the knob.
KNOB_GROUPS: dict[str, tuple[str, ...]] = {
    "envs": ("num_envs",),
    "batch": ("num_steps", "num_minibatches"),
    "bptt": ("bptt_horizon",),
    "epochs": ("update_epochs",),
    "workers": ("backend", "num_workers", "env_batch_size"),
    "compile": ("compile",),
    "precision": ("precision",),
}

BASE, KNOB, LEFT_OUT_KNOB, ALL = "base", "knob", "left_out", "all"


@dataclass(frozen=True)
class Variant:
    """One row of the ablation: the base preset with ``settings`` (config field -> value)."""

    name: str
    kind: str  # BASE, KNOB, LEFT_OUT_KNOB or ALL
    settings: dict[str, Any]


def flat_fields(cfg: Config) -> dict[str, Any]:
    """Every config field by its flat name (``num_envs``, ``kind`` ...) -> value."""
    return {name: getattr(getattr(cfg, section), name)
            for name, (section, _) in field_index().items()}  # fmt: skip


def knobs(base: Config, target: Config) -> dict[str, dict[str, Any]]:
    """The target's knobs: name -> the target's values of the fields that differ from base."""
    a, b = flat_fields(base), flat_fields(target)
    differing = [name for name in a if a[name] != b[name]]
    out: dict[str, dict[str, Any]] = {}
    for knob, fields in KNOB_GROUPS.items():
        moved = {f: b[f] for f in fields if f in differing}
        if moved:
            out[knob] = moved
    grouped = {f for moved in out.values() for f in moved}
    for name in differing:
        if name not in grouped:
            out[name] = {name: b[name]}
    return out


def variants(base_name: str, target_name: str) -> list[Variant]:
    """Base, each knob alone, each left-out knob alone, all together (ConfigError if a preset
    is unknown or the two do not differ)."""
    target_knobs = knobs(preset(base_name), preset(target_name))
    if not target_knobs:
        raise ConfigError(f"presets {base_name!r} and {target_name!r} do not differ: no knobs")
    rows = [Variant(base_name, BASE, {})]
    rows += [Variant(f"+{k}", KNOB, s) for k, s in target_knobs.items()]
    rows += [Variant(f"+{k} (left out)", LEFT_OUT_KNOB, s)
             for k, s in LEFT_OUT.get(target_name, {}).items()]  # fmt: skip
    everything = {f: v for s in target_knobs.values() for f, v in s.items()}
    rows.append(Variant(f"{target_name} (all)", ALL, everything))
    return rows


def row_key(variant: Variant) -> str:
    """The name ``--only`` selects a row by: the knob (``envs``, ``compile``), or ``all``."""
    if variant.kind == ALL:
        return "all"
    return variant.name.removeprefix("+").removesuffix(" (left out)")


def select(plan: list[Variant], only: list[str] | None) -> list[Variant]:
    """The base and the rows named in ``only`` (every row when None), in the plan's order.

    ``rlperf ablate --only all`` runs the base and the target alone: time to return needs
    budgets of minutes per run, and a whole table is every knob times that (ConfigError naming
    the choices for an unknown name)."""
    if only is None:
        return plan
    keys = [row_key(v) for v in plan[1:]]
    unknown = [name for name in only if name not in keys]
    if unknown:
        raise ConfigError(f"--only {unknown[0]!r} is not a row of this ablation: choose from "
                          f"{', '.join(keys)}")  # fmt: skip
    return [plan[0], *(v for v in plan[1:] if row_key(v) in only)]


def variant_config(base_name: str, variant: Variant, shared: dict[str, Any]) -> Config:
    """The variant's validated config: base preset, the variant's settings, then ``shared``
    (``--set`` and ``--env-option``, applied to every row; env options merge). ConfigError
    naming the variant for a config that cannot run, before any run starts."""
    cfg = preset(base_name)
    index = field_index()
    for name, value in {**variant.settings, **shared}.items():
        if name == "options":
            value = {**cfg.env.options, **value}
        set_field(cfg, index[name][0], name, value)
    try:
        # Every check the run's trainer makes: the fit needs the env's rows (grid: maps x
        # agents) and spaces, so the env is built once here.
        check_config(cfg)
    except ConfigError as e:
        raise ConfigError(f"variant {variant.name}: {e}") from None
    return cfg


# -- one run's figures -----------------------------------------------------------------------
@dataclass
class RunResult:
    """One variant's run: its profile report and its return curve."""

    variant: str
    seed: int
    repeat: int
    report: dict[str, Any]
    curve: list[tuple[float, float]]  # (wall_s, mean_return) of rows with a return

    @property
    def sps(self) -> float:
        return float(self.report["totals"]["sps"])

    @property
    def final_return(self) -> float | None:
        return self.curve[-1][1] if self.curve else None


def read_curve(run_dir: Path) -> list[tuple[float, float]]:
    """(wall_s, mean_return) of every metrics row that has a return."""
    curve = []
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row.get("mean_return") is not None:
            curve.append((float(row["wall_s"]), float(row["mean_return"])))
    return curve


def time_to_return(curve: list[tuple[float, float]], target: float | None) -> float | None:
    """Wall seconds of the first row at or above ``target`` (None: never, or no target)."""
    if target is None:
        return None
    return next((wall_s for wall_s, ret in curve if ret >= target), None)


# -- the table's rows ------------------------------------------------------------------------
def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _median_or_not_reached(values: list[float | None]) -> float | None:
    """Median with "not reached" as +inf; None when the median itself was not reached."""
    ordered = [math.inf if v is None else v for v in values]
    if not ordered:
        return None
    mid = statistics.median(ordered)
    return None if math.isinf(mid) else mid


@dataclass
class AblationRow:
    """One variant's figures over its runs, each paired with the base run of the same seed and
    repeat."""

    variant: Variant
    runs: list[RunResult]
    base_runs: list[RunResult]
    explanation: Explanation | None = None
    flags: list[str] = field(default_factory=list)

    @property
    def speedups(self) -> list[float]:
        return [r.sps / b.sps for r, b in zip(self.runs, self.base_runs, strict=True) if b.sps]

    @property
    def times_to_base_return(self) -> list[float | None]:
        return [time_to_return(r.curve, b.final_return)
                for r, b in zip(self.runs, self.base_runs, strict=True)]  # fmt: skip

    @property
    def base_times(self) -> list[float | None]:
        return [time_to_return(b.curve, b.final_return) for b in self.base_runs]

    @property
    def time_ratios(self) -> list[float | None]:
        """Paired time to the base's return over the base's own time (None: not reached)."""
        pairs = zip(self.times_to_base_return, self.base_times, strict=True)
        return [None if t is None or bt is None or bt <= 0 else t / bt for t, bt in pairs]

    @property
    def reached(self) -> int:
        return sum(t is not None for t in self.times_to_base_return)

    def to_json(self) -> dict[str, Any]:
        e = self.explanation
        return {
            "name": self.variant.name,
            "kind": self.variant.kind,
            "settings": self.variant.settings,
            "flags": self.flags,
            "sps": _spread([r.sps for r in self.runs]),
            "sps_speedup": _spread(self.speedups),
            "time_to_base_return_s": _median_or_not_reached(self.times_to_base_return),
            "time_ratio_to_base": _median_or_not_reached(self.time_ratios),
            "reached": self.reached,
            "return_in_budget": _spread(
                [r.final_return for r in self.runs if r.final_return is not None]
            ),
            "phase": None
            if e is None
            else {
                "section": e.section,
                "share_of_base_wall": e.share,
                "speedup": e.speedup,
                "amdahl_predicted_sps_speedup": e.predicted,
                "measured_sps_speedups": e.measured,
            },
            "runs": [
                {
                    "seed": r.seed,
                    "repeat": r.repeat,
                    "sps": r.sps,
                    "wall_s": r.report["totals"]["wall_s"],
                    "steps": r.report["totals"]["steps"],
                    "final_return": r.final_return,
                    "base_return": b.final_return,
                    "time_to_base_return_s": t,
                    "curve": r.curve,
                }
                for r, b, t in zip(
                    self.runs, self.base_runs, self.times_to_base_return, strict=True
                )
            ],  # fmt: skip
        }


def build_rows(
    plan: list[Variant], results: dict[str, list[RunResult]], flags: dict[str, list[str]]
) -> list[AblationRow]:
    """Pair every variant's runs with the base's and explain the phase that moved most."""
    base_name = plan[0].name
    base_runs = results[base_name]
    rows = []
    for variant in plan:
        runs = results[variant.name]
        row = AblationRow(variant, runs, base_runs, flags=flags[variant.name])
        if variant.kind != BASE:
            row.explanation = phase_that_moved_most(
                [b.report for b in base_runs], [r.report for r in runs]
            )
        rows.append(row)
    return rows


def phase_that_moved_most(
    a_reports: list[dict[str, Any]], b_reports: list[dict[str, Any]]
) -> Explanation | None:
    """The leaf section whose time per env step changed most in absolute terms (median of the
    paired differences: the one that moved SPS most, where a ratio would pick a tiny section
    that halved), with Amdahl's prediction beside the measured SPS speedups."""
    comparisons = compare_runs(a_reports, b_reports)
    by_name = {c.name: c for c in comparisons}
    parents = {n.rsplit("/", 1)[0] for n in by_name if "/" in n}
    leaves = [c for c in comparisons
              if c.name not in (SPS, *parents) and not names.is_measurement(c.name)]  # fmt: skip
    if SPS not in by_name or not leaves:
        return None
    sps = by_name[SPS]
    measured = [b / a for a, b in zip(sps.a, sps.b, strict=True) if a > 0]

    def moved(c: Comparison) -> float:
        return abs(statistics.median(x - y for x, y in zip(c.a, c.b, strict=True)))

    return explain_section(a_reports, max(leaves, key=moved), measured)


# -- running -------------------------------------------------------------------------------
def rotated(plan: list[Variant], k: int) -> list[tuple[int, Variant]]:
    """Round ``k``'s order: (index, variant) starting ``k`` rows later. A machine whose load
    drifts one way over the ablation would otherwise always favour the rows that run last."""
    start = k % len(plan)
    return [(i, plan[i]) for i in (*range(start, len(plan)), *range(start))]


def run_ablation(
    base_name: str,
    plan: list[Variant],
    shared: dict[str, Any],
    budget_s: float,
    seeds: list[int],
    repeats: int,
    out_dir: Path | None,
) -> tuple[dict[str, list[RunResult]], dict[str, list[str]]]:
    """Every variant under ``budget_s`` per run, interleaved: for each repeat, for each seed,
    every variant once (each round starting one row later: :func:`rotated`), each in a fresh
    ``rlperf profile`` process. Returns the runs and each
    variant's ``rlperf profile`` flags (less the seed, run directory and report directory)."""
    flags = {}
    for variant in plan:
        cfg = variant_config(base_name, variant, shared)
        settings = {**variant.settings, **shared}
        if "options" in settings:
            settings["options"] = cfg.env.options
        # profile's default --total-steps is short: the budget, not the step count, ends a run.
        settings.update(total_steps=cfg.run.total_steps, max_wall_s=budget_s)
        flags[variant.name] = ["--preset", base_name, *to_flags(settings)]
    results: dict[str, list[RunResult]] = {v.name: [] for v in plan}
    total = repeats * len(seeds) * len(plan)
    done = 0
    with tempfile.TemporaryDirectory(prefix="rlperf-ablate-") as tmp:
        root = out_dir or Path(tmp)
        rounds = [(repeat, seed) for repeat in range(1, repeats + 1) for seed in seeds]
        for k, (repeat, seed) in enumerate(rounds):
            for i, variant in rotated(plan, k):
                where = root / f"{i:02d}" / f"seed{seed}_r{repeat}"
                run_dir = where / "run"
                run_flags = flags[variant.name] + [
                    "--seed", str(seed), "--run-dir", str(run_dir)]  # fmt: skip
                report = run_profile(run_flags, where)
                result = RunResult(variant.name, seed, repeat, report, read_curve(run_dir))
                results[variant.name].append(result)
                done += 1
                ret = result.final_return
                print(f"run {done}/{total} {variant.name} seed {seed} repeat {repeat}: "
                      f"{result.sps:,.0f} SPS, return {'n/a' if ret is None else f'{ret:.2f}'}",
                      file=sys.stderr, flush=True)  # fmt: skip
    return results, flags


# -- output --------------------------------------------------------------------------------
def _fmt_spread(s: dict[str, float] | None, fmt: str) -> str:
    if s is None:
        return "n/a"
    if s["min"] == s["max"]:
        return format(s["median"], fmt)
    return f"{format(s['median'], fmt)} [{format(s['min'], fmt)}-{format(s['max'], fmt)}]"


def render(
    rows: list[AblationRow], target: str, budget_s: float, seeds: list[int], repeats: int
) -> str:
    """The ablation table and, below it, the phase that moved most per variant (Amdahl)."""
    base = rows[0].variant.name
    n = len(rows[0].runs)
    table = [row.to_json() for row in rows]
    cells = []
    for row, j in zip(rows, table, strict=True):
        t = j["time_to_base_return_s"]
        ratio = j["time_ratio_to_base"]
        cells.append((
            row.variant.name,
            _fmt_spread(j["sps"], ",.0f"),
            _fmt_spread(j["sps_speedup"], ".2f") + "x",
            ("not reached within the budget" if t is None else f"{t:.0f} s")
            + f" ({row.reached}/{n})",
            "n/a" if ratio is None else f"{ratio:.2f}x",
            _fmt_spread(j["return_in_budget"], ".2f"),
        ))  # fmt: skip
    heads = ("variant", "SPS median [min-max]", "SPS speedup", f"time to {base}'s return",
             "time x base", "return in budget")  # fmt: skip
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(heads)]
    line = "  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                     for i, (h, w) in enumerate(zip(heads, widths, strict=True)))  # fmt: skip
    out = [
        f"rlperf ablate: {base} -> {target}; {budget_s:g} s wall budget per run, "
        f"seeds {', '.join(map(str, seeds))} x {repeats} repeat(s) = {n} run(s) per variant, "
        "interleaved",
        f"time to {base}'s return: wall seconds until the mean return (last 100 episodes) first "
        f"reached the final return of {base}'s run of the same seed and repeat (median; "
        "reached/runs); time x base: that over the base run's own time",
        "-" * len(line),
        line,
        "-" * len(line),
    ]
    for c in cells:
        out.append("  ".join(v.ljust(w) if i == 0 else v.rjust(w)
                             for i, (v, w) in enumerate(zip(c, widths, strict=True))))  # fmt: skip
    out += [
        "",
        f"Phase that moved most (time per env step; A = {base}, B = the variant; Amdahl's law):",
    ]
    for row in rows[1:]:
        e = row.explanation
        out.append(f"- {row.variant.name}: " + ("n/a" if e is None else e.render()))
    return "\n".join(out)


def to_json(
    rows: list[AblationRow],
    base: str,
    target: str,
    shared: dict[str, Any],
    budget_s: float,
    seeds: list[int],
    repeats: int,
) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "base": base,
        "target": target,
        "shared_settings": shared,
        "budget_s": budget_s,
        "seeds": seeds,
        "repeats": repeats,
        "rows": [row.to_json() for row in rows],
    }


def charts_missing() -> str | None:
    """The one-line reason --chart cannot be drawn here, or None."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "--chart needs matplotlib: pip install 'rlperf[charts]'"
    return None


def write_chart(rows: list[AblationRow], path: str | Path) -> Path:
    """Left: SPS speedup per variant (median, min-max whiskers). Right: mean return against
    wall seconds, every run, one colour per variant, the base's final return dashed."""
    import matplotlib

    matplotlib.use("Agg")  # files only; never needs a display
    import matplotlib.pyplot as plt

    fig, (ax_sps, ax_ret) = plt.subplots(1, 2, figsize=(15, 0.45 * len(rows) + 3.5))
    names = [row.variant.name for row in rows]
    meds, lows, highs = [], [], []
    for row in rows:
        s = _spread(row.speedups) or {"median": 0.0, "min": 0.0, "max": 0.0}
        meds.append(s["median"])
        lows.append(s["median"] - s["min"])
        highs.append(s["max"] - s["median"])
    ax_sps.barh(names, meds, xerr=[lows, highs], color="tab:blue", capsize=3)
    ax_sps.axvline(1.0, color="black", linewidth=0.8)
    ax_sps.invert_yaxis()
    ax_sps.set_xlabel(f"SPS speedup over {names[0]} (paired; median, min-max)")
    colours = plt.get_cmap("tab10")
    for i, row in enumerate(rows):
        for j, run in enumerate(row.runs):
            if run.curve:
                xs, ys = zip(*run.curve, strict=True)
                ax_ret.plot(xs, ys, color=colours(i % 10), linewidth=1.2,
                            label=row.variant.name if j == 0 else None)  # fmt: skip
    base_returns = [b.final_return for b in rows[0].runs if b.final_return is not None]
    if base_returns:
        ax_ret.axhline(statistics.median(base_returns), color="black", linestyle="--",
                       linewidth=0.8, label=f"{names[0]}'s final return")  # fmt: skip
    ax_ret.set_xlabel("wall seconds since training started")
    ax_ret.set_ylabel("mean return (last 100 episodes)")
    ax_ret.legend(fontsize=8)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
