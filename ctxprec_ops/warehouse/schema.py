"""The output tables (``ctxprec_scores``, ``ctxprec_failures``, ``ctxprec_runs``,
``ctxprec_judgments``), declared with SQLAlchemy Core and created when missing.

Keys (each is the primary key, so upserts can target it):

- ``ctxprec_scores``: (log_id, metric, judge_model, prompt_version, source_table, mapping).
- ``ctxprec_failures``: the same six columns. A failure belongs to one scoring configuration,
  exactly like a score, so "every input row ends in exactly one of scores or failures" holds per
  (metric, judge model, prompt version), and the successful re-run of that configuration deletes
  the failure record; a failure under judge A is not erased by a score from judge B.
- ``ctxprec_runs``: (run_id, partition_key, metric, source_table, mapping): one row per partition
  run (the same orchestrator run id may score two metrics, tables or partitions without collisions).

``source_table`` is the input table a row came from: two tables whose ids overlap never share a
score, a failure or a run row. ``mapping`` is the fingerprint of the column mapping it was read
with (``pipeline.mapping.mapping_id``: ``default``, or 16 hex digits): a score read through
another column (``retrieval_context`` pointed elsewhere, say) is another score.
- ``ctxprec_judgments``: ``key`` = ``cache.judgment_key(...)``, 23 bytes of binary (tables with
  the former 64-hex-digit text key are converted in place, ``migrate.binary_judgment_keys``).

``log_id`` is text (source ids may be integers). ``score`` is double precision, unrounded.
Timestamps are stored in UTC. Each warehouse family chooses the concrete types
(``warehouse/types.py``): key text compares byte for byte everywhere (binary collations on
MySQL / MariaDB), the judgment key is ``bytea`` / ``BLOB`` / ``VARBINARY(23)``, JSON ``JSONB`` on
PostgreSQL and text on Snowflake, and so on (docs/warehouses.md's table).
"""

from __future__ import annotations

