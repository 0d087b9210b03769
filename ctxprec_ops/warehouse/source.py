"""Reading the source tables: reflection, the UTC-day partition filter, keyset pagination.

Partition = the UTC day of ``event_time``: rows with ``day 00:00 UTC <= event_time < next day
00:00 UTC``. How ``event_time`` is compared depends on what the column holds:

- PostgreSQL (and other servers) ``timestamp without time zone``: compared with naive UTC
  datetimes, so a naive value is UTC whatever the server's or session's ``TimeZone``;
- ``timestamp with time zone``: compared with aware UTC datetimes (absolute instants);
- ``date``: equal to the day;
- SQLite (any declared type; SQLite stores datetimes as text): ISO-8601 text such as
  ``2026-11-28 23:59:59``, ``2026-11-28T23:59:59.123``, ``2026-11-28T23:59:59Z`` or with an
  offset ``2026-11-28T18:59:59-05:00`` (normalised to UTC with SQLite's ``datetime()``);
  text without an offset is UTC. Values SQLite cannot parse (or numbers) belong to no partition;
- a text column on another backend: ISO-8601 text in UTC (compared as text).

Rows are paged by ``id`` (keyset: ``id > after_id ORDER BY id``), never OFFSET; rows whose id is
NULL cannot be paged and are not read.
"""

from __future__ import annotations

import re
import threading
import weakref
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Any, Collection, Iterator, Literal, Mapping

