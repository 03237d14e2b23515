"""``rlperf analyze`` points a float32 CNN update at ``--precision bf16`` only where bf16 is
native: on CUDA, or on a CPU with AVX512-BF16 / AMX-BF16 (the report's ``cpu_bf16``, else the
machine's; injected here)."""

from __future__ import annotations

import pytest

from rlperf import cpu_features
from rlperf.profiling.analyze import analyze


def test_analyze_advises_bf16_only_where_it_is_native(
    report_factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = report_factory([("update", 7.0, 10), ("update/backward", 5.0, 160)])
    report["run"]["config"]["policy"]["kind"] = "cnn"

    def advice() -> str:
        return analyze(report)["largest_leaf"]["advice"]

    report["run"]["cpu_bf16"] = True
    assert "--precision bf16" in advice()
    report["run"]["cpu_bf16"] = False
    assert "bf16" not in advice() and "larger minibatches" in advice()
    del report["run"]["cpu_bf16"]  # a report from before it was recorded: this machine's
    monkeypatch.setattr(cpu_features, "cpu_computes_bf16", lambda: False)
    assert "bf16" not in advice()
    monkeypatch.setattr(cpu_features, "cpu_computes_bf16", lambda: True)
    assert "--precision bf16" in advice()
    report["run"]["device"] = "cuda:0"
    monkeypatch.setattr(cpu_features, "cpu_computes_bf16", lambda: False)  # the GPU's bf16
    assert "--precision bf16" in advice()
