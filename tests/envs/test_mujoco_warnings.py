"""MuJoCo's deprecation warning about gymnasium's own models (``settotalmass``) is not shown:
the user cannot act on it, and every run printed it; MuJoCo's other warnings still are."""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("mujoco", reason="needs the mujoco extra: pip install 'rlperf[mujoco]'")

from rlperf.envs import make_vec  # noqa: E402


def test_gymnasiums_settotalmass_is_not_shown_and_other_warnings_are() -> None:
    import mujoco

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        make_vec("gym:HalfCheetah-v5", 2, seed=0).close()
        mujoco.get_mju_user_warning()("planted")  # the handler MuJoCo now calls
    messages = [str(w.message) for w in caught]
    assert not [m for m in messages if "settotalmass" in m]
    assert "MuJoCo: planted" in messages
