"""Subcommands of this package (registered into ``rlperf`` by cli.py)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add this package's subcommands."""
