"""Idempotent writes: insert-or-update (and insert-or-ignore) keyed by a table's primary key.

This module picks the path; SQLite's statements are in ``sqlite_write``, PostgreSQL's ``COPY``
in ``pg_copy``, what they share in ``write_rows``.

SQLite and PostgreSQL use their native ``INSERT ... ON CONFLICT``. On SQLite that is a few
driver-level multi-row statements (``INSERT ... VALUES (...), (...) ON CONFLICT``, up to
``SQLITE_ROWS_PER_STATEMENT`` rows each). On PostgreSQL several rows go in bulk: ``COPY`` into a
session-local temporary staging table shaped like the target (``ON COMMIT DELETE ROWS``), then one
``INSERT ... SELECT ... ORDER BY key ON CONFLICT`` (``copy_upsert``) — three round trips per table
instead of one statement per row, inside the caller's transaction. Every other dialect takes
MySQL and MariaDB use ``INSERT ... ON DUPLICATE KEY UPDATE`` given as one executemany per
``BATCH`` rows (PyMySQL sends such a batch as one multi-row ``VALUES`` statement); an insert that
leaves existing rows alone updates a key column to itself (``INSERT IGNORE`` would also turn
strict mode's errors into warnings). Every other dialect takes
the generic path: ``UPDATE`` by key and ``INSERT`` the rows the update did not match, inside the
caller's transaction (correct for one writer per key; concurrent writers of the same key on such
a dialect may see a unique-key error and should retry the chunk).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table, and_, bindparam, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.sql.dml import Insert

from .dialects import for_dialect
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
        stmt = _native_insert(conn, table, keys, others)
        for batch in _batches(rows):
            conn.execute(stmt, list(batch))
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
    if isinstance(rows, ColumnRows):
        if use_native and conn.dialect.name == "sqlite":  # distinct keys: nothing to de-duplicate
            _sqlite_write_columns(conn, table, keys, [], rows.columns, rows.shared)
            return len(rows)
        rows = rows.as_dicts()
    if use_native and conn.dialect.name == "postgresql" and len(rows) > 1:
        return copy_upsert(conn, table, rows, update=False)
    rows = _dedupe(rows, keys, ordered=conn.dialect.name != "sqlite")
    if use_native and conn.dialect.name == "sqlite":
        _sqlite_upsert(conn, table, list(rows[0].keys()), keys, [], rows)
        return len(rows)
    if use_native:
        stmt = _native_insert(conn, table, keys, [])
        for batch in _batches(rows):
            conn.execute(stmt, list(batch))
        return len(rows)
    exists = select(*[table.c[k] for k in keys]).where(and_(*[table.c[k] == bindparam(f"k_{k}") for k in keys]))
    for row in rows:
        if conn.execute(exists, {f"k_{k}": row[k] for k in keys}).first() is None:
            conn.execute(insert(table), [row])
    return len(rows)
