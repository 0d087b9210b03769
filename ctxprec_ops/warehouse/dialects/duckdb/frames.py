"""DuckDB's write path: the chunk as a frame scanned by one ``INSERT ... SELECT ... ON CONFLICT``.

A multi-row ``VALUES`` statement of 500 rows is compiled afresh by SQLAlchemy each time (no
statement cache for multi-row inserts) and bound parameter by parameter: at ~25 columns that cost
more than DuckDB's own work (bench/README.md, "Backends"). Instead the rows go column by column
(through the columns' own bind processors, the values SQLAlchemy would store) into numpy object
arrays, registered on the connection for the statement and scanned by

    INSERT INTO t (cols) SELECT CAST(col AS type), ... FROM stage ON CONFLICT (key) DO UPDATE ...

The casts give every column its table type (a column whose values are all NULL included). One
statement per table and chunk, inside the caller's transaction (the same DuckDB connection). A
column holding the same object in every row (the partition, the key's model and prompt, the run
id, the timestamp) is one bound parameter instead of a frame column, and a column of floats,
integers or booleans only is a typed array: registering and scanning object columns is what a
write's frame costs (a 1,000-row scores chunk: 20 object columns ~2.1 ms to register and ~2.3 ms
to scan; 9 columns, 5 of them typed, ~0.8 ms and ~0.5 ms).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Connection

from ...write_rows import ColumnRows, bind_processors, bind_values
from ..writes import conflict_action

__all__ = ["frame_upsert", "registered_values"]


#: numpy's type for a column whose values are all of one of these Python types
_TYPED = {float: "float64", int: "int64", bool: "bool"}


def _array(values: list[Any]) -> Any:
    """One column as a numpy array DuckDB scans: typed when every value is a float, every one an
    int (within 64 bits) or every one a bool; else of objects (each value's type inferred)."""
    import numpy as np

    first = type(values[0]) if values else None
    kind = _TYPED.get(first)  # type: ignore[arg-type]
    if kind is not None and all(type(v) is first for v in values):  # exactly: a bool is no int here
        try:
            return np.array(values, dtype=kind)
        except OverflowError:  # an int past 64 bits: DuckDB's own conversion says what it is
            pass
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


def _frame(columns: dict[str, list[Any]]) -> dict[str, Any]:
    """The columns as a dict of numpy arrays, which DuckDB scans as a table (each column's type
    taken from the array, or inferred from its values; the statement's casts give the table's).
    Neither pyarrow nor pandas is imported: registering an Arrow table made DuckDB import pandas,
    ~80 MB of resident memory for the run, and its conversion cost more CPU than filling arrays."""
    return {name: _array(values) for name, values in columns.items()}


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
    *,
    plain: bool = False,
) -> int:
    """Insert ``rows`` (distinct keys, the same columns each) into ``table``; where the key exists,
    update ``others`` (None or empty: leave the row as it is). Returns the number of rows.
    ``plain``: without ``ON CONFLICT`` (a key that exists fails the statement, and DuckDB aborts
    the transaction with it)."""
    n = len(rows)
    if not n:
        return 0
    if isinstance(rows, ColumnRows):
        data = rows
    else:
        data = ColumnRows.from_dicts(rows, list(rows[0]), keep=keys)
    # the frame's own columns (a key always: the frame has at least one, and its rows' count)
    varying = {**data.columns, **{k: [data.shared[k]] * n for k in keys if k in data.shared}}
    shared = {c: v for c, v in data.shared.items() if c not in varying}
    cols = [*varying, *shared]
    procs = dict(zip(cols, bind_processors(table, cols, conn.dialect)))
    frame = _frame({c: bind_values(values, procs[c]) for c, values in varying.items()})
    params = tuple(v if procs[c] is None else procs[c](v) for c, v in shared.items())
    prep = conn.dialect.identifier_preparer
    target = prep.format_table(table)
    stage = f"ctxprec_stage_{uuid.uuid4().hex[:12]}"
    sources = [prep.quote(c) for c in varying] + [f"${i}" for i in range(1, len(shared) + 1)]
    types = [table.c[c].type.compile(dialect=conn.dialect) for c in cols]
    casts = ", ".join(f"CAST({source} AS {type_})" for source, type_ in zip(sources, types))
    quoted = ", ".join(prep.quote(c) for c in cols)
    sql = f"INSERT INTO {target} ({quoted}) SELECT {casts} FROM {stage}"
    if not plain:
        conflict = ", ".join(prep.quote(k) for k in keys)
        sql += f" ON CONFLICT ({conflict}) {conflict_action(prep, others or ())}"
    raw = conn.connection.dbapi_connection
    if raw is None:  # SQLAlchemy's handle lost its DBAPI connection (invalidated)
        raise RuntimeError(f"cannot write {table.name}: the connection is no longer usable")
    with _registered(raw, stage, frame):
        conn.exec_driver_sql(sql, params) if params else conn.exec_driver_sql(sql)
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
