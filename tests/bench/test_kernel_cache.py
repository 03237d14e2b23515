"""The compiled-kernel cache: a tree whose kernel sources were built before is not compiled
again, and anything the build reads changes the key."""

from __future__ import annotations

from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

from rlperf.bench import kernel_cache
from rlperf.bench.worktree import build_in_place

SUFFIX = EXTENSION_SUFFIXES[0]

# Stands in for the real setup.py: "compiles" src/pkg/_k.c into a module file holding the
# source's bytes, and counts its runs.
FAKE_SETUP = f"""
from pathlib import Path

runs = Path("runs.txt")
runs.write_text(runs.read_text() + "x" if runs.exists() else "x")
source = Path("src/pkg/_k.c")
source.with_name("_k{SUFFIX}").write_bytes(b"built from " + source.read_bytes())
"""


def make_tree(root: Path, source: str = "int f(void) { return 1; }\n") -> Path:
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "setup.py").write_text(FAKE_SETUP)
    (root / "src" / "pkg" / "_k.c").write_text(source)
    (root / "src" / "pkg" / "_k.h").write_text("int f(void);\n")
    (root / "src" / "pkg" / "mod.py").write_text("X = 1\n")
    return root


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RLPERF_CACHE_DIR", str(tmp_path / "cache"))
    for name in kernel_cache.BUILD_ENV:
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "cache" / "kernels"


def runs(tree: Path) -> int:
    marker = tree / "runs.txt"
    return len(marker.read_text()) if marker.exists() else 0


def test_same_sources_are_built_once(tmp_path: Path, cache: Path) -> None:
    first, second = make_tree(tmp_path / "a"), make_tree(tmp_path / "b")
    build_in_place(first)
    assert runs(first) == 1 and [p.name for p in cache.iterdir()] == [
        kernel_cache.source_key(first)
    ]
    build_in_place(second)
    assert runs(second) == 0  # copied, not compiled
    module = Path("src/pkg") / f"_k{SUFFIX}"
    assert (second / module).read_bytes() == (first / module).read_bytes()
    assert kernel_cache.built_modules(second) == [module]


def test_changed_sources_are_compiled(tmp_path: Path) -> None:
    first = make_tree(tmp_path / "a")
    changed = make_tree(tmp_path / "b", source="int f(void) { return 2; }\n")
    build_in_place(first)
    build_in_place(changed)
    assert runs(changed) == 1
    assert (changed / "src/pkg" / f"_k{SUFFIX}").read_bytes().endswith(b"return 2; }\n")


def test_the_key_follows_what_the_build_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = make_tree(tmp_path / "a")
    key = kernel_cache.source_key(tree)
    (tree / "src" / "pkg" / "mod.py").write_text("X = 2\n")  # Python is not compiled
    assert kernel_cache.source_key(tree) == key
    (tree / "src" / "pkg" / "_k.h").write_text("int f(void); /* changed */\n")
    assert kernel_cache.source_key(tree) != key
    key = kernel_cache.source_key(tree)
    (tree / "src" / "pkg" / "_k.h").rename(tree / "src" / "pkg" / "_k2.h")  # a path is input
    assert kernel_cache.source_key(tree) != key
    key = kernel_cache.source_key(tree)
    (tree / "setup.py").write_text(FAKE_SETUP + "# -O2\n")
    assert kernel_cache.source_key(tree) != key
    key = kernel_cache.source_key(tree)
    monkeypatch.setenv("CFLAGS", "-O0")
    assert kernel_cache.source_key(tree) != key


def test_an_unwritable_cache_still_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("RLPERF_CACHE_DIR", str(blocker))
    tree = make_tree(tmp_path / "a")
    build_in_place(tree)
    build_in_place(tree)
    assert runs(tree) == 2 and kernel_cache.built_modules(tree)


def test_folders_no_build_reads_are_left_out(tmp_path: Path) -> None:
    tree = make_tree(tmp_path / "a")
    key = kernel_cache.source_key(tree)
    for folder in (".git", ".venv/include", "build/temp", "venv/include"):
        (tree / folder).mkdir(parents=True)
        (tree / folder / "x.h").write_text("/* not a kernel source */\n")
    (tree / "venv" / "pyvenv.cfg").write_text("home = /usr\n")
    assert kernel_cache.source_key(tree) == key
    (tree / "other").mkdir()
    (tree / "other" / "x.c").write_text("int g(void);\n")  # outside src/: still an input
    assert kernel_cache.source_key(tree) != key


def test_a_loaded_module_is_never_written_into(tmp_path: Path) -> None:
    """The gate imports the working tree's kernels before building it: restoring must leave a
    file a process has mapped as it was (an identical file untouched, another one renamed over),
    or that process crashes when the mapped pages change."""
    donor, tree = make_tree(tmp_path / "a"), make_tree(tmp_path / "b")
    build_in_place(donor)
    module = tree / "src" / "pkg" / f"_k{SUFFIX}"
    same = (donor / "src" / "pkg" / f"_k{SUFFIX}").read_bytes()
    module.write_bytes(same)
    inode = module.stat().st_ino
    build_in_place(tree)
    assert module.stat().st_ino == inode and runs(tree) == 0  # identical: left alone
    module.write_bytes(b"an older build")
    with module.open("rb") as mapped:  # what a process that loaded it holds
        build_in_place(tree)
        assert mapped.read() == b"an older build"
    assert module.read_bytes() == same and not list(module.parent.glob(".*"))