from sqlalchemy import (
    Column,
    Date,
    DateTime,
    Integer,
    JSON,
    MetaData,
    String,
    Table,
    Text,
    and_,
    cast,
    literal,
    func,
    inspect,
    select,
    type_coerce,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import NoSuchTableError
from sqlalchemy.sql.elements import ColumnElement

from ..errors import CtxPrecError
from .identifiers import split_table_name, validate_identifier

__all__ = [
    "SourceTableError",
    "PartitionKeyError",
    "SourceTable",
    "parse_partition_key",
    "partition_bounds",
    "reflect_source",
    "iter_partition_ids",
    "read_chunk_rows",
    "count_null_ids",
]

TimeMode = Literal["sqlite_text", "naive", "aware", "date", "text"]

_PARTITION = re.compile(r"\d{4}-\d{2}-\d{2}")
#: columns read as raw text/JSON (no SQLAlchemy JSON processing, which would fail on bad JSON)
_JSON_FIELDS = ("retrieval_context", "turns")


class SourceTableError(CtxPrecError, LookupError):
    """The configured source table or one of its columns does not exist or cannot be used."""

    error_type = "source_table"
    retryable = False


class PartitionKeyError(CtxPrecError, ValueError):
    """A partition key is not a ``YYYY-MM-DD`` date."""

    error_type = "invalid_partition"
    retryable = False


def parse_partition_key(partition_key: str) -> date:
    """``"2026-11-28"`` -> ``date(2026, 11, 28)``; anything else raises ``PartitionKeyError``."""
    if not isinstance(partition_key, str) or not _PARTITION.fullmatch(partition_key):
        raise PartitionKeyError(f"partition key must be a UTC date YYYY-MM-DD, got {partition_key!r}")
    try:
        return date.fromisoformat(partition_key)
    except ValueError:
        raise PartitionKeyError(f"partition key {partition_key!r} is not a real date") from None


def partition_bounds(partition_key: str) -> tuple[datetime, datetime]:
    """The partition's [start, end) as aware UTC datetimes."""
    day = parse_partition_key(partition_key)
    start = datetime.combine(day, time(0), tzinfo=timezone.utc)
    return start, start + timedelta(days=1)


@dataclass(frozen=True)
class SourceTable:
    """A reflected source table and how to read it."""

    table: Table
    columns: Mapping[str, Column]  # logical name ("input", "turns", ...) -> reflected column
    time_mode: TimeMode
    integer_ids: bool

    @property
    def id(self) -> Column:
        return self.columns["id"]

    @property
    def event_time(self) -> Column:
        return self.columns["event_time"]

    @property
    def name(self) -> str:
        return self.table.fullname

    def coerce_id(self, value: Any) -> Any:
        """Chunk bounds may come back from JSON (XCom) as text: give them the column's type."""
        if value is None:
            return None
        if self.integer_ids and not isinstance(value, int):
            return int(value)
        if not self.integer_ids and not isinstance(value, str):
            return str(value)
        return value

    # --- partition filter -------------------------------------------------------------------

    def partition_filter(self, partition_key: str, *, indexable: bool = True) -> ColumnElement[bool]:
        """``event_time`` within the UTC day. ``indexable=False`` (SQLite) leaves out the
        index-friendly coarse range so that a query bounded by id ranges uses the id index."""
        start, end = partition_bounds(partition_key)
        col = self.event_time
        if self.time_mode == "sqlite_text":
            text_col = type_coerce(col, String())
            normalised = func.datetime(text_col)
            precise = and_(
                normalised >= literal(start.strftime("%Y-%m-%d %H:%M:%S"), type_=String()),
                normalised < literal(end.strftime("%Y-%m-%d %H:%M:%S"), type_=String()),
            )
            if not indexable:
                return precise
            # any ISO form of a UTC instant in the day (with an offset of up to a day) sorts
            # between these two date prefixes: lets SQLite use an index on event_time
            lo = (start - timedelta(days=1)).strftime("%Y-%m-%d")
            hi = (end + timedelta(days=1)).strftime("%Y-%m-%d")
            coarse = and_(
                text_col >= literal(lo, type_=String()),
                text_col < literal(hi, type_=String()),
            )
            return and_(coarse, precise)
        if self.time_mode == "naive":
            t = DateTime(timezone=False)
            return and_(
                col >= literal(start.replace(tzinfo=None), type_=t),
                col < literal(end.replace(tzinfo=None), type_=t),
            )
        if self.time_mode == "aware":
            t = DateTime(timezone=True)
            return and_(col >= literal(start, type_=t), col < literal(end, type_=t))
        if self.time_mode == "date":
            return col == literal(start.date(), type_=Date())
        text_col = type_coerce(col, String())
        return and_(
            text_col >= literal(start.strftime("%Y-%m-%d"), type_=String()),
            text_col < literal(end.strftime("%Y-%m-%d"), type_=String()),
        )


def _time_mode(engine: Engine, col: Column) -> TimeMode:
    if engine.dialect.name == "sqlite":
        return "sqlite_text"
    t = col.type
    if isinstance(t, DateTime):
        return "aware" if getattr(t, "timezone", False) else "naive"
    if isinstance(t, Date):
        return "date"
    if isinstance(t, (String, Text)):
        return "text"
    raise SourceTableError(
        f"column {col.name!r} of {col.table.fullname} has type {t}; event_time must be a "
        "timestamp, timestamptz, date or ISO-8601 text column"
    )


_reflected: "weakref.WeakKeyDictionary[Engine, dict[tuple, SourceTable]]" = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def reflect_source(
    engine: Engine, table_name: str, schema: str | None, columns: Mapping[str, str], *,
    columns_env: str | None = None, optional: Collection[str] = (),
) -> SourceTable:
    """Reflect ``table_name`` and check that every configured column exists.

    ``columns`` maps logical names (``id``, ``event_time``, ``input``, ...) to the table's
    column names; all are validated identifiers. Cached per engine. ``columns_env`` names the
    variable holding the column mapping (said in the "has no column" error, with ``--column``).
    A logical column in ``optional`` that the table lacks is left out (rows read it as NULL).
    """
    schema, table_name = split_table_name(table_name, schema, "source table name")
    for logical, physical in columns.items():
        validate_identifier(physical, f"column name for {logical!r}")
    cache_key = (schema, table_name, tuple(sorted(columns.items())), tuple(sorted(optional)))
    with _lock:
        hit = _reflected.get(engine, {}).get(cache_key)
    if hit is not None:
        return hit
    where = f"{schema}.{table_name}" if schema else table_name
    try:
        table = Table(table_name, MetaData(), schema=schema, autoload_with=engine)
    except NoSuchTableError:
        hint = ""
        try:
            names = inspect(engine).get_table_names(schema=schema)
            hint = f" (tables there: {', '.join(sorted(names)[:20]) or 'none'})"
        except Exception:  # the hint is a courtesy
            pass
        raise SourceTableError(f"source table {where!r} does not exist in the warehouse{hint}") from None
    found: dict[str, Column] = {}
    by_lower = {c.name.lower(): c for c in table.columns}
    for logical, physical in columns.items():
        col = table.columns.get(physical)
        if col is None:
            col = by_lower.get(physical.lower())
        if col is None and logical in optional:
            continue
        if col is None:
            how = f"--column {logical}=COLUMN" + (f" or {columns_env}" if columns_env else "")
            raise SourceTableError(
                f"source table {where!r} has no column {physical!r} (configured for {logical!r}); "
                f"its columns are: {', '.join(c.name for c in table.columns)}; map it with {how}"
            )
        found[logical] = col
    src = SourceTable(
        table=table,
        columns=found,
        time_mode=_time_mode(engine, found["event_time"]),
        integer_ids=isinstance(found["id"].type, Integer),
    )
    with _lock:
        _reflected.setdefault(engine, {})[cache_key] = src
    return src


def iter_partition_ids(conn: Connection, src: SourceTable, partition_key: str, batch: int = 10_000) -> Iterator[Any]:
    """Stream the partition's ids in id order (server-side cursor where the driver has one)."""
    stmt = select(src.id).where(src.partition_filter(partition_key), src.id.is_not(None)).order_by(src.id)
    result = conn.execution_options(stream_results=True, yield_per=batch).execute(stmt)
    for part in result.partitions():
        for (value,) in part:
            yield value


def count_null_ids(conn: Connection, src: SourceTable, partition_key: str) -> int:
    """Rows of the partition whose id is NULL (they cannot be paged, scored or recorded)."""
    stmt = select(func.count()).select_from(src.table).where(src.partition_filter(partition_key), src.id.is_(None))
    return int(conn.execute(stmt).scalar_one())


def read_chunk_rows(
    conn: Connection, src: SourceTable, partition_key: str, after_id: Any, upto_id: Any
) -> list[dict[str, Any]]:
    """The partition's rows with ``after_id < id <= upto_id``, in id order, as dicts keyed by
    logical column name. JSON columns come back as Python objects or raw text (never parsed
    here: bad JSON is a row problem, not a read error)."""
    cols = []
    for logical, col in src.columns.items():
        if logical == "event_time":
            continue
        expr = col
        if logical in _JSON_FIELDS:
            # a JSON/JSONB column is cast to its JSON text in SQL, so a JSON *string* stays a
            # string ('"x"') instead of coming back decoded as text that looks like bad JSON
            expr = cast(col, Text()) if isinstance(col.type, JSON) else type_coerce(col, Text())
        cols.append(expr.label(logical))
    conds = [src.partition_filter(partition_key, indexable=False), src.id <= src.coerce_id(upto_id)]
    if after_id is not None:
        conds.append(src.id > src.coerce_id(after_id))
    stmt = select(*cols).where(*conds).order_by(src.id)
    result = conn.execute(stmt)
    names = list(result.keys())
    return [dict(zip(names, r)) for r in result]
