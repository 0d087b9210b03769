"""SQLite's key look-ups and the failure clean-up as driver SQL: the statements the Core
expressions render, sent without them — a chunk's 500-value ``IN`` lists otherwise cost more to
compile and bind in Python than SQLite takes to answer them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Connection

from ..driver_sql import scored_failures, select_from
from ..reads import in_parts

__all__ = ["select_in", "delete_scored_failures"]


def _equalities(q: Any, table: Table, equal: Sequence[tuple[str, Any]]) -> tuple[list[str], tuple[Any, ...]]:
    """``column = ?`` conditions and their parameters."""
    return [f"{q.quote(table.c[name].name)} = ?" for name, _ in equal], tuple(v for _, v in equal)


def _in(conn: Connection, sql: str, params: tuple[Any, ...], values: Sequence[Any]) -> Any:
    """Run ``sql`` (ending in ``IN``) with ``values`` as its list."""
    return conn.exec_driver_sql(f"{sql} ({', '.join('?' * len(values))})", (*params, *values))


def select_in(
    conn: Connection,
    table: Table,
    columns: Sequence[str | None],
    in_column: str,
    values: Sequence[Any],
    equal: Sequence[tuple[str, Any]],
) -> Iterator[Sequence[Any]]:
    """``SELECT columns FROM table WHERE <equal> AND in_column IN (...)`` (a None column reads NULL)."""
    q = conn.dialect.identifier_preparer
    conds, params = _equalities(q, table, equal)
    conds.append(f"{q.quote(table.c[in_column].name)} IN")
    sql = f"{select_from(q, table, columns)} WHERE {' AND '.join(conds)}"
    for part in in_parts(list(values)):
        yield from _in(conn, sql, params, part)


def delete_scored_failures(
    conn: Connection, failures: Table, scores: Table, equal: Sequence[tuple[str, Any]], log_ids: Sequence[str]
) -> None:
    """``DELETE FROM failures WHERE <equal> AND <a score exists under the row's key> AND log_id IN (...)``."""
    q = conn.dialect.identifier_preparer
    delete, scored = scored_failures(q, failures, scores)
    conds, params = _equalities(q, failures, equal)
    conds.append(scored)
    conds.append(f"{q.quote('log_id')} IN")
    sql = f"{delete} WHERE {' AND '.join(conds)}"
    for part in in_parts(list(log_ids)):
        _in(conn, sql, params, part)
