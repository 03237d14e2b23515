"""benchmarks/atari_limit.py runs end to end at tiny sizes (``--quick``, 32 frames, 64x64
matmuls) and reports sane figures: the Nature CNN's FLOPs, rates and fractions that are
positive and finite, every variant paired against the first. No timing is asserted."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import rlperf

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "atari_limit.py"
# conv1..conv3, fc, heads: forward FLOPs a frame (2 multiply-adds); backward 1x for conv1, else 2x
FORWARD = [2 * 4 * 64 * 32 * 400, 2 * 32 * 16 * 64 * 81, 2 * 64 * 9 * 64 * 49, 2 * 3136 * 512,
           2 * 512 * 5]  # fmt: skip


def test_quick_run_reports_sane_fields(tmp_path: Path) -> None:
    out = tmp_path / "limit.json"
    src = str(Path(rlperf.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    argv = ["--quick", "--threads", "1", "--rounds", "1", "--batch", "32", "--mm-sizes", "64",
            "--variants", "default,nchw,no_mkldnn,bf16", "--json", str(out)]  # fmt: skip
    done = subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True,
                          env=env, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "of peak" in done.stdout and "Where one update" in done.stdout
    res = json.loads(out.read_text())

    layers = res["layers"]
    assert [x["name"] for x in layers] == ["conv1", "conv2", "conv3", "fc", "heads"]
    assert [x["fwd_flop_per_frame"] for x in layers] == FORWARD
    assert [x["bwd_flop_per_frame"] for x in layers] == [FORWARD[0]] + [2 * f for f in FORWARD[1:]]
    assert res["flop_per_frame"] == 3 * sum(FORWARD) - FORWARD[0]
    assert math.isclose(res["update_gflop"], res["flop_per_frame"] * 32 / 1e9)
    assert res["update_class"] == "AutogradUpdate" and res["minibatch"] == 8

    def positive(s: dict) -> bool:
        return all(math.isfinite(v) and v > 0 for v in s.values()) and s["min"] <= s["median"]

    assert positive(res["peak_gflops"]) and positive(res["mm_gflops"]["64"])
    assert set(res["variants"]) == {"default", "nchw", "no_mkldnn", "bf16"}
    for name, var in res["variants"].items():
        for key in ("update_s", "update_gflops", "update_fraction_of_peak", "cnn_fwdbwd_s"):
            assert positive(var[key]), (name, key)
        assert ("update_speedup_paired" in var) == (name != "default")
        assert set(var["layers"]) == {x["name"] for x in layers}
    assert set(res["variants"]["default"]["nonflop_s"]) >= {"clip_grad_norm", "Adam (fused, flat)"}
    groups = res["profile"]["groups_s"]
    assert groups["convolutions"] > 0 and all(v >= 0 for v in groups.values())
