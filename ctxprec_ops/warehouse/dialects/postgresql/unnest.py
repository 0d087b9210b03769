"""PostgreSQL's write of a chunk's rows as one ``INSERT ... SELECT ... FROM unnest(:col1, :col2,
...)`` per table: each column one array parameter in PostgreSQL's array text form, the columns
every row holds the same value in as scalar parameters (rows given column by column, a chunk's
judgments, as they are; dict rows, its scores and failures, through ``ColumnRows.from_dicts``).

``COPY`` takes four round trips to the server (the staging table, the copy's start and end, the
insert from the stage); the writer thread waits for the interpreter lock after each one while the
event loop judges, ~3 – 7 ms a round trip (bench/README.md). Here the savepoint, the insert and its
release go in one pipeline: one round trip, no staging table (``conflicts``: plain first). Rows
holding a value these arrays do not carry exactly (a JSON object, a naive datetime, a date, a
``Decimal``, an integer past 64 bits, a boolean for a non-boolean column) go through ``COPY``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import nullcontext
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import JSON, Boolean, Table
from sqlalchemy.engine import Connection

from ....json_text import JSONText
from ...types import stored_type
from ...write_rows import ColumnRows, column_processor, key_columns
from .conflicts import ROLLBACK, SAVEPOINT, insert_plain_first

__all__ = ["array_text", "unnest_insert"]

_INT64 = 1 << 63


def _text(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _element(value: Any) -> str | None:
    """One array element in PostgreSQL's array text form, or None when the value has none here."""
    kind = type(value)
    if value is None:
        return "NULL"
    if kind is str:
        return _text(value)
    if kind is bytes:
        return '"\\\\x' + value.hex() + '"'
    if kind is bool:
        return "t" if value else "f"
    if kind is int:
        return str(value) if -_INT64 <= value < _INT64 else None
    if kind is float:
        if math.isfinite(value):
            return repr(value)
        return '"NaN"' if math.isnan(value) else ('"Infinity"' if value > 0 else '"-Infinity"')
    if kind is JSONText:  # serialized already: the JSON column parses it
        return _text(value)
    if kind is datetime and value.tzinfo is not None:  # an instant: exact to the microsecond
        return _text(value.isoformat())
    return None


def array_text(values: Sequence[Any], *, json_null: bool = False) -> str | None:
    """``values`` as one array in PostgreSQL's text form (text quoted and escaped, bytes as
    ``\\x`` hex, booleans, integers, floats exactly by ``repr``, ``JSONText`` as its text, aware
    datetimes in ISO form, None as NULL — or, ``json_null``, as JSON ``null``); None when a value
    is of another type."""
    items = []
    for value in values:
        item = '"null"' if json_null and value is None else _element(value)
        if item is None:
            return None
        items.append(item)
    return "{" + ",".join(items) + "}"


def _scalar(value: Any, json_null: str | None) -> Any:
    """A shared value as a parameter the statement casts to its column's type (a JSON column's
    None as JSON ``null`` where SQLAlchemy would store that)."""
    if value is None and json_null == "null":
        return "null"
    return str(value) if type(value) is JSONText else value


@cache
def _pipelines() -> bool:
    """Whether psycopg's libpq has pipeline mode (libpq 14+; the binary wheels bundle one)."""
    import psycopg

    return bool(psycopg.Pipeline.is_supported())


def _json_nulls(conn: Connection, table: Table, rows: ColumnRows) -> dict[str, str] | None:
    """For each JSON column, how this path stores a None as SQLAlchemy would (its bind processor
    keeps it a SQL NULL, or makes it JSON ``null``: the default); None when a JSON column holds
    a value other than ``JSONText`` or None (serialized as SQLAlchemy would only through it)."""
    dialect = conn.dialect
    nulls: dict[str, str] = {}
    for name in (*rows.columns, *rows.shared):
        if not isinstance(stored_type(table.c[name].type, dialect), JSON):
            continue
        values = rows.columns[name] if name in rows.columns else [rows.shared[name]]
        if not all(v is None or type(v) is JSONText for v in values):
            return None
        proc = column_processor(table, name, dialect)
        bound = None if proc is None else proc(None)
        if bound is None:
            nulls[name] = "NULL"
        elif getattr(bound, "obj", object()) is None:  # psycopg's Json / Jsonb wrapper of None
            nulls[name] = "null"
        else:
            return None
    return nulls


def unnest_insert(conn: Connection, table: Table, rows: ColumnRows, action: str) -> bool:
    """Insert ``rows`` (distinct keys) into ``table`` in key order with one ``INSERT ... SELECT
    ... FROM unnest(...)``: plainly under a savepoint, in one pipeline, else (a key exists) with
    ``ON CONFLICT (key) <action>``. False, nothing sent, when a value has no array form here."""
    nulls = _json_nulls(conn, table, rows)
    if nulls is None:
        return False
    keys = key_columns(table)
    ordered = rows.sorted_by(keys[0]) if len(keys) == 1 and keys[0] in rows.columns else rows
    if not ordered.columns:  # nothing to unnest (every value shared)
        return False
    arrays = {}
    for name, values in ordered.columns.items():
        if bool in set(map(type, values)) and not isinstance(table.c[name].type, Boolean):
            return False  # COPY's binary form writes True as 1 into an integer column; "t" would not parse
        text = array_text(values, json_null=name in nulls and nulls[name] == "null")
        if text is None:
            return False
        arrays[name] = text
    dialect = conn.dialect
    q = dialect.identifier_preparer
    names = [*arrays, *ordered.shared]
    params: dict[str, Any] = {f"a{i}": text for i, text in enumerate(arrays.values())}
    params.update({f"s{i}": _scalar(value, nulls.get(c)) for i, (c, value) in enumerate(ordered.shared.items())})
    typed = {c: table.c[c].type.compile(dialect=dialect) for c in names}
    unnest = ", ".join(f"CAST(%(a{i})s AS {typed[c]}[])" for i, c in enumerate(arrays))
    aliases = [f"u{i}" for i in range(len(arrays))]
    selected = aliases + [f"CAST(%(s{i})s AS {typed[c]})" for i, c in enumerate(ordered.shared)]
    insert = (
        f"INSERT INTO {q.format_table(table)} ({', '.join(q.quote(c) for c in names)}) "
        f"SELECT {', '.join(selected)} FROM unnest({unnest}) AS u({', '.join(aliases)})"
    )
    by_key = [aliases[list(arrays).index(k)] for k in keys if k in arrays]
    if ordered is rows and by_key:  # else sorted above: concurrent writers lock keys in one order
        insert += " ORDER BY " + ", ".join(by_key)
    upsert = f"{insert} ON CONFLICT ({', '.join(q.quote(k) for k in keys)}) {action}"
    driver = conn.connection.driver_connection
    if driver is None:
        raise RuntimeError(f"cannot write {table.name}: the connection is no longer usable")
    with driver.cursor() as cur:

        def plain() -> None:  # one round trip (three with a libpq older than 14: no pipeline mode)
            with driver.pipeline() if _pipelines() else nullcontext():
                cur.execute(f"SAVEPOINT {SAVEPOINT}")
                cur.execute(insert, params)
                cur.execute(f"RELEASE SAVEPOINT {SAVEPOINT}")

        if not insert_plain_first(conn, table, plain, lambda: cur.execute(ROLLBACK)):
            cur.execute(upsert, params)
    return True
