"""``ctxprec_segments``: the segment values of each score row (``ctxprec score --segment COL``).

One row per ``ctxprec_scores`` row that was scored with segment columns, with the score's key
(``log_id``, ``metric``, ``judge_model``, ``prompt_version``, ``source_table``, ``mapping``) and, copied from it
in the same transaction, ``partition_key``, ``score`` and ``success``; then one text column per
segment column, named ``seg_<column>`` (the source column's value as text; NULL is the segment
``(null)``), and ``segment_columns``, the JSON list of the segment columns the row was scored with
(sorted): a ``seg_`` column that is not in that list was not recorded for the row (it was added
for another configuration) and is never read as ``(null)``.

Why this shape: per-segment figures and comparisons are ``GROUP BY`` over plain columns of one
narrow table — no join with the scores, no JSON parsing per row. The primary key starts with the
scoring key and the partition, so the rows of one population's partitions are one contiguous range
of the key (on SQLite the table is clustered by it, ``WITHOUT ROWID``). A ``seg_`` column is added
(``ALTER TABLE ... ADD COLUMN``, nullable: no rewrite) the first time a run names its segment.

A score row re-scored under another set of segment columns gets its segment row rewritten; a row
scored without segments has none.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime
from typing import Any

from sqlalchemy import Boolean, Column, MetaData, PrimaryKeyConstraint, Table, Text, delete, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.schema import CreateColumn

from .ddl import create_table
from .dialects.reads import in_parts
from .engine import write_transaction
from .identifiers import validate_identifier
from .migrate import MAPPING, MAPPING_LENGTH, add_key_columns, migrate_table
from .reflect import get_columns, table_names
from .scoring_key import ScoringKey
from .types import Double, ExactText, KeyCode, KeyText, ModelName
from .upsert import upsert

__all__ = [
    "SEGMENTS",
    "PREFIX",
    "NULL_LABEL",
    "segment_column",
    "segment_value",
    "segments_json",
    "segments_table",
    "ensure_segments_table",
    "existing_segments_table",
    "segment_rows",
    "segment_state",
    "refresh_segment_values",
    "write_segments",
]

SEGMENTS = "ctxprec_segments"
PREFIX = "seg_"
#: how a NULL segment value is shown (stored as SQL NULL)
NULL_LABEL = "(null)"

_KEY = (*ScoringKey.FIELDS, "partition_key", "log_id")

_tables: dict[tuple[str | None, tuple[str, ...]], Table] = {}
_ensured: weakref.WeakKeyDictionary[Engine, set[tuple[str | None, tuple[str, ...]]]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def segment_column(name: str) -> str:
    """``tenant`` -> ``seg_tenant`` (the column of ``ctxprec_segments`` holding its values)."""
    return PREFIX + name


def segments_json(names: Iterable[str]) -> str:
    """The canonical ``segment_columns`` value: the sorted JSON list of the names."""
    return json.dumps(sorted(set(names)), separators=(",", ":"))


def segment_value(value: Any) -> str | None:
    """A source value as segment text: NULL stays None (the ``(null)`` segment); bytes are decoded
    (UTF-8, invalid bytes replaced); dates ISO-8601; JSON values as compact JSON; anything else ``str``."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def segments_table(schema: str | None, names: Sequence[str]) -> Table:
    """The declaration of ``ctxprec_segments`` with the ``seg_`` columns of ``names``."""
    if schema is not None:
        validate_identifier(schema, "output schema name")
    cache_key = (schema, tuple(sorted(set(names))))
    with _lock:
        t = _tables.get(cache_key)
        if t is None:
            cols: list[Column[Any]] = [Column(segment_column(n), ExactText()) for n in cache_key[1]]
            t = _tables[cache_key] = Table(
                SEGMENTS,
                MetaData(schema=schema),
                Column("log_id", KeyText(), nullable=False),
                Column("metric", KeyText(64), nullable=False),
                # the key's types are the scores' (each family's choice, ``warehouse/types.py``):
                # on MySQL / MariaDB this key, with the partition, fits InnoDB's 3,072 bytes
                Column("judge_model", ModelName(), nullable=False),
                Column("prompt_version", KeyText(64), nullable=False),
                Column("source_table", KeyText(), nullable=False),
                Column(MAPPING, KeyCode(MAPPING_LENGTH), nullable=False),
                Column("partition_key", KeyCode(10), nullable=False),
                Column("score", Double(), nullable=False),
                Column("success", Boolean, nullable=False),
                Column("segment_columns", Text, nullable=False),
                *cols,
                PrimaryKeyConstraint(*_KEY, name=f"{SEGMENTS}_pk"),
                sqlite_with_rowid=False,
            )
        return t


def _column_names(conn: Connection, schema: str | None) -> set[str] | None:
    if SEGMENTS not in table_names(conn, schema):
        return None
    return {c["name"] for c in get_columns(conn, SEGMENTS, schema)}


