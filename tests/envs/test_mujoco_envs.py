"""gymnasium's MuJoCo envs through rlperf (the `mujoco` extra): MuJoCo's warnings become Python
warnings instead of lines printed per env and a MUJOCO_LOG.TXT left in the user's directory."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

pytest.importorskip("gymnasium.envs.mujoco", reason="gymnasium's MuJoCo envs are not installed")

from rlperf.envs import make_vec  # noqa: E402


def test_no_log_file_is_left_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        env = make_vec("gym:HalfCheetah-v5", 2, seed=0)
        env.close()
    assert not (tmp_path / "MUJOCO_LOG.TXT").exists()


def test_a_mujoco_warning_is_a_python_warning() -> None:
    import mujoco

    make_vec("gym:HalfCheetah-v5", 1, seed=0).close()
    with pytest.warns(RuntimeWarning, match="MuJoCo: planted"):
        mujoco.get_mju_user_warning()("planted")  # the handler MuJoCo now calls
