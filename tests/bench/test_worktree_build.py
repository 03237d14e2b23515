"""Building a checked-out tree: its C extension is compiled in place, so a gate or bisect worker
importing ``rlperf`` from the tree runs the commit's compiled code, not a fallback; and a gate
whose one side failed to compile its (optional) kernels refuses to time it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlperf.bench.worktree import (
    BuildError,
    build_in_place,
    check_same_kernels_built,
    unbuilt_extensions,
)
from rlperf.cli import main

SETUP = """
from setuptools import Extension, setup
setup(name="tiny", ext_modules=[Extension("pkg._answer", ["pkg/_answer.c"])])
"""
SOURCE = """
#include <Python.h>
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_answer", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__answer(void) {
    PyObject *mod = PyModule_Create(&m);
    PyModule_AddIntConstant(mod, "ANSWER", %s);
    return mod;
}
"""


def tree(tmp_path: Path, value: str) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "_answer.c").write_text(SOURCE % value)
    (tmp_path / "setup.py").write_text(SETUP)
    return tmp_path


def test_a_tree_with_a_c_extension_is_built_in_place(tmp_path: Path) -> None:
    build_in_place(tree(tmp_path, "42"))
    answer = subprocess.run(
        [sys.executable, "-c", "import pkg._answer as a; print(a.ANSWER)"],
        cwd=tmp_path, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert answer.stdout.strip() == "42"


def test_a_tree_that_does_not_compile_is_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="building .* failed") as e:
        build_in_place(tree(tmp_path, "this is not C"))
    assert "\n" not in str(e.value)


def test_a_pure_python_tree_needs_no_build(tmp_path: Path) -> None:
    build_in_place(tmp_path)  # no setup.py: nothing to do, no error
    assert list(tmp_path.iterdir()) == []


OPTIONAL_SETUP = """
from setuptools import Extension, setup
setup(
    name="tiny",
    package_dir={"": "src"},
    ext_modules=[Extension("rlperf._k", ["src/rlperf/_k.c"], optional=True)],
)
"""
KERNEL = """
#include <Python.h>
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "_k", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__k(void) { return PyModule_Create(&m); }
"""


def kernel_tree(root: Path, source: str) -> Path:
    """A tree whose one C extension is optional, as rlperf's are: a compile error still
    "builds"."""
    (root / "src" / "rlperf").mkdir(parents=True, exist_ok=True)
    (root / "src" / "rlperf" / "__init__.py").write_text("")
    (root / "src" / "rlperf" / "_k.c").write_text(source)
    (root / "setup.py").write_text(OPTIONAL_SETUP)
    return root


def test_an_optional_extension_that_failed_is_found_unbuilt(tmp_path: Path) -> None:
    built, failed = kernel_tree(tmp_path / "a", KERNEL), kernel_tree(tmp_path / "b", "not C")
    build_in_place(built)
    build_in_place(failed)  # no error: the extension is optional
    assert unbuilt_extensions(built) == []
    assert unbuilt_extensions(failed) == ["rlperf._k"]
    check_same_kernels_built(failed, failed)  # neither side compiled: like with like
    for base, head, side in ((failed, built, "base"), (built, failed, "head")):
        with pytest.raises(BuildError, match=f"{side}'s C kernels did not build \\(rlperf._k\\)"):
            check_same_kernels_built(base, head)


def test_the_gate_refuses_a_base_whose_kernel_did_not_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """End to end: base's kernel does not compile, the working tree's does: exit 2 with one
    line, before any case runs."""
    repo = kernel_tree(tmp_path, "this is not C")

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@localhost", *args],
            cwd=repo, check=True, capture_output=True, text=True,
        )  # fmt: skip
        return done.stdout.strip()

    git("init", "-q")
    git("add", "setup.py", "src")
    git("commit", "-qm", "base: a kernel that does not compile")
    base = git("rev-parse", "HEAD")
    kernel_tree(repo, KERNEL)  # the working tree (the head) compiles
    monkeypatch.chdir(repo)
    code = main(["gate", "--base", base, "--cases", "gae[num_steps=32,num_envs=64]"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("rlperf: error: base's C kernels did not build (rlperf._k)")
