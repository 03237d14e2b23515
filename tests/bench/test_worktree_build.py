"""Building a checked-out tree: its C extension is compiled in place, so a gate or bisect worker
importing ``rlperf`` from the tree runs the commit's compiled code, not a fallback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlperf.bench.worktree import BuildError, build_in_place

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
