"""Fixtures shared by the core tests."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator

import numpy as np
import psutil
import pytest

from rlperf import native
from rlperf.envs import CartPoleVec


def pytest_configure(config: pytest.Config) -> None:
    """A suite started in the background by a non-interactive shell (``pytest &`` in a CI script)
    inherits SIGINT ignored, and so would every process it starts: the Ctrl-C tests (in-process,
    and in the trainers and env workers they start) need it delivered, as from a terminal."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_report_header() -> str:
    built = ", ".join(f"{k} {'in use' if v else 'absent'}" for k, v in native.status().items())
    return f"rlperf kernels: {built}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``@pytest.mark.kernel("lstm")`` / ``("loss")``: the test needs that compiled kernel; where
    it is not built (an install without a C compiler, or ``RLPERF_NO_KERNELS=1``) it is skipped
    with the reason, and the torch fallback's own tests still run."""
    status = native.status()
    for item in items:
        for mark in item.iter_markers("kernel"):
            name = mark.args[0]
            if not status[name]:
                why = (
                    "switched off by RLPERF_NO_KERNELS"
                    if native.kernels_disabled()
                    else ("not built (no C compiler at install?)")
                )
                item.add_marker(pytest.mark.skip(reason=f"the compiled {name} kernel is {why}"))


@pytest.fixture
def nan_rewards_from(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """``nan_rewards_from(k)``: CartPole returns NaN rewards from its k-th step (1-based) on,
    so the loss turns non-finite in the iteration that contains that step."""

    def install(first_bad_call: int) -> None:
        original = CartPoleVec.step
        calls = {"n": 0}

        def step(self, actions):
            obs, rewards, terms, truncs, infos = original(self, actions)
            calls["n"] += 1
            if calls["n"] >= first_bad_call:
                rewards = np.full_like(rewards, np.nan)
            return obs, rewards, terms, truncs, infos

        monkeypatch.setattr(CartPoleVec, "step", step)

    return install


@pytest.fixture
def isolated_env_registry() -> Iterator[None]:
    """Environments a test registers disappear after it (other tests iterate ``registered()``)."""
    from rlperf.envs import registered, unregister

    before = set(registered())
    yield
    for name in set(registered()) - before:
        unregister(name)


@pytest.fixture
def usage_error(capsys: pytest.CaptureFixture) -> Callable[[list[str]], str]:
    """``usage_error(argv)``: run the CLI, expect exit 2 with one ``rlperf: error:`` line on
    stderr, and return that line."""
    from rlperf.cli import main
    from rlperf.commandline import EXIT_USAGE

    def check(argv: list[str]) -> str:
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == EXIT_USAGE
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("rlperf: error: "), lines
        return lines[0]

    return check


@pytest.fixture
def no_orphans() -> Iterator[None]:
    """The test leaves exactly the child processes it found (env workers' forkserver, which
    is shared and lives as long as the test process, is started first so it counts as found)."""
    from rlperf.envs.workers.pool import _context

    _context()
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    yield
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        left = {p.pid for p in me.children(recursive=True) if p.status() != "zombie"} - before
        if not left:
            break
        time.sleep(0.05)
    assert not left, f"processes left behind: {left}"
