"""PostgreSQL's write of rows given column by column (``ColumnRows``: a chunk's judgments) as one
``INSERT ... SELECT ... FROM unnest(:col1, :col2, ...)``: each column one array parameter in
PostgreSQL's array text form (``arrays``), the values every row shares as scalar parameters.

``COPY`` takes four round trips to the server (the staging table, the copy's start and end, the
insert from the stage); the writer thread waits for the interpreter lock after each one while the
event loop judges, ~2 – 5 ms a round trip (bench/README.md). Here the savepoint, the insert and its
release go in one pipeline: one round trip, no staging table (``conflicts``: plain first). Values
of other types than these arrays carry exactly (a datetime, a dict, an integer past 64 bits)
leave the rows to ``COPY``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Connection

from ...write_rows import ColumnRows, key_columns
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
    return None


def array_text(values: Sequence[Any]) -> str | None:
    """``values`` as one array in PostgreSQL's text form (text quoted and escaped, bytes as
    ``\\x`` hex, booleans, integers, floats exactly by ``repr``, None as NULL); None when a value
    is of another type."""
    items = []
    for value in values:
        item = _element(value)
        if item is None:
            return None
        items.append(item)
    return "{" + ",".join(items) + "}"


def unnest_insert(conn: Connection, table: Table, rows: ColumnRows, action: str) -> bool:
    """Insert ``rows`` (distinct keys) into ``table`` in key order with one ``INSERT ... SELECT
    ... FROM unnest(...)``: plainly under a savepoint, in one pipeline, else (a key exists) with
    ``ON CONFLICT (key) <action>``. False, nothing sent, when a value has no array form here."""
    keys = key_columns(table)
    ordered = rows.sorted_by(keys[0]) if len(keys) == 1 and keys[0] in rows.columns else rows
    arrays = {}
    for name, values in ordered.columns.items():
        text = array_text(values)
        if text is None:
            return False
        arrays[name] = text
    dialect = conn.dialect
    q = dialect.identifier_preparer
    names = [*arrays, *ordered.shared]
    params: dict[str, Any] = {f"a{i}": text for i, text in enumerate(arrays.values())}
    params.update({f"s{i}": value for i, value in enumerate(ordered.shared.values())})
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

        def plain() -> None:  # one round trip
            with driver.pipeline():
                cur.execute(f"SAVEPOINT {SAVEPOINT}")
                cur.execute(insert, params)
                cur.execute(f"RELEASE SAVEPOINT {SAVEPOINT}")

        if not insert_plain_first(conn, table, plain, lambda: cur.execute(ROLLBACK)):
            cur.execute(upsert, params)
    return True
