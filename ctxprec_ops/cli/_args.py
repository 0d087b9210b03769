"""Options shared by ``score`` / ``estimate`` / ``demo``, early validation, one-line errors."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from ..config import Settings
from ..errors import CtxPrecError, IdentifierError, JudgeConfigurationError
from ..pipeline import DEFAULT_METRIC, METRIC_KINDS, METRIC_NAMES, MetricKind, PipelineConfig
from ..pipeline.columns import parse_column_flags
from ..pipeline.outcome import EXIT_BUDGET, decide_error
from ..scoring.samples import check_samples
from ..secrets import redact
from ._common import err_console

__all__ = [
    "EXIT_BUDGET",
    "UsageError",
    "add_warehouse",
    "add_metric",
    "add_columns",
    "add_segments",
    "add_source",
    "add_traces",
    "traces_of",
    "metric_of",
    "columns_of",
    "mapping_of_args",
    "settings",
    "check_partition",
    "check_warehouse",
    "check_judge",
    "check_judge_name",
    "warehouse_hint",
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


def add_segments(parser: argparse.ArgumentParser) -> None:
    """``--segment COL`` (repeatable): copy a source column's values into the score rows."""
    parser.add_argument(
        "--segment",
        action="append",
        metavar="COL",
        default=None,
        help="a column of the input table whose value each score row carries, for per-segment "
        "trend/check/compare (--by COL); repeatable (default: CTXPREC_SEGMENTS, a JSON list)",
    )


def metric_of(args: argparse.Namespace) -> MetricKind:
    return METRIC_KINDS[getattr(args, "metric", None) or DEFAULT_METRIC]


def columns_of(args: argparse.Namespace) -> dict[str, str]:
    try:
        return parse_column_flags(getattr(args, "column", None))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def mapping_of_args(args: argparse.Namespace) -> str:
    """The fingerprint of the column mapping configured for the readers (``CTXPREC_*_COLUMNS``,
    ``--column`` on top): the scores read with it are the ones compared, as the configured input
    table's are (``pipeline.mapping``)."""
    from ..pipeline.mapping import configured_mapping

    try:
        return configured_mapping(metric_of(args), settings(), columns_of(args))
    except (TypeError, ValueError) as exc:
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
        "--judge-url",
        metavar="URL",
        help="the judge's OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 for vLLM "
        "(default: OPENAI_BASE_URL, else OpenAI); --judge names the model served there",
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
    from ..warehouse.source import PartitionKeyError, parse_partition_key

    try:
        parse_partition_key(value)
    except PartitionKeyError as exc:
        raise UsageError(str(exc)) from None
    return value


def check_warehouse(url: str) -> None:
    """Refuse a malformed URL, or a SQLite file that does not exist (instead of creating it)."""
    from sqlalchemy.engine import make_url

    from ..warehouse.engine import MissingDriverError, UnknownDialectError, check_dialect, require_sqlite_file

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
    require_sqlite_file(u, setting="--warehouse / CTXPREC_WAREHOUSE_URL")


#: what an endpoint looks like: a scheme (``http://``, ``https://``), or ``localhost``/an IP with a port
_URL_LIKE = re.compile(r"^\s*([a-z][a-z0-9+.-]*://|(localhost|\d{1,3}(\.\d{1,3}){3})(:\d+)?(/|$))", re.IGNORECASE)


def check_judge_name(judge: Any) -> None:
    """Refuse at once a judge setting that is an endpoint URL, not a model name (it would be sent
    as the model name to OpenAI's endpoint and fail much later)."""
    if isinstance(judge, str) and _URL_LIKE.match(judge):
        raise UsageError(
            f"the judge is a model name, not an endpoint URL: got {redact(judge.strip())!r} (from --judge or "
            "CTXPREC_JUDGE). Give the endpoint with --judge-url URL (or OPENAI_BASE_URL) and the model served "
            "there with --judge NAME, e.g. --judge-url http://localhost:8000/v1 --judge Qwen/Qwen2.5-7B-Instruct"
        )


def check_judge(judge: Any) -> None:
    """Fail before any work when the judge setting is a URL, or an LLM judge has no API key (the
    client would fail later)."""
    check_judge_name(judge)
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
            segments=getattr(args, "segment", None) or None,
            chunk_size=getattr(args, "chunk_size", None),
            threshold=getattr(args, "threshold", None),
            max_nodes_per_call=getattr(args, "max_nodes_per_call", None),
            judge_samples=getattr(args, "samples", None),
            **({"judge_base_url": args.judge_url} if getattr(args, "judge_url", None) else {}),
            **extra,
        )
    except (IdentifierError, TypeError) as exc:
        raise UsageError(str(exc)) from None
    except ValueError as exc:  # bad numbers (flags or CTXPREC_* variables)
        raise UsageError(str(exc)) from None
    check_judge_name(config.judge)
    if isinstance(config.warehouse, str):
        check_warehouse(config.warehouse)
    return config


#: (pattern of a warehouse driver's error, what to check), first match wins; secret-free by construction
_WAREHOUSE_HINTS = (
    (
        r"could not translate host name|failed to resolve host|name or service not known|nodename nor servname"
        r"|unknown host|getaddrinfo failed",
        "check the host name in the warehouse URL",
    ),
    (
        r"connection refused|could not connect to server|can't connect to|is the server running",
        "check the host and port in the warehouse URL and that the database server is running and accepts "
        "connections there",
    ),
    (
        r"timeout expired|timed out|connection timeout",
        "the server did not answer: check the host and port in the warehouse URL, that the server is running "
        "and that no firewall is in the way",
    ),
    (
        r"password authentication failed|access denied for user|authentication failed",
        "check the user name and password of the warehouse URL",
    ),
    (r'database "[^"]*" does not exist|unknown database', "check the database name in the warehouse URL"),
    (r"no such file or directory.*\.s\.pgsql", "check the socket directory (host=...) of the warehouse URL"),
)


def warehouse_hint(text: str) -> str | None:
    """What to check for a warehouse connection error's text (``None`` when it is not one)."""
    for pattern, hint in _WAREHOUSE_HINTS:
        if re.search(pattern, text, re.IGNORECASE):
            return hint
    return None


def one_line(exc: BaseException) -> str:
    """A secret-free, single-line description of ``exc`` (SQLAlchemy's SQL and links dropped)."""
    if "sqlalchemy.exc" not in sys.modules:  # no warehouse code ran: the error is not SQLAlchemy's
        return redact(
            _first_line(exc, f"{type(exc).__name__}: {exc}" if not isinstance(exc, CtxPrecError) else str(exc))
        )
    from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, SQLAlchemyError

    hint = None
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        text = f"{type(exc.orig).__name__}: {exc.orig}"
        prefix = "warehouse error: "
        if isinstance(exc, (OperationalError, InterfaceError)):  # the connection, not the statement
            hint = warehouse_hint(text)
    elif isinstance(exc, SQLAlchemyError):
        text, prefix = str(exc), "warehouse error: "
    elif isinstance(exc, CtxPrecError):
        text, prefix = str(exc), ""
    else:
        text, prefix = f"{type(exc).__name__}: {exc}", ""
    return redact(prefix + _first_line(exc, text) + (f" — {hint}" if hint else ""))


def _first_line(exc: BaseException, text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)


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