import random
import threading
import time
import weakref
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from sqlalchemy import (
    Boolean,
    Column,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    func,
    select,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import FromClause, Subquery

from ..errors import CtxPrecError
from ..judge.cache import KEY_BYTES
from .ddl import create_tables
from .dialects import dialect_of
from .engine import write_transaction
from .identifiers import validate_identifier
from .migrate import (
    MAPPING_LENGTH,
    StoredColumns,
    add_key_columns,
    add_missing_columns,
    binary_judgment_keys,
    default_legacy_sources,
    migrate_table,
)
from .reflect import get_columns, table_names
from .scoring_key import ScoringKey
from .types import Double, HashKey, JSONValue, KeyCode, KeyText, ModelName, Timestamp

__all__ = [
    "OutputTables",
    "ExistingTables",
    "MissingScoresTableError",
    "existing_output_tables",
    "output_tables",
    "ensure_output_tables",
    "SCORES",
    "FAILURES",
    "RUNS",
    "JUDGMENTS",
]

SCORES = "ctxprec_scores"
FAILURES = "ctxprec_failures"
RUNS = "ctxprec_runs"
JUDGMENTS = "ctxprec_judgments"


#: how each column type is chosen per family: ``warehouse/types.py``
_JSON = JSONValue()
_TS = Timestamp()
_DOUBLE = Double()
#: key text: unbounded where the family allows it in a key, 255 characters elsewhere
_KEYTEXT = KeyText()
#: short key text (metric names, prompt versions)
_KEYNAME = KeyText(64)
#: the judge model in a key: its length is what the family's key size leaves (112 on MySQL)
_MODEL = ModelName()
#: judgment-cache keys are 23-byte digests (``cache.KEY_BYTES``), stored as bytes: compared with
#: memcmp, and on PostgreSQL a 32-byte key-index entry instead of the 80 bytes of 64 hex digits
_HASHKEY = HashKey(KEY_BYTES)
#: the partition key (``YYYY-MM-DD``) and the column mapping's fingerprint (``migrate.MAPPING_LENGTH``)
_PARTITION = KeyCode(10)
_MAPPING = KeyCode(MAPPING_LENGTH)
#: trace and span ids as text (OTLP's 32 / 16 hex digits; room for other id forms)
_TRACE_ID = String(128)


@dataclass(frozen=True)
class OutputTables:
    metadata: MetaData
    scores: Table
    failures: Table
    runs: Table
    judgments: Table


def _build(schema: str | None) -> OutputTables:
    md = MetaData(schema=schema)
    scores = Table(
        SCORES,
        md,
        Column("log_id", _KEYTEXT, nullable=False),
        Column("partition_key", _PARTITION, nullable=False),
        Column("metric", _KEYNAME, nullable=False),
        # the input table the row came from (``schema.table`` as configured): ids of two tables
        # never share a score
        Column("source_table", _KEYTEXT, nullable=False),
        # the column mapping it was read with (``default`` or 16 hex digits of its sha256)
        Column("mapping", _MAPPING, nullable=False),
        Column("score", _DOUBLE, nullable=False),
        Column("success", Boolean, nullable=False),
        Column("threshold", _DOUBLE, nullable=False),
        Column("verdicts", _JSON),
        Column("reason", Text),
        Column("judge_model", _MODEL, nullable=False),
        Column("prompt_version", _KEYNAME, nullable=False),
        Column("prompt_tokens", Integer),
        Column("completion_tokens", Integer),
        Column("cost", _DOUBLE),
        Column("run_id", _KEYTEXT, nullable=False),
        Column("scored_at", _TS, nullable=False),
        # additions: how the score was obtained (0 judge calls = answered from the cache)
        Column("judge_calls", Integer),
        Column("cached_nodes", Integer),
        Column("chunk_index", Integer),
        # a spans source (docs/traces.md): the case's trace and span (joins back to the trace), its
        # documents' ids / scores / metadata by rank, and which reference it was judged against
        Column("trace_id", _TRACE_ID),
        Column("span_id", _TRACE_ID),
        Column("documents", _JSON),
        Column("reference", Text),
        PrimaryKeyConstraint(*ScoringKey.ROW_KEY, name=f"{SCORES}_pk"),
        Index(f"ix_{SCORES}_partition", "partition_key", "metric"),
        Index(f"ix_{SCORES}_run", "run_id"),
    )
    failures = Table(
        FAILURES,
        md,
        Column("log_id", _KEYTEXT, nullable=False),
        Column("partition_key", _PARTITION, nullable=False),
        Column("metric", _KEYNAME, nullable=False),
        Column("source_table", _KEYTEXT, nullable=False),
        Column("mapping", _MAPPING, nullable=False),
        Column("judge_model", _MODEL, nullable=False),
        Column("prompt_version", _KEYNAME, nullable=False),
        Column("error_type", String(64), nullable=False),
        Column("error_message", Text, nullable=False),
        Column("attempts", Integer, nullable=False),
        Column("run_id", _KEYTEXT, nullable=False),
        Column("failed_at", _TS, nullable=False),
        Column("chunk_index", Integer),
        Column("trace_id", _TRACE_ID),
        Column("span_id", _TRACE_ID),
        PrimaryKeyConstraint(*ScoringKey.ROW_KEY, name=f"{FAILURES}_pk"),
        Index(f"ix_{FAILURES}_partition", "partition_key", "metric"),
    )
    runs = Table(
        RUNS,
        md,
        Column("run_id", _KEYTEXT, nullable=False),
        Column("partition_key", _PARTITION, nullable=False),
        Column("metric", _KEYNAME, nullable=False),
        Column("source_table", _KEYTEXT, nullable=False),
        Column("mapping", _MAPPING, nullable=False),
        Column("status", String(32), nullable=False),
        Column("rows_total", Integer, nullable=False),
        Column("rows_scored", Integer, nullable=False),
        Column("rows_cached", Integer, nullable=False),
        Column("rows_failed", Integer, nullable=False),
        Column("mean_score", _DOUBLE),
        Column("median_score", _DOUBLE),
        Column("pass_rate", _DOUBLE),
        Column("ci_low", _DOUBLE),
        Column("ci_high", _DOUBLE),
        Column("prompt_tokens", Integer),
        Column("completion_tokens", Integer),
        Column("cost", _DOUBLE),
        Column("judge_model", String(255)),
        Column("prompt_version", String(64)),
        Column("started_at", _TS),
        Column("finished_at", _TS),
        # additions
        Column("threshold", _DOUBLE),
        Column("judge_calls", Integer),
        Column("failures_by_type", _JSON),
        Column("error_message", Text),
        # rows of the source table in no partition (event_time NULL or unreadable), and rows of
        # this partition without an id: neither scored nor failed, counted here instead
        Column("rows_unpartitioned", Integer),
        Column("rows_without_id", Integer),
        Column("sample_rate", _DOUBLE),
        Column("rows_sampled", Integer),
        # the ledger: sampled source rows in neither ctxprec_scores nor ctxprec_failures
        Column("rows_unaccounted", Integer),
        # a judge cascade (NULL for one judge): nodes of the rows scored, those the strong judge
        # decided and their share, each judge's spend, the threshold used and the agreement the
        # calibration that chose it measured (ctxprec_cascades)
        Column("nodes_judged", Integer),
        Column("nodes_escalated", Integer),
        Column("escalation_rate", _DOUBLE),
        Column("cheap_cost", _DOUBLE),
        Column("strong_cost", _DOUBLE),
        Column("escalate_below", _DOUBLE),
        Column("calibration_agreement", _DOUBLE),
        PrimaryKeyConstraint("run_id", "partition_key", "metric", "source_table", "mapping", name=f"{RUNS}_pk"),
        Index(f"ix_{RUNS}_partition", "partition_key", "metric"),
    )
    judgments = Table(
        JUDGMENTS,
        md,
        Column("key", _HASHKEY, nullable=False),
        Column("judge_model", _MODEL, nullable=False),
        Column("prompt_version", _KEYNAME, nullable=False),
        Column("relevant", Boolean, nullable=False),
        Column("reason", Text),
        Column("created_at", _TS, nullable=False),
        # self-consistency: share of the sampled answers agreeing with ``relevant`` (NULL: one answer)
        Column("agreement", _DOUBLE),
        PrimaryKeyConstraint("key", name=f"{JUDGMENTS}_pk"),
        # SQLite: one B-tree keyed by the hash instead of a rowid table plus a unique index
        # (half the writes per judged node; the rows are small)
        sqlite_with_rowid=False,
    )
    return OutputTables(md, scores, failures, runs, judgments)


_cache: dict[str | None, OutputTables] = {}
_ensured: weakref.WeakKeyDictionary[Engine, set[str | None]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def output_tables(schema: str | None = None) -> OutputTables:
    """The four output tables (in ``schema``, default the connection's default schema)."""
    if schema is not None:
        validate_identifier(schema, "output schema name")
    with _lock:
        t = _cache.get(schema)
        if t is None:
            t = _cache[schema] = _build(schema)
        return t


def _create_all(
    engine: Engine, tables: OutputTables, legacy_sources: Mapping[str, str], legacy_mappings: Mapping[str, str]
) -> None:
    # in a write transaction: on SQLite that is BEGIN IMMEDIATE, so a second process waits for
    # the write lock (busy timeout) instead of failing with "database is locked" when its
    # check-then-CREATE would upgrade a read transaction another writer has overtaken
    with write_transaction(engine) as conn:
        create_tables(conn, tables.metadata)
        every = (tables.scores, tables.failures, tables.runs, tables.judgments)
        stored = StoredColumns(conn, every)
        for table in (tables.scores, tables.failures, tables.runs):
            add_key_columns(conn, table, legacy_sources, legacy_mappings, stored)
        for table in every:
            add_missing_columns(conn, table, stored)
        binary_judgment_keys(conn, tables.judgments, stored)
        for table in every:
            migrate_table(conn, table, stored)


#: tries of the check-then-CREATE, one more than the output tables a race can hit
_CREATE_ATTEMPTS = 6


def ensure_output_tables(
    engine: Engine,
    schema: str | None = None,
    legacy_sources: Mapping[str, str] | None = None,
    legacy_mappings: Mapping[str, str] | None = None,
) -> OutputTables:
    """Create the output tables (and indexes) that do not exist yet, and bring tables of an
    older version up to date in place (``warehouse/migrate.py``); once per engine.

    ``legacy_sources`` (metric -> input table) says which table the rows of tables written
    before ``source_table`` existed came from (default: each metric kind's default table);
    ``legacy_mappings`` (metric -> mapping fingerprint) which column mapping the rows of tables
    written before ``mapping`` existed were read with (default: ``default``)."""
    tables = output_tables(schema)
    done = _ensured.setdefault(engine, set())
    if schema in done:
        return tables
    sources = {**default_legacy_sources(), **(legacy_sources or {})}
    for attempt in range(_CREATE_ATTEMPTS):
        try:
            _create_all(engine, tables, sources, legacy_mappings or {})
            break
        except Exception as exc:
            if not isinstance(exc, DBAPIError) and not dialect_of(engine).write_conflict(exc):
                raise
            # another worker created one between our check and our CREATE: check again (where
            # DDL is not transactional, MySQL's, each of the tables can race once; DuckDB's
            # optimistic catalogue fails the second creator until the first commits: a short pause)
            if attempt == _CREATE_ATTEMPTS - 1:
                raise
            time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))
    done.add(schema)
    return tables


