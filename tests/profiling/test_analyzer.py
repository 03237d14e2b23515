"""Analyzer scores, thresholds and advice on hand-made reports; text, detailed and chart output."""

from __future__ import annotations

import json

import pytest

from rlperf.cli import main
from rlperf.profiling.analyze import WEIGHTS, analyze, phase_of, render_analysis, score_sections


def test_score_is_the_weighted_sum_of_normalised_components(report_factory):
    # share: a=50%, b=25%; per call: a=5ms, b=50ms; cpu: a=200, b=100; gpu: a=None, b=400.
    report = report_factory([("a", 5.0, 1000, 200.0), ("b", 2.5, 50, 100.0, 400.0)], wall_s=10.0)
    scored = {s.name: s for s in score_sections(report["sections"])}
    a, b = scored["a"], scored["b"]
    assert a.components == pytest.approx(
        {"share": 1.0, "per_call": 0.1, "cpu_memory": 1.0, "gpu_memory": 0.0}
    )
    assert b.components == pytest.approx(
        {"share": 0.5, "per_call": 1.0, "cpu_memory": 0.5, "gpu_memory": 1.0}
    )
    assert a.score == pytest.approx(100 * (0.4 * 1.0 + 0.3 * 0.1 + 0.15 * 1.0))
    assert b.score == pytest.approx(100 * (0.4 * 0.5 + 0.3 * 1.0 + 0.15 * 0.5 + 0.15 * 1.0))
    assert [s.name for s in score_sections(report["sections"])] == ["b", "a"]
    assert sum(WEIGHTS.values()) == pytest.approx(1.0)


def test_missing_memory_scores_zero_for_everyone(report_factory):
    report = report_factory([("a", 1.0, 10), ("b", 2.0, 10)])
    for s in score_sections(report["sections"]):
        assert s.components["cpu_memory"] == s.components["gpu_memory"] == 0.0
    top = score_sections(report["sections"])[0]
    assert top.name == "b" and top.score == pytest.approx(70.0)


@pytest.mark.parametrize(
    "section, flags",
    [
        (("big", 3.01, 100), ["CRITICAL"]),  # 30.1% of 10 s
        (("edge", 3.0, 100), []),  # exactly 30%: not over
        (("slow", 1.0, 9), ["SLOW"]),  # 111 ms per call
        (("slow_edge", 1.0, 10), []),  # exactly 100 ms
        (("mem", 0.1, 100, 100.5), ["MEMORY"]),
        (("gpu", 0.1, 100, None, 150.0), ["GPU MEMORY"]),
        (("all", 4.0, 2, 500.0, 500.0), ["CRITICAL", "SLOW", "MEMORY", "GPU MEMORY"]),
    ],
)
def test_thresholds(report_factory, section, flags):
    report = report_factory([section], wall_s=10.0)
    (scored,) = score_sections(report["sections"])
    assert scored.flags == flags


@pytest.mark.parametrize(
    "name, phase",
    [
        ("rollout/device_to_host", "device_to_host"),
        ("rollout/policy_forward", "policy_forward"),
        ("rollout/env_step", "env_step"),
        ("update/loss", "update"),
        ("update/optimizer_step", "update"),
        ("logging", "logging"),
        ("checkpoint", "logging"),
        ("evaluation", "logging"),
        ("gae", "gae"),
        ("untimed", "untimed"),
        ("my_thing", "other"),
    ],
)
def test_phases_for_advice(name, phase):
    assert phase_of(name) == phase


def test_advice_follows_the_dominant_phase_and_quotes_the_run(report_factory):
    report = report_factory(
        [("rollout", 7.0, 10), ("rollout/env_step", 5.0, 320), ("rollout/policy_forward", 1.5, 320),
         ("update", 2.0, 10), ("update/loss", 1.0, 40)],
        wall_s=10.0,
    )  # fmt: skip
    analysis = analyze(report)
    assert analysis["dominant_phase"] == "rollout"
    assert analysis["largest_leaf"]["section"] == "rollout/env_step"
    assert "num_envs=64: try 128" in analysis["largest_leaf"]["advice"]
    critical = [r for r in analysis["recommendations"] if "CRITICAL" in r["flags"]]
    assert [r["section"] for r in critical] == ["rollout", "rollout/env_step"]
    assert "vectorised" in critical[1]["advice"]


