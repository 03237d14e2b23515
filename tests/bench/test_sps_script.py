"""benchmarks/sps.py's paired before/after summary, on made-up samples."""

from __future__ import annotations

import pytest
from benchmark_scripts import load_script


def test_paired_summary_pairs_rounds_not_medians(capsys: pytest.CaptureFixture) -> None:
    sps = load_script("sps.py")
    # The machine drifts 2x between rounds; the new code is 10% faster in every round.
    base = [{"sps": v, "sections": {"update": 100.0 / v, "rollout": 1.0}} for v in (100, 200, 50)]
    new = [{"sps": 1.1 * b["sps"], "sections": {"update": b["sections"]["update"] / 1.1,
                                                "rollout": 1.0}} for b in base]  # fmt: skip
    sps.print_paired(new, base)
    out = capsys.readouterr().out
    assert "paired by round: median 1.100 [1.100 - 1.100], faster in 3 of 3" in out
    assert "update time, paired: median 0.909x" in out
    assert "rollout time, paired: median 1.000x" in out


def test_paired_summary_skips_sections_a_sample_lacks(capsys: pytest.CaptureFixture) -> None:
    sps = load_script("sps.py")
    sample = {"sps": 10.0, "sections": {}}
    sps.print_paired([sample], [sample])
    out = capsys.readouterr().out
    assert "faster in 0 of 1" in out
    assert "update time" not in out