def _create_or_extend(engine: Engine, table: Table, legacy_mappings: Mapping[str, str], create: bool) -> None:
    with write_transaction(engine) as conn:
        have = _column_names(conn, table.schema)
        if have is None:
            if create:
                create_table(conn, table, checkfirst=False)
            return
        if MAPPING not in have:  # a table of the version before ``mapping``: add it to the key
            every = have | {c.name for c in table.c}  # the rebuilt table keeps every seg_ column
            whole = segments_table(table.schema, sorted(c[len(PREFIX) :] for c in every if c.startswith(PREFIX)))
            add_key_columns(conn, whole, {}, legacy_mappings)
            have = _column_names(conn, table.schema) or set()
        prep = conn.dialect.identifier_preparer
        for col in table.columns:
            if col.name not in have:
                ddl = CreateColumn(col).compile(dialect=conn.dialect)
                conn.exec_driver_sql(f"ALTER TABLE {prep.format_table(table)} ADD COLUMN {ddl}")
        migrate_table(conn, table)


def ensure_segments_table(
    engine: Engine,
    schema: str | None,
    names: Sequence[str],
    legacy_mappings: Mapping[str, str] | None = None,
    *,
    create: bool = True,
) -> Table:
    """Create ``ctxprec_segments`` if missing and add the ``seg_`` columns of ``names`` it lacks
    (once per engine and set of names); returns the declaration for ``names``. A table written
    before ``mapping`` existed gets it (``migrate.add_key_columns``, ``legacy_mappings`` as for
    the scores: metric -> the fingerprint its old rows were read with). ``create=False`` (a run
    without segments): only bring an existing table up to date — its readers filter by the
    scoring key, ``mapping`` included."""
    table = segments_table(schema, names)
    cache_key = (schema, tuple(sorted(set(names))))
    done = _ensured.setdefault(engine, set())
    if cache_key in done:
        return table
    try:
        _create_or_extend(engine, table, legacy_mappings or {}, create)
    except DBAPIError:  # another worker created or extended it between our look and our DDL
        _create_or_extend(engine, table, legacy_mappings or {}, create)
    done.add(cache_key)
    return table


def existing_segments_table(conn: Connection, schema: str | None = None) -> tuple[Table | None, list[str]]:
    """For readers: the declaration of ``ctxprec_segments`` with every ``seg_`` column it has, and
    the segment names (None, [] when the table does not exist)."""
    have = _column_names(conn, schema)
    if have is None:
        return None, []
    names = sorted(c[len(PREFIX) :] for c in have if c.startswith(PREFIX))
    return segments_table(schema, names), names


def segment_rows(
    scores: Sequence[Mapping[str, Any]], values: Mapping[str, Mapping[str, Any]], names: Sequence[str]
) -> list[dict[str, Any]]:
    """The segment rows of a chunk's score rows; ``values`` maps a log id to its row's raw
    segment values (by segment name)."""
    recorded = segments_json(names)
    out = []
    for s in scores:
        raw = values.get(str(s["log_id"]), {})
        row = {k: s[k] for k in _KEY}
        row.update(score=s["score"], success=s["success"], segment_columns=recorded)
        for n in names:
            row[segment_column(n)] = segment_value(raw.get(n))
        out.append(row)
    return out


def _parts(values: Sequence[str]) -> Iterable[list[str]]:
    for part in in_parts(list(dict.fromkeys(values))):
        yield list(part)


def segment_state(
    conn: Connection, table: Table, key: ScoringKey, partition_key: str, log_ids: Sequence[str], names: Sequence[str]
) -> tuple[dict[str, dict[str, str | None]], set[str]]:
    """Which of ``log_ids`` have a segment row in the partition: (those recorded with exactly the
    segment columns ``names``, with their recorded values by name; those with any row). Reads the
    primary key's range; the table exists (``ensure_segments_table``)."""
    wanted = segments_json(names)
    complete: dict[str, dict[str, str | None]] = {}
    present: set[str] = set()
    c = table.c
    values = [c[segment_column(n)] for n in names]
    for part in _parts(log_ids):
        stmt = select(c.log_id, c.segment_columns, *values).where(
            key.where(table), c.partition_key == partition_key, c.log_id.in_(part)
        )
        for log_id, recorded, *current in conn.execute(stmt):
            present.add(log_id)
            if recorded == wanted:
                complete[log_id] = dict(zip(names, current))
    return complete, present


def refresh_segment_values(
    conn: Connection,
    table: Table,
    key: ScoringKey,
    partition_key: str,
    values: Mapping[str, Mapping[str, str | None]],
) -> None:
    """Rewrite the ``seg_`` values of rows already scored whose source values changed since
    (``{log_id: {name: text}}``, inside the caller's transaction): a corrected segment value is
    read on the next run, as a corrected ``event_time`` is."""
    c = table.c
    for log_id, by_name in values.items():
        stmt = (
            table.update()
            .where(key.where(table), c.partition_key == partition_key, c.log_id == log_id)
            .values({segment_column(n): v for n, v in by_name.items()})
        )
        conn.execute(stmt)


def write_segments(
    conn: Connection,
    table: Table,
    key: ScoringKey,
    rows: Sequence[dict[str, Any]],
    *,
    moved: Sequence[str] = (),
    partition_key: str | None = None,
) -> None:
    """Upsert ``rows`` (from ``segment_rows``) inside the caller's transaction. ``moved``: log ids
    scored before in another partition (their ``event_time`` changed): their segment rows there
    are deleted first, so a score has one segment row."""
    if moved and partition_key is not None:
        c = table.c
        for part in _parts(moved):
            conn.execute(delete(table).where(key.where(table), c.partition_key != partition_key, c.log_id.in_(part)))
    if rows:
        upsert(conn, table, list(rows))
