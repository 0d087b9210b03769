"""Options shared by ``score`` / ``estimate`` / ``demo``, early validation, one-line errors."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import CtxPrecError, IdentifierError, JudgeConfigurationError
from ..pipeline import DEFAULT_METRIC, METRIC_KINDS, METRIC_NAMES, MetricKind
from ..pipeline.columns import parse_column_flags
from ..pipeline.outcome import decide_error
from ..secrets import redact
from ._common import err_console
from ._flags import add_flag, overrides

if TYPE_CHECKING:  # pydantic: loaded when a command runs, never for --help
    from ..config import Settings
    from ..pipeline import PipelineConfig

__all__ = [
    "UsageError",
    "add_flag",
    "add_warehouse",
    "add_metric",
    "add_columns",
    "add_segments",
    "add_cascade",
    "add_source",
    "add_traces",
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


def add_warehouse(parser: argparse.ArgumentParser) -> None:
    add_flag(parser, "--warehouse")


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
    add_flag(parser, "--segment")


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
    try:
        return settings(args).mapping_for(metric_of(args), columns_of(args))
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def settings(args: argparse.Namespace | None = None) -> Settings:
    """The settings: the ``CTXPREC_*`` variables with the setting flags given in ``args`` on top,
    each checked against the declaration; a bad one is a usage error (exit 2) naming the flag or
    the variable."""
    from ..config import Settings, SettingsError

    values, names = overrides(args) if args is not None else ({}, {})
    try:
        return Settings.from_env(**values)
    except SettingsError as exc:
        named = exc.named(names[exc.field]) if exc.field in names else exc
        raise UsageError(str(named)) from None


def add_source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--partition", required=True, metavar="YYYY-MM-DD", help="the UTC day of event_time to score")
    add_metric(parser)
    add_columns(parser)
    add_flag(parser, "--judge")
    add_flag(parser, "--judge-url")
    parser.add_argument(
        "--source-table",
        metavar="NAME",
        help="input table, 'table' or 'schema.table' (default: CTXPREC_SOURCE_TABLE or "
        "retrieval_logs; CTXPREC_CONVERSATION_TABLE or conversation_logs for the turn metric)",
    )
    for flag in ("--chunk-size", "--threshold", "--max-nodes-per-call", "--samples"):
        add_flag(parser, flag)


def add_cascade(parser: argparse.ArgumentParser) -> None:
    """A judge cascade (docs/cascade.md): ``--escalate-to STRONG`` with ``--escalate-below C`` or
    ``--target-agreement A``, ``--calibration-nodes N``, ``--recalibrate``."""
    g = parser.add_argument_group("judge cascade (docs/cascade.md)")
    for flag in ("--escalate-to", "--escalate-below", "--target-agreement", "--calibration-nodes"):
        add_flag(parser, flag, to=g)
    add_flag(parser, "--recalibrate", to=g, nargs="?", const="yes", metavar="yes|no")


def add_traces(parser: argparse.ArgumentParser) -> None:
    """A spans table (or an OTLP/JSON file) as the source: ``--source-format``, ``--stage``, the
    reference and documents lookups, ``--otlp-json`` (docs/traces.md)."""
    g = parser.add_argument_group("traces (docs/traces.md)")
    for flag in ("--source-format", "--stage", "--expected-attribute", "--gold-table", "--documents-table"):
        add_flag(parser, flag, to=g)
    p = parser.add_argument_group("Arize Phoenix (docs/phoenix.md)")
    add_flag(parser, "--phoenix", to=p)
    add_flag(parser, "--phoenix-project", to=p)
    add_flag(parser, "--write-back", to=p, nargs="?", const="phoenix", metavar="phoenix")
    g.add_argument(
        "--otlp-json",
        metavar="FILE",
        help="load an OTLP/JSON trace export into the spans table (--source-table, default spans) of the "
        "warehouse (a SQLite file is created if missing), then score it",
    )


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


def check_judge(judge: Any, s: Settings | None = None) -> None:
    """Fail before any work when the judge setting is a URL, or an LLM judge has no API key (the
    client would fail later)."""
    check_judge_name(judge)
    if not isinstance(judge, str) or judge.strip().lower() == "lexical":
        return
    s = s or settings()
    if s.openai_api_key is None and s.azure_openai_api_key is None:
        raise JudgeConfigurationError(
            f"judge {judge!r} needs OPENAI_API_KEY (and OPENAI_BASE_URL for a non-OpenAI endpoint); "
            "use --judge lexical for the offline judge"
        )


def config_from_args(args: argparse.Namespace, **extra: Any) -> PipelineConfig:
    """The run's ``PipelineConfig``: the settings (the environment, the setting flags on top) for
    the metric, input table and column mapping the flags name; ``extra``: more ``PipelineConfig``
    fields. The CLI's process is its own: the collector is tuned while chunks stream (``quiet_gc``)."""
    s = settings(args)
    try:
        config = s.pipeline_config(
            metric=metric_of(args).name,
            source_table=getattr(args, "source_table", None),
            columns=columns_of(args) or None,
            quiet_gc=True,
            **extra,
        )
    except (IdentifierError, TypeError, ValueError) as exc:  # bad names, or values that do not fit together
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
