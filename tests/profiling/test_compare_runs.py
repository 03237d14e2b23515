"""rlperf compare: the noise-aware verdict, the two-report table, and a real A/B run."""

from __future__ import annotations

import json

import pytest

from rlperf import native
from rlperf.cli import main
from rlperf.config import ConfigError
from rlperf.profiling import worker_split
from rlperf.profiling.compare import (
    ENV_PHASE,
    SPS,
    Comparison,
    compare_runs,
    explain,
    one_sided,
    parse_overrides,
    render_explanation,
    render_reports,
    render_runs,
    to_flags,
)


def test_one_percent_inside_five_percent_noise_reads_no_difference():
    # The guide's case: +1.2% overall while other rows moved by +-5% from noise.
    a = [100.0, 95.0, 105.0, 100.0, 98.0]
    b = [101.2, 96.5, 106.0, 100.9, 99.3]  # every pair +~1%: consistent but inside the noise
    c = Comparison(SPS, a, b)
    assert c.median_change == pytest.approx(0.012, abs=0.005)
    assert c.noise == pytest.approx(0.05)
    assert c.verdict == "no difference"


def test_a_consistent_change_above_the_noise_is_called():
    a = [100.0, 101.0, 99.0, 100.5, 100.0]
    faster = Comparison(SPS, a, [x * 1.10 for x in a])
    assert faster.verdict == "B faster" and faster.median_change == pytest.approx(0.10)
    slower = Comparison("rollout", a, [x * 1.10 for x in a])  # more time per step: slower
    assert slower.verdict == "B slower"


def test_mixed_signs_are_no_difference_even_when_the_median_is_large():
    c = Comparison(SPS, [100, 100, 100, 100, 100], [130, 130, 130, 99, 130])
    assert c.verdict == "no difference"


def test_too_few_repeats_give_no_verdict():
    assert Comparison(SPS, [100, 100], [150, 150]).verdict.startswith("n/a")


def test_runs_table_shows_median_and_range(report_factory):
    a = [
        report_factory([("rollout", s, 10)], sps=v) for s, v in ((5.0, 100), (6.0, 90), (4.0, 110))
    ]
    b = [report_factory([("rollout", s, 10)], sps=v) for s, v in ((5.0, 101), (5.5, 95), (4.5, 99))]
    comparisons = compare_runs(a, b)
    assert [c.name for c in comparisons] == [SPS, "rollout"]
    text = render_runs(comparisons, "x=1", "x=2")
    sps_line = next(line for line in text.splitlines() if line.startswith("SPS"))
    assert "100 [90-110]" in sps_line and "no difference" in sps_line
    rollout_line = next(line for line in text.splitlines() if line.startswith("rollout"))
    assert "50.00 [40.00-60.00]" in rollout_line  # ms per 1,000 of 100,000 steps


def test_overrides_parse_to_typed_values_and_back_to_flags():
    parsed = parse_overrides("num_envs=128 hidden-sizes=32,32 analytic=false", "a")
    assert parsed == {"num_envs": 128, "hidden_sizes": (32, 32), "analytic": False}
    assert to_flags(parsed) == ["--num-envs", "128", "--hidden-sizes", "32", "32",
                                "--no-analytic"]  # fmt: skip
    bad_inputs = {"nope=1": "unknown setting", "num_envs": "expected key=value",
                  "num_envs=many": "bad value", "norm_adv=maybe": "bad value"}  # fmt: skip
    for bad, message in bad_inputs.items():
        with pytest.raises(ConfigError, match=message):
            parse_overrides(bad, "b")


