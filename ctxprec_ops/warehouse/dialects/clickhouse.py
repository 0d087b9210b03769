"""ClickHouse (clickhouse-connect's SQLAlchemy dialect, ``clickhousedb://``; a ClickHouse server
over HTTP, or chDB in process): insert-only writes, keys not enforced, lease claims.

ClickHouse has no ``MERGE`` and no unique keys. Every output table is a
``ReplacingMergeTree(ctxprec_version)`` ordered by its primary key, with a hidden
``ctxprec_version`` column (the insert's time in nanoseconds): an insert-or-update is a plain
``INSERT`` of the chunk (one per 500 rows), and of the rows sharing a key the latest insert is the
row. Background merges drop the older ones eventually; until then readers see one row per key
because every session reads with the ``final = 1`` setting (``FINAL`` on each table read) — and
the readers that keep a key's latest row (``keys_enforced = False``) would too. An
insert-if-absent (the judgment cache) reads which keys exist and inserts the others. The lease
claims table alone is a plain ``MergeTree``: two claimers' rows of one name must both be seen.

The few updates and deletes of the core (run rows, failure records a score replaced, lease rows)
are ClickHouse's lightweight ``UPDATE`` / ``DELETE``: the tables are created with the block
number and offset columns those need. A correlated subquery cannot drive a mutation, so the
failure records a score replaced are deleted by ``(key) IN (SELECT key ...)``.

Types: ``Float64`` scores (``sa.Float`` would be ``Float32``), ``DateTime64(6, 'UTC')`` instants,
``FixedString(23)`` judgment keys (read back as bytes), ``String`` text and JSON text,
``Nullable(...)`` where a column takes NULL. Sessions run in UTC (``session_timezone``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Date,
    DateTime,
    Float,
    Integer,
    LargeBinary,
    MetaData,
    Numeric,
    SmallInteger,
    Table,
    delete,
    insert,
    literal,
    select,
    tuple_,
)
from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import operators
from sqlalchemy.sql.elements import BinaryExpression, BindParameter
from sqlalchemy.types import TypeDecorator, TypeEngine

from ..types import stored_type
from ..write_rows import ColumnRows, batches, decoded, dedupe
from .base import Dialect, Lineage
from .reads import in_parts
from .snowflake import JSONAsText

__all__ = ["ClickHouseDialect", "VERSION_COLUMN", "table_ddl"]

#: the hidden column a ``ReplacingMergeTree`` keeps the latest row of a key by
VERSION_COLUMN = "ctxprec_version"
_VERSION = f"`{VERSION_COLUMN}` UInt64 DEFAULT toUnixTimestamp64Nano(now64(9))"
#: what lightweight UPDATE / DELETE need of a MergeTree table
_SETTINGS = "SETTINGS enable_block_number_column = 1, enable_block_offset_column = 1"


_LIKES = (operators.like_op, operators.not_like_op, operators.ilike_op, operators.not_ilike_op)


def _backslashed(pattern: str, escape: str) -> str:
    """A ``LIKE`` pattern escaped with ``escape`` as ClickHouse reads it: escaped with backslashes
    (its only escape character; it takes no ``ESCAPE`` clause)."""
    out, chars = [], iter(pattern)
    for c in chars:
        if c == escape:
            nxt = next(chars, "")
            out.append("\\" + nxt if nxt in ("%", "_", "\\") else nxt)
        else:
            out.append("\\\\" if c == "\\" else c)
    return "".join(out)


@compiles(BinaryExpression, "clickhousedb")
def _like_escape(element: BinaryExpression[Any], compiler: Any, **kw: Any) -> str:
    """``LIKE :pattern ESCAPE '/'`` (the core's escaped patterns) as ClickHouse's backslash form."""
    escape = element.modifiers.get("escape")
    right = element.right
    if escape is not None and element.operator in _LIKES and isinstance(right, BindParameter):
        if isinstance(right.value, str):
            pattern = literal(_backslashed(right.value, escape), type_=right.type)
            element = element.operator(element.left, pattern)
    return str(compiler.visit_binary(element, **kw))


def _ch(name: str) -> TypeEngine[Any]:
    from clickhouse_connect.cc_sqlalchemy.datatypes.base import sqla_type_from_name  # the [clickhouse] extra

    return cast("TypeEngine[Any]", sqla_type_from_name(name))  # a TypeEngine subclass, untyped


class _JSONString(JSONAsText):
    """JSON as its text in a ``String`` (ClickHouse's JSON type reads back as an object tree)."""

    cache_ok = True

    def load_dialect_impl(self, dialect: Any) -> TypeEngine[Any]:
        return _ch("String")


def _type_name(type_: TypeEngine[Any], dialect: Any) -> str:
    """The ClickHouse type of a column's stored type (SQLAlchemy's generic types would compile to
    aliases with other meanings: ``FLOAT`` is ``Float32``, ``DATETIME`` has whole seconds)."""
    while isinstance(type_, TypeDecorator):
        type_ = type_.impl_instance
    if type(type_).__module__.startswith("clickhouse_connect"):
        return str(dialect.type_compiler_instance.process(type_))
    if isinstance(type_, Boolean):
        return "Bool"
    if isinstance(type_, (Integer, BigInteger, SmallInteger)):
        return "Int64"
    if isinstance(type_, Float):
        return "Float64"
    if isinstance(type_, Numeric):
        return f"Decimal({type_.precision or 38}, {type_.scale or 0})"
    if isinstance(type_, DateTime):
        return "DateTime64(6, 'UTC')"
    if isinstance(type_, Date):
        return "Date32"
    if isinstance(type_, (LargeBinary, JSON)):
        return "String"
    return "String"


def table_ddl(table: Table, dialect: Any, *, replacing: bool = True) -> str:
    """``CREATE TABLE`` of ``table``: ``ReplacingMergeTree(ctxprec_version)`` ordered by its
    primary key (``replacing=False``: a ``MergeTree`` that keeps every row of a key; no key: a
    ``MergeTree`` in insertion order), nullable columns ``Nullable``."""
    prep = dialect.identifier_preparer
    columns = []
    for col in table.columns:
        name = _type_name(stored_type(col.type, dialect), dialect)
        if col.nullable and not name.startswith("Nullable("):
            name = f"Nullable({name})"
        columns.append(f"{prep.quote(col.name)} {name}")
    key = [prep.quote(c.name) for c in table.primary_key.columns]
    if key and not replacing:
        engine = f"ENGINE = MergeTree ORDER BY ({', '.join(key)}) {_SETTINGS}"
    elif key:
        columns.append(_VERSION)
        engine = f"ENGINE = ReplacingMergeTree({prep.quote(VERSION_COLUMN)}) ORDER BY ({', '.join(key)}) {_SETTINGS}"
    else:
        engine = f"ENGINE = MergeTree ORDER BY tuple() {_SETTINGS}"
    return f"CREATE TABLE {prep.format_table(table)} ({', '.join(columns)}) {engine}"


class ClickHouseDialect(Dialect):
    names = ("clickhousedb",)
    family = "ClickHouse"
    write_path = (
        "insert-only: `INSERT` of the chunk into a `ReplacingMergeTree(ctxprec_version)` ordered by the key, "
        "read with `FINAL` (session setting `final = 1`)"
    )
    native_upsert = True
    claims = "lease"
    keys_enforced = False
    secondary_indexes = False
    #: UTC; every table read with ``FINAL``; SQL's NULLs where ClickHouse would give a type's
    #: default: an aggregate over no rows (``min`` of nothing is NULL, not ``''``) and the missing
    #: side of an outer join
    utc_session = (
        "SET session_timezone = 'UTC'",
        "SET final = 1",
        "SET aggregate_functions_null_for_empty = 1",
        "SET join_use_nulls = 1",
    )

    def session_time_zone(self) -> str:
        return (
            "`SET session_timezone = 'UTC'` on connect (also `final = 1`: reads see each key's latest row; "
            "`aggregate_functions_null_for_empty = 1`, `join_use_nulls = 1`: SQL's NULLs)"
        )

    def lineage(self, url: URL, table: str) -> Lineage:
        """``clickhouse://host:port`` / ``database.table`` (chDB: this machine, ``localhost``)."""
        host = url.host or "localhost"
        namespace = f"clickhouse://{host}:{url.port or 8123}"
        database = url.database or "default"
        return Lineage(namespace, f"{database}.{table}", f"{namespace}/{database}/{table}")

    # --- types and tables ------------------------------------------------------------------------

    def key_text_type(self, length: int | None) -> TypeEngine[Any]:
        return _ch("String")

    def exact_text_type(self) -> TypeEngine[Any]:
        return _ch("String")

    def key_code_type(self, length: int) -> TypeEngine[Any]:
        return _ch("String")

    def model_name_type(self) -> TypeEngine[Any]:
        return _ch("String")

    def json_type(self) -> TypeEngine[Any]:
        return _JSONString()

    def binary_key_type(self, size: int) -> TypeEngine[Any]:
        return _ch(f"FixedString({size})")

    def double_type(self) -> TypeEngine[Any]:
        return _ch("Float64")

    def timestamp_type(self) -> TypeEngine[Any]:
        return _ch("DateTime64(6, 'UTC')")

    def convert_judgment_keys(self, conn: Connection, table: Table) -> None:
        """Nothing to convert: ClickHouse support came after judgment keys became binary, and its
        ``FixedString`` key does not read back as one of SQLAlchemy's binary types."""

    def create_table(self, conn: Connection, table: Table, *, checkfirst: bool = True) -> None:
        if checkfirst and self.has_table(conn, table.name, table.schema):
            return
        from ..lease_claims import CLAIMS_TABLE

        # a lease is a row per claimer: two claimers' rows of one name must both be seen (the
        # later claimer sees the earlier and withdraws), never replaced by the later one
        conn.exec_driver_sql(table_ddl(table, conn.dialect, replacing=table.name != CLAIMS_TABLE))

    def create_tables(self, conn: Connection, metadata: MetaData, *, checkfirst: bool = True) -> None:
        for table in metadata.sorted_tables:
            self.create_table(conn, table, checkfirst=checkfirst)

    # --- writes ----------------------------------------------------------------------------------

    def _insert(self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> int:
        for batch in batches(rows):
            conn.execute(insert(table), list(batch))
        return len(rows)

    def upsert(self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]], keys: list[str]) -> int:
        """One ``INSERT`` per 500 rows: the latest row of a key is the row (``FINAL``)."""
        return self._insert(conn, table, decoded(dedupe(rows, keys)))

    def insert_ignore(
        self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]] | ColumnRows, keys: list[str]
    ) -> int:
        """The rows whose key is not there yet (read with ``FINAL``), inserted. Two writers racing
        on one key both insert it: the table keeps one row of it, as of any key."""
        dicts = decoded(dedupe(rows.as_dicts() if isinstance(rows, ColumnRows) else rows, keys))
        if not dicts:
            return 0
        key = tuple_(*[table.c[k] for k in keys]) if len(keys) > 1 else table.c[keys[0]]
        present: set[Any] = set()
        for part in in_parts([tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]] for r in dicts]):
            stmt = select(*[table.c[k] for k in keys]).where(key.in_(list(part)))
            present.update(tuple(r) if len(keys) > 1 else r[0] for r in conn.execute(stmt))
        new = [r for r in dicts if (tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]) not in present]
        self._insert(conn, table, new)
        return len(dicts)

    def delete_scored_failures(
        self,
        conn: Connection,
        failures: Table,
        scores: Table,
        equal: Sequence[tuple[str, Any]],
        log_ids: Sequence[str],
    ) -> None:
        """A lightweight ``DELETE`` of the failure records whose key is among the scores' keys
        (``(key) IN (SELECT key ...)``: no correlated subquery in a mutation)."""
        f, s = failures, scores
        names = [c.name for c in s.primary_key.columns]
        for part in in_parts(list(log_ids)):
            scored = select(*[s.c[n] for n in names]).where(
                *(s.c[n] == v for n, v in equal), s.c.log_id.in_(list(part))
            )
            conn.execute(
                delete(f).where(
                    *(f.c[n] == v for n, v in equal),
                    f.c.log_id.in_(list(part)),
                    tuple_(*[f.c[n] for n in names]).in_(scored),
                )
            )
