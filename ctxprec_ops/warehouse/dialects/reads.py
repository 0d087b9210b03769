"""The generic behaviour of a warehouse family in reads: how ``event_time`` is compared with a
UTC day's bounds, which ids a partition read scans, how a list of ids is bound, and the output
tables' look-ups by key."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Date, DateTime, String, Text, and_, literal, null, or_, select, type_coerce
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from .facts import Facts

__all__ = ["Reads", "TimeMode", "IN_BATCH", "in_parts"]

#: how ``event_time`` is compared: a timestamp without (``naive``, UTC) or with (``aware``) a
#: time zone, a ``date``, ISO-8601 ``text`` in UTC, or a family's own reading (``sqlite_text``)
TimeMode = Literal["sqlite_text", "naive", "aware", "date", "text"]

#: ids / keys per ``IN (...)`` list (well under every backend's bound-parameter limit)
IN_BATCH = 500


def in_parts(items: Sequence[Any], n: int = IN_BATCH) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


class Reads(Facts):
    # --- event_time and the partition's bounds -----------------------------------------------------

    def time_mode(self, column: Any) -> TimeMode | None:
        """How the column ``event_time`` maps to is compared (None: it cannot be)."""
        t = column.type
        if isinstance(t, DateTime):
            return "aware" if getattr(t, "timezone", False) else "naive"
        if isinstance(t, Date):
            return "date"
        if isinstance(t, (String, Text)):
            return "text"
        return None

    def partition_condition(
        self, column: Any, mode: TimeMode, start: datetime, end: datetime, *, indexable: bool = True
    ) -> ColumnElement[bool]:
        """``start <= column < end`` (aware UTC datetimes a day apart) for the column's mode: a
        naive timestamp is compared with naive UTC bounds, so it is UTC whatever the server's or
        session's time zone; an aware one with the instants; a date with the day; text as ISO
        text. ``indexable=False``: without the coarse ranges a family may add for an index."""
        if mode == "naive":
            t = DateTime(timezone=False)
            return and_(
                column >= literal(start.replace(tzinfo=None), type_=t),
                column < literal(end.replace(tzinfo=None), type_=t),
            )
        if mode == "aware":
            t = DateTime(timezone=True)
            return and_(column >= literal(start, type_=t), column < literal(end, type_=t))
        if mode == "date":
            return column == literal(start.date(), type_=Date())
        text_col = type_coerce(column, String())
        return and_(
            text_col >= literal(start.strftime("%Y-%m-%d"), type_=String()),
            text_col < literal(end.strftime("%Y-%m-%d"), type_=String()),
        )

    def partition_ranges(
        self, column: Any, mode: TimeMode, start: datetime, end: datetime
    ) -> list[ColumnElement[bool]]:
        """Index ranges of the column whose union holds every row of the day (generic: the
        condition itself)."""
        return [self.partition_condition(column, mode, start, end)]

    def unreadable_time(self, column: Any, mode: TimeMode) -> ColumnElement[bool]:
        """Rows whose ``event_time`` puts them in no partition: NULL, or text that is no ISO date."""
        if mode == "text":
            return or_(column.is_(None), ~type_coerce(column, String()).like(literal("____-__-__%", type_=String())))
        return column.is_(None)

    def partition_id_conditions(self, conn: Connection, src: Any, partition: Any) -> list[Any] | None:
        """The conditions of a scan of the partition's ids in id order (None: it has none)."""
        return [src.partition_filter(partition), src.id.is_not(None)]

    # --- ids and keys ----------------------------------------------------------------------------

    def id_in(self, conn: Connection, column: Any, values: Sequence[Any]) -> Iterator[ColumnElement[bool]]:
        """``column IN values`` in pieces the backend accepts."""
        for part in in_parts(list(values)):
            yield column.in_(list(part))

    def select_in(
        self,
        conn: Connection,
        table: Any,
        columns: Sequence[str | None],
        in_column: str,
        values: Sequence[Any],
        equal: Sequence[tuple[str, Any]] = (),
    ) -> Iterator[Sequence[Any]]:
        """Rows of ``SELECT columns FROM table WHERE <column = value for equal> AND in_column IN
        values`` (a None column reads NULL)."""
        cols = [null() if c is None else table.c[c] for c in columns]
        where = [table.c[name] == value for name, value in equal]
        for cond in self.id_in(conn, table.c[in_column], values):
            yield from conn.execute(select(*cols).where(*where, cond))

    def cached_judgments(
        self, conn: Connection, table: Any, keys: Sequence[bytes], *, agreement: bool
    ) -> Iterator[tuple[bytes, Any, Any, Any]]:
        """(key, relevant, reason, agreement) of the judgment cache's rows of ``keys``
        (``agreement=False``: NULL for a table without that column)."""
        columns = ["key", "relevant", "reason", "agreement" if agreement else None]
        for k, relevant, reason, agreed in self.select_in(conn, table, columns, "key", keys):
            yield bytes(k), relevant, reason, agreed