def test_two_report_files_give_a_speedup_table(report_factory, tmp_path, capsys):
    a = report_factory([("rollout", 5.0, 10), ("rollout/env_step", 2.0, 100)], sps=1000.0)
    b = report_factory([("rollout", 4.0, 10), ("rollout/env_step", 1.0, 100)], sps=1250.0)
    paths = []
    for name, r in (("a.json", a), ("b.json", b)):
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(r))
    assert main(["compare", *map(str, paths)]) == 0
    lines = capsys.readouterr().out.splitlines()
    sps = next(line for line in lines if line.startswith("SPS"))
    assert sps.split()[1:] == ["1,000", "1,250", "+25.0%"]
    env = next(line for line in lines if line.strip().startswith("env_step"))
    assert env.split()[-1] == "+100.0%"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["compare", "only_one.json"], "needs two reports"),
        (["compare", "--a", "num_envs=8"], "must both be given"),
        (["compare", "--a", "nope=1", "--b", ""], "unknown setting"),
        (["compare", "--a", "num_envs=7", "--b", "", "--num-steps", "15"], "--a: batch size"),
        (["compare", "--a", "", "--b", "", "--repeats", "0"], "--repeats must be at least 1"),
    ],
)
def test_bad_compare_input_is_one_line_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_compare_runs_both_configurations_in_fresh_processes(tmp_path, capsys):
    code = main(["compare", "--env", "cartpole", "--num-envs", "8", "--num-steps", "16",
                 "--total-steps", "512", "--threads", "1", "--a", "", "--b",
                 "hidden_sizes=16,16", "--repeats", "1", "--out", str(tmp_path)])  # fmt: skip
    assert code == 0
    captured = capsys.readouterr()
    assert "run 1/1 A:" in captured.err and "run 1/1 B:" in captured.err
    assert any(line.startswith("SPS") for line in captured.out.splitlines())
    saved = json.loads((tmp_path / "compare.json").read_text())
    assert "--hidden-sizes" in saved["b_flags"] and "--hidden-sizes" not in saved["a_flags"]
    figures = {f["name"]: f for f in saved["figures"]}
    assert len(figures[SPS]["a"]) == 1 and "rollout/env_step" in figures
    b_report = json.loads((tmp_path / "b_1" / "report.json").read_text())
    assert b_report["run"]["config"]["policy"]["hidden_sizes"] == [16, 16]


def test_amdahl_explains_a_fast_env_that_barely_moves_sps(report_factory):
    """The guide's puzzle: the env step 2x faster at 10% of wall time allows ~5% end to end."""

    def run(env_s: float, wall_s: float) -> dict:
        return report_factory(
            [("rollout", 4.0 + env_s, 1), ("rollout/env_step", env_s, 100), ("update", 5.0, 1),
             ("update/loss", 3.0, 10)],
            wall_s=wall_s, sps=100_000 / wall_s,
        )  # fmt: skip

    a = [run(1.0, 10.0), run(1.02, 10.1), run(0.98, 9.9)]
    b = [run(0.5, 9.55), run(0.51, 9.7), run(0.49, 9.4)]
    comparisons = compare_runs(a, b)
    (env,) = [e for e in explain(a, b, comparisons) if e.section == "rollout/env_step"]
    assert env.share == pytest.approx(0.1, abs=0.002)
    assert env.speedup == pytest.approx(2.0, abs=0.01)
    assert env.predicted == pytest.approx(1 / (0.9 + 0.1 / 2.0), abs=1e-3)  # ~1.053
    assert env.within, (env.predicted, env.measured)
    text = render_explanation(explain(a, b, comparisons))
    assert "Amdahl allows 1.05" in text and "within the measured spread" in text


def test_a_prediction_outside_the_measured_spread_says_so(report_factory):
    a = [report_factory([("rollout", 6.0, 1), ("rollout/env_step", 5.0, 10)], sps=10_000)] * 3
    b = [report_factory([("rollout", 2.0, 1), ("rollout/env_step", 1.0, 10)], sps=10_000)] * 3
    (env,) = explain(a, b, compare_runs(a, b))
    assert env.predicted > 1.5 and not env.within
    assert "OUTSIDE" in env.render()


def test_env_options_are_settings_of_a_side():
    parsed = parse_overrides("observe=position num_envs=8", "a", env="cartpole")
    assert parsed == {"options": {"observe": "position"}, "num_envs": 8}
    assert to_flags(parsed) == ["--env-option", "observe=position", "--num-envs", "8"]
    assert to_flags({"options": {"turbo": False}}) == ["--env-option", "turbo=false"]
    with pytest.raises(ConfigError, match="nor an option of env 'cartpole'"):
        parse_overrides("turbo=false", "b", env="cartpole")


