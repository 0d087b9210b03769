"""Creating tables the same way on every warehouse: with their secondary indexes where the
family takes them (``Dialect.secondary_indexes``), without them elsewhere.

snowflake-sqlalchemy refuses any table that declares an index ("Only Snowflake Hybrid Tables
supports indexes"), and DuckDB's ``ON CONFLICT DO UPDATE`` cannot update an indexed column; the
tables there are created from their ``CREATE TABLE`` alone (columns and primary key).
"""

from __future__ import annotations

from sqlalchemy import MetaData, Table
from sqlalchemy.engine import Connection

from .dialects import dialect_of

__all__ = ["create_table", "create_tables"]


def create_table(conn: Connection, table: Table, *, checkfirst: bool = True) -> None:
    """Create ``table`` (when missing, with ``checkfirst``)."""
    dialect_of(conn).create_table(conn, table, checkfirst=checkfirst)


def create_tables(conn: Connection, metadata: MetaData, *, checkfirst: bool = True) -> None:
    """Every table of ``metadata``, in dependency order."""
    dialect_of(conn).create_tables(conn, metadata, checkfirst=checkfirst)
