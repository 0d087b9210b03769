"""Idempotent writes: insert-or-update (and insert-or-ignore) keyed by a table's primary key.

This module picks the path, by the dialect family (``warehouse/dialects/``); SQLite's statements
are in ``sqlite_write``, PostgreSQL's ``COPY`` in ``pg_copy``, the MERGE family's in
``merge_write``, what they share in ``write_rows``.

- SQLite: native ``INSERT ... ON CONFLICT`` as a few driver-level multi-row statements (up to
  ``SQLITE_ROWS_PER_STATEMENT`` rows each).
- PostgreSQL: ``COPY`` into a session-local temporary staging table shaped like the target
  (``ON COMMIT DELETE ROWS``), then one ``INSERT ... SELECT ... ORDER BY key ON CONFLICT``
  (``copy_upsert``): three round trips per table instead of one statement per row.
- DuckDB: the chunk as a registered DataFrame, scanned by one ``INSERT ... SELECT ... ON
  CONFLICT`` per table (``duckdb_write``; DuckDB runs an executemany row by row, and SQLAlchemy
  compiles a multi-row ``VALUES`` afresh each time).
- MySQL and MariaDB: ``INSERT ... ON DUPLICATE KEY UPDATE`` as one executemany per ``BATCH``
  rows (PyMySQL sends it as one multi-row ``VALUES`` statement); an insert that leaves existing
  rows alone updates a key column to itself (``INSERT IGNORE`` would also turn strict mode's
  errors into warnings).
- Snowflake (keys not enforced): de-duplicate the chunk, stage it in a temporary table, one
  ``MERGE`` on the key (``merge_write``).
- Any other dialect: the generic path, ``UPDATE`` by key and ``INSERT`` the rows the update did
  not match (correct for one writer per key; concurrent writers of the same key may see a
  unique-key error and should retry the chunk).

All of it runs inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table, and_, bindparam, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.sql.dml import Insert

from .dialects import for_dialect
from .duckdb_write import frame_upsert
from .merge_write import merge_rows
from .pg_copy import copy_upsert
from .sqlite_write import SQLITE_ROWS_PER_STATEMENT, _sqlite_upsert, _sqlite_write_columns
from .write_rows import BATCH, ColumnRows, _batches, _decoded, _dedupe, _key_columns, _keys_and_columns

__all__ = [
    "upsert",
    "insert_ignore",
    "native_upsert_supported",
    "copy_upsert",
    "ColumnRows",
    "BATCH",
    "SQLITE_ROWS_PER_STATEMENT",
]


def native_upsert_supported(conn: Connection) -> bool:
    return for_dialect(conn.dialect.name).native_upsert


def _native_insert(conn: Connection, table: Table, keys: list[str], others: list[str]) -> Insert:
    """The dialect family's ``INSERT ... ON CONFLICT (keys)`` (``warehouse/dialects/``): update
    ``others`` from the new row, or (no ``others``) leave the existing row as it is."""
    build = for_dialect(conn.dialect.name).native_insert
    if build is None:
        raise ValueError(f"the {conn.dialect.name} dialect has no native insert-or-update here")
    stmt: Insert = build(table, keys, others)
    return stmt


def _native_batches(conn: Connection, stmt: Insert, rows: Sequence[dict[str, Any]]) -> None:
    """``stmt`` for ``rows``, one executemany per ``BATCH`` rows."""
    for batch in _batches(rows):
        conn.execute(stmt, list(batch))


def upsert(conn: Connection, table: Table, rows: Sequence[dict[str, Any]], *, native: bool | None = None) -> int:
    """Insert ``rows`` or, where the primary key exists, overwrite the other columns.

    Every row must carry the same keys. Returns the number of rows given (a key given twice is
    written once, with its last row).
    ``native=False`` forces the generic path (used by the tests on SQLite).
    """
    if not rows:
        return 0
    keys, cols = _keys_and_columns(table, rows)
    others = [c for c in cols if c not in keys]
    use_native = native_upsert_supported(conn) if native is None else native
    if use_native and for_dialect(conn.dialect.name).merge:
        return merge_rows(conn, table, _decoded(_dedupe(rows, keys)), keys, others)
    if use_native and for_dialect(conn.dialect.name).frame_write:
        return frame_upsert(conn, table, _dedupe(rows, keys), keys, others)
    if use_native and conn.dialect.name == "postgresql" and len(rows) > 1:
        return copy_upsert(conn, table, rows, update=True)
    if use_native and conn.dialect.name == "sqlite":
        # multi-row statements apply the rows in order: a key given twice ends with its last row,
        # as deduplication would leave it (and SQLite locks the whole database, so no key order)
        _sqlite_upsert(conn, table, cols, keys, others, rows)
        return len(rows)
    rows = _dedupe(rows, keys, ordered=conn.dialect.name != "sqlite")
    rows = _decoded(rows)
    if use_native:
        _native_batches(conn, _native_insert(conn, table, keys, others), rows)
        return len(rows)
    return _generic_upsert(conn, table, rows, keys, others)


def _generic_upsert(conn: Connection, table: Table, rows, keys: list[str], others: list[str]) -> int:
    # bind names must not clash with column names in UPDATE ... SET
    where = and_(*[table.c[k] == bindparam(f"k_{k}") for k in keys])
    upd = update(table).where(where).values({c: bindparam(f"v_{c}") for c in others}) if others else None
    exists = select(*[table.c[k] for k in keys]).where(where)
    for row in rows:
        params = {f"k_{k}": row[k] for k in keys}
        if upd is not None:
            params.update({f"v_{c}": row[c] for c in others})
            matched = conn.execute(upd, params).rowcount
        else:
            matched = 1 if conn.execute(exists, params).first() is not None else 0
        if not matched:
            conn.execute(insert(table), [row])
    return len(rows)


def insert_ignore(
    conn: Connection, table: Table, rows: Sequence[dict[str, Any]] | ColumnRows, *, native: bool | None = None
) -> int:
    """Insert ``rows`` whose primary key is not present yet; existing rows are left untouched."""
    if not len(rows):
        return 0
    keys = _key_columns(table)
    if isinstance(rows, ColumnRows) and (missing := [k for k in keys if k not in rows.columns]):
        raise ValueError(f"insert into {table.name}: rows lack key column(s) {missing} (a key is not shared)")
    use_native = native_upsert_supported(conn) if native is None else native
    if use_native and for_dialect(conn.dialect.name).frame_write:
        return frame_upsert(conn, table, rows if isinstance(rows, ColumnRows) else _dedupe(rows, keys), keys, None)
    if isinstance(rows, ColumnRows):
        if use_native and conn.dialect.name == "sqlite":  # distinct keys: nothing to de-duplicate
            _sqlite_write_columns(conn, table, keys, [], rows.columns, rows.shared)
            return len(rows)
        rows = rows.as_dicts()
    if use_native and conn.dialect.name == "postgresql" and len(rows) > 1:
        return copy_upsert(conn, table, rows, update=False)
    rows = _dedupe(rows, keys, ordered=conn.dialect.name != "sqlite")
    if use_native and for_dialect(conn.dialect.name).merge:
        return merge_rows(conn, table, _decoded(rows), keys, None)
    if use_native and conn.dialect.name == "sqlite":
        _sqlite_upsert(conn, table, list(rows[0].keys()), keys, [], rows)
        return len(rows)
    if use_native:
        _native_batches(conn, _native_insert(conn, table, keys, []), rows)
        return len(rows)
    exists = select(*[table.c[k] for k in keys]).where(and_(*[table.c[k] == bindparam(f"k_{k}") for k in keys]))
    for row in rows:
        if conn.execute(exists, {f"k_{k}": row[k] for k in keys}).first() is None:
            conn.execute(insert(table), [row])
    return len(rows)