def test_synchronous_envpool_is_told_about_batches(report_factory):
    report = report_factory([("rollout", 7.0, 10), ("rollout/env_step", 5.0, 320)])
    report["run"]["config"]["env"].update({"num_envs": 8, "backend": "envpool"})
    assert "--env-batch-size 4" in analyze(report)["largest_leaf"]["advice"]
    report["run"]["config"]["env"]["env_batch_size"] = 4  # batches already: the general advice
    assert "vectorised" in analyze(report)["largest_leaf"]["advice"]


def test_a_float32_cnn_update_is_told_about_bf16(report_factory):
    report = report_factory([("update", 7.0, 10), ("update/backward", 5.0, 160)])
    report["run"]["config"]["policy"]["kind"] = "cnn"
    report["run"]["cpu_bf16"] = True  # a CPU that computes bf16 natively (else no such advice)
    assert "--precision bf16" in analyze(report)["largest_leaf"]["advice"]
    report["run"]["config"]["ppo"]["precision"] = "bf16"  # taken already: the general advice
    assert "larger minibatches" in analyze(report)["largest_leaf"]["advice"]
    report["run"]["config"]["policy"]["kind"] = "mlp"
    report["run"]["config"]["ppo"]["precision"] = "fp32"
    assert "larger minibatches" in analyze(report)["largest_leaf"]["advice"]


def test_device_to_host_advice_mentions_pinned_buffers(report_factory):
    report = report_factory([("rollout", 9.0, 10), ("rollout/device_to_host", 6.0, 320)])
    advice = analyze(report)["largest_leaf"]["advice"]
    assert "pinned" in advice and "fewer" not in advice.split(":")[0]


def test_untimed_time_is_ranked_too(report_factory):
    report = report_factory([("rollout", 1.0, 10)], wall_s=10.0)  # 90% untimed
    names = [s["name"] for s in analyze(report)["ranking"]]
    assert names[0] == "untimed"


def test_analyze_command_writes_text_detailed_and_chart(report_factory, tmp_path, capsys):
    report = report_factory(
        [("rollout", 6.0, 10, 20.0), ("rollout/env_step", 4.0, 320, 1.0), ("update", 3.0, 10)]
    )
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    out = {k: tmp_path / f"analysis.{k}" for k in ("txt", "json", "png")}
    code = main(["analyze", str(path), "--output", str(out["txt"]), "--detailed",
                 str(out["json"]), "--charts", str(out["png"])])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "TOP 10 BOTTLENECKS" in printed and "[CRITICAL,SLOW] rollout takes 60.0%" in printed
    assert out["txt"].read_text().strip() in printed
    detailed = json.loads(out["json"].read_text())
    assert detailed["weights"] == WEIGHTS
    assert {r["name"] for r in detailed["ranking"]} == {"rollout", "rollout/env_step", "update",
                                                        "untimed"}  # fmt: skip
    assert out["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unstable_flags_a_mean_far_above_the_fastest_call(report_factory):
    # conftest sections have min = mean / 2; make one whose fastest call is 10x below its mean.
    report = report_factory([("update", 1.0, 100), ("update/loss", 0.5, 100)])
    report["sections"][1]["min_ms"] = report["sections"][1]["mean_ms"] / 10
    scored = {s.name: s for s in score_sections(report["sections"])}
    assert scored["update/loss"].flags == ["UNSTABLE"] and scored["update"].flags == []
    (rec,) = [r for r in analyze(report)["recommendations"] if "UNSTABLE" in r["flags"]]
    assert rec["section"] == "update/loss" and "--threads 1" in rec["advice"]
    report["sections"][1]["calls"] = 19  # too few calls to judge
    assert score_sections(report["sections"])[1].flags == []


def test_each_flagged_section_is_advised_once_and_a_smaller_network_is_smaller(report_factory):
    # rollout/policy_forward: 60% of the time (CRITICAL) at 600 ms a call (SLOW).
    report = report_factory([("rollout", 9.0, 10), ("rollout/policy_forward", 6.0, 10)])
    recs = [
        r for r in analyze(report)["recommendations"] if r["section"] == "rollout/policy_forward"
    ]
    assert len(recs) == 1 and recs[0]["flags"] == ["CRITICAL", "SLOW"]
    assert recs[0]["flag"] == "CRITICAL,SLOW"
    # conftest's run has hidden_sizes [64, 64]: the advice names a smaller one.
    assert "hidden_sizes=[64, 64]: try [32, 32]" in recs[0]["advice"]
    printed = render_analysis(analyze(report))
    assert printed.count("rollout/policy_forward takes 60.0%") == 2  # the advice, where to start
