"""Git plumbing for the gate: resolve refs and check a commit out in a temporary worktree.

Building a commit is checking its tree out and compiling its C extensions in place (the LSTM
recurrence and the PPO loss, ``setup.py build_ext --inplace``, a few seconds; a tree without
``setup.py`` is pure Python): the gate's workers import ``rlperf`` from ``<worktree>/src``. A
worktree shares the repository's objects, so adding one is cheap and never touches the user's
checkout; it is removed again when the gate ends.

The C extensions are optional builds (``setup.py``): a tree whose kernel fails to compile still
"builds" and imports its torch fallback. :func:`check_same_kernels_built` refuses a pair of
trees where that happened on one side only, so the gate never times a fallback against
compiled code.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

from rlperf.bench import kernel_cache


class GitError(RuntimeError):
    """A git command failed (not a repository, unknown ref); the message is one line."""


class BuildError(GitError):
    """Compiling a checked-out tree failed; reported as the git errors are (one line)."""


def git(args: list[str], cwd: Path) -> str:
    """Run ``git args`` in ``cwd``; its stdout stripped, or GitError with git's first line."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    except FileNotFoundError as e:
        raise GitError("git is not installed") from e
    if done.returncode != 0:
        message = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[0]
        raise GitError(f"git {' '.join(args)}: {message}")
    return done.stdout.strip()


def repo_root(cwd: Path) -> Path:
    """Top of the git checkout containing ``cwd``."""
    return Path(git(["rev-parse", "--show-toplevel"], cwd))


def resolve_commit(ref: str, repo: Path) -> str:
    """Full sha of ``ref``; GitError naming the ref when it is not a commit here."""
    try:
        return git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], repo)
    except GitError as e:
        raise GitError(f"unknown git ref {ref!r} in {repo}") from e


@contextmanager
def checked_out(sha: str, repo: Path) -> Iterator[Path]:
    """A detached worktree of ``sha`` in a temporary directory, removed on exit."""
    with tempfile.TemporaryDirectory(prefix="rlperf-gate-") as tmp:
        path = Path(tmp) / sha[:12]
        git(["worktree", "add", "--detach", "--quiet", str(path), sha], repo)
        try:
            build_in_place(path)
            yield path
        finally:
            try:
                git(["worktree", "remove", "--force", str(path)], repo)
            except GitError:
                git(["worktree", "prune"], repo)  # directory already gone: drop the record


def build_in_place(tree: Path) -> None:
    """Compile ``tree``'s C extensions next to their sources, as ``pip install -e`` does, so
    that importing ``rlperf`` from ``tree/src`` runs the code that commit ships (without it the
    LSTM would time its torch fallback). A tree whose kernel sources were built before gets
    those modules from :mod:`kernel_cache` instead of a compiler run."""
    if not (tree / "setup.py").is_file():
        return
    key = kernel_cache.source_key(tree)
    if kernel_cache.restore(tree, key):
        return
    try:
        import setuptools  # noqa: F401  (setup.py needs it; say so instead of a traceback)
    except ImportError as e:
        raise BuildError(f"building {tree.name} needs setuptools: pip install setuptools") from e
    done = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
        cwd=tree,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        lines = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise BuildError(f"building {tree.name} failed: {lines[-1] if lines else done.returncode}")
    kernel_cache.store(tree, key)


def unbuilt_extensions(tree: Path) -> list[str]:
    """The C extensions of ``tree`` that are not built: each ``*.c`` under ``tree/src`` (every
    one is an extension's source) without its compiled module beside it, as a dotted name."""
    src = tree / "src"
    missing = []
    for source in sorted(src.rglob("*.c")):
        if not any(
            source.with_name(source.stem + suffix).is_file() for suffix in EXTENSION_SUFFIXES
        ):
            missing.append(".".join(source.relative_to(src).with_suffix("").parts))
    return missing


def check_same_kernels_built(base: Path, head: Path) -> None:
    """BuildError when one side's C extensions did not all build while the other side's did:
    that side would run its torch fallback, and the gate would time it against compiled code.
    (Neither built, as on a machine without a compiler, compares like with like.)"""
    missing = {"base": unbuilt_extensions(base), "head": unbuilt_extensions(head)}
    for side, other in (("base", "head"), ("head", "base")):
        if missing[side] and not missing[other]:
            raise BuildError(
                f"{side}'s C kernels did not build ({', '.join(missing[side])}) while {other}'s "
                f"did: timing its torch fallback against compiled code would measure the build, "
                f"not the change; run `python setup.py build_ext --inplace` in a checkout of "
                f"{side} to see the compiler's error"
            )


def is_ancestor(older: str, newer: str, repo: Path) -> bool:
    """Whether commit ``older`` is an ancestor of (or equal to) commit ``newer``."""
    done = subprocess.run(
        ["git", "merge-base", "--is-ancestor", older, newer], cwd=repo, capture_output=True
    )
    if done.returncode not in (0, 1):
        message = (done.stderr.decode().strip().splitlines() or [f"exit {done.returncode}"])[0]
        raise GitError(f"git merge-base --is-ancestor: {message}")
    return done.returncode == 0


def first_parent_path(good: str, bad: str, repo: Path) -> list[tuple[str, str]]:
    """(sha, subject) of the commits after ``good`` up to ``bad`` along ``bad``'s first
    parents, oldest first; GitError when ``good`` is not on that line."""
    out = git(["log", "--first-parent", "--reverse", "--format=%H %s", f"{good}..{bad}"], repo)
    commits = [(line[:40], line[41:]) for line in out.splitlines()]
    if not commits or git(["rev-parse", f"{commits[0][0]}^"], repo) != good:
        raise GitError(f"{good[:12]} is not on the first-parent history of {bad[:12]}")
    return commits


def subject(sha: str, repo: Path) -> str:
    """The first line of the commit's message."""
    return git(["log", "-1", "--format=%s", sha], repo)
