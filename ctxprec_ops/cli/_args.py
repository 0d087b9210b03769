"""Options shared by ``score`` / ``estimate`` / ``demo``, early validation, one-line errors."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from ..config import Settings
from ..errors import CtxPrecError, IdentifierError, JudgeConfigurationError
from ..pipeline import DEFAULT_METRIC, METRIC_KINDS, METRIC_NAMES, MetricKind, PipelineConfig
from ..pipeline.columns import parse_column_flags
from ..pipeline.outcome import EXIT_BUDGET, decide_error
from ..scoring.consistency import check_samples
from ..secrets import redact
from ..warehouse.engine import MissingDriverError, UnknownDialectError, check_dialect
from ..warehouse.source import PartitionKeyError, parse_partition_key
from ._common import err_console

__all__ = [
    "EXIT_BUDGET",
    "UsageError",
    "add_warehouse",
    "add_metric",
    "add_columns",
    "add_source",
    "add_traces",
    "traces_of",
    "metric_of",
    "columns_of",
    "settings",
    "check_partition",
    "check_warehouse",
    "check_judge",
    "config_from_args",
    "one_line",
    "fail",
    "guarded",
]

RAW = argparse.RawDescriptionHelpFormatter


class UsageError(CtxPrecError, ValueError):
    """A flag or setting is wrong; nothing was read or written (exit code 2)."""

    error_type = "usage"
    retryable = False


def add_warehouse(
    parser: argparse.ArgumentParser, *, default_help: str = "CTXPREC_WAREHOUSE_URL or sqlite:///ctxprec.db"
) -> None:
    parser.add_argument("--warehouse", metavar="URL", help=f"SQLAlchemy URL of the warehouse (default: {default_help})")


def add_metric(parser: argparse.ArgumentParser) -> None:
    """``--metric NAME`` (from the metric registry) and ``--conversations``, its alias for the turn metric."""
    turn = [k for k in METRIC_KINDS.values() if k.table_setting == "conversation_table"][0]
    parser.add_argument(
        "--metric", choices=METRIC_NAMES, default=None, help=f"metric to compute or read (default: {DEFAULT_METRIC})"
    )
    parser.add_argument(
        "--conversations", action="store_const", dest="metric", const=turn.name, help=f"alias of --metric {turn.name}"
    )


def add_columns(parser: argparse.ArgumentParser) -> None:
    """``--column NAME=COLUMN`` (repeatable): map a logical column to the table's column."""
    parser.add_argument(
        "--column",
        action="append",
        metavar="NAME=COLUMN",
        default=None,
        help="the input table's column for a logical column, e.g. retrieval_context=contexts "
        "(repeatable; default: CTXPREC_SOURCE_COLUMNS / CTXPREC_CONVERSATION_COLUMNS)",
    )


def metric_of(args: argparse.Namespace) -> MetricKind:
    return METRIC_KINDS[getattr(args, "metric", None) or DEFAULT_METRIC]


def columns_of(args: argparse.Namespace) -> dict[str, str]:
    try:
        return parse_column_flags(getattr(args, "column", None))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def settings() -> Settings:
    """``Settings.from_env()``; a malformed ``CTXPREC_*`` variable is a usage error (exit 2)."""
    try:
        return Settings.from_env()
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def add_source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--partition", required=True, metavar="YYYY-MM-DD", help="the UTC day of event_time to score")
    add_metric(parser)
    add_columns(parser)
    parser.add_argument(
        "--judge",
        metavar="MODEL",
        help="an OpenAI-compatible model name, or 'lexical' for the offline judge "
        "(default: CTXPREC_JUDGE, else gpt-4o-mini with OPENAI_API_KEY, else lexical)",
    )
    parser.add_argument(
        "--source-table",
        metavar="NAME",
        help="input table, 'table' or 'schema.table' (default: CTXPREC_SOURCE_TABLE or "
        "retrieval_logs; CTXPREC_CONVERSATION_TABLE or conversation_logs for the turn metric)",
    )
    parser.add_argument(
        "--chunk-size", type=int, metavar="N", help="rows per chunk (default: CTXPREC_CHUNK_SIZE or 500)"
    )
    parser.add_argument(
        "--threshold",
        type=float,
        metavar="X",
        help="per-case pass threshold in [0, 1] (default: CTXPREC_THRESHOLD or 0.5)",
    )
    parser.add_argument(
        "--max-nodes-per-call",
        type=int,
        default=None,
        metavar="N",
        help="nodes per judge call for long lists (default: 20)",
    )
    parser.add_argument(
        "--samples",
        type=int,
        metavar="N",
        help="self-consistency: ask the judge N sampled answers per node (odd; one request with n=N "
        "at temperature 1 where the endpoint supports it) and keep the majority verdict; costs ~N times "
        "the completion tokens (default: CTXPREC_JUDGE_SAMPLES or 1)",
    )


