"""Compiled kernels shared between checkouts whose kernel sources are the same.

Every gate and bisect run checks a commit out in a fresh worktree and compiles its C kernels
(``setup.py build_ext --inplace``): ~8 s on an idle 2-core box, twice that beside busy
processes, for each base and each bisect step, although most commits do not touch a kernel.
The compiled modules depend only on what goes into the build, so they are cached under a key
made of exactly that: ``setup.py``, every ``.c`` and ``.h`` in the tree (paths and bytes),
the interpreter's extension suffix and version, and the environment variables the build reads
(``CC``, ``CFLAGS``, ``RLPERF_NO_KERNELS``, ...). A tree with the same key gets a copy of the
modules; any other tree is compiled, then stored.

The cache is ``$RLPERF_CACHE_DIR/kernels``, else ``$XDG_CACHE_HOME/rlperf/kernels``, else
``~/.cache/rlperf/kernels``. A cache that cannot be written is skipped (the tree is still
built); an entry is written to a temporary folder and renamed, so a reader never sees half of
one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import sysconfig
import tempfile
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

KERNEL_SOURCES = (".c", ".h")
SKIPPED = ("build", "node_modules", "__pycache__")
# What setuptools' build_ext and setup.py itself read from the environment.
BUILD_ENV = ("CC", "CXX", "CFLAGS", "CPPFLAGS", "LDFLAGS", "LDSHARED", "ARCHFLAGS",
             "RLPERF_NO_KERNELS")  # fmt: skip


def cache_dir() -> Path:
    """Where compiled kernels are kept, one folder per key."""
    root = os.environ.get("RLPERF_CACHE_DIR")
    if root:
        return Path(root) / "kernels"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "rlperf" / "kernels"


def source_key(tree: Path) -> str:
    """A hex digest of everything the build of ``tree``'s kernels depends on."""
    digest = hashlib.sha256()
    digest.update(f"{sys.version}\0{sysconfig.get_config_var('EXT_SUFFIX')}\0".encode())
    for name in BUILD_ENV:
        digest.update(f"{name}={os.environ.get(name, '')}\0".encode())
    files = [tree / "setup.py"]
    files += [p for p in tree_files(tree) if p.suffix in KERNEL_SOURCES]
    for path in files:
        digest.update(f"{path.relative_to(tree).as_posix()}\0".encode())
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def tree_files(tree: Path) -> list[Path]:
    """``tree``'s files, sorted, less what no build reads: hidden folders (``.git``, ``.venv``),
    ``build/`` (setuptools' own copies) and virtual environments (a ``pyvenv.cfg``)."""
    found = []
    for folder, subfolders, names in os.walk(tree):
        here = Path(folder)
        subfolders[:] = sorted(
            d for d in subfolders
            if not d.startswith(".") and d not in SKIPPED and not (here / d / "pyvenv.cfg").exists()
        )  # fmt: skip
        found += [here / name for name in names]
    return sorted(found)


def built_modules(tree: Path) -> list[Path]:
    """The compiled extension modules in ``tree``, relative to it."""
    return [
        p.relative_to(tree)
        for p in tree_files(tree)
        if any(p.name.endswith(suffix) for suffix in EXTENSION_SUFFIXES)
    ]


def restore(tree: Path, key: str) -> bool:
    """Copy the cached modules of ``key`` into ``tree``; False when there is no entry."""
    entry = cache_dir() / key
    if not entry.is_dir():
        return False
    for module in (p for p in entry.rglob("*") if p.is_file()):
        place(module, tree / module.relative_to(entry))
    return True


def place(module: Path, target: Path) -> None:
    """Put a copy of ``module`` at ``target``, never writing into an existing file: a process
    that has the old one loaded (the gate itself imports the working tree's kernels) would
    crash when the pages it mapped change, so an identical file is left alone and a different
    one is replaced by a rename (its old inode lives on for whoever mapped it)."""
    if target.is_file() and target.read_bytes() == module.read_bytes():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, staging = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    os.close(fd)
    try:
        shutil.copy2(module, staging)
        os.replace(staging, target)
    finally:
        if os.path.exists(staging):
            os.unlink(staging)


def store(tree: Path, key: str) -> None:
    """Keep ``tree``'s compiled modules under ``key``; nothing when the cache is not writable
    or the entry exists."""
    entry = cache_dir() / key
    if entry.exists():
        return
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".incoming-", dir=entry.parent))
    except OSError:
        return
    try:
        for module in built_modules(tree):
            (staging / module).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(tree / module, staging / module)
        staging.rename(entry)
    except OSError:  # a full disk, or another process stored the same key first
        pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)
