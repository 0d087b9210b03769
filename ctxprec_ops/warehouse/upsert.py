"""Idempotent writes: insert-or-update (and insert-or-ignore) keyed by a table's primary key.

How a chunk is written is the warehouse family's (``Dialect.upsert`` / ``Dialect.insert_ignore``,
``warehouse/dialects/``): SQLite's multi-row ``INSERT ... ON CONFLICT`` statements,
PostgreSQL's ``COPY`` into a stage and one ``INSERT ... SELECT ... ON CONFLICT``, DuckDB's
registered frame, MySQL's ``ON DUPLICATE KEY UPDATE`` batches, Snowflake's stage and ``MERGE``,
and for any other dialect the generic path (``UPDATE`` by key, ``INSERT`` the rows the update did
not match). docs/warehouses.md lists them. All of it runs inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Connection

from .dialects import Dialect, dialect_of
from .write_rows import ColumnRows, key_columns, keys_and_columns

__all__ = ["upsert", "insert_ignore", "ColumnRows"]

#: the family that writes when ``native=False`` forces the generic path (tests compare the two)
_GENERIC = Dialect()


def _family(conn: Connection, native: bool | None) -> Dialect:
    return _GENERIC if native is False else dialect_of(conn)


def upsert(conn: Connection, table: Table, rows: Sequence[dict[str, Any]], *, native: bool | None = None) -> int:
    """Insert ``rows`` or, where the primary key exists, overwrite the other columns.

    Every row must carry the same keys. Returns the number of rows written (a key given twice is
    written once, with its last row). ``native=False`` forces the generic path.
    """
    if not rows:
        return 0
    keys, _cols = keys_and_columns(table, rows)
    return _family(conn, native).upsert(conn, table, rows, keys)


def insert_ignore(
    conn: Connection, table: Table, rows: Sequence[dict[str, Any]] | ColumnRows, *, native: bool | None = None
) -> int:
    """Insert ``rows`` whose primary key is not present yet; existing rows are left untouched."""
    if not len(rows):
        return 0
    keys = key_columns(table)
    if isinstance(rows, ColumnRows) and (missing := [k for k in keys if k not in rows.columns]):
        raise ValueError(f"insert into {table.name}: rows lack key column(s) {missing} (a key is not shared)")
    if not isinstance(rows, ColumnRows):
        keys_and_columns(table, rows)
    return _family(conn, native).insert_ignore(conn, table, rows, keys)