class MissingScoresTableError(CtxPrecError, LookupError):
    """The warehouse has no ``ctxprec_scores`` table (nothing was ever scored there)."""

    error_type = "no_scores"
    retryable = False


@dataclass(frozen=True)
class ExistingTables:
    """The output tables that exist in a warehouse, for readers (``failures``/``runs`` may be None)."""

    #: where the family does not enforce keys (``Dialect.keys_enforced``), ``scores`` and
    #: ``failures`` are each key's latest row (``latest_rows``): what two racing writers may
    #: have written twice is read once
    scores: FromClause
    failures: FromClause | None
    runs: Table | None
    #: the tables have ``source_table`` (False: written by a version before it, not migrated yet)
    source_keyed: bool = False
    #: the columns ``runs`` really has (an older version's table may lack the newer ones)
    runs_columns: frozenset[str] = frozenset()
    #: the columns ``scores`` really has (``mapping`` may be missing: not migrated yet)
    scores_columns: frozenset[str] = frozenset()


#: the column each output table's rows are written at (latest-wins reads order by it)
_WRITTEN_AT = {SCORES: "scored_at", FAILURES: "failed_at"}


def latest_rows(table: Table, columns: Collection[str]) -> Subquery:
    """``table`` with one row per primary key, its latest by when it was written (then by
    ``run_id``), for readers on a warehouse whose keys are informational: named like the table,
    with those of its ``columns`` the stored table has."""
    key = list(table.primary_key.columns)
    order = [table.c[_WRITTEN_AT[table.name]].desc(), table.c.run_id.desc()]
    rank = func.row_number().over(partition_by=key, order_by=order).label("ctxprec_rank")
    have = [c for c in table.c if c.name in columns]
    ranked = select(*have, rank).subquery(f"{table.name}_ranked")
    return select(*[ranked.c[c.name] for c in have]).where(ranked.c.ctxprec_rank == 1).subquery(table.name)


