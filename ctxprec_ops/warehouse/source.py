"""Reading the source tables: reflection, the UTC-day partition filter, keyset pagination.

Partition = the UTC day of ``event_time``: rows with ``day 00:00 UTC <= event_time < next day
00:00 UTC``. How ``event_time`` is compared depends on what the column holds and is the
warehouse family's (``Dialect.time_mode`` / ``partition_condition``, ``warehouse/dialects/``);
sessions run in UTC where the database has session time zones (``Dialect.utc_session``):

- ``timestamp without time zone`` (MySQL's ``TIMESTAMP``, Snowflake's ``TIMESTAMP_NTZ``):
  compared with naive UTC datetimes, so a naive value is UTC whatever the server's time zone;
- ``timestamp with time zone``: compared with aware UTC datetimes (absolute instants);
- ``date``: equal to the day;
- SQLite (any declared type; SQLite stores datetimes as text, ``dialects/sqlite/time.py``): ISO-8601 text such as
  ``2026-11-28 23:59:59``, ``2026-11-28T23:59:59.123``, ``2026-11-28T23:59:59Z`` or with an
  offset ``2026-11-28T18:59:59-05:00`` (normalised to UTC with SQLite's ``datetime()``);
  text without an offset is UTC; also ``+HHMM`` offsets, a trailing ``UTC``/``GMT``, surrounding
  whitespace and epoch seconds, number or text (``sqlite_instant``). Values none of these read
  (NULL, ``28/11/2026 10:00``: day or month first is unknowable) belong to no partition: each run
  counts them (``count_unpartitioned``), warns and records the number in ``ctxprec_runs``;
- a text column on another backend: ISO-8601 text in UTC (compared as text).

Rows are paged by ``id`` (keyset: ``id > after_id ORDER BY id``), never OFFSET; rows whose id is
NULL cannot be paged and are not read. A row's ``log_id`` is ``str`` of its id as the family reads
it: exact for every id type (a floating-point id as ``float``, whose text round-trips).
"""

from __future__ import annotations

import re
import threading
import uuid
import weakref
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlalchemy import JSON, Column, Integer, Table, Text, bindparam, cast, func, select, type_coerce
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import NoSuchTableError
from sqlalchemy.sql.elements import ColumnElement

from ..errors import CtxPrecError
from .dialects import Dialect, dialect_of
from .dialects.reads import TimeMode
from .engine import stream_batches
from .identifiers import split_table_name, validate_identifier
from .reflect import reflect_table, table_names

__all__ = [
    "SourceTableError",
    "PartitionKeyError",
    "SourceTable",
    "Partition",
    "parse_partition_key",
    "reflect_source",
    "iter_partition_ids",
    "read_chunk_rows",
    "count_null_ids",
    "count_unpartitioned",
    "recordable_id",
]

_PARTITION = re.compile(r"\d{4}-\d{2}-\d{2}")
_CANONICAL_INT = re.compile(r"-?(0|[1-9]\d*)")
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


#: partition keys accepted: room on both sides for the filter's day either side of the key and
#: for any look-back (date arithmetic near year 1 or 9999 overflows)
MIN_PARTITION = date(1900, 1, 1)
MAX_PARTITION = date(9998, 12, 31)


def parse_partition_key(partition_key: str) -> date:
    """``"2026-11-28"`` -> ``date(2026, 11, 28)``; anything else raises ``PartitionKeyError``."""
    if not isinstance(partition_key, str) or not _PARTITION.fullmatch(partition_key):
        raise PartitionKeyError(f"partition key must be a UTC date YYYY-MM-DD, got {partition_key!r}")
    try:
        day = date.fromisoformat(partition_key)
    except ValueError:
        raise PartitionKeyError(f"partition key {partition_key!r} is not a real date") from None
    if not MIN_PARTITION <= day <= MAX_PARTITION:
        # the partition filter and monitoring's look-backs compute days around the key
        raise PartitionKeyError(
            f"partition key {partition_key!r} is out of range "
            f"({MIN_PARTITION.isoformat()} to {MAX_PARTITION.isoformat()})"
        )
    return day


@dataclass(frozen=True)
class Partition:
    """One daily partition: its key ``YYYY-MM-DD``, the UTC day, and the day's [start, end) as
    aware UTC datetimes. Made once where a key comes in (``Partition.of``) and passed on as is:
    what reads the partition's rows takes the bounds from it, what filters the output tables by
    ``partition_key`` takes ``key``."""

    key: str
    day: date
    start: datetime
    end: datetime

    @classmethod
    def of(cls, partition: Partition | str) -> Partition:
        """``partition`` itself, or the key ``YYYY-MM-DD`` parsed (``PartitionKeyError`` if it is
        not one)."""
        if isinstance(partition, Partition):
            return partition
        day = parse_partition_key(partition)
        start = datetime.combine(day, time(0), tzinfo=UTC)
        return cls(partition, day, start, start + timedelta(days=1))

    def __str__(self) -> str:
        return self.key


