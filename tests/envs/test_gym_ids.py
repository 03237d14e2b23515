"""``gym:`` ids that a package registers when imported (issue 50, item 8): gymnasium's own
``gym:<module>:<id>`` form, the ``gymnasium.envs`` entry points of an unknown id's namespace,
and one-line errors that name the ``module:id`` form, serially and on env workers."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from plugin_envs import ENTRY_POINT_ID, MAX_STEPS, PLUGIN_ID  # tests/envs/, on sys.path

from rlperf.envs import UnknownEnvError, check_env_name, make_vec
from rlperf.envs import registry as registry_module
from rlperf.envs.workers import MultiprocessVecEnv

MODULE_NAME = f"gym:plugin_envs:{PLUGIN_ID}"
HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"


@pytest.fixture
def unregistered() -> Iterator[None]:
    """The plugin's ids are not registered and its module not imported, as in a process that
    never imported it; the test's own registrations are removed after it."""
    ids = (PLUGIN_ID, ENTRY_POINT_ID)
    saved = {i: gymnasium.registry.pop(i) for i in ids if i in gymnasium.registry}
    module = sys.modules.pop("plugin_envs", None)
    yield
    for i in ids:
        gymnasium.registry.pop(i, None)
    gymnasium.registry.update(saved)
    if module is not None:
        sys.modules["plugin_envs"] = module


@pytest.mark.usefixtures("unregistered")
def test_module_form_imports_the_module_then_builds_the_id() -> None:
    with pytest.raises(UnknownEnvError, match=r"gym:<module>:RlperfPlugin/CartPole-v0"):
        check_env_name(f"gym:{PLUGIN_ID}")
    env = make_vec(MODULE_NAME, 3, seed=1)
    want = gymnasium.make_vec(PLUGIN_ID, 3, vectorization_mode="sync")
    try:
        np.testing.assert_array_equal(env.reset(seed=1)[0], want.reset(seed=1)[0])
        ended = []
        for _ in range(MAX_STEPS):
            *_, truncations, infos = env.step(np.zeros(3, dtype=np.int64))
            ended.append(truncations.any() or infos.get("_episode", np.zeros(3)).any())
        assert any(ended), "the id's own registration (its TimeLimit) is used"
    finally:
        env.close()
        want.close()
    # Once imported, the bare id is registered in this process too.
    check_env_name(f"gym:{PLUGIN_ID}")


def test_module_form_on_workers_imports_the_module_in_each_worker(no_orphans: None) -> None:
    """Workers build their share from the name: each imports the module itself."""
    env = MultiprocessVecEnv(MODULE_NAME, 4, 2, seed=5)
    serial = make_vec(MODULE_NAME, 4, seed=5)
    try:
        np.testing.assert_array_equal(env.reset(seed=5)[0], serial.reset(seed=5)[0])
        rng = np.random.default_rng(0)
        for t in range(MAX_STEPS + 2):
            actions = rng.integers(0, 2, 4)
            got, want = env.step(actions), serial.step(actions)
            for g, w in zip(got[:4], want[:4], strict=True):
                np.testing.assert_array_equal(g, w, err_msg=f"step {t}")
    finally:
        env.close()
        serial.close()


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("gym:no_such_module_rlperf:Foo-v0", ["no module named 'no_such_module_rlperf'"]),
        ("gym:json:Foo-v0", ["unknown gymnasium id 'Foo-v0'", "module 'json' was imported"]),
        ("gym:plugin_envs:RlperfPlugin/CartPol-v0", ["gym:plugin_envs:RlperfPlugin/CartPole-v0"]),
        ("gym:NoSuchNamespace/Foo-v0", ["gym:<module>:NoSuchNamespace/Foo-v0"]),
    ],
)
def test_unknown_ids_and_modules_are_one_line_naming_the_module_form(name, words) -> None:
    with pytest.raises(UnknownEnvError) as err:
        check_env_name(name)
    message = str(err.value)
    assert "\n" not in message
    for word in words:
        assert word in message


