"""--device auto and the explicit devices (ppo/device_choice.py), on the CPU: the probe runs real
iterations on CPU trainers standing in for both devices, with a fake clock deciding which wins."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from rlperf.config import Config, ConfigError
from rlperf.ppo.device_choice import (
    PROBE_ITERATIONS,
    SMALL_WORKLOAD_ENVS,
    choose_device,
    probe_sps,
    small_workload_note,
)
from rlperf.ppo.trainer import Trainer
from rlperf.timing.sections import Profiler


def _cfg(device: str = "auto") -> Config:
    cfg = Config()
    cfg.env.num_envs, cfg.ppo.num_steps, cfg.run.total_steps = 4, 16, 64
    cfg.run.device = device
    cfg.run.telemetry = cfg.run.progress = False
    return cfg


class CpuTrainers:
    """Builds a real CPU trainer for whichever device a probe asks for, and notes the asks."""

    def __init__(self) -> None:
        self.devices: list[str] = []

    def __call__(self, cfg: Config, profiler: Profiler) -> Trainer:
        self.devices.append(cfg.run.device)
        cfg.run.device = "cpu"
        return Trainer(cfg, profiler)


def fake_clock(*seconds_per_probe: float) -> Iterator[float]:
    """Two readings per probe (start, end), the probes taking these many seconds."""
    for elapsed in seconds_per_probe:
        yield from (100.0, 100.0 + elapsed)


def test_no_cuda_means_cpu_without_probing() -> None:
    def no_trainer(cfg: Config, profiler: Profiler) -> Trainer:
        raise AssertionError("nothing to probe with one device")

    device, note = choose_device(_cfg(), 1, no_trainer, devices=("cpu",))
    assert device == torch.device("cpu")
    assert note == "--device auto: cpu (no CUDA device here)"


@pytest.mark.parametrize(("cpu_s", "cuda_s", "chosen"), [(1.0, 4.0, "cpu"), (3.0, 0.5, "cuda")])
def test_auto_takes_the_device_the_probe_times_faster(cpu_s: float, cuda_s: float,
                                                       chosen: str) -> None:  # fmt: skip
    trainers, clock = CpuTrainers(), fake_clock(cpu_s, cuda_s)
    cfg = _cfg()
    device, note = choose_device(cfg, 1, trainers, ("cpu", "cuda"), timer=lambda: next(clock))
    assert device == torch.device(chosen)
    assert trainers.devices == ["cpu", "cuda"], "one trainer per device, each asked as itself"
    steps = PROBE_ITERATIONS * 4 * 16
    assert note == (
        f"--device auto: {chosen} (SPS over {PROBE_ITERATIONS} probe iterations: "
        f"cpu {steps / cpu_s:,.0f}, cuda {steps / cuda_s:,.0f})"
    )
    assert cfg.run.device == "auto", "the run's config is left as the user wrote it"


def test_probe_runs_the_workload_and_counts_its_steps() -> None:
    """A warm-up iteration, then the timed ones: each a rollout, GAE and an update."""
    trainers, clock = CpuTrainers(), fake_clock(2.0)
    built: list[Trainer] = []

    def keep(cfg: Config, profiler: Profiler) -> Trainer:
        built.append(trainers(cfg, profiler))
        return built[-1]

    sps = probe_sps(_cfg(), "cpu", keep, iterations=2, timer=lambda: next(clock))
    assert sps == 2 * 64 / 2.0
    assert built[0].iteration == 3 and built[0].global_step == 3 * 64
    assert built[0].cfg.ppo.anneal_lr is False


def test_auto_needs_one_process() -> None:
    with pytest.raises(ConfigError, match="--nproc"):
        choose_device(_cfg(), 2, CpuTrainers(), ("cpu", "cuda"))


def test_explicit_devices_are_kept() -> None:
    device, note = choose_device(_cfg("cpu"), 1, CpuTrainers())
    assert device == torch.device("cpu") and note is None
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="CUDA is not available"):
            choose_device(_cfg("cuda"), 1, CpuTrainers())


def test_small_workload_note_for_explicit_cuda() -> None:
    cfg = _cfg("cuda")
    assert "--device auto" in (small_workload_note(cfg) or "")
    cfg.env.num_envs = SMALL_WORKLOAD_ENVS + 1
    assert small_workload_note(cfg) is None
    cfg.env.num_envs, cfg.policy.kind = 4, "cnn"
    assert small_workload_note(cfg) is None


def test_trainer_records_the_device_auto_chose() -> None:
    trainer = Trainer(_cfg(), Profiler())
    if not torch.cuda.is_available():
        assert trainer.device == torch.device("cpu")
        assert trainer.notes == ["--device auto: cpu (no CUDA device here)"]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (the GPU check)")
def test_auto_probes_both_devices_on_a_cuda_machine() -> None:
    device, note = choose_device(_cfg(), 1, Trainer)
    assert device.type in ("cpu", "cuda")
    assert note is not None and ": cpu " in note and ", cuda " in note
    trainer = Trainer(_cfg(), Profiler())
    assert trainer.device.type in ("cpu", "cuda") and trainer.notes[0].startswith("--device auto")


def test_train_prints_the_device_auto_chose(capsys: pytest.CaptureFixture[str]) -> None:
    from rlperf.cli import main

    argv = ["train", "--device", "auto", "--num-envs", "4", "--num-steps", "16",
            "--total-steps", "64", "--no-progress", "--no-telemetry"]  # fmt: skip
    assert main(argv) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "--device auto" in line]
    if not torch.cuda.is_available():
        assert lines == ["rlperf: --device auto: cpu (no CUDA device here)"]
    else:
        assert len(lines) == 1 and lines[0].startswith("rlperf: --device auto: ")