def readable(bind: Engine | Connection, table: Table, columns: Collection[str] | None = None) -> FromClause:
    """``table`` for reading: itself, or where the family does not enforce keys each key's
    latest row (``columns``: those the stored table has; default all of them)."""
    if dialect_of(bind).keys_enforced:
        return table
    return latest_rows(table, [c.name for c in table.c] if columns is None else columns)


def existing_output_tables(engine: Engine, schema: str | None = None) -> ExistingTables:
    """The output tables a reader can query (read-only: nothing is created)."""
    tables = output_tables(schema)
    names = set(table_names(engine, schema))
    if SCORES not in names:
        raise MissingScoresTableError(
            f"nothing has been scored in this warehouse yet (no {SCORES} table): "
            "score a partition first (ctxprec score --partition YYYY-MM-DD)"
        )
    score_cols = frozenset(c["name"] for c in get_columns(engine, SCORES, schema))
    keyed = "source_table" in score_cols
    run_cols = frozenset(c["name"] for c in get_columns(engine, RUNS, schema)) if RUNS in names else frozenset()
    failures: FromClause | None = None
    if FAILURES in names:  # its stored columns are read only where the latest rows are picked
        failures = (
            tables.failures
            if dialect_of(engine).keys_enforced
            else latest_rows(tables.failures, {c["name"] for c in get_columns(engine, FAILURES, schema)})
        )
    return ExistingTables(
        scores=readable(engine, tables.scores, score_cols),
        failures=failures,
        runs=tables.runs if RUNS in names else None,
        source_keyed=keyed,
        runs_columns=run_cols,
        scores_columns=score_cols,
    )
