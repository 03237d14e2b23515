"""``rlperf history``: asv results and gate runs to one self-contained page; bad input."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rlperf.bench.history import asv_charts, gate_charts, ticks
from rlperf.cli import main

E2E = "e2e_train[num_envs=64,env_steps=4096,threads=1]"
E2E_LSTM = "e2e_train[num_envs=64,threads=1,kind=lstm,env_steps=4096]"
GAE = "gae[num_steps=32,num_envs=64]"
COLUMNS = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a",
           "stats_ci_99_b", "stats_q_25", "stats_q_75", "stats_number", "stats_repeat",
           "samples", "profile"]  # fmt: skip


def asv_result(commit: str, date: int, e2e_s: list[float | None], gae_s: float) -> dict:
    """One asv result file as asv 0.6 writes it (``asv.results.Results.save``)."""

    def row(values: list[float | None], params: list[str]) -> list:
        lower = [None if v is None else v * 0.97 for v in values]
        upper = [None if v is None else v * 1.04 for v in values]
        return [values, [[repr(p) for p in params]], "0" * 64, date, 12.5,
                [None] * len(values), [None] * len(values), lower, upper,
                [1] * len(values), [10] * len(values)]  # fmt: skip

    return {
        "commit_hash": commit,
        "env_name": "virtualenv-py3.11-torch2.13.0",
        "date": date,
        "params": {"machine": "box", "python": "3.11", "torch": "2.13.0"},
        "python": "3.11",
        "requirements": {"torch": "2.13.0"},
        "env_vars": {},
        "result_columns": COLUMNS,
        "results": {
            "benchmarks.TimeTrain.time_case": row(e2e_s, [E2E, E2E_LSTM]),
            "benchmarks.Time_gae.time_case": row([gae_s], [GAE]),
            "benchmarks.TimeTrain.peakmem_case": [None],  # failed on this commit: skipped
        },
        "durations": {},
        "version": 2,
    }


@pytest.fixture
def asv_dir(tmp_path: Path) -> Path:
    """Five commits on one machine (out of date order on disk), one e2e value missing."""
    results = tmp_path / "results"
    (results / "box").mkdir(parents=True)
    (results / "box" / "machine.json").write_text('{"machine": "box", "version": 1}')
    (results / "benchmarks.json").write_text(json.dumps({
        "benchmarks.TimeTrain.time_case": {"unit": "seconds"},
        "benchmarks.Time_gae.time_case": {"unit": "seconds"}, "version": 2,
    }))  # fmt: skip
    for i in range(5):
        commit = f"{(5 - i) * 1111111:08x}" + "ab" * 16
        e2e = [0.30 + 0.01 * i, None if i == 2 else 0.9]
        data = asv_result(commit, 1_700_000_000_000 + i * 86_400_000, e2e, 1e-4 * (1 + i))
        (results / "box" / f"{commit[:8]}-virtualenv-py3.11-torch2.13.0.json").write_text(
            json.dumps(data)
        )
    return results


def gate_run(tmp_path: Path, name: str, head: str, ratio: float, decision: str) -> Path:
    """A ``rlperf gate --json`` file of one e2e case with trainer sections."""
    base_sample = {
        "wall_s": 1.0,
        "cpu_s": 1.0,
        "sections_s": {"rollout": 0.5, "update": 0.45, "update/backward": 0.3},
    }
    head_sample = {"wall_s": ratio, "cpu_s": ratio,
                   "sections_s": {"rollout": 0.5, "update": 0.45 + 0.3 * (ratio - 1) * 3,
                                  "update/backward": 0.3 * (1 + (ratio - 1) * 3)}}  # fmt: skip
    verdict = {"decision": decision, "rounds": 8, "ratio": ratio, "low": ratio - 0.02,
               "high": ratio + 0.02, "reason": "", "p_value": 0.01}  # fmt: skip
    data = {
        "sides": {"base": {"ref": "origin/main", "sha": "b" * 40}, "head": {"ref": "HEAD",
                                                                        "sha": head * 40}},
        "settings": {"threshold": 0.05, "metric": "cpu", "confidence": 0.95},
        "cases": [{"name": E2E, "calls_per_sample": 1, "items_per_call": 4096,
                   "items_unit": "env_steps",
                   "rounds": [{"base": [base_sample], "head": [head_sample]}] * 8,
                   "verdicts": {"cpu": verdict, "wall": verdict}}],
        "exit_code": 1 if decision == "regression" else 0,
    }  # fmt: skip
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def gate_files(tmp_path: Path) -> list[Path]:
    return [
        gate_run(tmp_path, "gate1.json", "1", 1.00, "ok"),
        gate_run(tmp_path, "gate2.json", "2", 1.08, "regression"),
        gate_run(tmp_path, "gate3.json", "3", 1.03, "undecided"),
    ]


def test_asv_results_become_one_chart_per_case(asv_dir: Path) -> None:
    charts = {c.title: c for c in asv_charts(asv_dir)}
    assert set(charts) == {E2E, E2E_LSTM, GAE}
    e2e = charts[E2E]
    assert e2e.unit == "env steps/s" and len(e2e.points) == 5
    # Commit-date order (the files are named in the opposite order), SPS = 4096 / seconds.
    assert [p.value for p in e2e.points] == pytest.approx([4096 / (0.30 + 0.01 * i)
                                                          for i in range(5)])  # fmt: skip
    assert all(p.low < p.value < p.high for p in e2e.points)
    assert len(charts[E2E_LSTM].points) == 4  # the missing value is left out, not drawn as 0
    assert charts[GAE].unit == "ms per call"


def test_gate_runs_become_verdict_charts_with_the_phase(gate_files: list[Path]) -> None:
    (chart,) = gate_charts(gate_files)
    assert [p.decision for p in chart.points] == ["ok", "regression", "undecided"]
    assert [p.value for p in chart.points] == [1.00, 1.08, 1.03]
    assert chart.rules[1] == (1.05, "threshold 1.05")
    assert "update/backward 1.24x slower" in chart.points[1].detail


def test_the_page_has_a_chart_per_case_and_no_url(
    asv_dir: Path, gate_files: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "history.html"
    args = ["history", "--asv-results", str(asv_dir), "--gate-json", *map(str, gate_files)]
    assert main([*args, "--out", str(out)]) == 0
    assert capsys.readouterr().out == f"history: 4 charts written to {out}\n"
    page = out.read_text()
    assert page.count('<svg class="chart"') == 4
    for case in (E2E, E2E_LSTM, GAE):
        assert f'data-case="{case}"' in page
    # Nothing that a browser would fetch: no src/href at all, no scripts, no external CSS.
    assert not re.search(r"""\b(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert not re.search(r"\b(src|href)\s*=", page, re.I)
    assert "<script" not in page and "@import" not in page and "url(" not in page


def test_reads_the_results_dir_of_asv_conf_json(
    asv_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = '{\n    // asv settings\n    "version": 1,\n    "results_dir": "results"\n}\n'
    (tmp_path / "asv.conf.json").write_text(conf)
    monkeypatch.chdir(tmp_path)
    assert main(["history", "--out", "page.html"]) == 0
    assert (tmp_path / "page.html").read_text().count('<svg class="chart"') == 3


def test_a_file_written_by_asv_itself_is_read() -> None:
    """The format as asv's own ``Results.save`` writes it (skipped without the dev extra)."""
    asv_results = pytest.importorskip("asv.results", reason="asv is in the dev extra")
    runner = pytest.importorskip("asv.runner")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        params = {"machine": "box", "python": "3.11"}
        res = asv_results.Results(params, {}, "c" * 40, 1_700_000_000_000, "3.11", "env", {})
        bench = {"name": "benchmarks.TimeTrain.time_case", "version": "1", "params": [[repr(E2E)]]}
        samples = [[0.30, 0.31, 0.29, 0.33, 0.30]]
        res.add_result(bench, runner.BenchmarkResult([0.30], samples, [1], 0, "", None))
        res.save(tmp)
        (chart,) = asv_charts(Path(tmp))
    assert chart.title == E2E and chart.points[0].value == pytest.approx(4096 / 0.30, rel=0.05)
    point = chart.points[0]  # the band is asv's quartiles of the samples
    assert point.low <= point.value <= point.high and point.low < point.high


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (lambda d: (d / "box" / "x-env.json").write_text("{oops"), "is not JSON"),
        (lambda d: (d / "box" / "x-env.json").write_text("[]"), "not an object"),
        (lambda d: (d / "box" / "x-env.json").write_text('{"version": 1}'), "format version 1"),
        (
            lambda d: (d / "box" / "x-env.json").write_text(
                json.dumps(
                    {**asv_result("c" * 40, 1, [0.3, 0.3], 1.0), "results": {"b": [[0.3, 0.4], []]}}
                )
            ),
            "1 parameter combinations",
        ),  # fmt: skip
        (
            lambda d: (d / "box" / "x-env.json").write_text(
                json.dumps(
                    {**asv_result("c" * 40, 1, [0.3, 0.3], 1.0), "results": {"b": [["fast"]]}}
                )
            ),
            "'fast' is not a number",
        ),  # fmt: skip
        (lambda d: shutil.rmtree(d / "box"), "no asv result files"),
        (lambda d: shutil.rmtree(d), "does not exist"),
    ],
    ids=[
        "not-json",
        "not-object",
        "old-version",
        "params-mismatch",
        "not-number",
        "no-files",
        "no-dir",
    ],  # fmt: skip
)
def test_malformed_asv_results_are_one_line_and_exit_2(
    asv_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    write,
    message: str,  # noqa: ANN001
) -> None:
    write(asv_dir)
    code = main(["history", "--asv-results", str(asv_dir), "--out", str(tmp_path / "h.html")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("rlperf: error: ") and message in err
    assert not (tmp_path / "h.html").exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{nope", "is not JSON"),
        ('{"cases": []}', "no cases"),
        (
            '{"cases": [{"name": "x", "calls_per_sample": 1, "rounds": [{"base": '
            '[{"wall_s": 1, "cpu_s": 1}], "head": [{"wall_s": 1, "cpu_s": 1}]}]}]}',
            "KeyError: 'verdicts'",
        ),  # fmt: skip
    ],
)
def test_malformed_gate_json_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture, text: str, message: str
) -> None:
    path = tmp_path / "gate.json"
    path.write_text(text)
    assert main(["history", "--gate-json", str(path), "--out", str(tmp_path / "h.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_an_out_that_cannot_be_written_is_one_line_and_exit_2(
    gate_files: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("kept")
    outs = [(tmp_path, "is a directory, not a file"), (a_file / "h.html", "does not exist")]
    if Path("/proc/self").is_dir():  # procfs takes no new files, even from root
        outs.append((Path("/proc/nope.html"), "cannot create anything in /proc"))
    for out, message in outs:
        assert main(["history", "--gate-json", str(gate_files[0]), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("rlperf: error: --out") and message in err
    assert a_file.read_text() == "kept"


def test_no_source_is_exit_2(tmp_path: Path, monkeypatch, capsys) -> None:  # noqa: ANN001
    monkeypatch.chdir(tmp_path)
    assert main(["history"]) == 2
    assert "cannot read asv.conf.json" in capsys.readouterr().err


def test_ticks_are_round_and_cover_the_range() -> None:
    assert ticks(0.0, 1.0) == pytest.approx([0.0, 0.5, 1.0])
    values = ticks(0.93, 1.12)
    assert values[0] >= 0.93 and values[-1] <= 1.12 and len(values) >= 3


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# No network at all: every host name resolves nowhere and every request goes to a dead proxy.
OFFLINE = ["--headless", "--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9",
           "--host-resolver-rules=MAP * ~NOTFOUND"]  # fmt: skip


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed (Debian: apt-get install -y chromium); the page "
    "is checked for URLs by test_the_page_has_a_chart_per_case_and_no_url regardless",
)
def test_renders_offline_in_headless_chromium(
    asv_dir: Path, gate_files: list[Path], tmp_path: Path
) -> None:
    """Chromium with the network cut: the rendered DOM holds every case's chart, and a
    screenshot is taken (tmp_path/history.png) to look at."""
    page = tmp_path / "history.html"
    args = ["history", "--asv-results", str(asv_dir), "--gate-json", *map(str, gate_files)]
    assert main([*args, "--out", str(page)]) == 0
    url = page.resolve().as_uri()
    dom = subprocess.run([CHROMIUM, *OFFLINE, "--dump-dom", url], capture_output=True,
                         text=True, timeout=120, check=True).stdout  # fmt: skip
    assert dom.count('<svg class="chart"') == 4
    for case in (E2E, E2E_LSTM, GAE):
        assert f'data-case="{case}"' in dom
    assert dom.count("<circle") == 5 + 4 + 5 + 3  # every point drawn
    shot = tmp_path / "history.png"
    subprocess.run([CHROMIUM, *OFFLINE, f"--screenshot={shot}", "--window-size=1200,900", url],
                   capture_output=True, timeout=120, check=True)  # fmt: skip
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
