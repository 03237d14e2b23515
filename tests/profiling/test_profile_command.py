"""rlperf profile end to end, in process, on tiny CartPole runs (8 iterations of 8 x 16 steps)."""

from __future__ import annotations

import json
import pstats

import numpy as np
import pytest

from rlperf import native
from rlperf.cli import main
from rlperf.commandline import EXIT_INTERRUPTED
from rlperf.envs import register, unregister
from rlperf.envs.cartpole import CartPoleVec
from rlperf.profiling.report import load_report

TINY = ["--num-envs", "8", "--num-steps", "16", "--total-steps", "1024", "--threads", "1",
        "--no-progress", "--seed", "3"]  # fmt: skip
ITERATIONS = 1024 // (8 * 16)
TRAINER_SECTIONS = {"rollout", "rollout/policy_forward", "rollout/env_step", "gae", "update",
                    "update/loss", "update/backward", "update/optimizer_step"}  # fmt: skip


class InterruptingCartPole(CartPoleVec):
    """CartPole that raises KeyboardInterrupt (as Ctrl-C would) on its 40th step."""

    def step(self, actions: np.ndarray):  # type: ignore[override]
        self.steps_taken = getattr(self, "steps_taken", 0) + 1
        if self.steps_taken == 40:
            raise KeyboardInterrupt
        return super().step(actions)


@pytest.fixture
def interrupting_env():
    register("test_interrupting_cartpole", lambda n, **kw: InterruptingCartPole(n, **kw))
    yield "test_interrupting_cartpole"
    unregister("test_interrupting_cartpole")


def test_profile_prints_the_breakdown_and_writes_a_valid_report(tmp_path, capsys):
    code = main(["profile", *TINY, "--out", str(tmp_path), "--summary-every", "3", "--memory"])
    assert code == 0
    out = capsys.readouterr().out
    assert "Where the time went" in out and "untimed" in out
    # --summary-every 3 over 8 iterations: blocks after iterations 3 and 6.
    assert out.count("Rollout Timing Profile") == 2
    assert "iterations 4-6" in out
    block = out.split("iterations 1-3")[1].split("=" * 60 + "\n", 2)[1]
    # The fused rollout's actions never leave its kernel: no "actions to host" there.
    to_host = () if native.rollout_available() else ("actions to host",)
    for label in ("rollout total", "student forward", *to_host, "env step",
                  "replay store", "other"):  # fmt: skip
        assert label in block
    assert "teacher" not in block  # no teacher on CartPole
    assert "Memory: peak above the level at section entry" in out
    report = load_report(tmp_path)
    assert report["interrupted"] is False
    assert report["totals"]["steps"] == 1024 and report["totals"]["iterations"] == ITERATIONS
    assert report["run"]["config"]["env"]["num_envs"] == 8
    names = {e["name"] for e in report["sections"]}
    assert TRAINER_SECTIONS <= names
    # A section a C kernel timed (Profiler.record) has no memory peak of its own: None.
    recorded = {"rollout/policy_forward", "rollout/env_step", "rollout/buffer_store",
                "rollout/truncation_bootstrap", "update/loss", "update/backward",
                "update/optimizer_step"}  # fmt: skip
    assert all((e["cpu_peak_mb"] is not None or e["name"] in recorded)
               and e["gpu_peak_mb"] is None for e in report["sections"])  # fmt: skip
    assert all(e["cpu_peak_mb"] is not None for e in report["sections"] if "/" not in e["name"])
    assert report["memory"]["cpu_peak_rss_mb"] > 0
    assert report["run"]["instrumentation"] == ["memory"]


def test_torch_profiler_trace_is_json_with_the_section_names(tmp_path, capsys):
    trace_dir = tmp_path / "traces"
    code = main(["profile", *TINY, "--torch-profiler", "--torch-profiler-dir", str(trace_dir),
                 "--wait", "1", "--warmup", "1", "--active", "2", "--torch-profiler-summary",
                 "--record-shapes"])  # fmt: skip
    assert code == 0
    out = capsys.readouterr().out
    assert "top operators by self time" in out and "Self CPU time total" in out
    (trace,) = trace_dir.glob("*.pt.trace.json")  # repeat=1: exactly one cycle
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e.get("name") for e in events}
    # Sections a C kernel times itself (the fused rollout's, the native update's) are there
    # too: their spans, from the kernel's clock, are added to the exported trace.
    assert TRAINER_SECTIONS <= names
    assert any(str(n).startswith("ProfilerStep#") for n in names)


