"""report.json: build from a real profiler, write, load back unchanged; bad files rejected."""

from __future__ import annotations

import json

import pytest

from rlperf.cli import main
from rlperf.config import Config
from rlperf.profiling.report import (
    SCHEMA,
    ReportError,
    build_report,
    load_report,
    stats_from_report,
    validate_report,
    write_report,
)
from rlperf.timing.sections import Profiler

SUMMARY = {"wall_s": 0.5, "global_step": 4096, "iterations": 4, "sps_cumulative": 9000.0,
           "sps": 8500.0, "interrupted": False, "env": "cartpole", "device": "cpu",
           "threads": 1}  # fmt: skip


def recorded_profiler() -> Profiler:
    prof = Profiler()
    for _ in range(4):
        with prof.section("rollout"):
            with prof.section("env_step"):
                pass
        with prof.section("update"):
            pass
    return prof


def test_report_round_trips_through_a_file(tmp_path):
    prof = recorded_profiler()
    report = build_report(
        SUMMARY, prof.stats(), Config().to_dict(), memory_mb={"rollout": (1.5, None)}
    )
    path = write_report(tmp_path / "out", report)
    assert path == tmp_path / "out" / "report.json"
    loaded = load_report(tmp_path / "out")
    assert loaded == json.loads(json.dumps(report))
    assert loaded["schema"] == SCHEMA
    assert loaded["totals"]["steps"] == 4096 and loaded["totals"]["sps"] == 9000.0
    by_name = {e["name"]: e for e in loaded["sections"]}
    assert by_name["rollout/env_step"]["parent"] == "rollout"
    assert by_name["rollout/env_step"]["calls"] == 4
    assert by_name["rollout"]["cpu_peak_mb"] == 1.5 and by_name["update"]["cpu_peak_mb"] is None
    for key in ("config", "env", "device", "torch", "numpy", "gymnasium", "git_commit",
                "cpu_model", "threads", "date"):  # fmt: skip
        assert key in loaded["run"]
    # Stats rebuilt from the file are the recorded ones (to the nanosecond).
    original = {s.name: (s.calls, s.total_ns, s.min_ns, s.max_ns) for s in prof.stats()}
    rebuilt = {s.name: (s.calls, s.total_ns, s.min_ns, s.max_ns) for s in stats_from_report(loaded)}
    assert rebuilt == original


def test_untimed_and_percentages_add_up(report_factory):
    prof = recorded_profiler()
    report = build_report(SUMMARY, prof.stats(), {})
    top = [e for e in report["sections"] if e["parent"] is None]
    total = sum(e["total_s"] for e in top) + report["totals"]["untimed_s"]
    assert total == pytest.approx(SUMMARY["wall_s"])


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda r: r.update(schema="rlperf.report/2"), "unsupported report schema"),
        (lambda r: r.pop("totals"), "totals must be an object"),
        (lambda r: r["totals"].pop("sps"), "totals has no 'sps'"),
        (lambda r: r["sections"][0].update(calls="3"), "sections[0].calls has the wrong type"),
        (lambda r: r["sections"][0].update(total_s=True), "sections[0].total_s has the wrong"),
        (lambda r: r["sections"].reverse(), "is not listed before it"),
        (lambda r: r.update(sections={}), "sections must be a list"),
    ],
)
def test_validation_names_the_problem(report_factory, mutate, message):
    report = report_factory([("rollout", 5.0, 10), ("rollout/env_step", 2.0, 100)])
    validate_report(report)
    mutate(report)
    with pytest.raises(ReportError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate_report(report)


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", json.dumps({"schema": "other/1"}), ""])
def test_analyze_rejects_a_bad_report_with_exit_2(tmp_path, capsys, content):
    bad = tmp_path / "report.json"
    bad.write_text(content)
    with pytest.raises(SystemExit) as exc:
        main(["analyze", str(bad)])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rlperf: error: ")


def test_a_missing_report_is_one_line_and_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["analyze", str(tmp_path / "missing.json")])
    assert exc.value.code == 2
    assert "cannot read report" in capsys.readouterr().err
