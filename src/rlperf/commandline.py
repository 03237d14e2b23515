"""What every ``rlperf`` command shares: one-line errors, exit statuses, the seed check
(the output-file check, :func:`rlperf.run.run_dir.out_file_problem`, sits lower: the
evaluation's video uses it too).

The command modules (``run/commands.py``, ``profiling/commands.py``, ``bench/commands.py``)
and ``cli.py`` import these from here, below all of them, so no command reaches up into the
CLI that registers it. Bad input a user can fix is one line ``rlperf: error: ...`` and exit
status 2, before any work.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, NoReturn

from rlperf.config import ConfigError
from rlperf.distributed.group import RANK_SEED_STRIDE
from rlperf.envs.registry import EnvOptionError, UnknownEnvError
from rlperf.run.checkpoint import CheckpointError

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
# numpy's legacy seeding (np.random.seed, the envs' generators) takes 0 .. 2**32 - 1.
SEED_LIMIT = 2**32
# Bad input a user can fix: one line, status 2.
USAGE_ERRORS = (ConfigError, UnknownEnvError, EnvOptionError, CheckpointError)
# True while a command's checks run without the command (rlperf.cli.check_command): fail()
# raises without printing.
_CHECKING = ContextVar("rlperf_checking", default=False)


class UsageError(Exception):
    """Bad command-line input; printed as one line, exit status 2."""


class Failed(SystemExit):
    """:func:`fail`'s exit, carrying the line it printed (``message``) for
    :func:`rlperf.cli.check_command`."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(code)
        self.message = message


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as one line instead of usage text + error, and takes
    no abbreviation of a flag: ``--num-env 32`` would otherwise set ``--num-envs`` silently
    (and a later flag could make the same abbreviation mean another one)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)  # subcommands' parsers too (parser_class)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        # fail() already says "rlperf: error:"; a subcommand's parser adds its own name.
        command = self.prog.removeprefix("rlperf").strip()
        raise UsageError(f"{command}: {message}" if command else message)


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print one line ``rlperf: error: message`` and exit with ``code``."""
    # Every rank of a launched run finds the same bad input: rank 0 says it. A command's checks
    # run alone (checking_only) raise the line instead of printing it.
    if os.environ.get("RANK", "0") == "0" and not _CHECKING.get():
        print(f"rlperf: error: {message}", file=sys.stderr)
    raise Failed(message, code)


@contextmanager
def checking_only() -> Iterator[None]:
    """A stretch in which :func:`fail` raises its line without printing it (a command's checks
    made without the command)."""
    token = _CHECKING.set(True)
    try:
        yield
    finally:
        _CHECKING.reset(token)


def check_seed(seed: int, world_size: int = 1) -> None:
    """ConfigError unless ``seed``, and every rank's seed derived from it
    (:meth:`~rlperf.distributed.group.Ranks.seed`), is one numpy takes."""
    top = SEED_LIMIT - 1 - RANK_SEED_STRIDE * (world_size - 1)
    if not 0 <= seed <= top:
        ranks = (
            f" on {world_size} ranks (rank r seeds with seed + {RANK_SEED_STRIDE} * r, "
            f"at most {SEED_LIMIT - 1})"
            if world_size > 1
            else ""
        )
        raise ConfigError(f"seed must be between 0 and {top}{ranks}, got {seed}")


def subcommand_parsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """``parser``'s subcommands by name (``train``, ``profile`` ...) and their parsers."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def check_parsed(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """Parse ``argv`` with ``parser`` and run the command's ``check`` (its checks before any
    work) without running it, nothing printed: :func:`rlperf.cli.check_command` with the whole
    parser, ``rlperf compare`` with its package's for each side's ``profile``.

    Raises:
        UsageError: the first problem; its message is the line the CLI prints after
            ``rlperf: error:``.
    """
    # A flag spelled in full: argparse takes a prefix (`--num-env`) for the flag it abbreviates,
    # so a doc naming a renamed flag's old prefix would pass unnoticed.
    for each in (parser, *subcommand_parsers(parser).values()):
        each.allow_abbrev = False
    try:
        with checking_only():
            args = parser.parse_args(argv)
            args.argv = list(argv)
            check = getattr(args, "check", None)
            if check is not None:
                check(args)
    except USAGE_ERRORS as e:
        raise UsageError(str(e)) from None
    except Failed as e:
        raise UsageError(e.message) from None
    except SystemExit as e:
        if e.code not in (0, None):  # --help exits 0: the command is accepted
            raise
