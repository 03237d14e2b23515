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
    """The script with nothing of the GPU run's extras: no wheels, no CleanRL or LeanRL copy."""
    out = tmp_path / "report" / "gpu_check.json"
    argv = [sys.executable, str(SCRIPT), *flags, "--out", str(out), "--wheels",
            str(tmp_path / "no_wheels"), "--site", str(tmp_path / "site"), "--cleanrl",
            str(tmp_path / "no_cleanrl.py"), "--scripts", str(tmp_path / "no_scripts")]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
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


def ok_or_lacks_feature(result: dict) -> bool:
    """Ran, or skipped because this rlperf lacks one of issue #57's features (one line)."""
    return result["status"] == "ok" or "rlperf has no" in (result["reason"] or "")


def test_cpu_mode_runs_every_step_or_says_why(tmp_path: Path) -> None:
    done, report = run_check(tmp_path, "--cpu")
    assert done.returncode == 0, done.stdout[-4000:]
    assert report["schema"] == gpucheck("check").SCHEMA and report["mode"] == "cpu"
    assert tuple(report["steps"]) == tuple(gpucheck("main").STEPS)
    assert [s["step"] for s in report["plan"]] == list(report["steps"])
    assert "plan (cpu" in done.stdout
    for name, result in outcomes(report).items():
        assert result["status"] in ("ok", "skipped"), (name, result)
        assert result["status"] == "ok" or result["reason"], f"{name} skipped without a reason"
    steps = report["steps"]
    # What needs no CUDA ran, on the CPU.
    for name in ("probe", "install", "cuda_tests", "cartpole_475", "registry_cuda",
                 "cartpole_rows", "mujoco_devices", "breakout", "workloads"):  # fmt: skip
        assert steps[name]["status"] == "ok", (name, steps[name]["reason"])
    assert set(steps["install"]["figures"]["facts"]["rlperf"]["features"]) == {
        "vec_backend_torch", "cuda_graphs", "device_auto"}  # fmt: skip
    cartpole = steps["cartpole_475"]["figures"]
    assert cartpole["stopped_at_target"] and cartpole["at_target"]["global_step"] > 0
    assert cartpole["device"] == "cpu" and cartpole["sps"] > 0
    # The CartPole rows: the host path ran under the profiler, its trace read (no GPU here);
    # the device rows ran or say which feature rlperf lacks.
    rows = steps["cartpole_rows"]["figures"]["items"]
    assert len(rows) == 6 and all(ok_or_lacks_feature(r) for r in rows.values())
    for name in ("host_16x32", "host_4x16"):
        host = rows[name]["figures"]
        assert host["sps"] > 0 and host["trace"]["iterations"] == 2, name
    assert steps["cartpole_rows"]["figures"]["traces"]["kept"]
    assert ok_or_lacks_feature(steps["graphs_equal"])
    if steps["graphs_equal"]["status"] == "ok":  # eager on both sides on the CPU: same bits
        assert all(
            r["figures"]["identical"] for r in steps["graphs_equal"]["figures"]["items"].values()
        )
    # MuJoCo: the CPU row ran; no CUDA to train on; auto ran or says rlperf lacks it.
    mujoco = steps["mujoco_devices"]["figures"]["items"]
    assert mujoco["cpu"]["figures"]["sps"] > 0 and "no CUDA" in mujoco["cuda"]["reason"]
    assert ok_or_lacks_feature(mujoco["auto"])
    # The third-party scripts say where they are missing and how to prepare them.
    breakout = steps["breakout"]["figures"]["items"]
    assert breakout["rlperf"]["status"] == "ok"
    for side in ("leanrl", "cleanrl"):
        assert "--prepare-" in breakout[side]["reason"], side
    assert "no_scripts" in json.dumps(steps["halfcheetah"])
    # The CUDA transfers are skipped saying why; the trainer's parts were timed on the CPU.
    registry = steps["registry_cuda"]["figures"]
    assert any("CUDA not available" in r for r in registry["skip_reasons"])
    timed = {name.split("[")[0] for name in registry["cases"]}
    assert timed == {"policy_act", "update_epoch", "optimizer_step", "e2e_train"}
    cuda_tests = steps["cuda_tests"]["figures"]
    assert cuda_tests["passed"] > 0
    assert "tests/bench/test_gpu_check.py" not in {t.split("::")[0] for t in cuda_tests["selected"]}
    work = steps["workloads"]["figures"]["items"]
    assert work["cnn_robots_rgb"]["status"] == "ok"
    assert "needs 2 GPUs" in work["nccl_2ranks"]["reason"]
    # CleanRL's side says its script is missing: the whole step skipped (no ale-py), or its
    # rlperf side ran and the CleanRL side was recorded as skipped.
    assert "no_cleanrl.py" in json.dumps(steps["atari_vs_cleanrl"])
    assert set(report["headline"]) >= {"cartpole_sps", "cartpole_gpu_busy_pct", "graphs_equal",
                                       "mujoco_auto_over_best", "breakout_ratios"}  # fmt: skip
    # Beside the report: every step's output and the rows' traces.
    report_dir = tmp_path / "report"
    assert (report_dir / "gpu_check.log").stat().st_size > 0
    assert (report_dir / "gpu_check_traces.tar").stat().st_size > 0
    assert "gpu_check (cpu) on no GPU" in done.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_the_gpu_run_without_cuda_skips_its_cuda_steps(tmp_path: Path) -> None:
    done, report = run_check(tmp_path)
    assert done.returncode == 0, done.stdout[-4000:]
    steps = report["steps"]
    assert steps["install"]["status"] == "skipped" and "no CUDA" in steps["install"]["reason"]
    for name in ("cuda_tests", "cartpole_475", "cartpole_rows", "graphs_equal", "mujoco_devices",
                 "breakout", "halfcheetah"):  # fmt: skip
        assert steps[name]["status"] == "skipped"
        assert "CUDA not available" in steps[name]["reason"], name
    # Outside the 8 minutes: --only runs them.
    for name in ("registry_cuda", "workloads", "atari_vs_cleanrl"):
        assert f"--only {name} runs it" in steps[name]["reason"], name