def test_compare_serial_against_workers_end_to_end(tmp_path, capsys):
    code = main(["compare", "--env", "cartpole", "--num-envs", "8", "--num-steps", "16",
                 "--total-steps", "512", "--threads", "1", "--a", "", "--b",
                 "backend=multiprocess num_workers=2", "--repeats", "1", "--out",
                 str(tmp_path)])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert "env: step | send+recv" in out and "only in B" in out
    saved = json.loads((tmp_path / "compare.json").read_text())
    assert ENV_PHASE in {f["name"] for f in saved["figures"]}
    # With the fused rollout kernel, serial cartpole (A) hands its actions to no host copy:
    # device_to_host is B's alone (ppo/fused_rollout.py).
    fused = {("rollout/device_to_host", "B")} if native.rollout_available() else set()
    assert {(o["name"], o["side"]) for o in saved["one_sided"]} == {
        ("rollout/env_step", "A"),
        ("rollout/env_send", "B"),
        ("rollout/env_recv", "B"),
        *fused,
    }
    assert saved["explanation"][0]["section"] == ENV_PHASE
    assert "env workers (B, 2): the slowest worker was busy" in out
    split = saved["env_workers"]
    assert split["side"] == "B" and split["workers"] == 2 and split["busy_ms"] > 0


def test_compare_of_env_options_with_cprofile_and_the_explanation(tmp_path, capsys):
    argv = ["compare", "--env", "cartpole", "--num-envs", "8", "--num-steps", "16",
            "--total-steps", "512", "--threads", "1", "--a", "observe=full", "--b",
            "observe=position", "--repeats", "1", "--cprofile", "--out", str(tmp_path)]  # fmt: skip
    code = main(argv)
    assert code == 0
    out = capsys.readouterr().out
    assert "Why (Amdahl's law" in out and "rollout/env_step:" in out
    assert "cProfile of the last A run" in out and "cProfile of the last B run" in out
    saved = json.loads((tmp_path / "compare.json").read_text())
    assert "observe=position" in saved["b_flags"]
    assert saved["explanation"][0]["section"] == "rollout/env_step"
    assert (tmp_path / "a_1" / "train.pstats").is_file()


def serial_and_workers(report_factory) -> tuple[list[dict], list[dict]]:
    """Serial runs (``env_step``) against worker runs (``env_send`` + ``env_recv``)."""

    def serial(env_s: float, wall_s: float) -> dict:
        return report_factory(
            [("rollout", 1.5 + env_s, 1), ("rollout/env_step", env_s, 100),
             ("update", 5.0, 1), ("update/loss", 3.0, 10)],
            wall_s=wall_s, sps=100_000 / wall_s,
        )  # fmt: skip

    def workers(send_s: float, recv_s: float, wall_s: float) -> dict:
        return report_factory(
            [("rollout", 1.5 + send_s + recv_s, 1), ("rollout/env_send", send_s, 100),
             ("rollout/env_recv", recv_s, 100), ("update", 5.0, 1), ("update/loss", 3.0, 10)],
            wall_s=wall_s, sps=100_000 / wall_s,
        )  # fmt: skip

    a = [serial(3.5, 10.0), serial(3.6, 10.1), serial(3.4, 9.9)]
    b = [workers(1.8, 0.2, 8.5), workers(1.9, 0.2, 8.6), workers(1.7, 0.2, 8.4)]
    return a, b


