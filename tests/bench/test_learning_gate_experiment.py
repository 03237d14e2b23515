"""benchmarks/learning_gate_experiment.py: its planted bugs apply to today's tree, and its
summary of made-up gate runs (nothing is trained)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from benchmark_scripts import load_script

import rlperf


def test_every_planted_bug_applies_and_wraps_what_it_names(tmp_path: Path) -> None:
    """Each bug's lines appended to a copy of rlperf: the modules import, and each wrapper
    replaced what it names (a rename in the tree would leave a bug planting nothing)."""
    script = load_script("learning_gate_experiment.py")
    package = Path(rlperf.__file__).parent
    shutil.copytree(package, tmp_path / "src" / "rlperf",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    for name, (module, what, code) in script.BUGS.items():
        path = tmp_path / module
        path.write_text(f"{path.read_text()}\n\n# planted {name}: {what}{code}")
    check = (
        "import rlperf.ppo.trainer as t, rlperf.ppo.update as u\n"
        "assert t.Trainer.__init__.__name__ == '_planted_trainer_init'\n"
        "assert t.gae.__module__ == 'rlperf.ppo.trainer'\n"
        "assert u.loss_coefs.__code__.co_filename == u.__file__\n"
        "import rlperf.ppo.gae\n"
        "assert t.gae is not rlperf.ppo.gae.gae\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "src")}
    done = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert set(script.DEFAULT_BUGS) <= set(script.BUGS)


def row(kind: str, index: int, code: int, wall_s: float, ratio: float) -> dict:
    entry = {"decision": {0: "ok", 1: "regression", 2: "undecided"}[code], "rounds": 6,
             "ratio": ratio, "reason": "", "base_steps": 100.0, "head_steps": 100.0 * ratio,
             "sps_ratio": 1.0, "censored": {"base": 0, "head": 0}}  # fmt: skip
    return {"kind": kind, "index": index, "exit": code, "wall_s": wall_s, "stdout": "",
            "workloads": {"cartpole_mlp": entry}}  # fmt: skip


def test_summary_has_rates_durations_and_ratios() -> None:
    script = load_script("learning_gate_experiment.py")
    rows = [row("A/A", 0, 0, 100.0, 1.0), row("lr_x0.4", 0, 1, 80.0, 1.9),
            row("A/A", 1, 2, 400.0, 1.0), row("lr_x0.4", 1, 1, 90.0, 2.1)]  # fmt: skip
    text = script.summarise(rows)
    assert "| A/A | 2 | 1 | 0 | 1 | 250 [100-400] |" in text
    assert "| lr_x0.4 | 2 | 0 | 2 | 0 | 85 [80-90] |" in text
    assert "runs over 5 minutes: 1/4" in text
    assert "target A/A (at most 1 false alarm in 20): exit 0 in 1/2" in text
    assert "target lr_x0.4 (caught in 19 of 20): caught in 2/2" in text
    assert (
        "| lr_x0.4 | cartpole_mlp | 2 regression | 2.000 [1.900-2.100] | 1.000 [1.000-1.000] |"
        in text
    )


def test_seed_table_trains_the_clean_code_and_each_bug_in_its_own_process() -> None:
    """``--seeds``: the clean code in this process, the bug in a child (its patch stays there);
    0.4x the learning rate needs more steps on the same seed, and this process's
    modules are left unpatched."""
    script = load_script("learning_gate_experiment.py")
    rows, table = script.seed_table("catch_cnn", [1], ["lr_x0.4"])
    clean, slow = rows
    assert (clean["code"], slow["code"]) == ("clean", "lr_x0.4")
    assert clean["reached"] and slow["steps"] > clean["steps"]
    assert table.splitlines()[2].startswith("| clean | 1 | 1 |")
    assert table.splitlines()[3].startswith("| lr_x0.4 | 1 |")
    import rlperf.ppo.trainer as trainer

    assert trainer.Trainer.__init__.__name__ == "__init__"
    assert script.parse_seeds("1-3") == [1, 2, 3] and script.parse_seeds("4,6") == [4, 6]
