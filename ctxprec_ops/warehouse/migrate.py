"""Bring output tables created by an older version up to the current declaration, in place.

- ``add_missing_columns``: a column the declaration has and the table lacks is added with
  ``ALTER TABLE ... ADD COLUMN`` (nullable, so existing rows keep their values and get NULL).
- ``add_key_columns``: ``source_table``, then ``mapping`` joined the primary keys of
  ``ctxprec_scores``, ``ctxprec_failures`` and ``ctxprec_runs`` (``mapping`` also that of
  ``ctxprec_segments``). Existing rows keep the table they came from (the input table their
  metric was configured with, ``legacy_sources``) and the column mapping it was read with: the
  fingerprint of the mapping their metric is configured with now (``legacy_mappings``; the run
  that migrates: its own; no configured mapping: ``default``, the default mapping's). That is a
  deliberate assumption, as for ``source_table``: the version before recorded neither, and the
  configuration in force when the tables are upgraded is the best witness of what wrote them.
  How is the family's (``Dialect.add_key_columns``): add the columns, fill them, make them NOT
  NULL, replace the primary key; SQLite, which cannot change a primary key, rebuilds the table.
- ``binary_judgment_keys``: ``ctxprec_judgments.key`` was 64 hex digits of text and is now the
  23 binary bytes of ``cache.judgment_key``; the family converts it (``Dialect.convert_judgment_keys``:
  PostgreSQL and SQLite keep the verdicts already paid for, others start the cache afresh).
- ``migrate_table``: the family's own steps (MySQL / MariaDB: key text an older version created
  with the server's case-insensitive collation is given its binary collation).

All run inside the caller's write transaction; the family locks the table where concurrent
migrators need it (PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` already does) and it is checked again,
so concurrent workers migrate once; idempotent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Connection
from sqlalchemy.schema import CreateColumn
from sqlalchemy.types import BINARY, VARBINARY, LargeBinary

from .dialects import dialect_of
from .reflect import get_columns

__all__ = [
    "StoredColumns",
    "default_legacy_sources",
    "add_missing_columns",
    "add_key_columns",
    "binary_judgment_keys",
    "migrate_table",
    "MAPPING",
    "DEFAULT_MAPPING",
    "MAPPING_LENGTH",
]


def default_legacy_sources() -> dict[str, str]:
    """metric -> input table for rows written before ``source_table`` existed, when the caller
    gives none: nothing known (old rows then get ``retrieval_logs``). The pipeline passes the
    registry's tables and this run's (``pipeline.context.legacy_sources``)."""
    return {}


SOURCE_TABLE = "source_table"
#: the column mapping's fingerprint (``pipeline.mapping.mapping_id``): part of a score's key
MAPPING = "mapping"
#: ``mapping`` of rows read with the default column mapping (and of old rows without a configured one)
DEFAULT_MAPPING = "default"
#: characters of a ``mapping`` value (16 hex digits of a sha256; short: keys must fit MySQL's 3,072 bytes)
MAPPING_LENGTH = 16
#: the key columns added after the first version, in the order they are filled
KEY_COLUMNS = (SOURCE_TABLE, MAPPING)


class StoredColumns:
    """The stored columns of the tables a migration checks, read once for all of them (one query
    where the family reads ``information_schema``: DuckDB's eight reads cost ~10 - 20 ms of a run's
    start) and read again for a table once a step changed it. A check made again after taking the
    migration lock reads the table itself: another worker may have migrated it meanwhile."""

    def __init__(self, conn: Connection, tables: Sequence[Table]) -> None:
        self._conn = conn
        self._known: dict[tuple[str | None, str], list[dict[str, Any]]] = {}
        for schema in dict.fromkeys(t.schema for t in tables):
            names = [t.name for t in tables if t.schema == schema]
            for name, cols in dialect_of(conn).columns_of(conn, names, schema).items():
                self._known[(schema, name)] = cols

    def of(self, table: Table) -> list[dict[str, Any]]:
        key = (table.schema, table.name)
        cols = self._known.get(key)
        if cols is None:
            cols = self._known[key] = get_columns(self._conn, table.name, table.schema)
        return cols

    def forget(self, table: Table) -> None:
        self._known.pop((table.schema, table.name), None)


def _stored(conn: Connection, table: Table, stored: StoredColumns | None) -> list[dict[str, Any]]:
    """``table``'s stored columns: from ``stored`` when given, else read now."""
    return stored.of(table) if stored is not None else get_columns(conn, table.name, table.schema)


