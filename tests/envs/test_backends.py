"""``envs/backends.py``: the automatic ``--worker-spin-us`` spins only where every process the
workers and the trainer need has a core of its own."""

from __future__ import annotations

import os

import pytest

from rlperf.config import EnvConfig
from rlperf.envs.backends import AUTO_SPIN_US, worker_spin_us


@pytest.fixture
def two_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)


def config(**kw) -> EnvConfig:
    return EnvConfig(backend="multiprocess", **kw)


@pytest.mark.usefixtures("two_cores")
@pytest.mark.parametrize(
    ("workers", "inline", "threads", "spins"),
    [
        (2, True, 1, True),  # the trainer's thread and worker 1: one core each
        (2, False, 1, False),  # three processes on two cores: a spinner starves the busy one
        (2, True, 2, False),  # the trainer's second thread takes the spare core
        (1, False, 1, True),
        (1, True, 1, True),  # no process at all beside the trainer
    ],
)
def test_automatic_spin_where_every_process_has_a_core(workers, inline, threads, spins):
    cfg = config(num_workers=workers, inline_worker=inline)
    assert worker_spin_us(cfg, threads) == (AUTO_SPIN_US if spins else 0.0)


@pytest.mark.usefixtures("two_cores")
def test_ranks_on_this_machine_count(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = config(num_workers=2, inline_worker=True)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert worker_spin_us(cfg, 1) == 0.0


@pytest.mark.usefixtures("two_cores")
def test_an_explicit_spin_is_kept() -> None:
    assert worker_spin_us(config(worker_spin_us=0.0, inline_worker=True), 1) == 0.0
    assert worker_spin_us(config(worker_spin_us=50.0), 2) == 50.0