def add_traces(parser: argparse.ArgumentParser) -> None:
    """A spans table (or an OTLP/JSON file) as the source: ``--source-format``, ``--stage``, the
    reference and documents lookups, ``--otlp-json`` (docs/traces.md)."""
    g = parser.add_argument_group("traces (docs/traces.md)")
    g.add_argument(
        "--source-format",
        choices=("rows", "openinference", "otel-genai"),
        help="rows (a retrieval-log table) or a spans table of OpenInference / OTel GenAI traces: one case "
        "per retriever span (default: CTXPREC_SOURCE_FORMAT or rows; with --otlp-json: the file's convention)",
    )
    g.add_argument(
        "--stage",
        choices=("retrieve", "rerank"),
        help="spans: score the retriever spans or the reranker spans' order (default: CTXPREC_STAGE or retrieve)",
    )
    g.add_argument(
        "--expected-attribute",
        metavar="KEY",
        help="spans: the span attribute holding the reference answer (default: CTXPREC_EXPECTED_ATTRIBUTE)",
    )
    g.add_argument(
        "--gold-table",
        metavar="NAME",
        help="spans: table of reference answers, expected_output by trace_id or input (default: "
        "CTXPREC_GOLD_TABLE); with neither this nor --expected-attribute scoring is reference-free",
    )
    g.add_argument(
        "--documents-table",
        metavar="NAME",
        help="spans: table of document texts (id, content) for spans that record document ids only "
        "(default: CTXPREC_DOCUMENTS_TABLE)",
    )
    g.add_argument(
        "--otlp-json",
        metavar="FILE",
        help="load an OTLP/JSON trace export into the spans table (--source-table, default spans) of the "
        "warehouse (a SQLite file is created if missing), then score it",
    )


def traces_of(args: argparse.Namespace) -> dict[str, Any]:
    """The trace settings given as flags (``PipelineConfig`` fields)."""
    return {
        "source_format": getattr(args, "source_format", None),
        "stage": getattr(args, "stage", None),
        "expected_attribute": getattr(args, "expected_attribute", None),
        "gold_table": getattr(args, "gold_table", None),
        "documents_table": getattr(args, "documents_table", None),
    }


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
        raise UsageError(
            f"invalid warehouse URL {redact(url)!r} (expected e.g. sqlite:///ctxprec.db or postgresql://user@host/db)"
        ) from None
    try:
        check_dialect(url)
    except UnknownDialectError as exc:  # a malformed URL, like any other: exit 2
        raise UsageError(str(exc)) from None
    except MissingDriverError as exc:  # a setup problem: exit 1, naming the package to install
        raise CtxPrecError(str(exc)) from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if (
        u.get_backend_name() == "sqlite"
        and u.database not in (None, "", ":memory:")
        and not u.database.startswith("file:")
    ):
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
    if getattr(args, "samples", None) is not None:
        try:
            check_samples(args.samples, "--samples")
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    try:
        config = PipelineConfig.from_settings(
            settings(),
            warehouse=getattr(args, "warehouse", None),
            judge=getattr(args, "judge", None),
            metric=metric_of(args).name,
            source_table=getattr(args, "source_table", None),
            columns=columns_of(args) or None,
            chunk_size=getattr(args, "chunk_size", None),
            threshold=getattr(args, "threshold", None),
            max_nodes_per_call=getattr(args, "max_nodes_per_call", None),
            judge_samples=getattr(args, "samples", None),
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
    """Print ``ctxprec COMMAND: error: ...`` (one line, stderr); the exit code is the outcome
    policy's (2 for bad arguments, 1 otherwise)."""
    err_console.print(f"ctxprec {command}: error: {one_line(exc)}", markup=False, highlight=False, soft_wrap=True)
    return decide_error(exc).exit_code


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
