"""``report.json``: the saved result of ``rlperf profile``, schema ``rlperf.report/1``.

One JSON object::

    {
      "schema": "rlperf.report/1",
      "interrupted": false,            # true when the run was stopped by Ctrl-C
      "run": {                         # what ran, where
        "date": "2026-11-22T23:30:00+00:00", "command": ["rlperf", "profile", ...],
        "env": "cartpole", "device": "cpu", "threads": 2, "config": {...Config.to_dict()...},
        "rlperf": "0.1.0", "python": "3.11.9", "torch": "2.13.0+cpu", "numpy": "2.4.0",
        "gymnasium": "1.4.0", "git_commit": "969c068..." | null, "git_dirty": false | null,
        "cpu_model": "AMD EPYC ...", "cpu_bf16": true | false | null, "cpu_count": 2,
        "hostname": "..."
      },
      "totals": {"steps": 98304, "iterations": 48, "wall_s": 2.1, "sps": 51000.0,
                 "sps_windowed": 50500.0, "untimed_s": 0.003},
      "memory": null | {"cpu_peak_rss_mb": 612.0, "gpu_peak_allocated_mb": null},
      "telemetry": null | {"samples": 9, "interval_s": 1.0, "trainer": {...}, "workers": [...],
                           "machine": {...}, "gpus": [...] | absent, "note": "..." | absent,
                           "sample_cpu_ms_mean": 0.8},
      "sections": [
        {"name": "rollout/env_step", "parent": "rollout", "calls": 1536, "total_s": 0.18,
         "mean_ms": 0.117, "min_ms": 0.06, "max_ms": 1.5, "pct": 8.6,
         "cpu_peak_mb": null, "gpu_peak_mb": null}, ...
      ],
      "artifacts": {"torch_traces": ["..."], "cprofile": "..." | null}
    }

``sps`` is cumulative steps per second after warm-up (the trainer's headline figure); ``pct`` is
the share of ``wall_s``. ``cpu_peak_mb`` / ``gpu_peak_mb`` are null unless ``--memory`` was given;
their meaning is in :mod:`rlperf.profiling.memory`. ``telemetry`` is the whole run's block of
:mod:`rlperf.run.telemetry` (null with ``--no-telemetry``, and in reports written before it was
added: readers must accept its absence). Sections are parents before children, in the order first
entered. A reader must reject a file whose ``schema`` it does not know.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import socket
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rlperf.cpu_features import cpu_computes_bf16
from rlperf.timing.stats import SectionStats

SCHEMA = "rlperf.report/1"
REPORT_NAME = "report.json"

SECTION_FIELDS: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "parent": (str, type(None)),
    "calls": (int,),
    "total_s": (int, float),
    "mean_ms": (int, float),
    "min_ms": (int, float),
    "max_ms": (int, float),
    "pct": (int, float),
    "cpu_peak_mb": (int, float, type(None)),
    "gpu_peak_mb": (int, float, type(None)),
}
TOTALS_FIELDS: dict[str, tuple[type, ...]] = {
    "steps": (int,),
    "wall_s": (int, float),
    "sps": (int, float),
}


class ReportError(ValueError):
    """A report file that cannot be used; the message is one line naming the problem."""


# -- run metadata --------------------------------------------------------------------------
def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git(*args: str) -> str | None:
    """Output of a git command run in rlperf's source tree, or None outside a checkout."""
    try:
        done = subprocess.run(
            ["git", "-C", str(Path(__file__).parent), *args],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def run_metadata(summary: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """The ``run`` block: config, env, device, library versions, git commit, CPU, date."""
    import gymnasium
    import numpy
    import torch

    import rlperf

    commit = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": ["rlperf", *sys.argv[1:]],
        "env": summary.get("env", config.get("env", {}).get("env")),
        "device": summary.get("device", config.get("run", {}).get("device")),
        "threads": summary.get("threads", torch.get_num_threads()),
        # each env worker's busy and idle seconds (None without workers): profiling/worker_split.py
        "env_workers": summary.get("env_workers"),
        "config": config,
        "rlperf": rlperf.__version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "gymnasium": gymnasium.__version__,
        "git_commit": commit,
        "git_dirty": None if status is None else bool(status),
        "cpu_model": _cpu_model(),
        "cpu_bf16": cpu_computes_bf16(),  # native bf16 arithmetic (None: unknown)
        "cpu_count": os.cpu_count(),
        "hostname": socket.gethostname(),
    }


# -- building ------------------------------------------------------------------------------
def section_entries(
    stats: Iterable[SectionStats],
    wall_s: float,
    memory_mb: dict[str, tuple[float | None, float | None]] | None = None,
) -> list[dict[str, Any]]:
    """Report entries for sections with at least one call; ``memory_mb``: path -> (cpu, gpu)."""
    denom = wall_s if wall_s > 0 else 1.0
    entries = []
    for s in stats:
        if not s.calls:
            continue
        cpu_mb, gpu_mb = (memory_mb or {}).get(s.name, (None, None))
        entries.append(
            {
                "name": s.name,
                "parent": s.parent,
                "calls": s.calls,
                "total_s": s.total_ns / 1e9,
                "mean_ms": s.total_ns / s.calls / 1e6,
                "min_ms": s.min_ns / 1e6,
                "max_ms": s.max_ns / 1e6,
                "pct": 100.0 * s.total_ns / 1e9 / denom,
                "cpu_peak_mb": cpu_mb,
                "gpu_peak_mb": gpu_mb,
            }
        )
    return entries


def build_report(
    summary: dict[str, Any],
    stats: Iterable[SectionStats],
    config: dict[str, Any],
    memory: dict[str, Any] | None = None,
    memory_mb: dict[str, tuple[float | None, float | None]] | None = None,
    artifacts: dict[str, Any] | None = None,
    telemetry: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A schema ``rlperf.report/1`` report from a trainer summary and the section stats."""
    wall_s = float(summary["wall_s"])
    sections = section_entries(stats, wall_s, memory_mb)
    top_level_s = sum(e["total_s"] for e in sections if e["parent"] is None)
    return {
        "schema": SCHEMA,
        "interrupted": bool(summary.get("interrupted", False)),
        "run": run_metadata(summary, config),
        "totals": {
            "steps": int(summary["global_step"]),
            "iterations": int(summary.get("iterations", 0)),
            "wall_s": wall_s,
            "sps": float(summary.get("sps_cumulative", 0.0)),
            "sps_windowed": float(summary.get("sps", 0.0)),
            "untimed_s": max(wall_s - top_level_s, 0.0),
        },
        "memory": memory,
        "telemetry": telemetry,
        "sections": sections,
        "artifacts": artifacts or {"torch_traces": [], "cprofile": None},
    }


def stats_from_report(report: dict[str, Any]) -> list[SectionStats]:
    """The report's sections as :class:`SectionStats` (for the breakdown table)."""
    return [
        SectionStats(
            name=e["name"],
            parent=e["parent"],
            calls=e["calls"],
            total_ns=round(e["total_s"] * 1e9),
            min_ns=round(e["min_ms"] * 1e6),
            max_ns=round(e["max_ms"] * 1e6),
        )
        for e in report["sections"]
    ]


# -- validation and files ------------------------------------------------------------------
def _check_fields(obj: Any, fields: dict[str, tuple[type, ...]], where: str) -> None:
    if not isinstance(obj, dict):
        raise ReportError(f"{where} must be an object")
    for key, types in fields.items():
        if key not in obj:
            raise ReportError(f"{where} has no {key!r}")
        value = obj[key]
        # bool is an int subclass in Python; a count or a time is never true/false.
        if isinstance(value, bool) or not isinstance(value, types):
            raise ReportError(f"{where}.{key} has the wrong type ({type(value).__name__})")


def validate_report(report: Any) -> dict[str, Any]:
    """Return ``report`` if it follows schema ``rlperf.report/1``; else raise ReportError."""
    if not isinstance(report, dict):
        raise ReportError("not a report: the top level must be a JSON object")
    schema = report.get("schema")
    if schema != SCHEMA:
        raise ReportError(f"unsupported report schema {schema!r}: expected {SCHEMA!r}")
    _check_fields(report.get("totals"), TOTALS_FIELDS, "totals")
    if not isinstance(report.get("run"), dict):
        raise ReportError("run must be an object")
    if not isinstance(report.get("telemetry"), (dict, type(None))):
        raise ReportError("telemetry must be an object or null")
    sections = report.get("sections")
    if not isinstance(sections, list):
        raise ReportError("sections must be a list")
    names = set()
    for i, entry in enumerate(sections):
        _check_fields(entry, SECTION_FIELDS, f"sections[{i}]")
        if entry["parent"] is not None and entry["parent"] not in names:
            raise ReportError(
                f"sections[{i}] ({entry['name']}) names parent {entry['parent']!r} "
                "that is not listed before it"
            )
        names.add(entry["name"])
    return report


def report_path(path: str | Path) -> Path:
    """The file :func:`write_report` writes for ``path``: ``path`` itself when it names a
    ``.json`` file, else ``path/report.json``."""
    target = Path(path)
    if target.is_dir() or target.suffix != ".json":
        return target / REPORT_NAME
    return target


def write_report(path: str | Path, report: dict[str, Any]) -> Path:
    """Validate and write ``report`` atomically to ``path`` (a directory gets report.json)."""
    from rlperf.run.run_dir import write_json_atomic

    target = report_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(target, validate_report(report))
    return target


def load_report(path: str | Path) -> dict[str, Any]:
    """Read and validate a report (a directory means its report.json); ReportError if unusable."""
    target = Path(path)
    if target.is_dir():
        target = target / REPORT_NAME
    try:
        text = target.read_text()
    except OSError as e:
        raise ReportError(f"cannot read report {target}: {e.strerror or e}") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportError(f"{target} is not valid JSON ({e.msg} at line {e.lineno})") from e
    try:
        return validate_report(data)
    except ReportError as e:
        raise ReportError(f"{target}: {e}") from e
