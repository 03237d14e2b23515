"""--dashboard: a frame's content, the view as a trainer callback, refused without a terminal, and
the real thing in tmux: drawn in place, Ctrl-C leaves a clean exit, a summary and no process."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
from rich.console import Console
from tmux_terminal import needs_tmux, tmux, wait_for

import rlperf
from rlperf.config import Config
from rlperf.ppo.trainer import Trainer
from rlperf.run.dashboard import Dashboard, DashboardView, abbreviate, duration, render
from rlperf.timing.sections import Profiler

TINY = ["--num-envs", "8", "--num-steps", "16", "--num-minibatches", "4", "--update-epochs",
        "1", "--threads", "1", "--seed", "4"]  # fmt: skip
ROW = {
    "iteration": 12, "global_step": 250_000, "sps": 50_000.0, "mean_return": 45.25,
    "episodes": 1200, "loss": 1.5, "pg_loss": -0.0125, "v_loss": 2.5, "entropy": 0.6875,
    "approx_kl": 0.004, "clipfrac": 0.0625, "learning_rate": 0.0024,
    "sections_s": {"rollout": 3.0, "rollout/env_step": 1.5, "rollout/env_step/reset": 0.5,
                   "update": 1.0, "update/backward": 0.5},
}  # fmt: skip
TELEMETRY = {
    "samples": 1, "interval_s": 1.0,
    "trainer": {"pid": 7, "cpu_pct_mean": 187.0, "cpu_pct_max": 187.0, "rss_mb_mean": 402.0,
                "rss_mb_max": 402.0},
    "workers": [{"pid": 8}, {"pid": 9}],
    "workers_total": {"cpu_pct_max": 150.0, "rss_mb_max": 2048.0},
    "machine": {"cpu_pct_max": 98.0, "mem_used_pct_max": 41.0},
    "note": "no GPU telemetry: NVML is not available here",
}  # fmt: skip


def frame_text(view: DashboardView, width: int = 120) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(render(view))
    return console.export_text()


def row_of(text: str, first: str) -> list[str]:
    """The words of the frame's line whose first word is ``first`` (box characters dropped)."""
    for line in text.splitlines():
        words = [w for w in line.split() if w not in ("│", "╭", "╰")]
        if words and words[0] == first:
            return words
    raise AssertionError(f"no line starting with {first!r} in:\n{text}")


def test_a_frame_shows_progress_phases_learning_and_utilisation() -> None:
    view = DashboardView("cartpole | mlp | cpu | 2 threads", 500_000, elapsed_s=3725.0)
    view.add_row(ROW)
    view.add_row({**ROW, "sections_s": {"rollout": 1.0, "update": 1.0}})  # sums over rows
    view.telemetry = TELEMETRY
    text = frame_text(view)
    assert "rlperf cartpole | mlp | cpu | 2 threads" in text
    assert "Steps 250.0k / 500.0k" in text and "SPS 50.0k" in text
    # 250k steps left at 50k SPS: 5 s.
    assert "Elapsed 1:02:05" in text and "Left 0:00:05" in text and "Iteration 12" in text
    # Seconds summed over the two rows and shares of the timed 6 s; grandchildren left out.
    assert "rollout" in text and "  env_step" in text and "reset" not in text
    assert row_of(text, "rollout")[:3] == ["rollout", "4.00", "66.7"]
    assert row_of(text, "backward")[:3] == ["backward", "0.50", "8.3"]
    assert "mean return" in text and "45.25" in text and "pg_loss" in text and "-0.0125" in text
    assert row_of(text, "trainer") == ["trainer", "187", "402", "MB"]
    assert "workers (2)" in text and "2.0 GB" in text and "41% used" in text
    assert TELEMETRY["note"] in text


def test_a_frame_before_any_row_or_sample() -> None:
    text = frame_text(DashboardView("x", 1000))
    assert "Steps 0 / 1.0k" in text and "Left n/a" in text and "mean return" in text
    assert "Utilisation: no telemetry sample yet" in text


def test_number_formats() -> None:
    assert [abbreviate(v) for v in (999, 1_500, 2_500_000, 3e9)] == ["999", "1.5k", "2.5M", "3.0G"]
    assert duration(59.9) == "0:00:59" and duration(3600 * 27 + 61) == "27:01:01"


