"""rlperf analyze names GPU idle time (profiling/analyze.py): synthetic CUDA reports with their
telemetry's GPU utilisation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rlperf.profiling.analyze import GPU_IDLE_BUSY_PCT, analyze, gpu_idle, render_analysis


def _cuda_report(
    report_factory: Callable[..., dict[str, Any]], busy_pct: float | None, device: str = "cuda"
) -> dict[str, Any]:
    report = report_factory([("rollout", 6.0, 10), ("update", 3.0, 10)])
    report["run"]["device"] = device
    gpus = [{"index": i, "name": "GPU", "util_pct_mean": busy_pct, "util_pct_max": 99.0}
            for i in range(2)]  # fmt: skip
    report["telemetry"] = {"samples": 9, "interval_s": 1.0, "gpus": gpus}
    return report


def test_an_idle_gpu_is_the_first_recommendation(report_factory) -> None:
    report = _cuda_report(report_factory, 12.0)
    analysis = analyze(report)
    first = analysis["recommendations"][0]
    assert first["flag"] == "GPU IDLE" and analysis["gpu_idle"] == first
    assert first["busy_pct"] == 12.0
    text = first["advice"]
    assert "busy 12% of the run" in text and "88% of the time" in text
    assert "--vec-backend torch" in text, "cartpole has a device env"
    assert "CUDA graphs" in text and "--device cpu" in text and "--device auto" in text
    assert "[GPU IDLE]" in render_analysis(analysis)


def test_advice_follows_the_run_settings(report_factory) -> None:
    report = _cuda_report(report_factory, 27.0)
    config = report["run"]["config"]
    config["env"]["backend"] = "torch"  # already on the device
    config["run"] = {"cuda_graphs": False}
    config["policy"]["kind"] = "cnn"
    text = (gpu_idle(report) or {})["advice"]
    assert "--vec-backend torch" not in text
    assert "drop --no-cuda-graphs" in text
    assert "--device cpu" not in text and "more envs per step" in text


@pytest.mark.parametrize(
    ("busy_pct", "device"),
    [(GPU_IDLE_BUSY_PCT, "cuda"), (95.0, "cuda"), (None, "cuda"), (12.0, "cpu")],
    ids=["at-threshold", "busy", "no-figure", "cpu-run"],
)
def test_no_finding_for_a_busy_gpu_or_a_cpu_run(report_factory, busy_pct, device) -> None:
    report = _cuda_report(report_factory, busy_pct, device)
    analysis = analyze(report)
    assert analysis["gpu_idle"] is None
    assert all(r["flag"] != "GPU IDLE" for r in analysis["recommendations"])


def test_the_run_gpu_is_the_one_read(report_factory) -> None:
    report = _cuda_report(report_factory, 95.0, device="cuda:1")
    report["telemetry"]["gpus"][1]["util_pct_mean"] = 20.0
    finding = gpu_idle(report)
    assert finding is not None and finding["busy_pct"] == 20.0
    assert finding["advice"].startswith("GPU 1 busy 20%")


def test_reports_without_telemetry_are_read(report_factory) -> None:
    report = report_factory([("rollout", 6.0, 10)])
    report["run"]["device"] = "cuda"
    assert gpu_idle(report) is None
    report["telemetry"] = None
    assert gpu_idle(report) is None
