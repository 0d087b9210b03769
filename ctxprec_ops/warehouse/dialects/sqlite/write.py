"""SQLite's ``INSERT ... ON CONFLICT`` (and ``INSERT OR IGNORE``) as a few driver-level multi-row
statements (up to ``ROWS_PER_STATEMENT`` rows each), bound column by column."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Sequence
from itertools import chain, repeat
from operator import is_, itemgetter
from typing import Any

from sqlalchemy import Boolean, LargeBinary, PrimaryKeyConstraint, Table
from sqlalchemy.engine import Connection

from ...types import stored_type
from ...write_rows import bind_processors

__all__ = ["ROWS_PER_STATEMENT", "upsert_rows", "write_columns", "multi_row_sql"]


def upsert_rows(
    conn: Connection, table: Table, cols: list[str], keys: list[str], others: list[str], rows: Sequence[dict[str, Any]]
) -> None:
    """SQLite's ``INSERT ... ON CONFLICT`` for ``rows``, in order (``write_columns``)."""
    write_columns(conn, table, keys, others, {c: list(map(itemgetter(c), rows)) for c in cols}, {})


def write_columns(
    conn: Connection,
    table: Table,
    keys: list[str],
    others: list[str],
    columns: dict[str, list[Any]],
    shared: dict[str, Any],
) -> None:
    """SQLite's ``INSERT ... ON CONFLICT`` for rows given column by column (``shared``: a value
    every row holds), in order, as multi-row ``VALUES`` statements (``multi_row_sql``):
    the columns' own bind processors (the values SQLAlchemy would store) applied once per value,
    without the per-row statement machinery of ``Connection.execute`` (a third of a chunk's write
    time, spent while the database write lock is held). SQLite applies a multi-row insert's rows
    one after another, conflict clause included, as an ``executemany`` of the same rows does;
    fewer statements to run (one per ``_rows_per_statement`` rows instead of one per row)
    and a value every row shares bound once."""
    dialect = conn.dialect
    cols = [*columns, *shared]
    n_rows = len(next(iter(columns.values())))
    types = [stored_type(table.c[c].type, dialect) for c in cols]
    procs = [_native(t, p) for t, p in zip(types, bind_processors(table, cols, dialect))]
    # a column that is NULL in every row is written as a literal NULL: the driver binds a None
    # through its adapter look-up (~3,000 instructions per value, e.g. every cached verdict's
    # agreement); a column holding one object in every row (a chunk's timestamp, run id, judge
    # model...) is processed once and is one parameter of the statement; the same rows are stored
    kinds: list[str] = []
    bound: list[list[Any]] = []
    for c, p, t in zip(cols, procs, types):
        values = columns[c] if c in columns else [shared[c]]
        first = values[0]
        if c in shared or all(map(is_, values, repeat(first))):
            value = first if p is None else p(first)
            kinds.append("null" if value is None else "same")
            bound.append([value])
        else:
            kinds.append("row")
            bound.append(_bind_values(values, p, t))
    same = [col[0] for col, kind in zip(bound, kinds) if kind == "same"]
    varying = [col for col, kind in zip(bound, kinds) if kind == "row"]
    ignore = not others and _can_ignore(table, cols, kinds, bound)
    per_stmt = _rows_per_statement(conn, len(same), len(varying))
    for start in range(0, n_rows, per_stmt):
        part = [col[start : start + per_stmt] for col in varying]
        n = min(per_stmt, n_rows - start)
        sql = multi_row_sql(table, tuple(cols), tuple(keys), tuple(others), tuple(kinds), n, dialect, ignore)
        conn.exec_driver_sql(sql, (*same, *chain.from_iterable(zip(*part))) if part else tuple(same))


def _can_ignore(table: Table, cols: list[str], kinds: list[str], bound: list[list[Any]]) -> bool:
    """Whether an insert-ignore of these rows may be ``INSERT OR IGNORE`` rather than ``ON
    CONFLICT (key) DO NOTHING``: the same rows are stored when the only constraint the rows can
    break is the primary key — no NULL in a NOT NULL column and no such column left out without
    a default (checked here), no other unique or check constraint on the table.

    ``OR IGNORE`` needs no statement journal (a statement that can abort half-way must be able to
    undo its own changes): for a chunk's judgment-cache rows, scattered over the key index, that
    journal spilled to a temporary file, ~190,000 writes of 4 KiB pages and page numbers per
    40,000 rows (bench/README.md)."""
    if not _only_key_constraint(table):
        return False
    given = set(cols)
    if any(not c.nullable and c.server_default is None and c.name not in given for c in table.columns):
        return False  # a NOT NULL column left out would be NULL: the ordinary statement's error
    for c, kind, values in zip(cols, kinds, bound):
        if not table.c[c].nullable and (kind == "null" or (kind == "row" and None in values)):
            return False  # the ordinary statement, which raises the database's own error
    return True


