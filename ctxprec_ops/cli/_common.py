"""Shared CLI plumbing: consoles, exit codes (from the outcome policy), the command runner."""

from __future__ import annotations

import argparse

from rich.console import Console

from ..pipeline.outcome import EXIT_BUDGET, EXIT_ERROR, EXIT_OK

__all__ = ["EXIT_OK", "EXIT_ERROR", "EXIT_ALERT", "EXIT_BUDGET", "console", "err_console", "run_command"]

#: `ctxprec check`: an alert fired
EXIT_ALERT = 3

console = Console(stderr=False)
err_console = Console(stderr=True)


def run_command(args: argparse.Namespace) -> int:
    """Run the parsed command; every command is ``guarded`` (one-line errors, exit codes)."""
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        err_console.print("ctxprec: interrupted")
        return 130
