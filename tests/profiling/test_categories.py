"""The analyzer's category view: rules, own time, shares adding up to the wall time."""

import pytest

from rlperf.profiling.analyze import analyze, render_analysis
from rlperf.profiling.categories import CATEGORIES, categorize, category_of


@pytest.mark.parametrize(
    "path, category",
    [
        ("rollout/env_step", "environment"),
        ("rollout/env_step/reset", "environment"),
        ("rollout/env_step/render", "rendering"),
        ("rollout/env_step/render/draw_robots", "rendering"),
        ("rollout/policy_forward", "model"),
        ("rollout/policy_forward/convlstm/layers", "model"),
        ("rollout/truncation_bootstrap", "model"),
        ("rollout/device_to_host", "transfer"),
        ("rollout/teacher/device_to_host", "transfer"),
        ("rollout/teacher/to_device", "transfer"),
        ("rollout/teacher/call", "other"),
        ("rollout/buffer_store", "training"),
        ("gae", "training"),
        ("update/loss/convlstm/encoder", "training"),
        ("update/backward", "training"),
        ("logging", "other"),
        ("my_section", "other"),
    ],
)
def test_category_rules(path, category):
    assert category_of(path) == category


def _entry(name, parent, total_s):
    return {"name": name, "parent": parent, "total_s": total_s}


def test_own_time_goes_to_one_category_and_shares_add_up():
    sections = [
        _entry("rollout", None, 6.0),
        _entry("rollout/env_step", "rollout", 4.0),
        _entry("rollout/env_step/render", "rollout/env_step", 3.0),
        _entry("rollout/env_step/render/resize", "rollout/env_step/render", 1.0),
        _entry("rollout/policy_forward", "rollout", 1.5),
        _entry("update", None, 3.0),
        _entry("measurement", None, 0.5),
    ]
    rows = {r["category"]: r for r in categorize(sections, wall_s=10.0, untimed_s=0.5)}
    assert set(rows) == set(CATEGORIES)
    assert rows["rendering"]["total_s"] == pytest.approx(3.0)  # render's own 2 + resize 1
    assert rows["environment"]["total_s"] == pytest.approx(1.0)  # env_step minus render
    assert rows["model"]["total_s"] == pytest.approx(1.5)
    assert rows["training"]["total_s"] == pytest.approx(3.0)
    # rollout's own 0.5 + untimed 0.5; measurement (0.5) is left out.
    assert rows["other"]["total_s"] == pytest.approx(1.0)
    assert sum(r["pct"] for r in rows.values()) == pytest.approx(95.0)
    assert rows["rendering"]["sections"][0] == "rollout/env_step/render"


def test_analysis_has_categories_in_json_and_text():
    section = {"calls": 1, "mean_ms": 1.0, "min_ms": 1.0, "max_ms": 1.0,
               "cpu_peak_mb": None, "gpu_peak_mb": None}  # fmt: skip
    report = {
        "sections": [
            {**section, "name": "rollout", "parent": None, "total_s": 2.0, "pct": 25.0},
            {**section, "name": "rollout/env_step", "parent": "rollout", "total_s": 2.0,
             "pct": 25.0},
            {**section, "name": "update", "parent": None, "total_s": 2.0, "pct": 25.0},
        ],
        "totals": {"wall_s": 4.0, "steps": 100, "sps": 25.0, "untimed_s": 0.0},
        "run": {"config": {"env": {"num_envs": 8}, "policy": {"hidden_sizes": [64, 64]},
                           "ppo": {"num_minibatches": 4, "update_epochs": 4}}},
    }  # fmt: skip
    analysis = analyze(report)
    by = {r["category"]: r["pct"] for r in analysis["categories"]}
    assert by["environment"] == pytest.approx(50.0) and by["training"] == pytest.approx(50.0)
    text = render_analysis(analysis)
    assert "CATEGORY ANALYSIS" in text and "environment" in text
