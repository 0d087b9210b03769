"""DuckDB's write path: the chunk as a frame scanned by one ``INSERT ... SELECT ... ON CONFLICT``.

A multi-row ``VALUES`` statement of 500 rows is compiled afresh by SQLAlchemy each time (no
statement cache for multi-row inserts) and bound parameter by parameter: at ~25 columns that cost
more than DuckDB's own work (bench/README.md, "Backends"). Instead the rows go column by column
(through the columns' own bind processors, the values SQLAlchemy would store) into numpy object
arrays, registered on the connection for the statement and scanned by

    INSERT INTO t (cols) SELECT CAST(col AS type), ... FROM stage ON CONFLICT (key) DO UPDATE ...

The casts give every column its table type (a column whose values are all NULL included). One
statement per table and chunk, inside the caller's transaction (the same DuckDB connection).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Connection

from ...write_rows import ColumnRows, bind_processors, bind_values

__all__ = ["frame_upsert", "registered_values"]


def _frame(columns: dict[str, list[Any]]) -> dict[str, Any]:
    """The columns as a dict of numpy object arrays, which DuckDB scans as a table (each column's
    type inferred from its values; the statement's casts give the table's). Neither pyarrow nor
    pandas is imported: registering an Arrow table made DuckDB import pandas, ~80 MB of resident
    memory for the run, and its conversion cost more CPU than filling object arrays."""
    import numpy as np

    frame = {}
    for name, values in columns.items():
        array = np.empty(len(values), dtype=object)
        array[:] = values
        frame[name] = array
    return frame


@contextmanager
def registered_values(conn: Connection, values: Sequence[Any]) -> Iterator[str]:
    """``values`` as a one-column (``v``) frame registered on the connection for the block;
    yields its name. A lookup ``IN (SELECT v FROM it)`` is one statement and one scan, where an
    expanding ``IN`` of 500 bound values is compiled and bound value by value each time."""
    raw = conn.connection.dbapi_connection
    if raw is None:
        raise RuntimeError("cannot look values up: the connection is no longer usable")
    name = f"ctxprec_values_{uuid.uuid4().hex[:12]}"
    with _registered(raw, name, _frame({"v": list(values)})):
        yield name


def frame_upsert(
    conn: Connection,
    table: Table,
    rows: Sequence[dict[str, Any]] | ColumnRows,
    keys: list[str],
    others: list[str] | None,
) -> int:
    """Insert ``rows`` (distinct keys, the same columns each) into ``table``; where the key exists,
    update ``others`` (None or empty: leave the row as it is). Returns the number of rows."""
    if isinstance(rows, ColumnRows):
        n = len(rows)
        columns = {**rows.columns, **{c: [v] * n for c, v in rows.shared.items()}}
    else:
        n = len(rows)
        columns = {c: [r[c] for r in rows] for c in rows[0]} if n else {}
    if not n:
        return 0
    cols = list(columns)
    procs = bind_processors(table, cols, conn.dialect)
    frame = _frame({c: bind_values(columns[c], p) for c, p in zip(cols, procs)})
    prep = conn.dialect.identifier_preparer
    target = prep.format_table(table)
    stage = f"ctxprec_stage_{uuid.uuid4().hex[:12]}"
    quoted = [prep.quote(c) for c in cols]
    casts = ", ".join(f"CAST({q} AS {table.c[c].type.compile(dialect=conn.dialect)})" for c, q in zip(cols, quoted))
    conflict = ", ".join(prep.quote(k) for k in keys)
    if others:
        action = "DO UPDATE SET " + ", ".join(f"{prep.quote(c)} = excluded.{prep.quote(c)}" for c in others)
    else:
        action = "DO NOTHING"
    sql = f"INSERT INTO {target} ({', '.join(quoted)}) SELECT {casts} FROM {stage} ON CONFLICT ({conflict}) {action}"
    raw = conn.connection.dbapi_connection
    if raw is None:  # SQLAlchemy's handle lost its DBAPI connection (invalidated)
        raise RuntimeError(f"cannot write {table.name}: the connection is no longer usable")
    with _registered(raw, stage, frame):
        conn.exec_driver_sql(sql)
    return n


@contextmanager
def _registered(raw: Any, name: str, frame: dict[str, Any]) -> Iterator[None]:
    """``frame`` registered on the connection as ``name`` for the block. When the block fails,
    DuckDB has aborted the transaction and refuses the unregistering too ("Current transaction is
    aborted"): that error must not replace the block's own (a duplicate key, a NOT NULL column)."""
    raw.register(name, frame)
    try:
        yield
    except BaseException:
        with suppress(Exception):
            raw.unregister(name)
        raise
    raw.unregister(name)
