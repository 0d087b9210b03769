"""Reading a table's shape (names, columns, primary key) the same way on every warehouse.

SQLAlchemy's inspector does it for most dialects. Two of those we support fail there:

- duckdb-engine inherits PostgreSQL's reflection, whose queries reach ``pg_collation`` and
  ``regclass``, which DuckDB's catalogue emulation lacks: its columns and primary key are read
  from ``information_schema`` here instead (the dialect's ``reflection`` is
  ``"information_schema"``, ``warehouse/dialects/``);
- snowflake-sqlalchemy (under fakesnow at least) fails in foreign-key reflection
  (``int('NO ACTION')``), which ``Table(..., autoload_with=...)`` always runs.

So a table is built from its columns (:func:`reflect_table`) and, where the inspector reads
them, its indexes' columns: the pipeline reads source tables and checks output tables by their
columns and types, and SQLite's partition reads by whether an index starts with ``event_time``;
it never needs their foreign keys. The result is what ``autoload_with`` gives minus
constraints.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Date,
    DateTime,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Numeric,
    Table,
    Text,
    inspect,
    text,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import NoSuchTableError
from sqlalchemy.types import NullType, TypeEngine

from .dialects import for_dialect

__all__ = ["get_columns", "table_names", "has_table", "reflect_table", "primary_key_columns", "type_of"]

Bind = Engine | Connection


def _uses_information_schema(bind: Bind) -> bool:
    return for_dialect(bind.dialect.name).reflection == "information_schema"


def table_names(bind: Bind, schema: str | None = None) -> list[str]:
    return list(inspect(bind).get_table_names(schema=schema))


def has_table(bind: Bind, name: str, schema: str | None = None) -> bool:
    inspector = inspect(bind)
    if schema is None and _uses_information_schema(bind):
        # duckdb-engine's has_table without a schema answers for a table of that name in any schema
        schema = inspector.default_schema_name
    return bool(inspector.has_table(name, schema=schema))


def get_columns(bind: Bind, name: str, schema: str | None = None) -> list[dict[str, Any]]:
    """The columns of ``name`` as ``{"name", "type", "nullable"}`` dicts, in table order; empty
    when there is no such table."""
    if not _uses_information_schema(bind):
        try:
            return [dict(c) for c in inspect(bind).get_columns(name, schema=schema)]
        except NoSuchTableError:
            return []
    rows = _information_schema(
        bind,
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
        "WHERE table_name = :name AND table_schema = {schema} ORDER BY ordinal_position",
        name,
        schema,
    )
    return [{"name": n, "type": type_of(t), "nullable": str(nullable).upper() == "YES"} for n, t, nullable in rows]


def primary_key_columns(bind: Bind, name: str, schema: str | None = None) -> tuple[list[str], str | None]:
    """The primary key's columns (in key order) and its constraint name (None if it has none)."""
    if not _uses_information_schema(bind):
        pk = inspect(bind).get_pk_constraint(name, schema=schema)
        return list(pk.get("constrained_columns") or []), pk.get("name")
    rows = _information_schema(
        bind,
        "SELECT k.column_name, k.constraint_name FROM information_schema.table_constraints c "
        "JOIN information_schema.key_column_usage k ON k.constraint_name = c.constraint_name "
        "AND k.table_name = c.table_name AND k.table_schema = c.table_schema "
        "WHERE c.constraint_type = 'PRIMARY KEY' AND c.table_name = :name AND c.table_schema = {schema} "
        "ORDER BY k.ordinal_position",
        name,
        schema,
    )
    return [r[0] for r in rows], (rows[0][1] if rows else None)


def reflect_table(bind: Bind, name: str, schema: str | None = None, metadata: MetaData | None = None) -> Table:
    """``name`` as a ``Table`` of its columns and (inspector dialects) indexes, no constraints;
    ``NoSuchTableError`` when it does not exist."""
    cols = get_columns(bind, name, schema)
    if not cols:
        raise NoSuchTableError(f"{schema}.{name}" if schema else name)
    md = metadata if metadata is not None else MetaData()
    columns = [Column(c["name"], c["type"], nullable=c.get("nullable", True)) for c in cols]
    table = Table(name, md, *columns, schema=schema)
    family = for_dialect(bind.dialect.name)
    if family.secondary_indexes and family.reflection == "inspector":
        # the indexes' columns (SQLite's partition reads ask whether one starts with event_time)
        for ix in inspect(bind).get_indexes(name, schema=schema):
            names = [c for c in ix.get("column_names") or [] if c is not None and c in table.c]
            if names and len(names) == len(ix.get("column_names") or []):
                Index(ix.get("name") or f"ix_{name}_{'_'.join(names)}", *[table.c[c] for c in names])
    return table


def _information_schema(bind: Bind, sql: str, name: str, schema: str | None) -> list[Any]:
    where_schema = ":schema" if schema else "current_schema()"
    stmt = text(sql.format(schema=where_schema))
    params = {"name": name, **({"schema": schema} if schema else {})}
    if isinstance(bind, Connection):
        return list(bind.execute(stmt, params))
    with bind.connect() as conn:
        return list(conn.execute(stmt, params))


_INTEGER = re.compile(r"^(U?(TINY|SMALL)?INT(EGER)?|INT[1248])$")
_BIG = re.compile(r"^(U?BIGINT|U?HUGEINT|INT8|LONG)$")
_DECIMAL = re.compile(r"^(DECIMAL|NUMERIC|NUMBER)\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


def type_of(data_type: str) -> TypeEngine[Any]:
    """A SQLAlchemy type for an ``information_schema.columns.data_type`` (DuckDB's spelling);
    a type it does not know (lists, structs, ...) is ``NullType``: its values pass through as the
    driver gives them."""
    t = data_type.strip().upper()
    if _BIG.match(t):
        return BigInteger()
    if _INTEGER.match(t):
        return Integer()
    if m := _DECIMAL.match(t):
        return Integer() if m.group(3) == "0" else Numeric(int(m.group(2)), int(m.group(3)))
    if t in ("DOUBLE", "FLOAT", "REAL", "FLOAT4", "FLOAT8", "DOUBLE PRECISION"):
        return Float(precision=53)
    if t in ("TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ"):
        return DateTime(timezone=True)
    if t.startswith("TIMESTAMP") or t == "DATETIME":
        return DateTime()
    if t == "DATE":
        return Date()
    if t in ("BOOLEAN", "BOOL"):
        return Boolean()
    if t == "JSON":
        return JSON()
    if t in ("BLOB", "BYTEA", "VARBINARY", "BINARY"):
        return LargeBinary()
    if t.startswith(("VARCHAR", "TEXT", "STRING", "CHAR", "BPCHAR", "UUID")):
        return Text()
    return NullType()
