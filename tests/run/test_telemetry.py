"""Telemetry: the fields of a row and of a run, workers found and forgotten, the GPU path through a
fake NVML module, the note said once, and the blocks in summary.json and report.json.

Samples are taken by calling ``sample()`` with the thread's interval set far beyond the test
(deterministic); one test checks that the thread itself samples."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from rlperf.cli import main
from rlperf.run import telemetry as telemetry_module
from rlperf.run.telemetry import MB, Telemetry, describe, machine_cpu_pct

NEVER_S = 3600.0  # an interval the thread never reaches within a test
TINY = ["--num-envs", "8", "--num-steps", "16", "--num-minibatches", "4", "--update-epochs",
        "1", "--threads", "1", "--seed", "4", "--no-progress"]  # fmt: skip
BATCH = 8 * 16
PROCESS_FIELDS = {"cpu_pct_mean", "cpu_pct_max", "rss_mb_mean", "rss_mb_max"}


class FakeNVMLError(Exception):
    pass


def fake_nvml(devices: int = 2, fail_init: bool = False) -> types.ModuleType:
    """A stand-in for nvidia-ml-py's ``pynvml``: ``devices`` GPUs whose utilisation reads
    10, 20, 30, ... (per device, index * 5 added) and whose memory in use grows 100 MB a read."""
    nvml = types.ModuleType("pynvml")
    nvml.NVMLError = FakeNVMLError
    reads = {"util": [0] * devices, "mem": [0] * devices}
    nvml.state = {"initialised": False, "fail_reads": False}

    def init() -> None:
        if fail_init:
            raise FakeNVMLError("NVML Shared Library Not Found")
        nvml.state["initialised"] = True

    def shutdown() -> None:
        nvml.state["initialised"] = False

    def utilization(handle: int) -> types.SimpleNamespace:
        if nvml.state["fail_reads"]:
            raise FakeNVMLError("GPU is lost")
        reads["util"][handle] += 1
        return types.SimpleNamespace(gpu=10 * reads["util"][handle] + 5 * handle, memory=0)

    def memory(handle: int) -> types.SimpleNamespace:
        reads["mem"][handle] += 1
        return types.SimpleNamespace(total=80_000 * MB, used=100 * reads["mem"][handle] * MB)

    nvml.nvmlInit, nvml.nvmlShutdown = init, shutdown
    nvml.nvmlDeviceGetCount = lambda: devices
    nvml.nvmlDeviceGetHandleByIndex = lambda i: i
    # Older bindings return bytes, newer ones str: one of each.
    nvml.nvmlDeviceGetName = lambda h: b"Fake GPU" if h == 0 else "Fake GPU"
    nvml.nvmlDeviceGetUtilizationRates = utilization
    nvml.nvmlDeviceGetMemoryInfo = memory
    return nvml


@pytest.fixture
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """NVML present but failing to initialise, as on a machine without an NVIDIA driver."""
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(fail_init=True))


@pytest.fixture
def child() -> Iterator[subprocess.Popen]:
    """A child process that spins for a while (a stand-in env worker)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time\nend = time.time() + 60\nwhile time.time() < end: pass"]
    )
    yield proc
    proc.kill()
    proc.wait()


def test_row_has_trainer_worker_and_machine_fields_and_the_note_once(no_nvml, child) -> None:
    telemetry = Telemetry(NEVER_S, scan_s=0.0).start()
    try:
        telemetry.sample()
        telemetry.sample()
        row = telemetry.row_fields()["telemetry"]
        assert row["samples"] == 2 and row["interval_s"] == NEVER_S
        assert row["trainer"]["pid"] == os.getpid()
        assert PROCESS_FIELDS <= row["trainer"].keys()
        assert row["trainer"]["rss_mb_max"] > 10
        # Other children may exist (an env workers' forkserver started by an earlier test).
        (worker,) = [w for w in row["workers"] if w["pid"] == child.pid]
        assert PROCESS_FIELDS <= worker.keys()
        others = sum(w["rss_mb_max"] for w in row["workers"] if w["pid"] != child.pid)
        assert worker["rss_mb_max"] <= row["workers_total"]["rss_mb_max"]
        assert row["workers_total"]["rss_mb_max"] <= worker["rss_mb_max"] + others + 1e-6
        assert {"cpu_pct_mean", "cpu_pct_max", "mem_used_pct_mean"} <= row["machine"].keys()
        # No GPU: no GPU fields, and the note says why.
        assert "gpus" not in row
        assert row["note"].startswith("no GPU telemetry: NVML is not available here")
        assert "NVML Shared Library Not Found" in row["note"]
        # Said once in the rows; no sample since the last row: no block.
        assert telemetry.row_fields() == {}
        telemetry.sample()
        assert "note" not in telemetry.row_fields()["telemetry"]
    finally:
        telemetry.stop()
    summary = telemetry.summary_fields()["telemetry"]
    assert summary["samples"] == 3  # three here; none at stop, right after the last
    assert summary["note"] == row["note"] and summary["sample_cpu_ms_mean"] > 0


