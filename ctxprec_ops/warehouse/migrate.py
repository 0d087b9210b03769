"""Bring output tables created by an older version up to the current declaration, in place.

``add_missing_columns``: a column the declaration has and the table lacks is added with
``ALTER TABLE ... ADD COLUMN`` (nullable, so existing rows keep their values and get NULL).
Runs inside the caller's write transaction, after ``create_all``; idempotent.
"""

from __future__ import annotations

from sqlalchemy import Table, inspect
from sqlalchemy.engine import Connection
from sqlalchemy.schema import CreateColumn

__all__ = ["add_missing_columns"]


def add_missing_columns(conn: Connection, table: Table) -> list[str]:
    """Add the columns of ``table`` its stored version lacks; returns their names."""
    have = {c["name"] for c in inspect(conn).get_columns(table.name, schema=table.schema)}
    added = []
    prep = conn.dialect.identifier_preparer
    for col in table.columns:
        if col.name in have:
            continue
        ddl = CreateColumn(col).compile(dialect=conn.dialect)
        conn.exec_driver_sql(f"ALTER TABLE {prep.format_table(table)} ADD COLUMN {ddl}")
        added.append(col.name)
    return added
