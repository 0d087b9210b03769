"""Options shared by ``score`` / ``estimate`` / ``demo``, early validation, one-line errors."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Callable

from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from ..errors import CtxPrecError, IdentifierError, JudgeConfigurationError
from ..pipeline import PipelineConfig
from ..secrets import redact
from ..warehouse.engine import MissingDriverError, UnknownDialectError, check_dialect
from ..warehouse.source import PartitionKeyError, parse_partition_key
from ._common import EXIT_ERROR, EXIT_USAGE, err_console

#: `ctxprec score`: the run stopped at --max-cost; unaffordable rows are recorded as
#: ``budget_exhausted`` failures and the next run picks them up
EXIT_BUDGET = 4

RAW = argparse.RawDescriptionHelpFormatter


class UsageError(CtxPrecError, ValueError):
    """A flag or setting is wrong; nothing was read or written (exit code 2)."""

    error_type = "usage"


def add_warehouse(parser: argparse.ArgumentParser, *, default_help: str = "CTXPREC_WAREHOUSE_URL or sqlite:///ctxprec.db") -> None:
    parser.add_argument("--warehouse", metavar="URL",
                        help=f"SQLAlchemy URL of the warehouse (default: {default_help})")


def add_source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--partition", required=True, metavar="YYYY-MM-DD",
                        help="the UTC day of event_time to score")
    parser.add_argument("--judge", metavar="MODEL",
                        help="an OpenAI-compatible model name, or 'lexical' for the offline judge "
                             "(default: CTXPREC_JUDGE, else gpt-4o-mini with OPENAI_API_KEY, else lexical)")
    parser.add_argument("--source-table", metavar="NAME",
                        help="input table, 'table' or 'schema.table' (default: CTXPREC_SOURCE_TABLE or "
                             "retrieval_logs; CTXPREC_CONVERSATION_TABLE or conversation_logs with --conversations)")
    parser.add_argument("--conversations", action="store_true",
                        help="score a conversation table with turn contextual precision")
    parser.add_argument("--chunk-size", type=int, metavar="N", help="rows per chunk (default: CTXPREC_CHUNK_SIZE or 500)")
    parser.add_argument("--threshold", type=float, metavar="X",
                        help="per-case pass threshold in [0, 1] (default: CTXPREC_THRESHOLD or 0.5)")
    parser.add_argument("--max-nodes-per-call", type=int, default=None, metavar="N",
                        help="nodes per judge call for long lists (default: 20)")


def check_partition(value: str) -> str:
    try:
        parse_partition_key(value)
    except PartitionKeyError as exc:
        raise UsageError(str(exc)) from None
    return value


def check_warehouse(url: str) -> None:
    """Refuse a malformed URL, or a SQLite file that does not exist (instead of creating it)."""
    try:
        u = make_url(url)
    except Exception:
        raise UsageError(f"invalid warehouse URL {redact(url)!r} (expected e.g. sqlite:///ctxprec.db or "
                         "postgresql://user@host/db)") from None
    try:
        check_dialect(url)
    except UnknownDialectError as exc:  # a malformed URL, like any other: exit 2
        raise UsageError(str(exc)) from None
    except MissingDriverError as exc:  # a setup problem: exit 1, naming the package to install
        raise CtxPrecError(str(exc)) from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if u.get_backend_name() == "sqlite" and u.database not in (None, "", ":memory:") and not u.database.startswith("file:"):
        if not Path(u.database).exists():
            raise CtxPrecError(f"the SQLite warehouse file {u.database!r} does not exist")


def check_judge(judge: Any) -> None:
    """Fail before any work when an LLM judge has no API key (the client would fail later)."""
    if not isinstance(judge, str) or judge.strip().lower() == "lexical":
        return
    if not (os.environ.get("OPENAI_API_KEY") or os.environ.get("AZURE_OPENAI_API_KEY")):
        raise JudgeConfigurationError(
            f"judge {judge!r} needs OPENAI_API_KEY (and OPENAI_BASE_URL for a non-OpenAI endpoint); "
            "use --judge lexical for the offline judge"
        )


def config_from_args(args: argparse.Namespace, **extra: Any) -> PipelineConfig:
    """``PipelineConfig`` from the env (``Settings.from_env``) with the given flags on top."""
    try:
        config = PipelineConfig.from_settings(
            None,
            warehouse=getattr(args, "warehouse", None),
            judge=getattr(args, "judge", None),
            metric="turn_contextual_precision" if getattr(args, "conversations", False) else "contextual_precision",
            source_table=getattr(args, "source_table", None),
            chunk_size=getattr(args, "chunk_size", None),
            threshold=getattr(args, "threshold", None),
            max_nodes_per_call=getattr(args, "max_nodes_per_call", None),
            **extra,
        )
    except (IdentifierError, TypeError) as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:  # bad numbers (flags or CTXPREC_* variables)
        raise UsageError(str(exc)) from None
    if isinstance(config.warehouse, str):
        check_warehouse(config.warehouse)
    return config


def one_line(exc: BaseException) -> str:
    """A secret-free, single-line description of ``exc`` (SQLAlchemy's SQL and links dropped)."""
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        text = f"{type(exc.orig).__name__}: {exc.orig}"
        prefix = "warehouse error: "
    elif isinstance(exc, SQLAlchemyError):
        text, prefix = str(exc), "warehouse error: "
    elif isinstance(exc, CtxPrecError):
        text, prefix = str(exc), ""
    else:
        text, prefix = f"{type(exc).__name__}: {exc}", ""
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    return redact(prefix + first)


def fail(command: str, exc: BaseException) -> int:
    """Print ``ctxprec COMMAND: error: ...`` (one line, stderr) and return the exit code."""
    err_console.print(f"ctxprec {command}: error: {one_line(exc)}", markup=False, highlight=False, soft_wrap=True)
    return EXIT_USAGE if isinstance(exc, UsageError) else EXIT_ERROR


def guarded(command: str, body: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Wrap a command so every error ends as one line and an exit code (never a traceback)."""

    def run(args: argparse.Namespace) -> int:
        try:
            return body(args)
        except KeyboardInterrupt:
            raise
        except Exception as exc:
            return fail(command, exc)

    return run
