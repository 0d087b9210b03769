"""Creating tables the same way on every warehouse: with their secondary indexes where the
family takes them (``Dialect.secondary_indexes``), without them elsewhere.

snowflake-sqlalchemy refuses any table that declares an index ("Only Snowflake Hybrid Tables
supports indexes"), and DuckDB's ``ON CONFLICT DO UPDATE`` cannot update an indexed column; the
tables there are created from their ``CREATE TABLE`` alone (columns and primary key).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable

from sqlalchemy import MetaData, Table
from sqlalchemy.engine import Connection, Engine

from .dialects import dialect_of
from .engine import after_commit

__all__ = ["create_table", "create_tables", "CreatedTables"]


def create_table(conn: Connection, table: Table, *, checkfirst: bool = True) -> None:
    """Create ``table`` (when missing, with ``checkfirst``)."""
    dialect_of(conn).create_table(conn, table, checkfirst=checkfirst)


def create_tables(conn: Connection, metadata: MetaData, *, checkfirst: bool = True) -> None:
    """Every table of ``metadata``, in dependency order."""
    dialect_of(conn).create_tables(conn, metadata, checkfirst=checkfirst)


class CreatedTables:
    """One table's copies (per schema) this process has created or found, per engine: a write
    creates the table once, not with every transaction. A copy counts once the transaction that
    created it has committed (``after_commit``): a CREATE undone with its transaction (a later
    statement failed, a retried transaction was given up) is made again by the next write, where
    marking it at once left every later write of the process failing on a missing table."""

    def __init__(self, migrate: Callable[[Connection, Table], object] | None = None) -> None:
        #: what brings an earlier version's table up to date, after the (skipped) CREATE
        self.migrate = migrate
        self._done: weakref.WeakKeyDictionary[Engine, set[str | None]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def ensure(self, conn: Connection, table: Table) -> None:
        """Create ``table`` in ``conn``'s transaction when this engine has not seen it yet."""
        engine, schema = conn.engine, table.schema
        with self._lock:
            if schema in self._done.get(engine, ()):
                return
        create_table(conn, table)
        if self.migrate is not None:
            self.migrate(conn, table)
        after_commit(conn, lambda: self._mark(engine, schema))

    def _mark(self, engine: Engine, schema: str | None) -> None:
        with self._lock:
            self._done.setdefault(engine, set()).add(schema)
