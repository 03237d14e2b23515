"""Native bf16 is detected from torch's CPU probe or /proc/cpuinfo; where the CPU lacks it,
``--precision bf16`` on the CPU gets a start line (``rlperf analyze``'s side:
tests/profiling/test_analyze_bf16.py). The detection is injected: the answers must not depend
on the machine running the tests."""

from __future__ import annotations

import pytest
import torch

from rlperf import cpu_features
from rlperf.config import Config
from rlperf.cpu_features import computes_bf16, proc_cpuinfo_flags
from rlperf.ppo.checks import precision_note

# Abridged /proc/cpuinfo of two x86 machines and one Arm (Neoverse V1 has BF16).
EPYC_AVX2 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\nprocessor\t: 1\nflags\t\t: avx2\n"
SAPPHIRE_RAPIDS = "flags\t\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
NEOVERSE_V1 = "Features\t: fp asimd sve bf16 i8mm\nCPU implementer\t: 0x41\n"


@pytest.mark.parametrize(
    ("text", "native"), [(EPYC_AVX2, False), (SAPPHIRE_RAPIDS, True), (NEOVERSE_V1, True)],
    ids=["epyc-avx2", "avx512-bf16", "arm-bf16"],
)  # fmt: skip
def test_cpuinfo_flags_say_whether_bf16_is_native(text: str, native: bool) -> None:
    assert computes_bf16(None, proc_cpuinfo_flags(text)) is native


def test_torchs_probe_is_read_first_and_unknown_is_none() -> None:
    probe = {"avx2": True, "avx512_bf16": False, "amx_bf16": False}
    assert computes_bf16(probe, None) is False
    assert computes_bf16({**probe, "amx_bf16": True}, None) is True
    assert computes_bf16(probe, proc_cpuinfo_flags(NEOVERSE_V1)) is True  # either says yes
    assert computes_bf16(None, None) is None and computes_bf16({}, set()) is None


def test_this_machines_answer_is_a_bool_or_none() -> None:
    assert cpu_features.cpu_computes_bf16() in (True, False, None)


def bf16_config() -> Config:
    cfg = Config()
    cfg.ppo.precision = "bf16"
    return cfg


def test_bf16_on_a_cpu_without_it_is_one_start_line(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    monkeypatch.setattr(cpu_features, "cpu_computes_bf16", lambda: False)
    note = precision_note(bf16_config(), cpu)
    assert note is not None and "without native bf16" in note and "\n" not in note
    assert precision_note(Config(), cpu) is None  # fp32: nothing to say
    assert precision_note(bf16_config(), cuda) is None  # CUDA's bf16 is native
    for answer in (True, None):  # native, or unknown: no claim
        monkeypatch.setattr(cpu_features, "cpu_computes_bf16", lambda answer=answer: answer)
        assert precision_note(bf16_config(), cpu) is None


def test_the_trainer_starts_with_the_note(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlperf.ppo.trainer import Trainer

    monkeypatch.setattr(cpu_features, "cpu_computes_bf16", lambda: False)
    cfg = bf16_config()
    cfg.env.num_envs, cfg.ppo.num_steps, cfg.run.threads = 4, 8, 1
    trainer = Trainer(cfg)
    try:
        assert trainer.notes == [precision_note(cfg, torch.device("cpu"))]
    finally:
        trainer.env.close()
