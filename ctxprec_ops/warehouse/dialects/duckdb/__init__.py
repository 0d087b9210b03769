"""DuckDB (duckdb-engine): writes and id look-ups through frames registered on the connection
(``frames``: one ``INSERT ... SELECT`` per table, plain first where the transaction can be run
again, ``ON CONFLICT`` once a key has existed: ``conflicts``; ``IN (SELECT v ...)``), claims
whose holders in another process are known to have ended (one process writes a file), table
shapes read through ``information_schema`` (the inspector duckdb-engine inherits from PostgreSQL
reaches ``pg_collation`` and ``regclass``), no secondary indexes (zone maps instead; ``ON
CONFLICT DO UPDATE`` cannot update an indexed column), write conflicts retried, sessions in
UTC."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Float, LargeBinary, Numeric, String, Table, select, text
from sqlalchemy import column as sql_column
from sqlalchemy import table as sql_table
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import StaticPool
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeEngine

from ...holders import ClaimHolder, this_process
from ...write_rows import ColumnRows, dedupe
from ..base import Dialect, Lineage
from ..connections import file_lineage
from .conflicts import duplicate_key, upsert_plain_first
from .frames import registered_values

__all__ = ["DuckDBDialect"]


class _DriverDecimal(Numeric):
    """A DECIMAL column read as the driver gives it: an exact ``Decimal``. duckdb-engine declares
    no native decimals, so SQLAlchemy's ``Numeric`` would format each value through a float
    (``12345678901234567890123456.5`` came back as ``12345678901234568244756480``)."""

    cache_ok = True

    def result_processor(self, dialect: Any, coltype: Any) -> None:
        return None


def _local_file(url: URL) -> bool:
    """Whether the URL names a database file on this machine (not MotherDuck's ``md:``)."""
    database = url.database or ""
    return ":" not in database.split("/")[0] or database.startswith("/")


class DuckDBDialect(Dialect):
    names = ("duckdb",)
    family = "DuckDB"
    write_path = (
        "the chunk as a registered frame (shared values as parameters), one `INSERT … SELECT CAST(…)` per "
        "table: plain first where the transaction can be run again, `ON CONFLICT` once a key has existed"
    )
    native_upsert = True
    # ~1 - 2 ms fixed a statement (a registered frame, planning, its worker threads): 1,000-row
    # chunks run ~1.3x the rows/s of 500-row ones at ~20 MB more peak memory, 1,500-row ones
    # another ~4 - 8 % at ~22 MB more (2,000: ~60 MB more than 1,000, too close to the 300 MB a
    # run is held to); bench/README.md
    default_chunk_size = 1500
    id_binding = "frame"
    claims = "file_lock"
    secondary_indexes = False
    reflection = "information_schema"
    utc_session = ("SET TimeZone = 'UTC'",)
    # in process, but unlike SQLite its statements run on DuckDB's own threads without the GIL and
    # each write's commit waits on an fsync: with a judge that answers inline, the reader and
    # writer threads overlap them with the judging (+5 % at 20,000 rows, +20 % at 100,000, where
    # the look-ups scan larger tables; bench/README.md)
    serial_in_process = False

    # no users or grants: a database opened read-only (``access_mode=read_only``, a MotherDuck
    # share) is what keeps a run from writing, and ``read_only_reason`` asks the catalogue for it
    has_grants = False

    def read_only_reason(self, engine: Engine, schema: str | None) -> str | None:
        """The output tables' database (``schema``'s catalogue when it names one, else the
        current one) when DuckDB attached it read-only."""
        catalog = schema.split(".", 1)[0] if schema and "." in schema else None
        where = "database_name = :catalog" if catalog else "database_name = current_database()"
        try:
            with engine.connect() as conn:
                row = conn.execute(
                    text(f"SELECT database_name FROM duckdb_databases() WHERE readonly AND {where}"),
                    {"catalog": catalog} if catalog else {},
                ).first()
        except DBAPIError:  # a catalogue that cannot say (a service's restrictions): the first write will
            return None
        if row is None:
            return None
        return f"DuckDB database {row[0]!r} is attached read-only; open it writable (no access_mode=read_only) to score"

    def lineage(self, url: URL, table: str) -> Lineage:
        """A file: ``duckdb:///abs/path/file.duckdb`` / ``table``."""
        return file_lineage(url, table)

    def in_memory(self, url: URL) -> bool:
        return url.database in (None, "", ":memory:")

    def local_file(self, url: URL) -> str | None:
        return None if self.in_memory(url) or not _local_file(url) else url.database

    def engine_arguments(self, url: URL, *, read_only: bool = False) -> dict[str, Any]:
        """An in-memory database is one connection shared by every thread, as SQLite's (the
        driver's default pool gives each thread a connection, and each its own empty database)."""
        arguments = super().engine_arguments(url, read_only=read_only)
        if self.in_memory(url):
            arguments["poolclass"] = StaticPool
        return arguments

    def write_conflict(self, exc: BaseException) -> bool:
        """DuckDB's concurrency is optimistic: of two transactions writing the same row (or
        inserting the same key: a judgment shared by two chunks), the second fails instead of
        waiting. Its transaction, run again once the first committed, finds the row and updates or
        skips it."""
        orig = getattr(exc, "orig", None) or exc
        return type(orig).__name__ == "TransactionException" or "Conflict on" in str(orig) or duplicate_key(exc)

    def claim_holder_gone(self, engine: Engine, holder: ClaimHolder) -> str | None:
        """A DuckDB file is written by one process at a time (the file lock), and this one is
        writing it: a claim holder in any other process has ended (after a crash its rows would
        otherwise wait out their lease)."""
        if holder.process is None or self.in_memory(engine.url) or not _local_file(engine.url):
            return None
        if holder.process.same(this_process()):
            return None
        return "DuckDB lets one process write the file, and that is this one: its process has ended"

    def key_text_type(self, length: int | None) -> TypeEngine[Any]:
        """``VARCHAR``: DuckDB stores text of any length (and does not enforce a declared one)."""
        return String() if length is None else String(length)

    def binary_key_type(self, size: int) -> TypeEngine[Any]:
        return LargeBinary()  # BLOB

    def reflected_type(self, type_: TypeEngine[Any]) -> TypeEngine[Any]:
        """A DECIMAL column's values exactly as stored (an id's text must round-trip)."""
        if isinstance(type_, Numeric) and not isinstance(type_, Float) and type_.asdecimal:
            return _DriverDecimal(type_.precision, type_.scale)
        return super().reflected_type(type_)

    def id_in(self, conn: Connection, column: Any, values: Sequence[Any]) -> Iterator[ColumnElement[bool]]:
        """One registered frame: ``IN (SELECT v FROM it)`` is one statement and one scan, where an
        expanding ``IN`` of 500 bound values is compiled and bound value by value each time."""
        if values:
            with registered_values(conn, values) as name:
                yield column.in_(select(sql_column("v")).select_from(sql_table(name)))

    def delete_scored_failures(
        self,
        conn: Connection,
        failures: Table,
        scores: Table,
        equal: Sequence[tuple[str, Any]],
        log_ids: Sequence[str],
    ) -> None:
        """Only when one of ``log_ids`` has a failure record in this transaction's snapshot (the
        one the ``DELETE`` would see): usually none has, and the ``DELETE``'s semi-join with the
        scores costs a scan of them for nothing (~5 ms a chunk at 20,000 rows, more as they grow)."""
        f = failures
        where = [f.c[name] == value for name, value in equal]
        found = False
        for cond in self.id_in(conn, f.c.log_id, log_ids):  # run to its end: it unregisters the frame
            # fetched to the end too: DuckDB refuses other work on a connection with a pending result
            found = found or bool(conn.execute(select(f.c.log_id).where(*where, cond).limit(1)).all())
        if found:
            super().delete_scored_failures(conn, failures, scores, equal, log_ids)

    def upsert(self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]], keys: list[str]) -> int:
        return upsert_plain_first(conn, table, dedupe(rows, keys), keys, [c for c in rows[0] if c not in keys])

    def insert_ignore(
        self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]] | ColumnRows, keys: list[str]
    ) -> int:
        distinct = rows if isinstance(rows, ColumnRows) else dedupe(rows, keys)
        return upsert_plain_first(conn, table, distinct, keys, None)
