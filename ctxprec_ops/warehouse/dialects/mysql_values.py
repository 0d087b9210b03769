"""MySQL / MariaDB's write path through PyMySQL: a chunk's rows as multi-row
``INSERT ... VALUES (...), (...) ON DUPLICATE KEY UPDATE ...`` statements whose values are
rendered as literals column by column, up to ``MAX_BYTES`` of SQL a statement.

PyMySQL's executemany sends the same multi-row statement, but it gets there through a parameter
dict per row (SQLAlchemy's) and PyMySQL's per-value escaping dispatch: at ~2,500 judgment-cache
rows and 500 score rows a chunk that was most of the client's CPU (bench/README.md). Here each
column's values go through the column's own bind processor (the values SQLAlchemy would send), a
value every row shares is rendered once, bytes are hex literals, and text and anything else is
rendered as the session reads them (``NO_BACKSLASH_ESCAPES`` honoured; ``literals``). The
statement text around the values (column list, ``ON DUPLICATE KEY UPDATE`` clause) is the one
SQLAlchemy compiles for the table; a statement that would insert other columns too (a Python-side
default) takes the executemany path.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from operator import is_
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Connection

from ..write_rows import ColumnRows, bind_processors, bind_values

__all__ = ["literal_insert", "literals", "pymysql_connection", "MAX_BYTES"]

#: SQL text per statement (MySQL 5.7's default ``max_allowed_packet`` is 4 MiB)
MAX_BYTES = 1 << 20


def pymysql_connection(conn: Connection) -> Any | None:
    """The PyMySQL connection under ``conn``; None for another driver (or none left)."""
    raw = conn.connection.dbapi_connection
    if raw is None or not type(raw).__module__.startswith("pymysql") or not hasattr(raw, "escape"):
        return None
    return raw


def literal_insert(conn: Connection, stmt: Any, table: Table, rows: Sequence[dict[str, Any]] | ColumnRows) -> bool:
    """Write ``rows`` (distinct keys, ordered as they should be inserted) with ``stmt`` (the
    family's ``INSERT ... ON DUPLICATE KEY UPDATE``) as multi-row literal statements; False (and
    nothing written) when the connection's driver is not PyMySQL."""
    raw = pymysql_connection(conn)
    if raw is None:
        return False
    if isinstance(rows, ColumnRows):
        n = len(rows)
        columns = {**rows.columns, **{c: [v] * n for c, v in rows.shared.items()}}
    else:
        n = len(rows)
        columns = {c: [r[c] for r in rows] for c in rows[0]}
    if not n:
        return True
    cols = [c.name for c in table.columns if c.name in columns]  # the order SQLAlchemy renders
    if len(cols) != len(columns):
        return False
    around = _around_values(conn, stmt, table, cols)
    if around is None:
        return False
    head, tail = around
    literal = literals(raw)
    rendered: list[Iterable[str]] = []
    for c, proc in zip(cols, bind_processors(table, cols, conn.dialect)):
        values = bind_values(columns[c], proc)
        first = values[0]
        if all(map(is_, values, repeat(first))):
            rendered.append(repeat(literal(first), n))
        else:
            rendered.append(map(literal, values))
    tuples = list(map(",".join, zip(*rendered)))  # each row's values, joined in C
    if sum(map(len, tuples)) + 3 * n <= MAX_BYTES:  # the usual chunk: one statement
        _execute(conn, head + "(" + "),(".join(tuples) + ")" + tail)
        return True
    batch: list[str] = []
    size = 0
    for values_text in tuples:
        if batch and size + len(values_text) + 3 > MAX_BYTES:
            _execute(conn, head + "(" + "),(".join(batch) + ")" + tail)
            batch, size = [], 0
        batch.append(values_text)
        size += len(values_text) + 3
    _execute(conn, head + "(" + "),(".join(batch) + ")" + tail)
    return True


def _execute(conn: Connection, sql: str) -> None:
    # no parameters: the driver does not read ``%`` in the literals as placeholders
    conn.exec_driver_sql(sql, execution_options={"no_parameters": True})


def _around_values(conn: Connection, stmt: Any, table: Table, cols: list[str]) -> tuple[str, str] | None:
    """The statement's text before and after its ``VALUES`` tuple (``%`` doubled: the driver's
    paramstyle would read it). SQLAlchemy renders ``VALUES (...) [AS new] ON DUPLICATE KEY
    UPDATE``. None when it inserts other columns than ``cols`` (a column's Python-side default:
    the executemany path fills it in)."""
    prep = conn.dialect.identifier_preparer
    head = f"INSERT INTO {prep.format_table(table)} ({', '.join(prep.quote(c) for c in cols)}) VALUES "
    sql = str(stmt.values({c: None for c in cols}).compile(dialect=conn.dialect)).replace("%%", "%")
    start = sql.find(" VALUES (") + len(" VALUES ")
    if sql[:start] != head:
        return None
    end = sql.rindex(")", start, sql.index(" ON DUPLICATE KEY UPDATE ")) + 1
    return head, sql[end:]


def _escaped(value: str) -> str:
    """``value`` quoted for a session that reads backslashes as escapes: the backslash, the quote
    and NUL (which some tools cut a statement at) escaped; newlines, double quotes and the rest
    stand for themselves. Three ``str.replace`` (each a C scan): ~1.3 µs for 800 characters, where
    one ``str.translate`` costs ~16 µs. A chunk's JSON verdicts and reasons often hold a backslash or
    a quote, so much of its text takes this path (bench/README.md)."""
    return value.replace("\\", "\\\\").replace("'", "\\'").replace("\0", "\\0")


def literals(raw: Any) -> Callable[[Any], str]:
    """How a value is written into the statement: text, floats, integers, booleans, bytes and NULL
    here (~0.3 µs a text with nothing to escape, where PyMySQL's ``escape`` dispatches each value
    through its encoders and escapes double quotes, newlines and Ctrl-Z too: ~2 µs; its ``literal``
    also warns of its own deprecation at each call), anything else by ``escape``.
    Text is quoted as the session reads it: with ``NO_BACKSLASH_ESCAPES`` in its ``sql_mode``
    only quotes are doubled (the server reports the mode in every answer's status)."""
    from pymysql.constants.SERVER_STATUS import SERVER_STATUS_NO_BACKSLASH_ESCAPES

    escape = raw.escape
    plain_quotes = bool(raw.server_status & SERVER_STATUS_NO_BACKSLASH_ESCAPES)

    def literal(value: Any) -> str:
        kind = type(value)
        if kind is str:
            if "'" not in value and "\\" not in value and "\0" not in value:
                return "'" + value + "'"  # the usual text (JSON included): three scans, no copy
            return "'" + (value.replace("'", "''") if plain_quotes else _escaped(value)) + "'"
        if value is None:
            return "NULL"
        if kind is bool:
            return "1" if value else "0"
        if kind is int:
            return str(value)
        if kind is float and math.isfinite(value):
            text = repr(value)
            return text if "e" in text else text + "e0"  # a DOUBLE literal, as PyMySQL writes it
        if kind is bytes:
            return "X'" + value.hex() + "'"
        return str(escape(value))

    return literal
