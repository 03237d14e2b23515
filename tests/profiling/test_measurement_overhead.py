"""The measuring tools' own cost (torch.profiler steps and exports) is its own section,
``measurement/torch_profiler``: not ``untimed``, and never ranked as a training bottleneck."""

from __future__ import annotations

import copy
import json

import pytest

from rlperf.cli import main
from rlperf.profiling.analyze import MEASUREMENT_NOTE, analyze, render_analysis
from rlperf.profiling.report import load_report
from rlperf.timing import names

TINY = ["--num-envs", "8", "--num-steps", "16", "--total-steps", "1024", "--threads", "1",
        "--no-progress", "--seed", "3"]  # fmt: skip
OVERHEAD = names.path(names.MEASUREMENT, names.TORCH_PROFILER)


@pytest.fixture(scope="module")
def traced_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A profile of 8 iterations whose torch.profiler exports one 2-iteration window."""
    out = tmp_path_factory.mktemp("traced")
    argv = ["profile", *TINY, "--out", str(out), "--torch-profiler", "--wait", "2",
            "--warmup", "1", "--active", "2"]  # fmt: skip
    assert main(argv) == 0
    return load_report(out)


def test_profiler_overhead_is_its_own_top_level_section(traced_report: dict) -> None:
    sections = {e["name"]: e for e in traced_report["sections"]}
    assert sections[names.MEASUREMENT]["parent"] is None
    assert sections[OVERHEAD]["parent"] == names.MEASUREMENT
    overhead_s = sections[OVERHEAD]["total_s"]
    assert overhead_s > 0
    # One step per iteration, plus start and stop.
    assert sections[OVERHEAD]["calls"] == traced_report["totals"]["iterations"] + 2
    # The export used to land in untimed; now untimed is only glue, far below the overhead.
    assert traced_report["totals"]["untimed_s"] < 0.25 * overhead_s
    # Top-level rows plus untimed still add up to the wall time (start/stop included); untimed
    # is clamped at 0, so timer rounding may leave the rows a hair above the wall.
    top = sum(e["total_s"] for e in traced_report["sections"] if e["parent"] is None)
    wall = traced_report["totals"]["wall_s"]
    assert top + traced_report["totals"]["untimed_s"] == pytest.approx(wall, rel=1e-3)


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