def test_the_plan_fits_the_deadline() -> None:
    check = gpucheck("check")
    planned = sum(check.PLAN_S.values())
    assert planned <= check.GPU.deadline_s - gpucheck("core").RESERVE_S
    assert set(check.PLAN_S) | set(check.EXTRA_S) == set(gpucheck("main").STEPS)


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


def test_trace_activity_counts_kernels_and_the_gpu_busy_share(tmp_path: Path) -> None:
    trace = tmp_path / "t.pt.trace.json"
    events = [{"cat": "user_annotation", "name": "ProfilerStep#3", "ts": 100, "dur": 50},
              {"cat": "user_annotation", "name": "ProfilerStep#4", "ts": 150, "dur": 50},
              {"cat": "cpu_op", "name": "aten::mm", "ts": 100, "dur": 5},
              {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 101, "dur": 1},
              {"cat": "kernel", "name": "gemm", "ts": 110, "dur": 20},
              {"cat": "kernel", "name": "gemm", "ts": 120, "dur": 20},  # overlaps the first
              {"cat": "gpu_memcpy", "name": "Memcpy DtoH", "ts": 190, "dur": 30},  # past the end
              {"cat": "kernel", "name": "late", "ts": 300, "dur": 9}]  # fmt: skip
    trace.write_text(json.dumps({"traceEvents": events}))
    got = gpucheck("busy").trace_activity(trace)
    assert (got["kernels"], got["memcpy"], got["launches"], got["iterations"]) == (3, 1, 1, 2)
    assert got["top_kernels_us"] == {"gemm": 40, "late": 9}
    # Busy: 110-140 (the two kernels as one span) and 190-200 (the copy, clipped): 40 of 100 us.
    assert (got["window_ms"], got["busy_ms"], got["busy_pct"]) == (0.1, 0.04, 40.0)


def test_busy_spans_are_counted_once() -> None:
    union_us = gpucheck("busy").union_us
    assert union_us([], 0, 10) == 0
    assert union_us([(0, 4), (2, 6), (8, 20)], 1, 10) == 5 + 2
    assert union_us([(5, 6), (0, 10)], 0, 10) == 10


