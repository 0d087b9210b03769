"""MySQL / MariaDB's key look-ups and the failure clean-up through PyMySQL as statements whose
``IN`` lists are literals (``mysql_values.literals``): a chunk's ~2,500 judgment keys as an
expanding bound list cost ~18 ms a chunk to compile, bind and escape value by value, ~9 ms
written out (bench/README.md). Rows come back as the driver reads them (as SQLite's look-ups);
with another driver the Core statements of ``Reads`` run instead."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Connection

from ..write_rows import bind_values, column_processor
from .driver_sql import scored_failures, select_from
from .mysql_values import literals
from .reads import in_parts

__all__ = ["select_in", "delete_scored_failures"]

#: values of an ``IN`` list, the family's (``MySQLDialect.id_in`` too): a chunk's ~2,500 judgment
#: keys in one statement, ~130 KB of SQL
IN_BATCH = 5_000


def _equalities(
    conn: Connection, table: Table, equal: Sequence[tuple[str, Any]], literal: Callable[[Any], str]
) -> list[str]:
    q = conn.dialect.identifier_preparer
    out = []
    for name, value in equal:
        (bound,) = bind_values([value], column_processor(table, name, conn.dialect))
        out.append(f"{q.quote(table.c[name].name)} = {literal(bound)}")
    return out


def _in_list(conn: Connection, table: Table, column: str, values: Sequence[Any], literal: Callable[[Any], str]) -> str:
    bound = bind_values(list(values), column_processor(table, column, conn.dialect))
    return f"{conn.dialect.identifier_preparer.quote(table.c[column].name)} IN ({', '.join(map(literal, bound))})"


def _run(conn: Connection, sql: str) -> Any:
    # no parameters: the driver does not read ``%`` in the literals as placeholders
    return conn.exec_driver_sql(sql, execution_options={"no_parameters": True})


def select_in(
    conn: Connection,
    raw: Any,
    table: Table,
    columns: Sequence[str | None],
    in_column: str,
    values: Sequence[Any],
    equal: Sequence[tuple[str, Any]],
) -> Iterator[Sequence[Any]]:
    """``SELECT columns FROM table WHERE <equal> AND in_column IN (...)`` (a None column reads
    NULL) on ``raw``, ``conn``'s PyMySQL connection."""
    literal = literals(raw)
    conds = _equalities(conn, table, equal, literal)
    head = f"{select_from(conn.dialect.identifier_preparer, table, columns)} WHERE "
    for part in in_parts(list(values), IN_BATCH):
        yield from _run(conn, head + " AND ".join([*conds, _in_list(conn, table, in_column, part, literal)])).all()


def delete_scored_failures(
    conn: Connection,
    raw: Any,
    failures: Table,
    scores: Table,
    equal: Sequence[tuple[str, Any]],
    log_ids: Sequence[str],
) -> None:
    """``DELETE FROM failures WHERE <equal> AND <a score exists under the row's key> AND log_id
    IN (...)`` on ``raw``, ``conn``'s PyMySQL connection."""
    literal = literals(raw)
    delete, scored = scored_failures(conn.dialect.identifier_preparer, failures, scores)
    conds = [*_equalities(conn, failures, equal, literal), scored]
    for part in in_parts(list(log_ids), IN_BATCH):
        _run(conn, f"{delete} WHERE " + " AND ".join([*conds, _in_list(conn, failures, "log_id", part, literal)]))