def test_serial_against_workers_pairs_the_env_phase(report_factory):
    a, b = serial_and_workers(report_factory)
    by_name = {c.name: c for c in compare_runs(a, b)}
    env = by_name[ENV_PHASE]
    assert env.a == pytest.approx([35.0, 36.0, 34.0])  # ms per 1,000 steps: env_step
    assert env.b == pytest.approx([20.0, 21.0, 19.0])  # env_send + env_recv
    assert "rollout/env_step" not in by_name and "rollout/env_send" not in by_name
    assert [c.name for c in compare_runs(a, b)][:3] == [SPS, "rollout", ENV_PHASE]
    only = one_sided(a, b)
    assert [(name, side) for name, side, _ in only] == [
        ("rollout/env_step", "A"),
        ("rollout/env_send", "B"),
        ("rollout/env_recv", "B"),
    ]
    text = render_runs(compare_runs(a, b), "serial", "workers", only)
    assert "env: step | send+recv" in text
    step_line = next(line for line in text.splitlines() if line.startswith("rollout/env_step"))
    assert step_line.rstrip().endswith("only in A") and " - " in step_line


def test_amdahl_explains_the_workers_by_the_env_phase(report_factory):
    a, b = serial_and_workers(report_factory)
    (env, *_) = explain(a, b, compare_runs(a, b))
    assert env.section == ENV_PHASE
    assert env.share == pytest.approx(0.35, abs=0.005)  # env_step over wall
    assert env.speedup == pytest.approx(35.0 / 20.0, abs=0.01)
    assert env.predicted == pytest.approx(1 / (0.65 + 0.35 / 1.75), abs=2e-3)


def test_the_same_backend_on_both_sides_has_no_env_phase_row(report_factory):
    a = [report_factory([("rollout", 5.0, 1), ("rollout/env_step", 2.0, 10)])] * 3
    assert ENV_PHASE not in [c.name for c in compare_runs(a, a)]
    assert one_sided(a, a) == []


def test_two_reports_table_lists_one_sided_sections(report_factory):
    a, b = serial_and_workers(report_factory)
    text = render_reports(a[0], b[0], "serial.json", "workers.json")
    assert "env: step | send+recv" in text
    assert any(line.startswith("rollout/env_recv") and "only in candidate" in line
               for line in text.splitlines())  # fmt: skip


def with_busy(reports: list[dict], busy_s: list[tuple[float, ...]]) -> list[dict]:
    """The worker reports with each worker's busy seconds (``run.env_workers``)."""
    for report, busy in zip(reports, busy_s, strict=True):
        report["run"]["env_workers"] = [{"busy_s": b, "idle_s": 0.0} for b in busy]
    return reports


def test_worker_split_separates_the_slower_shares_from_the_hand_over(report_factory):
    a, b = serial_and_workers(report_factory)
    b = with_busy(b, [(1.7, 1.9), (1.8, 2.0), (1.6, 1.8)])  # the slowest: 19, 20, 18 ms/1k
    s = worker_split.split(a, b)
    assert (s.side, s.workers) == ("B", 2)
    assert s.serial_ms == pytest.approx(35.0) and s.busy_ms == pytest.approx(19.0)
    assert s.phase_ms == pytest.approx(20.0) and s.share == pytest.approx(0.35, abs=0.005)
    # per pair: 19/17.5, 20/18, 18/17 and 20-19, 21-20, 19-18
    assert s.slowdown == pytest.approx(19 / 17.5) and s.hand_over_ms == pytest.approx(1.0)
    amdahl = lambda phase: 1 / ((1 - s.share) + s.share * phase / 35.0)  # noqa: E731
    assert s.allows(1.0, 1.0) == pytest.approx(amdahl(17.5 + 1.0))
    assert s.allows(s.slowdown, 0.0) == pytest.approx(amdahl(19.0))
    assert s.allows(1.0, 0.0) == pytest.approx(amdahl(17.5))
    text = s.render()
    assert "env workers (B, 2)" in text and "1.09x its part" in text and "took 1.00" in text


def test_worker_split_needs_workers_on_exactly_one_side(report_factory):
    a, b = serial_and_workers(report_factory)
    assert worker_split.split(a, b) is None  # no busy seconds in the reports
    b = with_busy(b, [(1.9, 1.9)] * 3)
    assert worker_split.split(b, a).side == "A"
    assert worker_split.split(b, b) is None and worker_split.split(a, a) is None
