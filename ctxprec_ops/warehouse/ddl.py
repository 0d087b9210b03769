"""Creating tables the same way on every warehouse: with their secondary indexes where the
dialect family takes them (``Dialect.secondary_indexes``), without them elsewhere.

snowflake-sqlalchemy refuses any table that declares an index ("Only Snowflake Hybrid Tables
supports indexes"), and DuckDB's ``ON CONFLICT DO UPDATE`` cannot update an indexed column; the
tables there are created from their ``CREATE TABLE`` alone (columns and primary key).
"""

from __future__ import annotations

from sqlalchemy import MetaData, Table
from sqlalchemy.engine import Connection
from sqlalchemy.schema import CreateTable

from .dialects import for_dialect
from .reflect import has_table

__all__ = ["create_table", "create_tables"]


def create_table(conn: Connection, table: Table, *, checkfirst: bool = True) -> None:
    """Create ``table`` (when missing, with ``checkfirst``)."""
    if for_dialect(conn.dialect.name).secondary_indexes:
        table.create(conn, checkfirst=checkfirst)
        return
    if checkfirst and has_table(conn, table.name, table.schema):
        return
    conn.execute(CreateTable(table))


def create_tables(conn: Connection, metadata: MetaData, *, checkfirst: bool = True) -> None:
    """Every table of ``metadata``, in dependency order."""
    if for_dialect(conn.dialect.name).secondary_indexes:
        metadata.create_all(conn, checkfirst=checkfirst)
        return
    for table in metadata.sorted_tables:
        create_table(conn, table, checkfirst=checkfirst)