def test_without_nvidia_ml_py_the_note_says_how_to_install_it(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    with Telemetry(NEVER_S) as telemetry:
        telemetry.sample()
        row = telemetry.row_fields()["telemetry"]
    assert "gpus" not in row
    assert "nvidia-ml-py is not installed" in row["note"] and "rlperf[gpu]" in row["note"]


def test_a_missing_nvml_is_looked_for_once_not_at_every_start(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    telemetry = Telemetry(NEVER_S)
    telemetry.start()
    telemetry.stop()
    # Installed later: the sampler keeps what it found (a failed import costs ~0.3 ms a start).
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(devices=1))
    telemetry.start()
    telemetry.stop()
    block = telemetry.summary_fields()["telemetry"]
    assert "gpus" not in block and "nvidia-ml-py is not installed" in block["note"]


def _new(workers: list[dict], before: set[int]) -> list[dict]:
    """The workers that are not children found before the test (an env workers' forkserver
    started by an earlier test lives as long as the test process)."""
    return [w for w in workers if w["pid"] not in before]


@pytest.fixture
def children_before() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_a_new_worker_measures_cpu_from_its_second_read_and_an_exited_one_is_forgotten(
    no_nvml, children_before, child
) -> None:
    with Telemetry(NEVER_S, scan_s=0.0) as telemetry:
        # start() read the child once (its clock); this first sample already has its CPU.
        telemetry.sample()
        (worker,) = _new(telemetry.row_fields()["telemetry"]["workers"], children_before)
        assert "cpu_pct_mean" in worker
        child.kill()
        child.wait()
        telemetry.sample()
        row = telemetry.row_fields()["telemetry"]
        assert _new(row["workers"], children_before) == []
        assert ("workers_total" in row) == bool(row["workers"])
    # The whole run still lists the worker that lived through part of it.
    workers = telemetry.summary_fields()["telemetry"]["workers"]
    assert [w["pid"] for w in _new(workers, children_before)] == [child.pid]


def test_explicit_worker_pids_are_sampled_besides_children(no_nvml, child) -> None:
    # Sample the child as "the trainer" and this process (not its child) as a named worker.
    with Telemetry(NEVER_S, worker_pids=[os.getpid()], pid=child.pid, scan_s=0.0) as telemetry:
        telemetry.sample()
        row = telemetry.row_fields()["telemetry"]
    assert row["trainer"]["pid"] == child.pid
    assert [w["pid"] for w in row["workers"]] == [os.getpid()]


def test_children_are_looked_for_every_scan_s_only(no_nvml, children_before) -> None:
    with Telemetry(NEVER_S, scan_s=NEVER_S) as telemetry:
        late = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            telemetry.sample()
            assert _new(telemetry.row_fields()["telemetry"]["workers"], children_before) == []
            telemetry.scan_s = 0.0
            telemetry.sample()
            workers = _new(telemetry.row_fields()["telemetry"]["workers"], children_before)
            assert [w["pid"] for w in workers] == [late.pid]
        finally:
            late.kill()
            late.wait()


def test_gpu_fields_from_nvml(monkeypatch) -> None:
    nvml = fake_nvml(devices=2)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    telemetry = Telemetry(NEVER_S).start()
    assert nvml.state["initialised"]
    telemetry.sample()
    telemetry.sample()
    row = telemetry.row_fields()["telemetry"]
    gpu0, gpu1 = row["gpus"]
    assert "note" not in row
    assert gpu0["index"] == 0 and gpu0["name"] == "Fake GPU" and gpu1["name"] == "Fake GPU"
    assert gpu0["mem_total_mb"] == 80_000
    # Utilisation reads 10 then 20 (device 1: 15, 25); memory in use 200 then 300 MB (the
    # first memory read of each device, at start, was for its total).
    assert (gpu0["util_pct_mean"], gpu0["util_pct_max"]) == (15.0, 20.0)
    assert (gpu1["util_pct_mean"], gpu1["util_pct_max"]) == (20.0, 25.0)
    assert (gpu0["mem_used_mb_mean"], gpu0["mem_used_mb_max"]) == (250.0, 300.0)
    telemetry.stop()
    assert not nvml.state["initialised"], "NVML shut down at stop"
    # No closing sample right after the last one (MIN_CLOSING_SAMPLE_S): still 20, not 30.
    assert telemetry.summary_fields()["telemetry"]["gpus"][0]["util_pct_max"] == 20.0


def test_nvml_failing_during_the_run_stops_gpu_reads_with_a_note(monkeypatch) -> None:
    nvml = fake_nvml(devices=1)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    with Telemetry(NEVER_S) as telemetry:
        telemetry.sample()
        assert "gpus" in telemetry.row_fields()["telemetry"]
        nvml.state["fail_reads"] = True
        telemetry.sample()
        row = telemetry.row_fields()["telemetry"]
        assert "gpus" not in row and "GPU is lost" in row["note"]
        assert not nvml.state["initialised"]
    summary = telemetry.summary_fields()["telemetry"]
    assert summary["gpus"][0]["util_pct_max"] == 10.0
    assert "GPU is lost" in summary["note"]


def test_the_thread_samples_every_interval(no_nvml) -> None:
    with Telemetry(0.01) as telemetry:
        deadline = time.monotonic() + 10.0
        while telemetry.summary_fields()["telemetry"]["samples"] < 3:
            assert time.monotonic() < deadline, "no samples from the thread"
            time.sleep(0.01)
        assert telemetry.latest()["trainer"]["pid"] == os.getpid()


def test_describe_names_every_part(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml(devices=1))
    with Telemetry(NEVER_S) as telemetry:
        telemetry.sample()
    line = describe(telemetry.summary_fields()["telemetry"])
    assert line.startswith("telemetry (1 sample every 3600s): trainer CPU ")
    assert "machine CPU" in line and "GPU 0 " in line and "memory" in line


def test_a_restarted_sampler_covers_only_its_new_run(monkeypatch) -> None:
    nvml = fake_nvml(devices=1)
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    telemetry = Telemetry(NEVER_S)
    for _ in range(2):  # one sampler across two train() calls
        with telemetry:
            telemetry.sample()
        block = telemetry.summary_fields()["telemetry"]
        assert block["samples"] == 1 and len(block["gpus"]) == 1
    with telemetry, pytest.raises(RuntimeError, match="already running"):
        telemetry.start()


def test_stop_samples_once_more_only_after_a_readable_interval(no_nvml, monkeypatch) -> None:
    """The closing sample: always when there was none; not right after a sample (its CPU
    shares would be read from a few 10 ms ticks); yes once MIN_CLOSING_SAMPLE_S has passed."""
    with Telemetry(NEVER_S) as telemetry:
        pass
    assert telemetry.summary_fields()["telemetry"]["samples"] == 1  # none before: one at stop
    with Telemetry(NEVER_S) as telemetry:
        telemetry.sample()
    assert telemetry.summary_fields()["telemetry"]["samples"] == 1  # right after: none more
    monkeypatch.setattr(telemetry_module, "MIN_CLOSING_SAMPLE_S", 0.0)
    with Telemetry(NEVER_S) as telemetry:
        telemetry.sample()
    assert telemetry.summary_fields()["telemetry"]["samples"] == 2  # long enough: one more


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Telemetry(0.0)


# -- in the run's files --------------------------------------------------------------------
def test_summary_json_and_report_json_carry_the_run_block(no_nvml, tmp_path: Path) -> None:
    run_dir, out = tmp_path / "run", tmp_path / "profile"
    argv = [*TINY, "--total-steps", str(3 * BATCH), "--run-dir", str(run_dir)]
    assert main(["profile", *argv, "--out", str(out)]) == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    block = summary["telemetry"]
    assert block["samples"] >= 1  # at least the one taken when the run stops
    assert PROCESS_FIELDS <= block["trainer"].keys() and "gpus" not in block
    assert block["note"].startswith("no GPU telemetry")
    report = json.loads((out / "report.json").read_text())
    assert report["telemetry"] == block


def test_no_telemetry_leaves_no_block_and_a_bad_interval_is_refused(
    tmp_path: Path, usage_error
) -> None:
    argv = [*TINY, "--total-steps", str(BATCH), "--run-dir", str(tmp_path / "run")]
    assert main(["profile", *argv, "--no-telemetry", "--out", str(tmp_path / "p")]) == 0
    assert "telemetry" not in json.loads((tmp_path / "run" / "summary.json").read_text())
    assert json.loads((tmp_path / "p" / "report.json").read_text())["telemetry"] is None
    line = usage_error(["train", *TINY, "--telemetry-interval-s", "0"])
    assert line == "rlperf: error: telemetry_interval_s must be positive, got 0.0"


def test_machine_cpu_is_the_busy_share_between_two_reads() -> None:
    """Against hand-computed shares: idle and iowait are not busy, guest time is inside user
    time, a field that went backwards counts 0, no time passed reads 0."""
    fields = ("user", "nice", "system", "idle", "iowait", "guest")
    times = collections.namedtuple("scputimes", fields)
    before = times(10.0, 0.0, 5.0, 100.0, 1.0, 2.0)
    after = times(13.0, 0.0, 6.0, 103.0, 2.0, 3.0)  # busy 3 + 1 of 3 + 1 + 3 + 1 (guest out)
    assert machine_cpu_pct(before, after) == 50.0
    assert machine_cpu_pct(before, before) == 0.0
    backwards = times(13.0, 0.0, 6.0, 99.0, 2.0, 3.0)  # idle went back: counted 0
    assert machine_cpu_pct(before, backwards) == 80.0  # busy 4 (iowait 1 out) of 5


def test_the_threads_first_sample_reads_a_busy_machine_as_busy(no_nvml, child) -> None:
    """The sampling thread's first reading covers the time since start (a busy child keeps at
    least one core busy), not 0.0 from a clock primed on another thread."""
    with Telemetry(0.2) as telemetry:
        deadline = time.monotonic() + 10.0
        while telemetry.summary_fields()["telemetry"]["samples"] < 1:
            assert time.monotonic() < deadline, "no sample from the thread"
            time.sleep(0.02)
        first = telemetry.latest()["machine"]["cpu_pct_max"]
    assert first >= 100.0 / psutil.cpu_count() * 0.5


def test_contention_line_names_the_cores_other_processes_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rlperf.run import telemetry

    monkeypatch.setattr(telemetry.psutil, "cpu_count", lambda: 2)
    busy = {"machine": {"cpu_pct_mean": 100.0}, "trainer": {"cpu_pct_mean": 40.0}}
    line = telemetry.contention_line(busy, 2)
    assert line is not None and "other processes kept 1.6 of 2 cores busy" in line
    assert "rlperf compare" in line
    # Its own workers are not other processes; an idle machine says nothing.
    with_workers = {**busy, "workers_total": {"cpu_pct_mean": 150.0}}
    assert telemetry.contention_line(with_workers, 2) is None
    idle = {"machine": {"cpu_pct_mean": 52.0}, "trainer": {"cpu_pct_mean": 99.0}}
    assert telemetry.contention_line(idle, 2) is None
    assert telemetry.contention_line({"machine": {}, "trainer": {}}, 2) is None


def test_two_env_workers_read_as_two_not_as_their_forkserver_and_resource_tracker(
    no_nvml, no_orphans, children_before
) -> None:
    from rlperf.envs.workers.pool import MultiprocessVecEnv

    env = MultiprocessVecEnv("cartpole", num_envs=4, num_workers=2, seed=0)
    try:
        servers = telemetry_module.multiprocessing_service_pids()
        children = {p.pid for p in psutil.Process().children(recursive=True)}
        assert len(servers) == 2 and servers <= children, "both servers run, as children"
        with Telemetry(NEVER_S, scan_s=0.0) as telemetry:
            telemetry.sample()
            block = telemetry.row_fields()["telemetry"]
        pids = [w["pid"] for w in block["workers"]]
        assert servers.isdisjoint(pids)
        # Children of earlier tests in this process may still be counted: they are not new.
        assert sorted(pid for pid in pids if pid not in children_before) == sorted(env.pids)
    finally:
        env.close()