@functools.lru_cache(maxsize=64)
def _only_key_constraint(table: Table) -> bool:
    """The table's only constraint (unique, check, foreign key) is its primary key."""
    others = [c for c in table.constraints if not isinstance(c, PrimaryKeyConstraint)]
    on_columns = any(col.constraints or col.foreign_keys for col in table.columns)  # e.g. Column(CheckConstraint)
    return not others and not on_columns and not any(ix.unique for ix in table.indexes) and bool(table.primary_key)


#: rows per multi-row ``INSERT`` at most: preparing a statement costs about as much per row as
#: running it, so a chunk's rows go in a few statements of one shape (prepared once per
#: connection) rather than one long statement of each size. 128 rather than 32: a chunk's 2,500
#: judgment-cache rows in 20 statements instead of 79 (~6,800 instructions a case less, each
#: statement's own cost in SQLAlchemy and the driver; bench/README.md)
ROWS_PER_STATEMENT = 128


def _rows_per_statement(conn: Connection, shared: int, varying: int) -> int:
    """Rows one statement takes: ``ROWS_PER_STATEMENT``, fewer when their parameters would
    pass the connection's limit of bound parameters (999 where it cannot be asked)."""
    limit = 999
    driver = getattr(conn.connection, "driver_connection", None)
    getlimit = getattr(driver, "getlimit", None)
    if getlimit is not None:
        limit = getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    return max(1, min(ROWS_PER_STATEMENT, (limit - shared) // max(varying, 1)))


@functools.lru_cache(maxsize=64)
def multi_row_sql(
    table: Table,
    cols: tuple[str, ...],
    keys: tuple[str, ...],
    others: tuple[str, ...],
    kinds: tuple[str, ...],
    rows: int,
    dialect: Any,
    ignore: bool = False,
) -> str:
    """``INSERT INTO table (cols) VALUES (...), ... ON CONFLICT (keys) DO UPDATE SET others`` (or
    ``DO NOTHING``; with ``ignore``, ``INSERT OR IGNORE``: ``_can_ignore``) for ``rows``
    rows. Per column (``kinds``): ``null`` a literal NULL, ``same`` one parameter every row
    shares, ``row`` a parameter per row. The shared columns come first in each row as ``?1``,
    ``?2``, ... and the others as plain ``?`` (numbered on from there in order), so the parameters
    are the shared values, then each row's own values row by row (SQLite looks a numbered
    parameter up in a list: only the shared ones are numbered, or preparing a statement of many
    rows took time quadratic in its parameters). One text per shape: the driver's statement
    cache prepares it once."""
    q = dialect.identifier_preparer
    conflict = ", ".join(q.quote(k) for k in keys)
    action = (
        ("DO UPDATE SET " + ", ".join(f"{q.quote(c)} = excluded.{q.quote(c)}" for c in others))
        if others
        else "DO NOTHING"
    )
    order = [i for i, k in enumerate(kinds) if k == "same"] + [i for i, k in enumerate(kinds) if k != "same"]
    slots = []
    for number, i in enumerate(order, start=1):
        kind = kinds[i]
        slots.append(f"?{number}" if kind == "same" else "NULL" if kind == "null" else "?")
    group = f"({', '.join(slots)})"
    head = "INSERT OR IGNORE INTO" if ignore else "INSERT INTO"
    return (
        f"{head} {q.format_table(table)} ({', '.join(q.quote(cols[i]) for i in order)}) "
        f"VALUES {', '.join([group] * rows)}{'' if ignore else f' ON CONFLICT ({conflict}) {action}'}"
    )


def _native(type_: Any, proc: Any) -> Any:
    """A SQLite column's bind processor with shortcuts to what it returns for the common values:
    a binary column's ``bytes`` as a ``bytearray`` (the same BLOB, but the driver binds a
    ``bytearray`` directly, where ``bytes`` or the processor's ``memoryview`` go through its
    adapter look-up: two failed attribute look-ups, one raising ``AttributeError``, ~3,000
    instructions per value), a boolean's ``True``/``False`` as the processor's ``1``/``0``
    (without its two Python calls). Anything else goes to the processor."""
    if proc is None:
        return None
    if isinstance(type_, LargeBinary):

        def binary(value: Any) -> Any:
            return bytearray(value) if type(value) is bytes else proc(value)

        return binary
    if isinstance(type_, Boolean):

        def boolean(value: Any) -> Any:
            return 1 if value is True else 0 if value is False else proc(value)

        return boolean
    return proc


def _bind_values(values: list[Any], process: Any, type_: Any) -> list[Any]:
    """A column's values through its ``_native`` processor, the shortcuts taken for the
    whole column at once where every value is of the usual type (no Python call per value): a
    binary column of ``bytes`` as ``bytearray``s, a boolean column of ``bool``s as ``1``/``0``."""
    if process is None:
        return values
    kinds = set(map(type, values))
    if len(kinds) == 1:
        if bytes in kinds and isinstance(type_, LargeBinary):
            return list(map(bytearray, values))
        if bool in kinds and isinstance(type_, Boolean):
            return list(map(int, values))
    return list(map(process, values))
