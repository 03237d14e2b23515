"""benchmarks/mujoco_sps.py and atari_sps.py adapt CleanRL's own scripts to gymnasium 1.x (and
EnvPool 1.x) with the fewest edits, and refuse a version of a script those edits were not
written for; where the CleanRL mirror is here, the edits apply to the published Atari scripts."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmark_scripts import load_script

# (benchmark, its edits, the function applying them)
ADAPTATIONS = [
    ("mujoco_sps.py", "CLEANRL_EDITS", "adapted_cleanrl"),
    ("atari_sps.py", "CLEANRL_EDITS", "adapted_cleanrl"),
    ("atari_sps.py", "CLEANRL_ENVPOOL_EDITS", "adapted_cleanrl_envpool"),
]


@pytest.mark.parametrize(("name", "edits", "adapt"), ADAPTATIONS)
def test_every_edit_is_applied_and_nothing_else_changes(name: str, edits: str, adapt: str) -> None:
    bench = load_script(name)
    original = "\n".join(f"line {i}\n{old}" for i, (old, _) in enumerate(getattr(bench, edits)))
    adapted = getattr(bench, adapt)(original)
    for i, (old, new) in enumerate(getattr(bench, edits)):
        assert new in adapted and f"line {i}" in adapted
        assert old not in adapted or old in new


@pytest.mark.parametrize(("name", "edits", "adapt"), ADAPTATIONS)
def test_another_version_of_the_script_is_refused_in_one_line(
    name: str, edits: str, adapt: str
) -> None:
    bench = load_script(name)
    with pytest.raises(bench.ScriptError, match="the CleanRL script lacks") as e:
        getattr(bench, adapt)("import numpy as np\n")
    assert "\n" not in str(e.value)


# The bare git directory the search tool's fetch of github:vwxyzjn/cleanrl writes (not in CI).
CLEANRL_GIT = Path("/work/.mirror/vwxyzjn+cleanrl/repo")


def published(path: str) -> str:
    """CleanRL's file at the mirror's HEAD, or a skip naming what is missing."""
    import subprocess

    if not CLEANRL_GIT.is_dir():
        pytest.skip(f"no CleanRL mirror at {CLEANRL_GIT} (fetch github:vwxyzjn/cleanrl)")
    out = subprocess.run(["git", f"--git-dir={CLEANRL_GIT}", "show", f"HEAD:{path}"],
                         capture_output=True, text=True)  # fmt: skip
    if out.returncode != 0:
        pytest.skip(f"the CleanRL mirror has no {path}")
    return out.stdout


@pytest.mark.parametrize(
    ("path", "adapt"),
    [("cleanrl/ppo_atari.py", "adapted_cleanrl"),
     ("cleanrl/ppo_atari_envpool.py", "adapted_cleanrl_envpool")],
)  # fmt: skip
def test_atari_edits_apply_to_the_published_scripts(path: str, adapt: str) -> None:
    bench = load_script("atari_sps.py")
    adapted = getattr(bench, adapt)(published(path))
    compile(adapted, path, "exec")
    if adapt == "adapted_cleanrl_envpool":
        assert "import gym\n" not in adapted and 'env_type="gymnasium"' in adapted
        assert adapted.index("= RecordEpisodeStatistics(envs)") < adapted.index("envs.num_envs =")