def recordable_id(text: str, limit: int | None) -> bool:
    """Whether a row's id text can be its ``log_id``: at most ``limit`` characters (the column's
    length on this warehouse; None: any), and valid UTF-8 — SQLite hands text that is not as
    surrogates (``\\udcff``), which no driver can send back, as a chunk bound, a look-up or a
    ``log_id``. A row whose id cannot is counted apart (the ledger's ``refused``), never bound."""
    if limit is not None and len(text) > limit:
        return False
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True)
class SourceTable:
    """A reflected source table and how to read it."""

    table: Table
    columns: Mapping[str, Column]  # logical name ("input", "turns", ...) -> reflected column
    time_mode: TimeMode
    integer_ids: bool
    #: the warehouse family it is read through
    dialect: Dialect = field(default_factory=Dialect, compare=False, repr=False)
    #: the Python type of the id column's values (None: unknown); bounds given as text get it
    id_type: type | None = None
    #: ``read_chunk_rows``'s statements by (partition key, has a lower bound): built once
    _chunk_reads: dict[tuple[str, bool], Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def id(self) -> Column:
        return self.columns["id"]

    def with_columns(self, extra: Mapping[str, Column]) -> SourceTable:
        """This table read with the ``extra`` logical columns too (its statements built anew)."""
        return replace(self, columns={**self.columns, **extra}, _chunk_reads={})

    @property
    def event_time(self) -> Column:
        return self.columns["event_time"]

    @property
    def time_indexed(self) -> bool:
        """Whether an index of the table (as reflected) starts with ``event_time``."""
        return any(len(ix.columns) and ix.columns[0] is self.event_time for ix in self.table.indexes)

    @property
    def name(self) -> str:
        # a plain str, not SQLAlchemy's quoted_name: it is bound into every score and failure
        # row, and the sqlite3 driver adapts str subclasses slowly (a failed __conform__ lookup)
        return str(self.table.fullname)

    def coerce_id(self, value: Any) -> Any:
        """Chunk bounds may come back from JSON (XCom) as text: give them the column's type.

        Only canonical integer text (``"42"``, ``"-7"``) becomes an int in an INTEGER column; any
        other value is a bound the column really holds (SQLite lets an INTEGER column hold
        ``'abc'``, ``' 7'`` or ``3.5``) and is compared as it is, never refused. Text of a float,
        decimal or UUID column becomes that type's value (as ``str`` wrote it: exactly); a value of
        a text column, text."""
        if value is None:
            return None
        if self.integer_ids:
            if isinstance(value, str) and _CANONICAL_INT.fullmatch(value):
                return int(value)
            return value
        kind = self.id_type
        if isinstance(value, str):
            if kind in (float, Decimal, uuid.UUID):
                try:
                    return kind(value)
                except (ValueError, InvalidOperation):
                    return value  # a bound the column really holds (SQLite stores any value)
            return value
        if kind is None or kind is str:
            return str(value)
        return value

    def id_problem(self, value: Any) -> str | None:
        """Why a row's id cannot be used as its ``log_id`` (``None``: it can). SQLite stores
        whatever it is given, so an INTEGER column may hold text or a real number."""
        if self.integer_ids and (isinstance(value, bool) or not isinstance(value, int)):
            kind = "text" if isinstance(value, str) else type(value).__name__
            return (
                f"column {self.id.name!r} is INTEGER but this row's id is {kind} {str(value)[:100]!r}: "
                "store an integer id"
            )
        return None

    # --- partition filter -------------------------------------------------------------------

    def partition_filter(self, partition: Partition, *, indexable: bool = True) -> ColumnElement[bool]:
        """``event_time`` within the UTC day, as the family compares it. ``indexable=False``
        leaves out the index-friendly coarse ranges a family may add (SQLite's), so that a query
        bounded by id ranges uses the id index."""
        return self.dialect.partition_condition(
            self.event_time, self.time_mode, partition.start, partition.end, indexable=indexable
        )

    def partition_ranges(self, partition: Partition) -> list[ColumnElement[bool]]:
        """Index ranges of ``event_time`` whose union holds every row of the UTC day, each one
        range an index scans without computing any row's instant (SQLite's text forms: three
        coarse ranges; elsewhere the filter itself)."""
        return self.dialect.partition_ranges(self.event_time, self.time_mode, partition.start, partition.end)


_reflected: weakref.WeakKeyDictionary[Engine, dict[tuple, SourceTable]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def reflect_source(
    engine: Engine,
    table_name: str,
    schema: str | None,
    columns: Mapping[str, str],
    *,
    columns_env: str | None = None,
    optional: Collection[str] = (),
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
        table = reflect_table(engine, table_name, schema)
    except NoSuchTableError:
        hint = ""
        try:
            names = table_names(engine, schema)
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
    family = dialect_of(engine)
    time_mode = family.time_mode(found["event_time"])
    if time_mode is None:
        col = found["event_time"]
        raise SourceTableError(
            f"column {col.name!r} of {col.table.fullname} has type {col.type}; event_time must be a "
            "timestamp, timestamptz, date or ISO-8601 text column"
        )
    src = SourceTable(
        table=table,
        columns=found,
        time_mode=time_mode,
        integer_ids=isinstance(found["id"].type, Integer),
        dialect=family,
        id_type=_python_type(found["id"]),
    )
    with _lock:
        _reflected.setdefault(engine, {})[cache_key] = src
    return src


def iter_partition_ids(conn: Connection, src: SourceTable, partition: Partition, batch: int = 10_000) -> Iterator[Any]:
    """Stream the partition's ids in id order (server-side cursor where the driver has one)."""
    where = dialect_of(conn).partition_id_conditions(conn, src, partition)
    if where is None:
        return
    stmt = select(src.id).where(*where).order_by(src.id)
    for part in stream_batches(conn, stmt, batch):
        for (value,) in part:
            yield value


def count_unpartitioned(conn: Connection, src: SourceTable) -> int:
    """Rows of the whole table in no partition: ``event_time`` NULL, or (SQLite, text columns)
    not readable as an instant. A full scan: once per run."""
    cond = src.dialect.unreadable_time(src.event_time, src.time_mode)
    return int(conn.execute(select(func.count()).select_from(src.table).where(cond)).scalar_one())


def count_null_ids(conn: Connection, src: SourceTable, partition: Partition) -> int:
    """Rows of the partition whose id is NULL (they cannot be paged, scored or recorded)."""
    stmt = select(func.count()).select_from(src.table).where(src.partition_filter(partition), src.id.is_(None))
    return int(conn.execute(stmt).scalar_one())


def read_chunk_rows(
    conn: Connection, src: SourceTable, partition: Partition, after_id: Any, upto_id: Any
) -> list[dict[str, Any]]:
    """The partition's rows with ``after_id < id <= upto_id``, in id order, as dicts keyed by
    logical column name. JSON columns come back as Python objects or raw text (never parsed
    here: bad JSON is a row problem, not a read error)."""
    stmt = src._chunk_reads.get((partition.key, after_id is not None))
    if stmt is None:
        stmt = _chunk_select(src, partition, after_id is not None)
        if len(src._chunk_reads) >= 64:  # one partition at a time, as a rule
            src._chunk_reads.clear()
        src._chunk_reads[(partition.key, after_id is not None)] = stmt
    params = {"upto": src.coerce_id(upto_id)}
    if after_id is not None:
        params["after"] = src.coerce_id(after_id)
    return dialect_of(conn).read_rows(conn, stmt, params)


def _python_type(col: Column) -> type | None:
    try:
        kind: type = col.type.python_type
    except NotImplementedError:
        return None
    return kind


def _chunk_select(src: SourceTable, partition: Partition, bounded_below: bool) -> Any:
    """The chunk read of one partition with its id bounds as parameters ``after`` / ``upto``
    (the same statement object for every chunk: SQLAlchemy builds and compiles it once)."""
    cols = []
    for logical, col in src.columns.items():
        if logical == "event_time":
            continue
        expr: ColumnElement[Any] = col
        if logical in _JSON_FIELDS:
            # a JSON/JSONB column is cast to its JSON text in SQL, so a JSON *string* stays a
            # string ('"x"') instead of coming back decoded as text that looks like bad JSON
            expr = cast(col, Text()) if isinstance(col.type, JSON) else type_coerce(col, Text())
        cols.append(expr.label(logical))
    conds = [src.partition_filter(partition, indexable=False), src.id <= bindparam("upto", type_=src.id.type)]
    if bounded_below:
        conds.append(src.id > bindparam("after", type_=src.id.type))
    return select(*cols).where(*conds).order_by(src.id)
