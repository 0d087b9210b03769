"""``ctxprec``: a thin command line over the library.

Each sub-command lives in its own module with a ``register(subparsers)`` function that adds its
parser and sets ``func`` (called with the parsed args, returning the exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from . import _common

_COMMAND_MODULES = ("score", "estimate", "demo", "monitor", "compare", "calibrate", "batches")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ctxprec",
        description="Score the contextual precision of RAG retrievers from warehouse logs.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=(
            "examples:\n"
            "  ctxprec demo\n"
            "  ctxprec score --warehouse sqlite:///ctxprec.db --partition 2026-11-28\n"
            "  ctxprec check --warehouse sqlite:///ctxprec.db --partition 2026-11-28 --min-mean 0.6\n"
        ),
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return _common.run_command(args)
    finally:
        # the user's SQLite file is left whole: WAL checkpointed, no -wal/-shm beside it
        from ..warehouse.engine import release_sqlite_files

        release_sqlite_files()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
