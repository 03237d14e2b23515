"""rlperf ablate: knobs from two presets, the rows, time to a return, the table and its JSON,
bad input, and a real ablation end to end on a tiny budget."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from rlperf.cli import main
from rlperf.config import ConfigError, preset
from rlperf.profiling import ablate
from rlperf.profiling.ablate import (
    ALL,
    BASE,
    KNOB,
    LEFT_OUT_KNOB,
    RunResult,
    Variant,
    build_rows,
    knobs,
    render,
    time_to_return,
    variant_config,
    variants,
)

PLAN_NAMES = ["original", "+envs", "+batch", "+bptt", "+compile (left out)",
              "+precision (left out)", "+workers (left out)", "ultra_fast (all)"]  # fmt: skip


def test_knobs_group_the_fields_where_the_presets_differ() -> None:
    assert knobs(preset("original"), preset("ultra_fast")) == {
        "envs": {"num_envs": 16},
        "batch": {"num_steps": 128, "num_minibatches": 8},
        "bptt": {"bptt_horizon": 32},
    }


def test_a_differing_field_in_no_group_is_a_knob_of_its_own() -> None:
    found = knobs(preset("default"), preset("lstm"))
    assert found == {
        "batch": {"num_minibatches": 8},
        "kind": {"kind": "lstm"},
        "gamma": {"gamma": 0.98},
        "gae_lambda": {"gae_lambda": 0.98},
        "ent_coef": {"ent_coef": 0.0},
        "vf_coef": {"vf_coef": 0.005},
    }


def test_variants_are_base_each_knob_each_left_out_knob_and_all() -> None:
    plan = variants("original", "ultra_fast")
    assert [v.name for v in plan] == PLAN_NAMES
    assert [v.kind for v in plan] == [BASE, KNOB, KNOB, KNOB, *[LEFT_OUT_KNOB] * 3, ALL]
    assert plan[-1].settings == {"num_envs": 16, "num_steps": 128, "num_minibatches": 8,
                                 "bptt_horizon": 32}  # fmt: skip
    # Every row of the real ablation resolves and validates, the grid's rows counted.
    for variant in plan:
        cfg = variant_config("original", variant, {})
        for name, value in variant.settings.items():
            assert ablate.flat_fields(cfg)[name] == value
    with pytest.raises(ConfigError, match="do not differ"):
        variants("original", "original")


def test_shared_settings_win_and_a_row_that_cannot_run_is_named() -> None:
    cfg = variant_config("original", Variant("+envs", KNOB, {"num_envs": 16}), {"num_envs": 4})
    assert cfg.env.num_envs == 4
    with pytest.raises(ConfigError, match=r"variant \+bptt: .*divisible by bptt_horizon 5"):
        variant_config("original", Variant("+bptt", KNOB, {"bptt_horizon": 5}), {})
    # hub_12 has 4 agents: 2 maps x 4 = 8 segments cannot make 32 minibatches.
    with pytest.raises(ConfigError, match="variant original: .*8 segments"):
        variant_config("original", Variant("original", BASE, {}),
                       {"options": {"mission": "extractor_hub_12"}})  # fmt: skip


def test_each_round_starts_one_row_later_so_drift_favours_no_row() -> None:
    plan = variants("original", "ultra_fast")
    n = len(plan)
    orders = [[v.name for _, v in ablate.rotated(plan, k)] for k in range(n)]
    assert orders[0] == PLAN_NAMES
    assert orders[1] == PLAN_NAMES[1:] + PLAN_NAMES[:1]
    assert sorted(order[0] for order in orders) == sorted(PLAN_NAMES)
    assert all(sorted(order) == sorted(PLAN_NAMES) for order in orders)
    assert [i for i, _ in ablate.rotated(plan, n + 2)][:2] == [2, 3]


def test_only_keeps_the_base_and_the_named_rows_in_plan_order() -> None:
    plan = variants("original", "ultra_fast")
    assert ablate.select(plan, None) == plan
    assert [v.name for v in ablate.select(plan, ["all"])] == ["original", "ultra_fast (all)"]
    picked = ablate.select(plan, ["workers", "envs"])
    assert [v.name for v in picked] == ["original", "+envs", "+workers (left out)"]
    with pytest.raises(ConfigError, match="--only 'original' is not a row"):
        ablate.select(plan, ["original"])  # the base always runs: it is no choice


def test_time_to_return_is_the_first_row_at_or_above_the_target() -> None:
    curve = [(1.0, 0.1), (2.0, 0.5), (3.0, 0.4), (4.0, 0.9)]
    assert time_to_return(curve, 0.5) == 2.0
    assert time_to_return(curve, 0.45) == 2.0
    assert time_to_return(curve, 1.0) is None
    assert time_to_return(curve, None) is None


def result(
    name: str, seed: int, sps: float, curve: list, sections: list, report_factory
) -> RunResult:
    report = report_factory(sections, wall_s=10.0, steps=int(sps * 10), sps=sps)
    return RunResult(name, seed, 1, report, curve)


def test_rows_pair_each_run_with_the_base_run_of_its_seed(report_factory) -> None:
    """Two seeds. The base reaches its final return at 8 s (seed 1) and 6 s (seed 2); the fast
    variant reaches them at 2 s and 3 s and halves the update's time per step; the slow one
    never reaches seed 1's and reaches seed 2's at 9 s."""
    base_sections = [("rollout", 4.0, 10), ("update", 6.0, 10)]
    base = [
        result("original", 1, 1000.0, [(4.0, 0.2), (8.0, 0.6), (10.0, 0.6)], base_sections,
               report_factory),
        result("original", 2, 1000.0, [(6.0, 0.5), (10.0, 0.4)], base_sections, report_factory),
    ]  # fmt: skip
    # Per 1,000 steps: base update 600 ms, fast 300 ms; rollout unchanged (400 ms).
    fast_sections = [("rollout", 4.0 * 1.5 / 1.0, 10), ("update", 3.0 * 1.5, 10)]
    fast = [
        result("+batch", 1, 1500.0, [(2.0, 0.7)], fast_sections, report_factory),
        result("+batch", 2, 1500.0, [(1.0, 0.1), (3.0, 0.5)], fast_sections, report_factory),
    ]
    slow = [
        result("+bptt", 1, 900.0, [(5.0, 0.3)], base_sections, report_factory),
        result("+bptt", 2, 900.0, [(9.0, 0.5)], base_sections, report_factory),
    ]
    plan = [Variant("original", BASE, {}), Variant("+batch", KNOB, {"num_steps": 128}),
            Variant("+bptt", KNOB, {"bptt_horizon": 32})]  # fmt: skip
    results = {"original": base, "+batch": fast, "+bptt": slow}
    rows = build_rows(plan, results, {v.name: ["--preset", "original"] for v in plan})
    by = {row.variant.name: row.to_json() for row in rows}

    assert by["original"]["time_to_base_return_s"] == 7.0  # median of 8 and 6
    assert by["original"]["time_ratio_to_base"] == 1.0
    assert by["+batch"]["sps_speedup"] == {"median": 1.5, "min": 1.5, "max": 1.5}
    assert by["+batch"]["time_to_base_return_s"] == 2.5  # median of 2 and 3
    assert by["+batch"]["time_ratio_to_base"] == pytest.approx((2 / 8 + 3 / 6) / 2)
    assert by["+batch"]["reached"] == 2
    # One of two runs not reached: the median (with "not reached" as +inf) is not reached.
    assert by["+bptt"]["time_to_base_return_s"] is None and by["+bptt"]["reached"] == 1
    assert by["+bptt"]["return_in_budget"] == {"median": 0.4, "min": 0.3, "max": 0.5}
    phase = by["+batch"]["phase"]
    assert phase["section"] == "update" and phase["speedup"] == pytest.approx(2.0)
    share = 6.0 / 10.0
    assert phase["amdahl_predicted_sps_speedup"] == pytest.approx(1 / ((1 - share) + share / 2))
    assert [r["base_return"] for r in by["+batch"]["runs"]] == [0.6, 0.4]

    text = render(rows, "ultra_fast", 10.0, [1, 2], 1)
    assert "original -> ultra_fast" in text
    assert "not reached within the budget (1/2)" in text
    assert "2 s (2/2)" in text or "3 s (2/2)" in text
    assert "+batch: update: 60.0% of A's wall time, 2.00x faster in B" in text


def test_median_counts_not_reached_as_slowest() -> None:
    assert ablate._median_or_not_reached([1.0, 2.0, None]) == 2.0
    assert ablate._median_or_not_reached([1.0, None, None]) is None
    assert ablate._median_or_not_reached([]) is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--base", "orignal"], "unknown preset 'orignal' in --base"),
        (["--target", "fastest"], "unknown preset 'fastest' in --target"),
        (["--budget-s", "0"], "--budget-s must be a positive number of seconds, got 0.0"),
        (["--budget-s", "-5"], "--budget-s must be a positive number of seconds"),
        (["--budget-s", "nan"], "--budget-s must be a positive number of seconds"),
        (["--repeats", "0"], "--repeats must be at least 1"),
        (["--target", "original"], "presets 'original' and 'original' do not differ"),
        (["--set", "num_envs"], "--set: expected key=value"),
        (["--set", "warp=9"], "--set: unknown setting 'warp'"),
        (["--set", "bptt_horizon=5"], "variant original: num_steps 64 must be divisible"),
        (["--budget-s", "fast"], "--budget-s"),
        (
            ["--only", "warp"],
            "--only 'warp' is not a row of this ablation: choose from envs, "
            "batch, bptt, compile, precision, workers, all",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture, args: list[str], message: str
) -> None:
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_info:
        main(["ablate", "--out", str(out), *args])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rlperf: error:") and message in err[0], err
    assert not out.exists(), "nothing written before the error"


def test_a_non_empty_out_directory_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    with pytest.raises(SystemExit) as exit_info:
        main(["ablate", "--out", str(tmp_path)])
    assert exit_info.value.code == 2 and "is not empty" in capsys.readouterr().err
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_the_ablation_runs_end_to_end_and_its_json_has_every_row(tmp_path: Path) -> None:
    """Every row of original -> ultra_fast trained for one iteration in its own process
    (a 1 s budget, the small mission and tiny sizes set for every row; torch.compile off, so
    its row runs the base's code), then the table, the JSON and the chart."""
    out, report = tmp_path / "runs", tmp_path / "ablate.json"
    tiny = ["num_envs=2", "num_steps=16", "num_minibatches=2", "bptt_horizon=8",
            "cnn_channels=4", "cnn_features=16", "lstm_hidden_size=8", "threads=1",
            "compile=false"]  # fmt: skip
    cmd = [
        sys.executable,
        "-m",
        "rlperf.cli",
        "ablate",
        "--budget-s",
        "1",
        "--seed",
        "3",
        "--env-option",
        "mission=extractor_hub_12",
        "--out",
        str(out),
        "--json",
        str(report),
    ]
    cmd += [arg for item in tiny for arg in ("--set", item)]  # fmt: skip
    chart = tmp_path / "ablate.png"
    if ablate.charts_missing() is None:
        cmd += ["--chart", str(chart)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    data = json.loads(report.read_text())
    assert data["schema"] == ablate.SCHEMA and data["seeds"] == [3]
    assert [row["name"] for row in data["rows"]] == PLAN_NAMES
    assert json.loads((out / "ablate.json").read_text()) == data
    for row in data["rows"]:
        assert len(row["runs"]) == 1 and row["runs"][0]["seed"] == 3
        assert row["sps"]["median"] > 0 and math.isfinite(row["sps_speedup"]["median"])
        assert row["runs"][0]["curve"], f"{row['name']}: no return within one iteration"
        assert (row["phase"] is None) == (row["kind"] == BASE)
        assert "--max-wall-s" in row["flags"] and "--total-steps" in row["flags"]
    # The precision knob reached its run; the shared settings reached every run.
    for i, name in enumerate(PLAN_NAMES):
        config = json.loads((out / f"{i:02d}" / "seed3_r1" / "run" / "config.json").read_text())
        assert config["env"]["options"] == {"mission": "extractor_hub_12"}
        assert config["ppo"]["precision"] == ("bf16" if name.startswith("+precision") else "fp32")
        assert config["run"]["max_wall_s"] == 1.0 and config["run"]["threads"] == 1
    for name in PLAN_NAMES:
        assert name in done.stdout
    if ablate.charts_missing() is None:
        assert chart.stat().st_size > 0


def test_chart_without_matplotlib_is_one_line_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ablate, "charts_missing", lambda: "--chart needs matplotlib: pip x")
    with pytest.raises(SystemExit) as exit_info:
        main(["ablate", "--out", str(tmp_path / "out"), "--chart", str(tmp_path / "c.png")])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip() == "rlperf: error: --chart needs matplotlib: pip x"
    assert not (tmp_path / "out").exists()
