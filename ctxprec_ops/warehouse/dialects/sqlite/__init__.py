"""SQLite: the embedded default. One writer at a time per file (writers queue on the database
lock; claims in a table like every family's, their holders' processes on this host), ``INSERT
... ON CONFLICT`` as multi-row driver statements (``write``), key look-ups as driver SQL
(``lookups``), ``event_time`` read from any ISO-8601 text or epoch number (``time``), pragmas
and ``BEGIN IMMEDIATE`` (``session``), tables rebuilt where SQLite cannot alter them
(``migrations``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    LargeBinary,
    Numeric,
    String,
    Table,
    Text,
    and_,
    func,
    literal,
    or_,
    select,
    type_coerce,
    union_all,
)
from sqlalchemy.dialects.sqlite import insert
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import StaticPool
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeEngine

from ...write_rows import ColumnRows, dedupe
from ..base import Dialect, Lineage
from ..connections import dict_rows, file_lineage
from ..reads import TimeMode
from ..writes import on_conflict
from . import lookups, migrations, session
from .time import sqlite_instant
from .write import upsert_rows, write_columns

__all__ = ["SQLiteDialect"]


class SQLiteDialect(Dialect):
    names = ("sqlite",)
    family = "SQLite"
    write_path = "`INSERT … ON CONFLICT`, multi-row statements (128 rows each) bound column by column"
    native_upsert = True
    has_grants = False
    serial_in_process = True
    sqlite_idioms = True
    opens_read_only = True
    claims = "process"  # a WAL file is shared by processes of one host only

    # --- connections -----------------------------------------------------------------------------

    def engine_arguments(self, url: URL, *, read_only: bool = False) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "connect_args": {"check_same_thread": False, "timeout": session.BUSY_TIMEOUT_MS / 1000}
        }
        if url.database in (None, "", ":memory:"):
            kwargs["poolclass"] = StaticPool
        path = session.database_path(url) if read_only else None
        if path is not None:  # the driver opens the file read-only (a URI filename); the URL stays the user's
            kwargs["creator"] = session.read_only_connect(path)
        return kwargs

    def prepare_engine(self, engine: Engine, *, read_only: bool = False) -> None:
        session.prepare(engine, read_only=read_only)

    def database_file(self, url: URL) -> str | None:
        return session.database_path(url)

    def in_memory(self, url: URL) -> bool:
        db = url.database or ""
        return db in ("", ":memory:") or ":memory:" in db or url.query.get("mode") == "memory"

    def lineage(self, url: URL, table: str) -> Lineage:
        """A file: ``sqlite:///abs/path/file.db`` / ``table``."""
        return file_lineage(url, table)

    def release(self, engine: Engine) -> None:
        session.release(engine)

    def stream_batches(self, conn: Connection, stmt: Any, batch: int) -> Iterator[Sequence[Any]]:
        """When no selected column converts its values (``result_processor``), the batches are
        the driver cursor's own ``fetchmany`` tuples: SQLAlchemy's row handling cost ~1 - 2 us a
        row of a partition's ids or scores (bench/README.md)."""
        if not all(c.type.result_processor(conn.dialect, None) is None for c in stmt.selected_columns):
            yield from super().stream_batches(conn, stmt, batch)
            return
        result = conn.execute(stmt)
        try:
            while part := result.cursor.fetchmany(batch):
                yield part
        finally:
            result.close()

    def read_rows(self, conn: Connection, stmt: Any, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        try:
            with session.strict_text(conn):
                return dict_rows(conn.execute(stmt, dict(params)))
        except DBAPIError as exc:
            if not session.is_decode_error(exc):
                raise
        # text in some row is not valid UTF-8: read the chunk again keeping its bytes as surrogates
        # (that row's check then names the column: "not valid UTF-8")
        return dict_rows(conn.execute(stmt, dict(params)))

    # --- tables ----------------------------------------------------------------------------------

    def key_text_type(self, length: int | None) -> TypeEngine[Any]:
        return Text() if length is None else String(length)

    def binary_key_type(self, size: int) -> TypeEngine[Any]:
        return LargeBinary()

    def reflected_type(self, type_: TypeEngine[Any]) -> TypeEngine[Any]:
        """A NUMERIC/DECIMAL column holds SQLite's REALs and INTEGERs, never decimals: read as
        ``float`` (a ``Decimal`` rounded to the declared scale would give two ids one text)."""
        if isinstance(type_, Numeric) and type_.asdecimal:
            return Numeric(asdecimal=False)
        return super().reflected_type(type_)

    def add_key_columns(self, conn: Connection, table: Table, fills: Mapping[str, str]) -> None:
        old = [c["name"] for c in self.get_columns(conn, table.name, table.schema)]
        migrations.rebuild_with_columns(conn, table, old, fills)

    def convert_judgment_keys(self, conn: Connection, table: Table) -> None:
        old = [c["name"] for c in self.get_columns(conn, table.name, table.schema)]
        migrations.rebuild_judgments(conn, table, old)

    # --- reads: event_time as text or epoch numbers ------------------------------------------------

    def time_mode(self, column: Any) -> TimeMode | None:
        return "sqlite_text"  # any declared type: SQLite stores datetimes as text (or numbers)

    def partition_condition(
        self, column: Any, mode: TimeMode, start: datetime, end: datetime, *, indexable: bool = True
    ) -> ColumnElement[bool]:
        if mode != "sqlite_text":
            return super().partition_condition(column, mode, start, end, indexable=indexable)
        normalised = sqlite_instant(column)
        day = start.strftime("%Y-%m-%d")
        if start.isoformat() == f"{day}T00:00:00+00:00" and end - start == timedelta(days=1):
            # a UTC day (every partition): its instants' text starts with its date, one test of
            # one instant per row where the two bounds computed the instant twice
            precise = func.substr(normalised, 1, 10) == literal(day, type_=String())
        else:
            precise = and_(
                normalised >= literal(start.strftime("%Y-%m-%d %H:%M:%S"), type_=String()),
                normalised < literal(end.strftime("%Y-%m-%d %H:%M:%S"), type_=String()),
            )
        if not indexable:
            return precise
        return and_(or_(*self.partition_ranges(column, mode, start, end)), precise)

    def partition_ranges(
        self, column: Any, mode: TimeMode, start: datetime, end: datetime
    ) -> list[ColumnElement[bool]]:
        """Index ranges holding every row whose instant (``sqlite_instant``) lies in the day, which
        SQLite scans without computing any row's instant: any ISO form (with an offset of up to a
        day) sorts between the date prefixes of the days around it; numbers sort before all text,
        with text led by whitespace, a sign or a zero; epoch seconds and milliseconds as text lie
        between the day's first and last as text (``_epoch_text_ranges``); blobs sort after all
        text. Each instant the day's exact test accepts must lie in one: the plan and the ledger
        scan these, the chunk read does not — a row outside them was scored, then taken for
        stale by the ledger and deleted, under a succeeded run. The bounds are text no affinity
        can turn into numbers ('1!', not '1')."""
        if mode != "sqlite_text":
            return super().partition_ranges(column, mode, start, end)
        text_col = type_coerce(column, String())
        lo = (start - timedelta(days=1)).strftime("%Y-%m-%d")
        hi = (end + timedelta(days=1)).strftime("%Y-%m-%d")

        def below(v: str) -> ColumnElement[bool]:
            return text_col < literal(v, type_=String())

        def at_least(v: str) -> ColumnElement[bool]:
            return text_col >= literal(v, type_=String())

        epochs = [and_(at_least(a), below(b)) for a, b in _epoch_text_ranges(start, end)]
        blobs = type_coerce(column, LargeBinary()) >= literal(b"", type_=LargeBinary())
        return [and_(at_least(lo), below(hi)), below("1!"), *epochs, blobs]

    def unreadable_time(self, column: Any, mode: TimeMode) -> ColumnElement[bool]:
        if mode == "sqlite_text":
            return sqlite_instant(column).is_(None)
        return super().unreadable_time(column, mode)

    def partition_id_conditions(self, conn: Connection, src: Any, partition: Any) -> list[Any] | None:
        """Asked for the day's ids in id order, SQLite prefers walking the whole table in rowid
        order, every day of it, to the event-time index; sorting the day's ids instead would hold
        them all in the sorter's memory. So, with such an index: the smallest and largest id of
        the day's coarse index ranges (no row's instant computed; one aggregate per range), then
        the ids between them in id order, filtered — for ids that grow with time, the day's rows
        and its neighbours' (bench/README.md). Without one every plan is one scan of the table."""
        if not src.time_indexed:
            return super().partition_id_conditions(conn, src, partition)
        parts = [
            select(func.min(src.id).label("lo"), func.max(src.id).label("hi")).where(r)
            for r in src.partition_ranges(partition)
        ]
        each = union_all(*parts).subquery()
        lo, hi = conn.execute(select(func.min(each.c.lo), func.max(each.c.hi))).one()
        if lo is None:
            return None
        return [src.id >= lo, src.id <= hi, src.partition_filter(partition, indexable=False)]

    def select_in(
        self,
        conn: Connection,
        table: Any,
        columns: Sequence[str | None],
        in_column: str,
        values: Sequence[Any],
        equal: Sequence[tuple[str, Any]] = (),
    ) -> Iterator[Sequence[Any]]:
        return lookups.select_in(conn, table, columns, in_column, values, equal)

    def cached_judgments(
        self, conn: Connection, table: Any, keys: Sequence[bytes], *, agreement: bool
    ) -> Iterator[tuple[bytes, Any, Any, Any]]:
        # bytearray: bound as is (bytes go through the driver's adapter look-up)
        as_bound: list[Any] = [bytearray(k) for k in keys]
        return super().cached_judgments(conn, table, as_bound, agreement=agreement)

    # --- writes ----------------------------------------------------------------------------------

    def native_insert(self, table: Table, keys: list[str], others: list[str]) -> Any:
        return on_conflict(insert, table, keys, others)

    def upsert(self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]], keys: list[str]) -> int:
        # multi-row statements apply the rows in order: a key given twice ends with its last row,
        # as deduplication would leave it (and SQLite locks the whole database, so no key order)
        cols = list(rows[0])
        upsert_rows(conn, table, cols, keys, [c for c in cols if c not in keys], rows)
        return len(rows)

    def insert_ignore(
        self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]] | ColumnRows, keys: list[str]
    ) -> int:
        if isinstance(rows, ColumnRows):  # distinct keys: nothing to de-duplicate
            write_columns(conn, table, keys, [], rows.columns, rows.shared)
            return len(rows)
        distinct = dedupe(rows, keys, ordered=False)
        upsert_rows(conn, table, list(distinct[0]), keys, [], distinct)
        return len(distinct)

    def delete_scored_failures(
        self,
        conn: Connection,
        failures: Table,
        scores: Table,
        equal: Sequence[tuple[str, Any]],
        log_ids: Sequence[str],
    ) -> None:
        lookups.delete_scored_failures(conn, failures, scores, equal, log_ids)


def _epoch_text_ranges(start: datetime, end: datetime) -> list[tuple[str, str]]:
    """Text ranges ``[lo, hi)`` holding the epoch seconds and milliseconds of every instant of
    ``[start, end)`` written as digits (with any fraction or trailing blank): for digit strings of
    one length, text order is number order; a day whose numbers gain a digit (2001-09-09's
    seconds pass 10**9) gets a range for each length."""
    out = []
    for scale in (1, 1000):  # as ``sqlite_instant`` reads them: milliseconds from 10**11 on
        first, last = int(start.timestamp()) * scale, int(end.timestamp()) * scale
        a, b = str(first), str(last)
        if len(a) == len(b):
            out.append((a, b))
        else:
            out += [(a, "9" * len(a) + "~"), ("1" + "0" * len(a), b)]
    return out
