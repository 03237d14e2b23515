"""benchmarks/gpu_check.py and its package benchmarks/gpucheck: the whole control flow on the CPU
(``--cpu``), the GPU run's skips on a machine without CUDA, and the pieces it reads and writes,
on made-up input."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


def gpucheck(module: str) -> ModuleType:
    """``benchmarks/gpucheck/<module>.py``, imported as ``gpucheck.<module>`` (the package is
    the command's, found beside it, not installed)."""
    if "gpucheck" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "gpucheck",
            ROOT / "benchmarks" / "gpucheck" / "__init__.py",
            submodule_search_locations=[str(ROOT / "benchmarks" / "gpucheck")],
        )
        assert spec is not None and spec.loader is not None
        sys.modules["gpucheck"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules["gpucheck"])
    return importlib.import_module(f"gpucheck.{module}")


def run_check(tmp_path: Path, *flags: str) -> tuple[subprocess.CompletedProcess, dict]:
    """The script with nothing of the GPU run's extras: no wheels, no CleanRL copy."""
    out = tmp_path / "report" / "gpu_check.json"
    argv = [sys.executable, str(SCRIPT), *flags, "--out", str(out), "--wheels",
            str(tmp_path / "no_wheels"), "--site", str(tmp_path / "site"), "--cleanrl",
            str(tmp_path / "no_cleanrl.py")]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    return done, json.loads(out.read_text())


def outcomes(report: dict) -> dict[str, dict]:
    """Every step and every item of a step, by name."""
    found = {}
    for name, step in report["steps"].items():
        found[name] = step
        for item, result in step["figures"].get("items", {}).items():
            found[f"{name}/{item}"] = result
    return found


def test_cpu_mode_runs_every_step_or_says_why(tmp_path: Path) -> None:
    done, report = run_check(tmp_path, "--cpu")
    assert done.returncode == 0, done.stdout[-4000:]
    assert report["schema"] == gpucheck("check").SCHEMA and report["mode"] == "cpu"
    assert tuple(report["steps"]) == tuple(gpucheck("main").STEPS)
    for name, result in outcomes(report).items():
        assert result["status"] in ("ok", "skipped"), (name, result)
        assert result["status"] == "ok" or result["reason"], f"{name} skipped without a reason"
    steps = report["steps"]
    # What needs no CUDA ran, on the CPU.
    for name in ("probe", "install", "cuda_tests", "cartpole_475", "registry_cuda", "profile",
                 "workloads"):  # fmt: skip
        assert steps[name]["status"] == "ok", (name, steps[name]["reason"])
    cartpole = steps["cartpole_475"]["figures"]
    assert cartpole["stopped_at_target"] and cartpole["at_target"]["global_step"] > 0
    assert cartpole["device"] == "cpu" and cartpole["sps"] > 0
    # The CUDA transfers are skipped saying why; the trainer's parts were timed on the CPU.
    registry = steps["registry_cuda"]["figures"]
    assert any("CUDA not available" in r for r in registry["skip_reasons"])
    timed = {name.split("[")[0] for name in registry["cases"]}
    assert timed == {"policy_act", "update_epoch", "optimizer_step", "e2e_train"}
    cuda_tests = steps["cuda_tests"]["figures"]
    assert cuda_tests["passed"] > 0
    assert "tests/bench/test_gpu_check.py" not in {t.split("::")[0] for t in cuda_tests["selected"]}
    assert steps["profile"]["figures"]["trace"]["events"]
    work = steps["workloads"]["figures"]["items"]
    assert work["cartpole_big"]["status"] == "ok" and work["cnn_robots_rgb"]["status"] == "ok"
    assert "needs 2 GPUs" in work["nccl_2ranks"]["reason"]
    # CleanRL's side says its script is missing: the whole step skipped (no ale-py), or its
    # rlperf side ran and the CleanRL side was recorded as skipped.
    assert "no_cleanrl.py" in json.dumps(steps["atari_vs_cleanrl"])
    assert set(report["headline"]) >= {"cartpole_at_target", "d2h_median_us", "trace_cuda_kernels"}
    # Beside the report: every step's output and the profiler's trace.
    report_dir = tmp_path / "report"
    assert (report_dir / "gpu_check.log").stat().st_size > 0
    assert (report_dir / "gpu_check_trace.json.gz").exists()
    assert "gpu_check (cpu) on no GPU" in done.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_the_gpu_run_without_cuda_skips_its_cuda_steps(tmp_path: Path) -> None:
    done, report = run_check(tmp_path)
    assert done.returncode == 0, done.stdout[-4000:]
    steps = report["steps"]
    assert steps["install"]["status"] == "skipped" and "no CUDA" in steps["install"]["reason"]
    for name in ("cuda_tests", "cartpole_475", "registry_cuda", "profile", "workloads",
                 "atari_vs_cleanrl"):  # fmt: skip
        assert steps[name]["status"] == "skipped"
        assert "CUDA not available" in steps[name]["reason"], name


