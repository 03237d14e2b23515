"""``rlperf`` command line: the parser, with every command registered by its package.

Each package's ``commands.py`` adds its subcommands (``register(subparsers)``): ``train``
(``ppo/commands.py``), ``eval`` and ``export`` (``run/``), ``profile``, ``analyze``,
``compare`` and ``ablate`` (``profiling/``), ``gate``, ``bisect`` and ``history`` (``bench/``),
``tune``. What they share (one-line errors, exit statuses) is ``commandline.py``'s; this module
only parses, dispatches, and checks a command without running it (:func:`check_command`).

Errors a user can fix print one line ``rlperf: error: ...`` and exit with status 2 before any
work starts, leaving every file already written as it was.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from rlperf.commandline import USAGE_ERRORS, OneLineParser, UsageError, check_parsed, fail

# Modules that add subcommands; each has ``register(subparsers)``. The only imports of this
# module that point up the layers (tests/test_import_cycles.py), and by name.
COMMAND_MODULES = (
    "rlperf.ppo.commands", "rlperf.profiling.commands", "rlperf.bench.commands",
    "rlperf.run.commands", "rlperf.tune.commands",
)  # fmt: skip


# -- checking a command without running it -----------------------------------------------
def check_command(argv: list[str]) -> None:
    """Parse ``rlperf <argv>`` and make every check the command makes before any work, without
    doing the work: nothing is trained, no process started, nothing written.

    ``train`` and ``profile`` check their configuration as ``Trainer`` does, the env and the
    policy's fit included (the env built in this process, :func:`~rlperf.ppo.trainer.
    check_config`); ``compare`` and ``ablate`` check every run they would start that way.
    Left out are the checks that depend on where and when the command runs rather than on the
    command: the files and directories it names (a report, a checkpoint, a run directory that
    already holds a run), git refs, whether CUDA is here, the cores, a terminal for
    ``--dashboard``. ``analyze`` and ``history`` take files only: they are parsed and their
    options checked.

    Raises:
        UsageError: the first problem; its message is the line the CLI prints after
            ``rlperf: error:``.
    """
    check_parsed(build_parser(), argv)


# -- entry point -------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="rlperf", description="A PPO training stack built to be measured.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for module in COMMAND_MODULES:
        importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        args.argv = list(sys.argv[1:] if argv is None else argv)  # what a launcher hands on
        return int(args.func(args))
    except UsageError as e:
        fail(str(e))
    except USAGE_ERRORS as e:
        fail(str(e))
    except KeyboardInterrupt:  # before a command's own handling (building a trainer, joining)
        from rlperf.distributed import launch

        if os.environ.get("RANK", "0") == "0":
            print("\nrlperf: interrupted", file=sys.stderr)
        return launch.interrupted_status()


if __name__ == "__main__":
    sys.exit(main())