def test_steady_sps_leaves_out_the_traced_iterations() -> None:
    steady_sps = gpucheck("training").steady_sps
    metrics = [{"iteration": i, "global_step": 100 * i, "wall_s": w}
               for i, w in enumerate([0.1, 0.2, 0.3, 2.0, 4.0, 4.1, 4.2], start=1)]  # fmt: skip
    assert steady_sps(metrics, 5) == 200 / 0.2
    assert steady_sps(metrics, 7) is None


def test_parameters_are_compared_tensor_by_tensor(tmp_path: Path) -> None:
    compare = gpucheck("cartpole").compare_params
    weights = torch.linspace(-1, 1, 100)
    for name, flat in (("a", weights), ("b", weights.clone()), ("c", weights + 1e-3)):
        (tmp_path / name).mkdir()
        torch.save(
            {"global_step": 512, "policy": {"flat": flat}}, tmp_path / name / "checkpoint.pt"
        )
    same = compare(tmp_path / "a", tmp_path / "b")
    assert same["equal"] and same["identical"] and same["max_abs_diff"] == 0
    apart = compare(tmp_path / "a", tmp_path / "c")
    assert not apart["equal"] and not apart["identical"]
    assert apart["max_abs_diff"] == pytest.approx(1e-3, rel=1e-3)


def test_the_scripts_speed_lines_are_read() -> None:
    scripts = gpucheck("scripts")
    cleanrl = "global_step=1024, episodic_return=-21.0\nSPS: 300\nSPS: 310\n"
    assert scripts.read_figures(cleanrl, scripts.SPS_LINE) == {"sps": 310, "figures_printed": 2}
    first = json.dumps({"step": 320, "speed": 5.5, "episode_return": float("nan")})
    second = json.dumps({"step": 640, "speed": 6.5, "episode_return": -20.0})
    # tqdm's bar on stderr ends in a carriage return, not a new line: the log's line holds both.
    leanrl = f"  0%| 9/97 [00:04<00:40]wandb.log {first}\n\r 10%| 19/97 wandb.log {second}\n"
    got = scripts.read_figures(leanrl, scripts.WANDB_LINE)
    assert (got["sps"], got["figures_printed"], got["last_episode_return"]) == (6.5, 2, -20.0)
    assert got["speeds"] == [[320, 5.5], [640, 6.5]]
    assert scripts.read_figures("no speed yet", scripts.WANDB_LINE)["sps"] is None


def test_each_scripts_edits_apply_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # atari_sps.py and mujoco_sps.py
    scripts = gpucheck("scripts")
    from rlperf.bench.cleanrl import ScriptError, adapt_script

    for name in scripts.SCRIPTS:
        edits = scripts.edits_of(name)
        original = "".join(f"{old}# between\n" for old, _ in edits)
        adapted = adapt_script(original, edits)
        for old, new in edits:
            assert new in adapted and (old in new or old not in adapted), (name, old)
        with pytest.raises(ScriptError):
            adapt_script(original.replace(edits[0][0], ""), edits)
    # The stand-in for wandb is Python that prints each log call as one JSON line.
    namespace: dict = {}
    exec(scripts.WANDB_STANDIN, namespace)
    namespace["wandb"].init(project="x")


def test_a_slimmed_wheel_keeps_its_folders_and_a_true_record(tmp_path: Path) -> None:
    import base64
    import hashlib
    import zipfile

    wheels = gpucheck("wheels")
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name in ("pkg/__init__.py", "pkg/entry.py", "pkg/atari/a.so", "pkg/mujoco/m.so",
                     "pkg-1.0.dist-info/METADATA", "pkg-1.0.dist-info/RECORD"):  # fmt: skip
            z.writestr(name, f"# {name}\n")
    wheels.slim_wheel(wheel, ("pkg/__init__.py", "pkg/entry.py", "pkg/atari/"),
                      {"pkg/entry.py": "import pkg.atari\n"})  # fmt: skip
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        assert "pkg/mujoco/m.so" not in names and "pkg/atari/a.so" in names
        assert z.read("pkg/entry.py") == b"import pkg.atari\n"
        record = dict(
            line.split(",", 1) for line in z.read("pkg-1.0.dist-info/RECORD").decode().split()
        )
        for name in names - {"pkg-1.0.dist-info/RECORD"}:
            data = z.read(name)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert record[name] == f"sha256={digest},{len(data)}", name


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