# -- the pieces, on made-up input --------------------------------------------------------------
def test_cuda_tests_are_found_and_those_that_skip_on_cuda_left_out(tmp_path: Path) -> None:
    pytests = gpucheck("pytests")
    tests = tmp_path / "tests"
    (tests / "sub").mkdir(parents=True)
    (tests / "sub" / "test_a.py").write_text(
        "import pytest, torch\n"
        "def test_on_device():\n    x = torch.ones(1, device='cuda')\n"
        "def test_cpu_only():\n    pass\n"
        "def test_cpu_behaviour():\n"
        "    if torch.cuda.is_available():\n        pytest.skip('has CUDA')\n"
        "def test_needs_it():\n"
        "    if not torch.cuda.is_available():\n        pytest.skip('no CUDA')\n"
        "@pytest.mark.parametrize('d', ['cpu', 'cuda'])\ndef test_both(d):\n    pass\n"
        "class TestKernels:\n    def test_cuda_kernel(self):\n        pass\n"
    )
    (tests / "test_marked.py").write_text(
        "import pytest, torch\n"
        "pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason='CUDA')\n"
        "def test_anything():\n    pass\n"
    )
    (tests / "test_plain.py").write_text("def test_nothing():\n    pass\n")
    selected, excluded = pytests.find_cuda_tests(tests)
    assert selected == [
        "tests/sub/test_a.py::test_on_device",
        "tests/sub/test_a.py::test_needs_it",
        "tests/sub/test_a.py::test_both",
        "tests/sub/test_a.py::TestKernels::test_cuda_kernel",
        "tests/test_marked.py::test_anything",
    ]
    assert excluded == ["tests/sub/test_a.py::test_cpu_behaviour"]
    assert pytests.narrowing(selected) is None
    narrowed = pytests.narrowing(["tests/b.py::test_case_runs_once", *selected])
    assert narrowed == "not (test_case_runs_once and not transfer)"


def test_junit_counts_and_reasons(tmp_path: Path) -> None:
    xml = tmp_path / "r.xml"
    xml.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="t.a" name="ok"/>'
        '<testcase classname="t.a" name="bad"><failure message="x"/></testcase>'
        '<testcase classname="t.b" name="broken"><error message="y"/></testcase>'
        '<testcase classname="t.b" name="s1"><skipped message="CUDA not available"/></testcase>'
        '<testcase classname="t.b" name="s2"><skipped message="CUDA not available"/></testcase>'
        "</testsuite></testsuites>"
    )
    got = gpucheck("pytests").junit(xml)
    assert (got["passed"], got["failed"], got["errors"], got["skipped"]) == (1, 1, 1, 2)
    assert got["failures"] == ["t.a::bad", "t.b::broken"]
    assert got["skip_reasons"] == {"CUDA not available": 2}


def test_cleanrl_edits_apply_once_each_or_say_which_is_missing() -> None:
    atari = gpucheck("atari")
    original = "".join(f"{old}\n# between\n" for _, old, _ in atari.CLEANRL_EDITS)
    adapted = atari.adapt_cleanrl(original)
    for _, old, new in atari.CLEANRL_EDITS:
        assert new in adapted and (old in new or old not in adapted)
    with pytest.raises(ValueError, match="FrameStack"):
        atari.adapt_cleanrl(original.replace("FrameStack(env, 4)", "FrameStack(env, 8)"))


def test_the_episode_lines_of_cleanrl_are_read() -> None:
    atari = gpucheck("atari")
    text = ("global_step=1024, episodic_return=-21.0\nSPS: 300\n"
            "global_step=2048, episodic_return=[-20.]\nSPS: 310\n")  # fmt: skip
    assert atari.EPISODE.findall(text) == [("1024", "-21.0"), ("2048", "-20.")]
    assert atari.SPS_LINE.findall(text) == ["300", "310"]


def test_trace_activity_counts_kernels(tmp_path: Path) -> None:
    trace = tmp_path / "t.pt.trace.json"
    events = [{"cat": "cpu_op", "name": "aten::mm", "dur": 5},
              {"cat": "kernel", "name": "gemm", "dur": 7},
              {"cat": "kernel", "name": "gemm", "dur": 3},
              {"cat": "gpu_memcpy", "name": "Memcpy DtoH", "dur": 2}]  # fmt: skip
    trace.write_text(json.dumps({"traceEvents": events}))
    got = gpucheck("training").trace_activity(trace)
    assert (got["kernels"], got["memcpy"], got["top_kernels_us"]) == (2, 1, {"gemm": 10})


def test_rows_are_read_on_complete_lines_only(tmp_path: Path) -> None:
    core = gpucheck("core")
    path = tmp_path / "metrics.jsonl"
    rows = core.Rows(path)
    assert rows.read() == []
    path.write_text('{"global_step": 1, "mean_return": 10}\n{"global_st')
    assert [r["global_step"] for r in rows.read()] == [1]
    with open(path, "a") as f:
        f.write('ep": 2, "mean_return": 480}\n')
    assert core.first_at(rows.read(), 475)["global_step"] == 2
    assert core.thin(list(range(10)), 4) == [0, 2, 5, 9]


def test_a_step_of_items_fails_on_any_and_skips_when_none_ran() -> None:
    core = gpucheck("core")
    ok, skipped = core.done("ok", None), core.done("skipped", "no GPU")
    assert core.items({"a": ok, "b": skipped})["items"]["a"] is ok
    with pytest.raises(core.Skip, match="b: no GPU"):
        core.items({"b": skipped})
    with pytest.raises(core.Failed, match="c failed"):
        core.items({"a": ok, "c": core.done("failed", "boom")})
    assert core.last_json('warning\n{"sps": 5}\nexit\n') == {"sps": 5}
