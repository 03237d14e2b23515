"""Whether this CPU computes bfloat16 natively, for ``--precision bf16`` on the CPU.

bf16 autocast pays off on a CPU whose vector units take bf16 operands: AVX512-BF16 (``vdpbf16ps``)
or AMX-BF16 on x86, the BF16 extension on Arm. Elsewhere oneDNN converts every bf16 operand to
float32 and back, so bf16 is slower than float32: an Atari run on an AMD EPYC without AVX-512 ran
at 18-19 SPS in bf16 against ~130 in float32. The run says so in one line at its start
(``ppo/checks.py``'s ``precision_note``) and ``rlperf analyze`` does not advise bf16 there.

Read from torch's own CPU probe (cpuinfo, ``torch._C._cpu._get_cpu_capability()`` in torch
2.13) where it has the flags, else from ``/proc/cpuinfo`` (Linux); an unknown answer is None.
"""

from __future__ import annotations

import functools
from pathlib import Path

# Feature names that mean native bf16 arithmetic: torch's probe's keys and /proc/cpuinfo's
# flags (x86: "avx512_bf16", "amx_bf16"; Arm's Features line: "bf16").
BF16_FEATURES = ("avx512_bf16", "amx_bf16", "bf16")


def torch_cpu_features() -> dict[str, object] | None:
    """torch's CPU probe (feature name -> bool, plus sizes), or None where this torch has none
    (a private call: older and newer torch may lack it)."""
    try:
        import torch

        features = torch._C._cpu._get_cpu_capability()
    except (AttributeError, RuntimeError, ImportError):
        return None
    return dict(features) if isinstance(features, dict) else None


def proc_cpuinfo_flags(text: str) -> set[str]:
    """The feature flags of ``/proc/cpuinfo``'s text: x86's ``flags`` lines, Arm's
    ``Features`` lines."""
    flags: set[str] = set()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() in ("flags", "features"):
            flags.update(value.split())
    return flags


def computes_bf16(
    features: dict[str, object] | None, cpuinfo_flags: set[str] | None
) -> bool | None:
    """Whether a CPU with torch's probe ``features`` and ``/proc/cpuinfo``'s ``cpuinfo_flags``
    computes bf16 natively: True where either names a bf16 feature, False where one of them
    was read and names none, None where neither was (no probe, no flags)."""
    probe = features or {}
    probed = any(name in probe for name in BF16_FEATURES)
    if any(bool(probe.get(name)) for name in BF16_FEATURES):
        return True
    if cpuinfo_flags and any(name in cpuinfo_flags for name in BF16_FEATURES):
        return True
    return False if probed or cpuinfo_flags else None


@functools.cache
def cpu_computes_bf16() -> bool | None:
    """Whether this machine's CPU computes bf16 natively (module docstring); None: unknown."""
    try:
        flags: set[str] | None = proc_cpuinfo_flags(Path("/proc/cpuinfo").read_text())
    except OSError:
        flags = None
    return computes_bf16(torch_cpu_features(), flags)