def test_the_trace_has_a_range_for_every_section_of_the_table(tmp_path, capsys):
    # Every iteration but the first (warm-up) recorded: each section of the table ran in it.
    code = main(["profile", *TINY, "--out", str(tmp_path), "--torch-profiler", "--wait", "0",
                 "--warmup", "1", "--active", str(ITERATIONS - 1)])  # fmt: skip
    assert code == 0
    table = {e["name"] for e in load_report(tmp_path)["sections"]}
    (trace,) = (tmp_path / "torch_traces").glob("*.pt.trace.json")
    events = json.loads(trace.read_text())["traceEvents"]
    ranges = {e["name"] for e in events if e.get("cat") == "user_annotation"}
    # The measuring tools' own work is not traced (torch.profiler cannot trace its export).
    assert {n for n in table if not n.startswith("measurement")} <= ranges
    if native.rollout_available():
        assert {"rollout/env_step", "update/loss"} <= table  # the kernels' phases among them


def test_a_run_shorter_than_the_schedule_says_so_and_leaves_no_folder(tmp_path, capsys):
    trace_dir = tmp_path / "traces"
    code = main(["profile", *TINY, "--torch-profiler", "--torch-profiler-dir", str(trace_dir),
                 "--wait", "10", "--warmup", "2", "--active", "2"])  # fmt: skip
    assert code == 0
    err = capsys.readouterr().err
    assert "no trace will be written" in err  # warned before training
    assert f"the run ended after {ITERATIONS} iterations" in err
    assert "wait+warmup+active = 10+2+2 = 14" in err
    assert not trace_dir.exists()


def test_cprofile_writes_pstats_and_prints_the_top_functions(tmp_path, capsys):
    path = tmp_path / "run.pstats"
    assert main(["profile", *TINY, "--cprofile", str(path)]) == 0
    out = capsys.readouterr().out
    assert "cProfile: top 50 functions by cumulative time" in out
    assert "Ordered by: cumulative time" in out and "(train)" in out
    stats = pstats.Stats(str(path))
    assert any(func[2] == "train" for func in stats.stats)  # type: ignore[attr-defined]
    assert (tmp_path / "run.pstats.txt").read_text().strip() in out


def test_ctrl_c_still_writes_the_report_and_the_partial_trace(tmp_path, capsys, interrupting_env):
    trace_dir = tmp_path / "traces"
    code = main(["profile", *TINY, "--env", interrupting_env, "--out",
                 str(tmp_path), "--torch-profiler", "--torch-profiler-dir", str(trace_dir),
                 "--wait", "0", "--warmup", "1", "--active", "3"])  # fmt: skip
    # 16 steps per rollout: step 40 is in iteration 3, inside the active window.
    assert code == EXIT_INTERRUPTED
    captured = capsys.readouterr()
    assert "interrupted" in captured.err
    assert "(interrupted run)" in captured.out
    report = load_report(tmp_path)
    assert report["interrupted"] is True
    assert report["totals"]["steps"] == 2 * 8 * 16  # two whole iterations completed
    env_step = next(e for e in report["sections"] if e["name"] == "rollout/env_step")
    assert env_step["calls"] == 40  # 39 whole steps; the interrupted one closed its section too
    (trace,) = trace_dir.glob("*.pt.trace.json")
    assert "rollout/env_step" in {
        e.get("name") for e in json.loads(trace.read_text())["traceEvents"]
    }
    assert report["artifacts"]["torch_traces"] == [str(trace)]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--wait", "2"], "--wait needs --torch-profiler"),
        (["--torch-profiler", "--active", "0"], "--active must be at least 1"),
        (["--summary-every", "-1"], "summary_every must be >= 0"),
        (["--num-envs", "0"], "num_envs must be positive"),
    ],
)
def test_bad_profile_flags_are_one_line_exit_2(extra, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exc:
        main(["profile", *TINY, "--out", str(tmp_path / "out"), *extra])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("rlperf: error: ") and message in err[-1]
    assert not (tmp_path / "out").exists()