def test_dashboard_as_a_trainer_callback_draws_and_times_itself() -> None:
    cfg = Config()
    cfg.env.num_envs, cfg.ppo.num_steps, cfg.ppo.update_epochs = 8, 16, 1
    cfg.run.total_steps, cfg.run.threads, cfg.run.progress = 4 * 8 * 16, 1, False
    prof = Profiler()
    trainer = Trainer(cfg, profiler=prof)
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, color_system=None, width=120)
    with Dashboard.for_trainer(trainer, refresh_s=0.0, console=console) as dashboard:
        trainer.callbacks.append(dashboard)
        trainer.train()
    assert dashboard.view.row["iteration"] == 4
    text = out.getvalue()
    assert "cartpole | mlp | cpu | 1 threads" in text and "Steps 512 / 512" in text
    assert "measurement/dashboard" in prof.snapshot_ns()


def test_dashboard_without_a_terminal_is_refused_before_any_work(tmp_path, usage_error) -> None:
    run_dir = tmp_path / "run"
    line = usage_error(["train", *TINY, "--dashboard", "--run-dir", str(run_dir)])
    assert "--dashboard needs a terminal" in line and "progress line" in line
    assert not run_dir.exists()


# -- in a real terminal ------------------------------------------------------------------
@needs_tmux
def test_dashboard_in_tmux_redraws_in_place_and_ctrl_c_exits_cleanly(tmp_path: Path) -> None:
    socket, session = f"rlperf-test-{os.getpid()}", "dash"
    run_dir, rc_file = tmp_path / "run", tmp_path / "rc"
    src = Path(rlperf.__file__).resolve().parents[1]
    train = [sys.executable, "-m", "rlperf.cli", "train", *TINY, "--total-steps", "1000000000",
             "--run-dir", str(run_dir), "--telemetry-interval-s", "0.2", "--dashboard"]  # fmt: skip
    # bash waits for the run in the foreground (Ctrl-C reaches it), then records its status.
    # COLUMNS/LINES inherited from the test's environment would override the pane's size.
    script = (
        f"unset COLUMNS LINES; PYTHONPATH={src} {' '.join(train)}; echo $? > {rc_file}; sleep 60"
    )
    tmux(socket, "new-session", "-d", "-s", session, "-x", "140", "-y", "50", "bash", "-c", script)
    try:

        def pane() -> str:
            return tmux(socket, "capture-pane", "-p", "-t", session)

        def frame_with_telemetry() -> str | None:
            screen = pane()
            return screen if "Iteration" in screen and "machine" in screen else None

        screen = wait_for(frame_with_telemetry, 120, "the dashboard with a telemetry reading")
        for text in ("rlperf cartpole | mlp | cpu | 1 threads", "Steps", "SPS", "Left",
                     "rollout", "env_step", "update", "backward", "mean return", "pg_loss",
                     "Utilisation", "trainer", "no GPU telemetry"):  # fmt: skip
            assert text in screen, f"{text!r} not on the screen:\n{screen}"
        # Redrawn in place: one frame on the screen, the progress line off.
        assert screen.count("Utilisation") == 1 and "return" in screen and "[#" not in screen
        first = int(screen.split("Iteration ")[1].split()[0])
        wait_for(
            lambda: int(pane().split("Iteration ")[1].split()[0]) > first,
            timeout_s=60,
            what="a redraw with a later iteration",
        )
        tmux(socket, "send-keys", "-t", session, "C-c")
        rc = wait_for(lambda: rc_file.exists() and rc_file.read_text().strip(), 60, "the exit")
        screen = pane()
        assert rc == "130", screen
        assert "rlperf: interrupted; summary written" in screen and "Traceback" not in screen
        assert screen.count("Utilisation") == 1, "the last frame stays, drawn once"
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["interrupted"] is True and summary["telemetry"]["samples"] >= 1
        # The pane's bash (sleeping) is the only process left that names the run.
        runs = [
            p.pid
            for p in psutil.process_iter(["cmdline"])
            if (p.info["cmdline"] or [""])[0] == sys.executable
            and str(run_dir) in p.info["cmdline"]
        ]
        assert runs == [], "no training process is left"
        assert not psutil.pid_exists(summary["telemetry"]["trainer"]["pid"])
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=10)
