"""The measuring tools' own cost (torch.profiler steps and exports) is its own section,
``measurement/torch_profiler``: not ``untimed``, and never ranked as a training bottleneck."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
import torch

from rlperf.cli import main
from rlperf.profiling.analyze import MEASUREMENT_NOTE, analyze, render_analysis
from rlperf.profiling.report import load_report
from rlperf.profiling.torch_trace import TorchTrace
from rlperf.timing import names
from rlperf.timing.sections import Profiler

TINY = ["--num-envs", "8", "--num-steps", "16", "--total-steps", "1024", "--threads", "1",
        "--no-progress", "--seed", "3"]  # fmt: skip
OVERHEAD = names.path(names.MEASUREMENT, names.TORCH_PROFILER)


@pytest.fixture(scope="module")
def traced_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, list[str | None]]:
    """A profile of 8 iterations whose torch.profiler exports one 2-iteration window, and the
    rlperf section open at each export (recorded by wrapping the trace handler)."""
    out = tmp_path_factory.mktemp("traced")
    argv = ["profile", *TINY, "--out", str(out), "--torch-profiler", "--wait", "2",
            "--warmup", "1", "--active", "2"]  # fmt: skip
    open_at_export: list[str | None] = []
    with pytest.MonkeyPatch.context() as mp:
        start, make_handler = TorchTrace.start, torch.profiler.tensorboard_trace_handler
        profilers: list[Profiler] = []

        def recording_start(self: TorchTrace, profiler: Profiler) -> None:
            profilers.append(profiler)
            start(self, profiler)

        def recording_handler(*args: Any, **kwargs: Any) -> Callable[[Any], None]:
            export = make_handler(*args, **kwargs)

            def handler(prof: Any) -> None:
                open_at_export.append(profilers[-1].current_path)
                export(prof)

            return handler

        mp.setattr(TorchTrace, "start", recording_start)
        mp.setattr(torch.profiler, "tensorboard_trace_handler", recording_handler)
        assert main(argv) == 0
    return load_report(out), open_at_export


@pytest.fixture(scope="module")
def traced_report(traced_run: tuple[dict, list[str | None]]) -> dict:
    return traced_run[0]


def test_profiler_overhead_is_its_own_top_level_section(traced_report: dict) -> None:
    sections = {e["name"]: e for e in traced_report["sections"]}
    assert sections[names.MEASUREMENT]["parent"] is None
    assert sections[OVERHEAD]["parent"] == names.MEASUREMENT
    overhead_s = sections[OVERHEAD]["total_s"]
    assert overhead_s > 0
    # One step per iteration, plus start and stop.
    assert sections[OVERHEAD]["calls"] == traced_report["totals"]["iterations"] + 2
    # Top-level rows plus untimed still add up to the wall time (start/stop included); untimed
    # is clamped at 0, so timer rounding may leave the rows a hair above the wall.
    top = sum(e["total_s"] for e in traced_report["sections"] if e["parent"] is None)
    wall = traced_report["totals"]["wall_s"]
    assert top + traced_report["totals"]["untimed_s"] == pytest.approx(wall, rel=1e-3)


def test_the_trace_export_is_timed_as_measurement(traced_run: tuple[dict, list]) -> None:
    """The export, the profiler's largest cost, used to land in untimed: it runs inside
    ``measurement/torch_profiler``. (What that costs is timed by
    ``benchmarks/profiler_overhead.py --trace``, not asserted here.)"""
    _, open_at_export = traced_run
    assert open_at_export == [OVERHEAD]


def test_analyze_neither_flags_nor_ranks_the_overhead(traced_report: dict) -> None:
    analysis = analyze(traced_report)
    ranked = {s["name"] for s in analysis["ranking"]}
    assert not any(n == names.MEASUREMENT or n.startswith("measurement/") for n in ranked)
    assert all(not r["section"].startswith(names.MEASUREMENT) for r in analysis["recommendations"])
    assert {m["section"] for m in analysis["measurement"]} == {names.MEASUREMENT, OVERHEAD}
    assert analysis["dominant_phase"] != names.MEASUREMENT
    assert not analysis["largest_leaf"]["section"].startswith(names.MEASUREMENT)


def test_analyze_command_shows_the_overhead_labelled_with_the_note(
    traced_report: dict, tmp_path, capsys: pytest.CaptureFixture
) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(traced_report))
    assert main(["analyze", str(path)]) == 0
    out = capsys.readouterr().out
    assert "MEASUREMENT OVERHEAD (not a training bottleneck" in out
    assert MEASUREMENT_NOTE in " ".join(out.split())
    overhead_line = next(line for line in out.splitlines() if line.startswith(OVERHEAD))
    assert "CRITICAL" not in overhead_line
    ranking = out.split("RECOMMENDATIONS")[0].split("MEASUREMENT OVERHEAD")[0]
    assert "measurement" not in ranking.split("flags", 1)[1]


def test_a_dominant_overhead_changes_no_score(report_factory) -> None:
    training = [("rollout", 3.0, 10), ("rollout/env_step", 2.0, 100), ("update", 2.0, 10)]
    overhead = [(names.MEASUREMENT, 4.5, 11), (OVERHEAD, 4.5, 11)]
    report = report_factory(training + overhead, wall_s=10.0)
    stripped = copy.deepcopy(report)
    stripped["sections"] = [e for e in report["sections"] if e["parent"] != names.MEASUREMENT
                            and e["name"] != names.MEASUREMENT]  # fmt: skip
    # Not in the normalisation either: every other section scores as if it were absent.
    assert analyze(report)["ranking"] == analyze(stripped)["ranking"]
    text = render_analysis(analyze(report))
    assert "CRITICAL" not in text  # 45% of wall time, yet measurement
    assert OVERHEAD in text and "MEASUREMENT OVERHEAD" in text
