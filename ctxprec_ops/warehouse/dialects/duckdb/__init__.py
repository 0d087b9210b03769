"""DuckDB (duckdb-engine): writes and id look-ups through frames registered on the connection
(``frames``: one ``INSERT ... SELECT ... ON CONFLICT`` per table, ``IN (SELECT v ...)``), lease
claims (``warehouse/lease_claims.py``), table shapes read through ``information_schema`` (the
inspector duckdb-engine inherits from PostgreSQL reaches ``pg_collation`` and ``regclass``), no
secondary indexes (zone maps instead; ``ON CONFLICT DO UPDATE`` cannot update an indexed column),
write conflicts retried, sessions in UTC."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import LargeBinary, Table, select
from sqlalchemy import column as sql_column
from sqlalchemy import table as sql_table
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeEngine

from ...write_rows import ColumnRows, dedupe
from ..base import Dialect, Lineage
from ..connections import file_lineage
from .frames import frame_upsert, registered_values

__all__ = ["DuckDBDialect"]


class DuckDBDialect(Dialect):
    names = ("duckdb",)
    family = "DuckDB"
    write_path = "the chunk as a registered frame, one `INSERT … SELECT CAST(…) … ON CONFLICT` per table"
    native_upsert = True
    id_binding = "frame"
    claims = "lease"
    secondary_indexes = False
    reflection = "information_schema"
    utc_session = ("SET TimeZone = 'UTC'",)

    def lineage(self, url: URL, table: str) -> Lineage:
        """A file: ``duckdb:///abs/path/file.duckdb`` / ``table``."""
        return file_lineage(url, table)

    def in_memory(self, url: URL) -> bool:
        return url.database in (None, "", ":memory:")

    def write_conflict(self, exc: BaseException) -> bool:
        """DuckDB's concurrency is optimistic: of two transactions writing the same row (or
        inserting the same key: a judgment shared by two chunks), the second fails instead of
        waiting. Its transaction, run again once the first committed, finds the row and updates or
        skips it."""
        orig = getattr(exc, "orig", None) or exc
        kind = type(orig).__name__
        text = str(orig)
        return (
            kind == "TransactionException"
            or "Conflict on" in text
            or (kind == "ConstraintException" and "Duplicate key" in text)
        )

    @contextmanager
    def chunk_claim(
        self, engine: Engine, name: str, key: int, *, wait: bool, schema: str | None, lease: float | None
    ) -> Iterator[bool]:
        from ...lease_claims import lease_claim, lease_name

        with lease_claim(engine, lease_name(key), wait=wait, schema=schema, lease=lease) as got:
            yield got

    def binary_key_type(self, size: int) -> TypeEngine[Any]:
        return LargeBinary()  # BLOB

    def id_in(self, conn: Connection, column: Any, values: Sequence[Any]) -> Iterator[ColumnElement[bool]]:
        """One registered frame: ``IN (SELECT v FROM it)`` is one statement and one scan, where an
        expanding ``IN`` of 500 bound values is compiled and bound value by value each time."""
        if values:
            with registered_values(conn, values) as name:
                yield column.in_(select(sql_column("v")).select_from(sql_table(name)))

    def upsert(self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]], keys: list[str]) -> int:
        return frame_upsert(conn, table, dedupe(rows, keys), keys, [c for c in rows[0] if c not in keys])

    def insert_ignore(
        self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]] | ColumnRows, keys: list[str]
    ) -> int:
        return frame_upsert(conn, table, rows if isinstance(rows, ColumnRows) else dedupe(rows, keys), keys, None)