def test_a_module_whose_import_raises_is_one_line(tmp_path, monkeypatch) -> None:
    (tmp_path / "rlperf_raising_envs.py").write_text("raise RuntimeError('no licence\\nfound')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UnknownEnvError) as err:
        check_env_name("gym:rlperf_raising_envs:Foo-v0")
    assert str(err.value) == (
        "env 'gym:rlperf_raising_envs:Foo-v0': importing module 'rlperf_raising_envs' failed: "
        "RuntimeError: no licence"
    )


def test_an_installed_module_named_after_the_namespace_is_suggested(tmp_path, monkeypatch):
    """ALE/Pong-v5 with ale-py installed: 'did you mean gym:ale_py:ALE/Pong-v5?' (a hint only:
    the module is not imported)."""
    (tmp_path / "rlperfhint_py.py").write_text("raise RuntimeError('must not be imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UnknownEnvError, match=r"did you mean gym:rlperfhint_py:RlperfHint/X-v0\?"):
        check_env_name("gym:RlperfHint/X-v0")
    assert "rlperfhint_py" not in sys.modules


@pytest.mark.usefixtures("unregistered")
def test_an_unknown_id_loads_the_entry_points_of_its_namespace(monkeypatch) -> None:
    """gymnasium 0.26-0.29's plugin mechanism, which 1.x dropped: the ``gymnasium.envs`` entry
    point named after the id's namespace registers its ids under that namespace."""
    from importlib.metadata import EntryPoint

    loaded = []
    points = [
        EntryPoint("RlperfEntryPoint", "plugin_envs:register_entry_point_envs", "gymnasium.envs"),
        EntryPoint("Unrelated", "no_such_module_rlperf:register", "gymnasium.envs"),
    ]

    def entry_points(group: str) -> list[EntryPoint]:
        loaded.append(group)
        return points

    monkeypatch.setattr(registry_module.importlib.metadata, "entry_points", entry_points)
    check_env_name(f"gym:{ENTRY_POINT_ID}")
    assert loaded == ["gymnasium.envs"]
    env = make_vec(f"gym:{ENTRY_POINT_ID}", 2, seed=0)
    assert env.reset(seed=0)[0].shape == (2, 4)
    env.close()
    # Known ids never read the entry points; a broken plugin of the namespace is named.
    check_env_name("gym:CartPole-v1")
    assert loaded == ["gymnasium.envs"]
    points[1] = EntryPoint("Broken", "no_such_module_rlperf:register", "gymnasium.envs")
    with pytest.raises(UnknownEnvError, match=r"entry point no_such_module_rlperf:register"):
        check_env_name("gym:Broken/Foo-v0")


def test_entry_points_of_an_installed_distribution_reach_the_workers(tmp_path) -> None:
    """A real distribution declaring a ``gymnasium.envs`` entry point (a dist-info directory on
    the path), in a fresh process: the bare id builds serially and on 2 workers."""
    info = tmp_path / "rlperf_entry_point_envs-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rlperf-entry-point-envs\n"
                                   "Version: 0.1\n")  # fmt: skip
    (info / "entry_points.txt").write_text(
        "[gymnasium.envs]\nRlperfEntryPoint = plugin_envs:register_entry_point_envs\n"
    )
    code = textwrap.dedent(f"""
        from rlperf.envs import make_vec
        from rlperf.envs.workers import MultiprocessVecEnv
        if __name__ == "__main__":
            name = "gym:{ENTRY_POINT_ID}"
            serial = make_vec(name, 2, seed=3)
            workers = MultiprocessVecEnv(name, 2, 2, seed=3)
            assert (serial.reset(seed=3)[0] == workers.reset(seed=3)[0]).all()
            workers.close()
            print("ok")
    """)
    script = tmp_path / "entry_point_run.py"
    script.write_text(code)
    path = os.pathsep.join([str(tmp_path), str(HERE), str(SRC)])
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": path}, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_train_refuses_an_unknown_module_with_one_line(usage_error, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = usage_error(["train", "--env", "gym:no_such_module_rlperf:Foo-v0",
                        "--total-steps", "4096"])  # fmt: skip
    assert "no module named 'no_such_module_rlperf'" in line
    assert list(tmp_path.iterdir()) == []
