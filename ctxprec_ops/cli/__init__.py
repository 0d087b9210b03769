"""``ctxprec``: a thin command line over the library.

Each sub-command lives in its own module with a ``register(subparsers)`` function that adds its
parser and sets ``func`` (called with the parsed args, returning the exit code).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
from collections.abc import Sequence

from . import _common
from .commands import COMMANDS, Parser


def _command_of(argv: Sequence[str] | None) -> str | None:
    """The sub-command named on the command line (its first word), if any."""
    words = [a for a in (sys.argv[1:] if argv is None else argv) if not a.startswith("-")]
    return words[0] if words and words[0] in COMMANDS else None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``ctxprec`` parser. Only the module of the command named in ``argv`` is imported (it adds
    its full parser); every other command is listed by name and help (``commands.COMMANDS``), so
    ``ctxprec --help`` and each command start without loading the others (``argv`` None: ``sys.argv``)."""
    parser = Parser(
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
    named = _command_of(argv)
    wanted = {COMMANDS[named].module} if named else set()
    done: set[str] = set()
    for name, command in COMMANDS.items():
        if command.module in wanted:
            if command.module not in done:
                importlib.import_module(f"{__name__}.{command.module}").register(sub)
                done.add(command.module)
        else:
            sub.add_parser(name, help=command.help)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The ``ctxprec`` command. Called without ``argv`` (the console script: the process ends next),
    the heap is frozen on the way out: the interpreter's teardown then skips its collections over
    every object the run left (~0.5 s after a partition run: bench/README.md)."""
    try:
        return _main(argv)
    finally:
        if argv is None:
            gc.freeze()


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser(argv)
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
