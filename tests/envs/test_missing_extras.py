"""An env whose package is not installed is one line naming rlperf's extra, exit 2: gymnasium
registers its MuJoCo ids with or without ``mujoco``, and making one without it was a traceback
(``rlperf train --preset mujoco``, the README's own command)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlperf.envs import make_vec
from rlperf.envs.registry import UnknownEnvError

# Run first in a fresh interpreter: ``mujoco`` as a package that is not installed (None in
# sys.modules: its import raises ModuleNotFoundError, find_spec finds nothing).
WITHOUT_MUJOCO = "import sys; sys.modules['mujoco'] = None\n"
INSTALL = "pip install 'rlperf[mujoco]'"


def test_a_mujoco_id_without_mujoco_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mujoco", None)
    with pytest.raises(UnknownEnvError, match=r"needs the mujoco package.*rlperf\[mujoco\]"):
        make_vec("gym:HalfCheetah-v5", 1)


def test_train_preset_mujoco_without_mujoco_is_one_line_exit_2() -> None:
    code = (
        f"{WITHOUT_MUJOCO}from rlperf.cli import main\n"
        "sys.exit(main(['train', '--preset', 'mujoco', '--total-steps', '2048']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "rlperf: error: env 'gym:HalfCheetah-v5' needs the mujoco package, which is not "
        f"installed: {INSTALL}"
    ]