def _columns(conn: Connection, table: Table, stored: StoredColumns | None = None) -> set[str]:
    return {c["name"] for c in _stored(conn, table, stored)}


def add_missing_columns(conn: Connection, table: Table, stored: StoredColumns | None = None) -> list[str]:
    """Add the (nullable) columns of ``table`` its stored version lacks; returns their names."""
    have = _columns(conn, table, stored)
    added = []
    prep = conn.dialect.identifier_preparer
    for col in table.columns:
        if col.name in have or not col.nullable:
            continue
        ddl = CreateColumn(col).compile(dialect=conn.dialect)
        conn.exec_driver_sql(f"ALTER TABLE {prep.format_table(table)} ADD COLUMN {ddl}")
        added.append(col.name)
    if added and stored is not None:
        stored.forget(table)
    return added


def _by_metric(values: Mapping[str, str], default: str) -> str:
    """``CASE metric WHEN ... END`` SQL giving an old row's value by its metric (literals are
    bound safely by quoting them as SQL strings: they are validated identifiers or hex anyway)."""

    def q(value: str) -> str:
        return "'" + value.replace("'", "''") + "'"

    if not values:
        return q(default)
    whens = " ".join(f"WHEN {q(m)} THEN {q(t)}" for m, t in sorted(values.items()))
    return f"CASE metric {whens} ELSE {q(default)} END"


def _missing_keys(conn: Connection, table: Table, stored: StoredColumns | None = None) -> list[str]:
    have = _columns(conn, table, stored)
    return [c for c in KEY_COLUMNS if c in table.c and c not in have]


def add_key_columns(
    conn: Connection,
    table: Table,
    legacy_sources: Mapping[str, str],
    legacy_mappings: Mapping[str, str] | None = None,
    stored: StoredColumns | None = None,
) -> list[str]:
    """Give an older ``table`` the key columns it lacks (``source_table``, ``mapping``), filled
    for its rows by metric (``legacy_sources``: metric -> input table, the first one for other
    metrics; ``legacy_mappings``: metric -> mapping fingerprint, ``DEFAULT_MAPPING`` for other
    metrics), and the current primary key; returns the columns added."""
    if not _missing_keys(conn, table, stored):
        return []
    if stored is not None:
        stored.forget(table)  # read again below, and changed after
    family = dialect_of(conn)
    family.lock_for_migration(conn, table)
    missing = _missing_keys(conn, table)  # a concurrent worker may have migrated it first
    if not missing:
        return []
    fills = {
        SOURCE_TABLE: _by_metric(legacy_sources, next(iter(legacy_sources.values()), "retrieval_logs")),
        MAPPING: _by_metric(legacy_mappings or {}, DEFAULT_MAPPING),
    }
    family.add_key_columns(conn, table, {c: fills[c] for c in missing})
    return missing


def binary_judgment_keys(conn: Connection, table: Table, stored: StoredColumns | None = None) -> bool:
    """Convert a judgments ``table`` whose stored ``key`` is text to binary keys; returns whether
    anything was done."""
    if _key_is_binary(conn, table, stored):
        return False
    if stored is not None:
        stored.forget(table)
    family = dialect_of(conn)
    family.lock_for_migration(conn, table)
    if _key_is_binary(conn, table):  # another worker converted it while we waited
        return False
    family.convert_judgment_keys(conn, table)
    return True


def migrate_table(conn: Connection, table: Table, stored: StoredColumns | None = None) -> list[str]:
    """The family's own steps for an existing ``table`` (``Dialect.migrate_table``); returns the
    columns it changed."""
    changed = dialect_of(conn).migrate_table(conn, table)
    if changed and stored is not None:
        stored.forget(table)
    return changed


def _key_is_binary(conn: Connection, table: Table, stored: StoredColumns | None = None) -> bool:
    for c in _stored(conn, table, stored):
        if c["name"] == "key":
            return isinstance(c["type"], (LargeBinary, BINARY, VARBINARY))
    return True  # no such table (nothing to convert)
