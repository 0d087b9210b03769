"""Shared CLI plumbing: one-line errors, exit codes, secret-free messages."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from ..errors import CtxPrecError
from ..secrets import redact

#: exit codes schedulers can branch on
EXIT_OK = 0
EXIT_ERROR = 1  # the command could not do its job
EXIT_USAGE = 2  # bad arguments
EXIT_ALERT = 3  # `ctxprec check`: an alert fired

console = Console(stderr=False)
err_console = Console(stderr=True)


def run_command(args: argparse.Namespace) -> int:
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        err_console.print("ctxprec: interrupted")
        return 130
    except (CtxPrecError, ValueError, OSError) as exc:
        err_console.print(f"ctxprec {args.command}: error: {redact(str(exc))}", markup=False, highlight=False)
        return EXIT_ERROR
    except Exception as exc:  # one line, no traceback, never a secret
        name = type(exc).__name__
        err_console.print(f"ctxprec {args.command}: error: {name}: {redact(str(exc))}", markup=False, highlight=False)
        return EXIT_ERROR
