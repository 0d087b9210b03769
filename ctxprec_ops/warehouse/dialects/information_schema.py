"""Reading a table's shape from ``information_schema`` (a family whose SQLAlchemy inspector fails
on its catalogue declares ``reflection = "information_schema"``: DuckDB, whose duckdb-engine
inherits PostgreSQL's reflection queries that reach ``pg_collation`` and ``regclass``)."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Date,
    DateTime,
    Float,
    Integer,
    LargeBinary,
    Numeric,
    Text,
    bindparam,
    text,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.types import NullType, TypeEngine

__all__ = ["columns", "columns_of", "primary_key", "type_of"]

Bind = Engine | Connection


def columns(bind: Bind, name: str, schema: str | None) -> list[dict[str, Any]]:
    """The columns of ``name`` as ``{"name", "type", "nullable"}`` dicts (empty: no such table)."""
    return columns_of(bind, [name], schema)[name]


def columns_of(bind: Bind, names: list[str], schema: str | None) -> dict[str, list[dict[str, Any]]]:
    """``columns`` of each of ``names``, read in one query (a missing table: an empty list)."""
    found: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    if not names:
        return found
    rows = _query(
        bind,
        "SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns "
        "WHERE table_name IN :names AND table_schema = {schema} ORDER BY table_name, ordinal_position",
        schema,
        names=list(names),
    )
    for table, n, t, nullable in rows:
        if table in found:
            found[table].append({"name": n, "type": type_of(t), "nullable": str(nullable).upper() == "YES"})
    return found


def primary_key(bind: Bind, name: str, schema: str | None) -> tuple[list[str], str | None]:
    """The primary key's columns (in key order) and its constraint name."""
    rows = _query(
        bind,
        "SELECT k.column_name, k.constraint_name FROM information_schema.table_constraints c "
        "JOIN information_schema.key_column_usage k ON k.constraint_name = c.constraint_name "
        "AND k.table_name = c.table_name AND k.table_schema = c.table_schema "
        "WHERE c.constraint_type = 'PRIMARY KEY' AND c.table_name = :name AND c.table_schema = {schema} "
        "ORDER BY k.ordinal_position",
        schema,
        name=name,
    )
    return [r[0] for r in rows], (rows[0][1] if rows else None)


def _query(bind: Bind, sql: str, schema: str | None, **params: Any) -> list[Any]:
    """``sql``'s rows, ``{schema}`` in it the given schema or the current one; a list parameter
    is expanded (``IN :names``)."""
    where_schema = ":schema" if schema else "current_schema()"
    stmt = text(sql.format(schema=where_schema))
    lists: list[Any] = [bindparam(k, expanding=True) for k, v in params.items() if isinstance(v, list)]
    if lists:
        stmt = stmt.bindparams(*lists)
    if schema:
        params["schema"] = schema
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
