"""``cores.py``: one count of usable cores, the affinity set's, for every core-based rule."""

from __future__ import annotations

import os

import pytest

from rlperf.config import ConfigError, EnvConfig
from rlperf.cores import pinnable_cores, usable_cores
from rlperf.distributed import launch


@pytest.fixture
def one_core(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that ``taskset`` left one core of a larger machine."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)


@pytest.mark.usefixtures("one_core")
def test_the_affinity_set_counts_not_the_machine() -> None:
    assert usable_cores() == 1
    assert launch.available_slots("cpu") == (1, "cores")


@pytest.mark.usefixtures("one_core")
def test_workers_beyond_the_affinity_set_need_oversubscribe() -> None:
    with pytest.raises(
        ConfigError, match="--num-workers 2 is more than the 1 cores this process may use"
    ):
        EnvConfig(backend="multiprocess", num_workers=2).validate_backend()
    EnvConfig(backend="multiprocess", num_workers=2, oversubscribe=True).validate_backend()


def test_without_an_affinity_call_the_machine_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert usable_cores() == 1
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert usable_cores() == 6


def test_the_pinnable_cores_are_the_affinity_set_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sorted, as the gate's pairs and --pin-workers take them in turn; none without the call."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {5, 1, 3}, raising=False)
    monkeypatch.setattr(os, "sched_setaffinity", lambda pid, cpus: None, raising=False)
    assert pinnable_cores() == [1, 3, 5]
    monkeypatch.delattr(os, "sched_setaffinity", raising=False)
    assert pinnable_cores() == []
