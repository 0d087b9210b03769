"""Check, before any judge call, that the warehouse user may write the output tables.

A role without INSERT on ``ctxprec_scores`` would otherwise judge (and pay for) a whole chunk and
only fail at its first write. Each needed privilege is exercised by a statement that touches no
row (``... WHERE 1 = 0``: the server checks privileges all the same) in a transaction that is
rolled back. The INSERT probe names every column (``INSERT INTO t (all) SELECT all FROM t WHERE
false``): MySQL/MariaDB in strict mode reject an INSERT that leaves a NOT NULL column without a
default even when it selects no row, which a one-column probe reported as a missing grant.
A family without grants (``Dialect.has_grants``: a file — SQLite, whose read-only file already
fails when the tables are ensured; DuckDB) is not probed: it says whether the database was opened
read-only (``Dialect.read_only_reason``: one catalogue query on DuckDB, where the eight probes,
each a transaction, cost ~15 ms of a run's start).
"""

from __future__ import annotations

import threading
import weakref

from sqlalchemy import Table, delete, false, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from ..errors import CtxPrecError
from .dialects import dialect_of
from .schema import OutputTables

__all__ = ["OutputPermissionError", "check_output_writable"]


class OutputPermissionError(CtxPrecError, PermissionError):
    """The warehouse user lacks a privilege the pipeline needs on an output table."""

    error_type = "warehouse_permission"
    retryable = False


#: what the pipeline does to each output table (all are read too)
_NEEDED = {
    "scores": ("INSERT", "UPDATE"),
    "failures": ("INSERT", "UPDATE", "DELETE"),
    "runs": ("INSERT", "UPDATE"),
    "judgments": ("INSERT",),
}

_checked: weakref.WeakKeyDictionary[Engine, set[str | None]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _probe(conn: Connection, table: Table, privilege: str) -> None:
    # a column outside the key: ClickHouse cannot UPDATE a column of the sorting key at all
    col = next((c for c in table.columns if not c.primary_key), next(iter(table.primary_key.columns)))
    if privilege == "INSERT":
        cols = list(table.columns)
        conn.execute(insert(table).from_select([c.name for c in cols], select(*cols).where(false())))
    elif privilege == "UPDATE":
        conn.execute(update(table).where(false()).values({col.name: col}))
    else:
        conn.execute(delete(table).where(false()))


def check_output_writable(engine: Engine, tables: OutputTables) -> None:
    """Raise ``OutputPermissionError`` (one line, no SQL) when a needed privilege is missing."""
    family = dialect_of(engine)
    schema = tables.scores.schema
    if not family.has_grants:
        why = family.read_only_reason(engine, schema)
        if why is not None:
            raise OutputPermissionError(f"cannot write the ctxprec_* tables: {why}")
        return
    with _lock:
        if schema in _checked.get(engine, set()):
            return
    for attr, privileges in _NEEDED.items():
        table: Table = getattr(tables, attr)
        for privilege in privileges:
            with engine.connect() as conn:
                tx = conn.begin()
                try:
                    _probe(conn, table, privilege)
                except DBAPIError as exc:
                    reason = str(exc.orig if exc.orig is not None else exc).strip().splitlines()
                    raise OutputPermissionError(
                        f"the warehouse user cannot {privilege} {table.fullname} "
                        f"({reason[0] if reason else type(exc).__name__}); grant it SELECT, INSERT, UPDATE and "
                        "DELETE on the ctxprec_* tables before scoring"
                    ) from None
                finally:
                    tx.rollback()
    with _lock:
        _checked.setdefault(engine, set()).add(schema)
